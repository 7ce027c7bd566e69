"""NVIDIA XID catalog: what each XID means and what gpu-remedy does about it.

Base table: NVIDIA's Xid catalog for Ampere and newer GPUs
(docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html, "Resolution Bucket (Immediate Action)").
Mnemonics and buckets for codes 1–162 are as carried by NVIDIA/NVSentinel's xiderrorsmapping.csv, which is
generated from NVIDIA's Xid-Catalog.xlsx; that CSV spells the catalog's CONTACT_SUPPORT bucket
"UNEXPECTED_ERR_REPORT_ISSUE" (the public page shows CONTACT_SUPPORT for the same codes), so it is read as
CONTACT_SUPPORT here. Descriptions are the catalog's where a catalog-derived source showed them
(`confidence="catalog"`); otherwise they come from the mnemonic (`confidence="mnemonic"`).

Overlay: seed 002 Table 3 (31/43/94 → RESTART_APP; 119/145/149 → RESET_GPU; 79 → RESTART_BM = reboot the node)
and §4.3.5 (when 79 recurs, stop retrying and escalate/replace).

Nothing is dropped: an XID in 1..65535 that is not in the table yields an UNKNOWN entry whose path is ESCALATE.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any


class Resolution(StrEnum):
    """NVIDIA's published resolution buckets (the XID catalog's 'immediate action')."""

    IGNORE = "IGNORE"
    RESTART_APP = "RESTART_APP"
    RESET_GPU = "RESET_GPU"
    RESTART_BM = "RESTART_BM"
    RESTART_VM = "RESTART_VM"
    CONTACT_SUPPORT = "CONTACT_SUPPORT"
    WORKFLOW_XID_48 = "WORKFLOW_XID_48"
    WORKFLOW_NVLINK_ERR = "WORKFLOW_NVLINK_ERR"
    WORKFLOW_NVLINK5_ERR = "WORKFLOW_NVLINK5_ERR"
    CHECK_MECHANICALS = "CHECK_MECHANICALS"
    UNKNOWN = "UNKNOWN"


# Catalog buckets the shared enum does not carry, folded onto the nearest member so every consumer of
# `Resolution` (e.g. the fix ladder) keeps working; `XidEntry.catalog_bucket` keeps NVIDIA's word verbatim.
FOLDED_BUCKETS: dict[str, Resolution] = {
    "WORKFLOW_XID_45": Resolution.IGNORE,  # preemptive cleanup after an earlier XID: act on that one
    "UPDATE_SWFW": Resolution.CONTACT_SUPPORT,  # software/firmware update: a person schedules it
    "CHECK_UVM": Resolution.CONTACT_SUPPORT,  # check the UVM/software stack: a person decides
    "XID_154": Resolution.CONTACT_SUPPORT,  # the action is in the message; without it a person decides
    "NOTICE": Resolution.IGNORE,  # 162-172 with guidance that needs no reset (power smoothing, CC mode, ECC off)
    "NO_BUCKET": Resolution.UNKNOWN,  # 167, 169: listed without a bucket or guidance
}


class RemediationPath(StrEnum):
    """What gpu-remedy's triage starts for a fault."""

    IGNORE = "ignore"  # informational; recorded, no action
    RESTART_APP = "restart-app"  # restart the job's pods, node stays in
    RESET_GPU = "reset-gpu"  # drain, nvidia-smi -r, verify, uncordon
    REBOOT = "reboot"  # drain, reboot, wait Ready, verify, uncordon
    REPLACE = "replace"  # swap in a warm spare, node to repair
    ISOLATE = "isolate"  # bisection fault isolation over a pool
    ESCALATE = "escalate"  # a human decides (unknown XID, CONTACT_SUPPORT, breaker open)
    WATCH = "watch"  # warning-level: drain at next checkpoint / keep observing


XID_MIN, XID_MAX = 1, 65535

SOURCE_CATALOG = "NVIDIA Xid catalog (analyzing-xid-catalog; bucket via NVIDIA/NVSentinel xiderrorsmapping.csv)"
# seed 002 Table 3: a 60-node B200 cluster's published XID actions (overrides/confirms the NVIDIA catalog bucket)
SOURCE_SEED_002 = "field practice on a 60-node B200 training cluster (overrides or confirms the NVIDIA catalog bucket)"


@dataclass(frozen=True)
class XidEntry:
    code: int
    name: str  # the catalog's mnemonic, e.g. ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS
    description: str
    resolution: Resolution  # immediate action gpu-remedy follows (catalog, or seed 002 where it differs)
    path: RemediationPath
    reason: str  # one line: why this path
    recurrence_path: RemediationPath  # when the same XID recurs on the same GPU (SignalThresholds.xid_recurrence_limit)
    source: str
    catalog_bucket: str = ""  # NVIDIA's bucket verbatim (may differ from `resolution` where seed 002 overrides)
    investigatory: str = ""  # the catalog's investigatory action, where a source showed it
    confidence: str = "catalog"  # catalog | mnemonic | seed-002 | unknown

    @property
    def known(self) -> bool:
        return self.resolution is not Resolution.UNKNOWN


# (code, mnemonic, catalog bucket). "CS" = CONTACT_SUPPORT (the CSV's UNEXPECTED_ERR_REPORT_ISSUE).
_R = Resolution
CS = _R.CONTACT_SUPPORT
_CATALOG: tuple[tuple[int, str, Resolution | str], ...] = (  # str: a folded bucket (FOLDED_BUCKETS)
    (1, "ROBUST_CHANNEL_FIFO_ERROR_FIFO_METHOD", CS),
    (2, "ROBUST_CHANNEL_FIFO_ERROR_SW_METHOD", CS),
    (3, "ROBUST_CHANNEL_FIFO_ERROR_UNK_METHOD", CS),
    (4, "ROBUST_CHANNEL_FIFO_ERROR_CHANNEL_BUSY", CS),
    (5, "ROBUST_CHANNEL_FIFO_ERROR_RUNOUT_OVERFLOW", CS),
    (6, "ROBUST_CHANNEL_FIFO_ERROR_PARSE_ERR", CS),
    (7, "ROBUST_CHANNEL_FIFO_ERROR_PTE_ERR", CS),
    (8, "ROBUST_CHANNEL_FIFO_ERROR_IDLE_TIMEOUT", _R.RESTART_APP),
    (9, "ROBUST_CHANNEL_GR_ERROR_INSTANCE", CS),
    (10, "ROBUST_CHANNEL_GR_ERROR_SINGLE_STEP", CS),
    (11, "ROBUST_CHANNEL_GR_ERROR_MISSING_HW", _R.RESTART_APP),
    (12, "ROBUST_CHANNEL_GR_ERROR_SW_METHOD", CS),
    (13, "ROBUST_CHANNEL_GR_EXCEPTION", _R.RESTART_APP),
    (14, "ROBUST_CHANNEL_FAKE_ERROR", _R.IGNORE),
    (15, "ROBUST_CHANNEL_SCANLINE_TIMEOUT", CS),
    (16, "ROBUST_CHANNEL_VBLANK_CALLBACK_TIMEOUT", CS),
    (17, "ROBUST_CHANNEL_PARAMETER_ERROR", CS),
    (18, "ROBUST_CHANNEL_BUS_MASTER_TIMEOUT_ERROR", CS),
    (19, "ROBUST_CHANNEL_DISP_MISSED_NOTIFIER", CS),
    (20, "ROBUST_CHANNEL_MPEG_ERROR_SW_METHOD", CS),
    (21, "ROBUST_CHANNEL_ME_ERROR_SW_METHOD", CS),
    (22, "ROBUST_CHANNEL_VP_ERROR_SW_METHOD", CS),
    (23, "ROBUST_CHANNEL_RC_LOGGING_ENABLED", CS),
    (24, "ROBUST_CHANNEL_GR_SEMAPHORE_TIMEOUT", CS),
    (25, "ROBUST_CHANNEL_GR_ILLEGAL_NOTIFY", _R.RESTART_APP),
    (26, "ROBUST_CHANNEL_FIFO_ERROR_FBISTATE_TIMEOUT", CS),
    (27, "ROBUST_CHANNEL_VP_ERROR", CS),
    (28, "ROBUST_CHANNEL_VP2_ERROR", CS),
    (29, "ROBUST_CHANNEL_BSP_ERROR", CS),
    (30, "ROBUST_CHANNEL_BAD_ADDR_ACCESS", CS),
    (31, "ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT", _R.RESTART_APP),
    (32, "ROBUST_CHANNEL_PBDMA_ERROR", _R.RESTART_APP),
    (33, "ROBUST_CHANNEL_SEC_ERROR", CS),
    (34, "ROBUST_CHANNEL_MSVLD_ERROR", CS),
    (35, "ROBUST_CHANNEL_MSPDEC_ERROR", CS),
    (36, "ROBUST_CHANNEL_MSPPP_ERROR", CS),
    (37, "ROBUST_CHANNEL_FECS_ERR_UNIMP_FIRMWARE_METHOD", _R.IGNORE),
    (38, "ROBUST_CHANNEL_FECS_ERR_WATCHDOG_TIMEOUT", _R.IGNORE),
    (39, "ROBUST_CHANNEL_CE0_ERROR", _R.RESTART_APP),
    (40, "ROBUST_CHANNEL_CE1_ERROR", _R.RESTART_APP),
    (41, "ROBUST_CHANNEL_CE2_ERROR", _R.RESTART_APP),
    (42, "ROBUST_CHANNEL_VIC_ERROR", CS),
    (43, "ROBUST_CHANNEL_RESETCHANNEL_VERIF_ERROR", _R.IGNORE),
    (44, "ROBUST_CHANNEL_GR_FAULT_DURING_CTXSW", _R.IGNORE),
    (45, "ROBUST_CHANNEL_PREEMPTIVE_REMOVAL", "WORKFLOW_XID_45"),
    (46, "ROBUST_CHANNEL_GPU_TIMEOUT_ERROR", _R.RESET_GPU),
    (47, "ROBUST_CHANNEL_NVENC0_ERROR", CS),
    (48, "ROBUST_CHANNEL_GPU_ECC_DBE", _R.WORKFLOW_XID_48),
    (49, "SILENT_RUNNING_CONSTANT_LEVEL_SET_BY_REGISTRY", CS),
    (50, "SILENT_RUNNING_LEVEL_TRANSITION_DUE_TO_RC_ERROR", CS),
    (51, "SILENT_RUNNING_STRESS_TEST_FAILURE", CS),
    (52, "SILENT_RUNNING_LEVEL_TRANS_DUE_TO_TEMP_RISE", CS),
    (53, "SILENT_RUNNING_TEMP_REDUCED_CLOCKING", CS),
    (54, "SILENT_RUNNING_PWR_REDUCED_CLOCKING", _R.CHECK_MECHANICALS),
    (55, "SILENT_RUNNING_TEMPERATURE_READ_ERROR", CS),
    (56, "DISPLAY_CHANNEL_EXCEPTION", CS),
    (57, "FB_LINK_TRAINING_FAILURE_ERROR", CS),
    (58, "FB_MEMORY_ERROR", CS),
    (59, "PMU_ERROR", CS),
    (60, "ROBUST_CHANNEL_SEC2_ERROR", _R.RESTART_APP),
    (61, "PMU_BREAKPOINT", CS),
    (62, "PMU_HALT_ERROR", _R.RESET_GPU),
    (63, "INFOROM_DRAM_RETIREMENT_EVENT", _R.IGNORE),
    (64, "INFOROM_DRAM_RETIREMENT_FAILURE", _R.RESET_GPU),
    (65, "ROBUST_CHANNEL_NVENC1_ERROR", CS),
    (66, "ROBUST_CHANNEL_FECS_ERR_REG_ACCESS_VIOLATION", _R.IGNORE),
    (67, "ROBUST_CHANNEL_FECS_ERR_VERIF_VIOLATION", _R.IGNORE),
    (68, "ROBUST_CHANNEL_NVDEC0_ERROR", _R.RESTART_APP),
    (69, "ROBUST_CHANNEL_GR_CLASS_ERROR", _R.RESTART_APP),
    (70, "ROBUST_CHANNEL_CE3_ERROR", _R.RESTART_APP),
    (71, "ROBUST_CHANNEL_CE4_ERROR", _R.RESTART_APP),
    (72, "ROBUST_CHANNEL_CE5_ERROR", _R.RESTART_APP),
    (73, "ROBUST_CHANNEL_NVENC2_ERROR", CS),
    (74, "NVLINK_ERROR", _R.WORKFLOW_NVLINK_ERR),
    (75, "ROBUST_CHANNEL_CE6_ERROR", _R.RESTART_APP),
    (76, "ROBUST_CHANNEL_CE7_ERROR", _R.RESTART_APP),
    (77, "ROBUST_CHANNEL_CE8_ERROR", _R.RESTART_APP),
    (78, "VGPU_START_ERROR", "UPDATE_SWFW"),
    (79, "ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS", _R.RESTART_BM),
    (80, "PBDMA_PUSHBUFFER_CRC_MISMATCH", _R.RESTART_APP),
    (81, "ROBUST_CHANNEL_VGA_SUBSYSTEM_ERROR", CS),
    (82, "ROBUST_CHANNEL_NVJPG0_ERROR", _R.RESTART_APP),
    (83, "ROBUST_CHANNEL_NVDEC1_ERROR", _R.RESTART_APP),
    (84, "ROBUST_CHANNEL_NVDEC2_ERROR", _R.RESTART_APP),
    (85, "ROBUST_CHANNEL_CE9_ERROR", _R.RESTART_APP),
    (86, "ROBUST_CHANNEL_OFA0_ERROR", _R.RESTART_APP),
    (87, "NVTELEMETRY_DRIVER_REPORT", CS),
    (88, "ROBUST_CHANNEL_NVDEC3_ERROR", _R.RESTART_APP),
    (89, "ROBUST_CHANNEL_NVDEC4_ERROR", _R.RESTART_APP),
    (90, "LTC_ERROR", CS),
    (91, "RESERVED_XID", CS),
    (92, "EXCESSIVE_SBE_INTERRUPTS", _R.IGNORE),
    (93, "INFOROM_ERASE_LIMIT_EXCEEDED", _R.IGNORE),
    (94, "ROBUST_CHANNEL_CONTAINED_ERROR", _R.RESTART_APP),
    (95, "ROBUST_CHANNEL_UNCONTAINED_ERROR", _R.RESET_GPU),
    (96, "ROBUST_CHANNEL_NVDEC5_ERROR", _R.RESTART_APP),
    (97, "ROBUST_CHANNEL_NVDEC6_ERROR", _R.RESTART_APP),
    (98, "ROBUST_CHANNEL_NVDEC7_ERROR", _R.RESTART_APP),
    (99, "ROBUST_CHANNEL_NVJPG1_ERROR", _R.RESTART_APP),
    (100, "ROBUST_CHANNEL_NVJPG2_ERROR", _R.RESTART_APP),
    (101, "ROBUST_CHANNEL_NVJPG3_ERROR", _R.RESTART_APP),
    (102, "ROBUST_CHANNEL_NVJPG4_ERROR", _R.RESTART_APP),
    (103, "ROBUST_CHANNEL_NVJPG5_ERROR", _R.RESTART_APP),
    (104, "ROBUST_CHANNEL_NVJPG6_ERROR", _R.RESTART_APP),
    (105, "ROBUST_CHANNEL_NVJPG7_ERROR", _R.RESTART_APP),
    (106, "SMBPBI_TEST_MESSAGE", _R.IGNORE),
    (107, "SMBPBI_TEST_MESSAGE_SILENT", _R.IGNORE),
    (108, "NVLINK_REMOTE_TRANSLATION_ERROR", _R.IGNORE),  # catalog: IGNORE (unused)
    (109, "ROBUST_CHANNEL_CTXSW_TIMEOUT_ERROR", _R.RESET_GPU),
    (110, "SEC_FAULT_ERROR", _R.RESET_GPU),
    (111, "BUNDLE_ERROR_EVENT", CS),
    (112, "DISP_SUPERVISOR_ERROR", CS),
    (113, "DP_LT_FAILURE", CS),
    (114, "HEAD_RG_UNDERFLOW", CS),
    (115, "CORE_CHANNEL_REGS", CS),
    (116, "WINDOW_CHANNEL_REGS", CS),
    (117, "CURSOR_CHANNEL_REGS", CS),
    (118, "HEAD_REGS", CS),
    (119, "GSP_RPC_TIMEOUT", _R.RESET_GPU),
    (120, "GSP_ERROR", _R.RESET_GPU),
    (121, "C2C_ERROR", _R.IGNORE),
    (122, "SPI_PMU_RPC_READ_FAIL", CS),
    (123, "SPI_PMU_RPC_WRITE_FAIL", CS),
    (124, "SPI_PMU_RPC_ERASE_FAIL", CS),
    (125, "INFOROM_FS_ERROR", CS),
    (126, "ROBUST_CHANNEL_CE10_ERROR", _R.RESTART_APP),
    (127, "ROBUST_CHANNEL_CE11_ERROR", _R.RESTART_APP),
    (128, "ROBUST_CHANNEL_CE12_ERROR", _R.RESTART_APP),
    (129, "ROBUST_CHANNEL_CE13_ERROR", _R.RESTART_APP),
    (130, "ROBUST_CHANNEL_CE14_ERROR", _R.RESTART_APP),
    (131, "ROBUST_CHANNEL_CE15_ERROR", _R.RESTART_APP),
    (132, "ROBUST_CHANNEL_CE16_ERROR", _R.RESTART_APP),
    (133, "ROBUST_CHANNEL_CE17_ERROR", _R.RESTART_APP),
    (134, "ROBUST_CHANNEL_CE18_ERROR", _R.RESTART_APP),
    (135, "ROBUST_CHANNEL_CE19_ERROR", _R.RESTART_APP),
    (136, "ALI_TRAINING_FAIL", _R.RESET_GPU),
    (137, "NVLINK_FLA_PRIV_ERR", _R.IGNORE),
    (138, "ROBUST_CHANNEL_DLA_ERROR", CS),
    (139, "ROBUST_CHANNEL_OFA1_ERROR", _R.RESTART_APP),
    (140, "UNRECOVERABLE_ECC_ERROR_ESCAPE", _R.RESET_GPU),
    (141, "ROBUST_CHANNEL_FAST_PATH_ERROR", _R.IGNORE),
    (142, "ROBUST_CHANNEL_NVENC3_ERROR", CS),
    (143, "GPU_INIT_ERROR", _R.RESET_GPU),
    (144, "NVLINK_SAW_ERROR", _R.WORKFLOW_NVLINK5_ERR),
    (145, "NVLINK_RLW_ERROR", _R.WORKFLOW_NVLINK5_ERR),
    (146, "NVLINK_TLW_ERROR", _R.WORKFLOW_NVLINK5_ERR),
    (147, "NVLINK_TREX_ERROR", _R.WORKFLOW_NVLINK5_ERR),
    (148, "NVLINK_NVLPW_CTRL_ERROR", _R.WORKFLOW_NVLINK5_ERR),
    (149, "NVLINK_NETIR_ERROR", _R.WORKFLOW_NVLINK5_ERR),
    (150, "NVLINK_MSE_ERROR", _R.WORKFLOW_NVLINK5_ERR),
    (151, "ROBUST_CHANNEL_KEY_ROTATION_ERROR", _R.RESTART_VM),
    (152, "ROBUST_CHANNEL_DLA_SMMU_ERROR", _R.IGNORE),
    (153, "ROBUST_CHANNEL_DLA_TIMEOUT", _R.IGNORE),
    (154, "GPU_RECOVERY_ACTION_CHANGED", "XID_154"),
    (155, "NVLINK_SW_DEFINED_ERROR", _R.RESET_GPU),
    (156, "RESOURCE_RETIREMENT_EVENT", _R.RESET_GPU),
    (157, "RESOURCE_RETIREMENT_FAILURE", _R.IGNORE),
    (158, "GPU_FATAL_TIMEOUT", _R.RESET_GPU),
    (159, "ROBUST_CHANNEL_CHI_NON_DATA_ERROR", "CHECK_UVM"),
    (160, "CHANNEL_RETIREMENT_EVENT", _R.IGNORE),
    (161, "CHANNEL_RETIREMENT_FAILURE", _R.IGNORE),
    # 162-172: the catalog gives no resolution bucket, only guidance text; folded by what that text says
    (162, "PSHC_REENGAGED", "NOTICE"),  # power smoothing capability re-engaged: informational
    (163, "PSHC_DISENGAGED", "NOTICE"),  # "No GPU reset required"; resolve the thermal events if wanted
    (164, "PSHC_LOW_LIFETIME", "NOTICE"),  # "Monitor power swings and expect to replace GPUs if ... desired"
    (165, "PSHC_ZERO_LIFETIME", "NOTICE"),  # "Replace GPUs if power swings are not acceptable": a person's call
    (166, "NVLINK_SECURE_CRYPTO_ERR", "NOTICE"),  # confidential-computing mode only
    (167, "PCIE_FATAL_TIMEOUT", "NO_BUCKET"),
    (168, "REDUCED_GPU_MEMORY_CAPACITY", "NOTICE"),  # only with ECC disabled: enable ECC (a configuration fix)
    (169, "SEC2_HALT_ERROR", "NO_BUCKET"),
    (170, "NVLINK_SECURE_OTHER", "NOTICE"),  # confidential-computing mode only
    (171, "UNCORRECTABLE_DRAM_ERROR", "WORKFLOW_XID_45"),  # "additional to Xid 48": act on the 48 it explains
    (172, "UNCORRECTABLE_SRAM_ERROR", "WORKFLOW_XID_45"),  # "additional to Xid 48": act on the 48 it explains
)

# Descriptions a catalog-derived source showed verbatim (NVIDIA catalog "Description" column).
_CATALOG_DESCRIPTIONS: dict[int, str] = {
    1: "Unused", 2: "Unused", 3: "Unused", 4: "Unused", 5: "Unused", 6: "Unused", 7: "Unused",
    8: "GPU stopped processing",
    13: "Graphics Engine Exception",
    31: "GPU memory page fault",
    41: "Copy Engine Exception",
    43: "GPU stopped processing",
    45: "Preemptive cleanup, due to previous errors",
    46: "GPU stopped processing",
    48: "Double Bit ECC Error",
    54: "Auxiliary power not connected",
    62: "Internal micro-controller halt",
    63: "GPU memory remapping event",
    64: "GPU memory remapping failure",
    74: "NVLINK Error",
    79: "GPU has fallen off the bus",
    92: "High single-bit ECC error rate",
    94: "Contained memory error",
    95: "Uncontained memory error",
    109: "Context Switch Timeout Error",
    110: "Security Fault Error",
    119: "GSP RPC Timeout",
    120: "GSP Error",
    136: "Link Training Failed",
    140: "ECC Unrecovered Error",
    143: "GPU Initialization Error",
    151: "Key rotation Error",
    154: "GPU Recovery Action Changed",
    155: "NVLINK: SW Defined Error",
    156: "Resource Retirement Event",
    158: "GPU Fatal Timeout",
}

# Investigatory actions a catalog-derived source showed.
_INVESTIGATORY: dict[int, str] = {
    **{c: "N/A; Unused" for c in range(1, 8)},
    41: "CONTACT_SUPPORT",
    48: "solo: RESET_GPU; with XID 63 or 64: DRAIN_AND_RESET",
    155: "INVESTIGATE_SW_USER",
    156: "IGNORE",
}

# Seed 002 Table 3: (resolution, action as published). Exactly these seven rows.
SEED_002_TABLE_3: dict[int, tuple[Resolution, str]] = {
    79: (Resolution.RESTART_BM, "reboot the node"),
    119: (Resolution.RESET_GPU, "reset the GPU"),
    145: (Resolution.RESET_GPU, "reset the GPU"),
    149: (Resolution.RESET_GPU, "reset the GPU"),
    31: (Resolution.RESTART_APP, "restart the job session"),
    43: (Resolution.RESTART_APP, "restart the job session"),
    94: (Resolution.RESTART_APP, "automatic correction (restart the job session)"),
}
_SEED_002_NAMES = {
    79: "GPU fell off the bus",
    119: "GSP RPC timeout",
    145: "NVLink RLW error",
    149: "NVLink NETIR error",
    31: "GPU memory page fault",
    43: "GPU stopped processing",
    94: "Contained ECC error",
}

# Seed 002 rows where gpu-remedy follows NVIDIA's catalog instead: 43 (catalog IGNORE; the seed restarted the
# session by hand, but the error is reported after the application already stopped).
FOLLOW_CATALOG_OVER_SEED_002 = frozenset({43})

# Bucket → (path, reason, recurrence path, recurrence reason).
_BUCKET_POLICY: dict[Resolution | str, tuple[RemediationPath, str, RemediationPath]] = {
    _R.IGNORE: (RemediationPath.IGNORE, "catalog: informational, no action", RemediationPath.IGNORE),
    _R.RESTART_APP: (
        RemediationPath.RESTART_APP,
        "catalog: restart the application; the node stays in the pool",
        # An application error says nothing about the node, however often it comes (catalog: RESTART_APP); a
        # repeat on one GPU is a watch finding and a notice. Only a node-level signal on that GPU takes it out.
        RemediationPath.WATCH,
    ),
    _R.RESET_GPU: (
        RemediationPath.RESET_GPU,
        "catalog: stop GPU processes and reset the GPU (nvidia-smi -r)",
        RemediationPath.REBOOT,  # catalog: persists after reset → reboot; after reboot → replace
    ),
    _R.RESTART_BM: (
        RemediationPath.REBOOT,
        "catalog: GPU unreachable over PCIe; bare-metal restart (reboot the node)",
        RemediationPath.REPLACE,
    ),
    _R.RESTART_VM: (RemediationPath.REBOOT, "catalog: restart the VM/instance", RemediationPath.REPLACE),
    _R.CONTACT_SUPPORT: (
        RemediationPath.ESCALATE,
        "catalog: unexpected error, contact NVIDIA support; a human decides",
        RemediationPath.ESCALATE,
    ),
    _R.WORKFLOW_XID_48: (
        RemediationPath.RESET_GPU,
        "catalog workflow: reset the GPU, then check SRAM DBE thresholds",
        RemediationPath.REPLACE,  # catalog: persistent DBE means hardware degradation (RMA)
    ),
    _R.WORKFLOW_NVLINK_ERR: (
        RemediationPath.RESET_GPU,
        "catalog workflow: reset the GPU or reboot; inspect nvidia-smi nvlink",
        RemediationPath.REPLACE,  # catalog: recurring after reset/reboot → replace hardware
    ),
    _R.WORKFLOW_NVLINK5_ERR: (
        RemediationPath.RESET_GPU,
        "catalog NVLink5 workflow (decode per the catalog's 144-150 sheet); reset the GPU first",
        RemediationPath.REPLACE,
    ),
    _R.CHECK_MECHANICALS: (
        RemediationPath.REPLACE,
        "catalog: check power connectors/mechanicals; needs hands on the node, so swap in a spare",
        RemediationPath.REPLACE,
    ),
    "WORKFLOW_XID_45": (
        RemediationPath.WATCH,
        "catalog: preemptive cleanup after earlier errors; act on the XID that preceded it",
        RemediationPath.WATCH,
    ),
    "UPDATE_SWFW": (
        RemediationPath.ESCALATE,
        "catalog: update software/firmware; a human schedules it",
        RemediationPath.ESCALATE,
    ),
    "CHECK_UVM": (
        RemediationPath.ESCALATE,
        "catalog: check the UVM/software stack; a human decides",
        RemediationPath.ESCALATE,
    ),
    "NOTICE": (
        RemediationPath.WATCH,
        "catalog: no resolution bucket; its guidance needs no reset: recorded and shown, a person decides",
        RemediationPath.WATCH,
    ),
    "NO_BUCKET": (
        RemediationPath.ESCALATE,
        "catalog: no resolution bucket and no guidance: a person decides (asked and notified; the node keeps its work)",
        RemediationPath.ESCALATE,
    ),
    "XID_154": (
        RemediationPath.ESCALATE,
        "catalog: the required action is in the message (see recovery_action_path); without it a human decides",
        RemediationPath.ESCALATE,
    ),
}

# Entry-specific policy where the bucket's default path is not what the evidence says.
_PATH_OVERRIDES: dict[int, tuple[RemediationPath, str, RemediationPath]] = {
    79: (
        RemediationPath.REBOOT,
        "field practice: GPU fell off the bus → RESTART_BM (reboot the node); stop retrying if it recurs",
        RemediationPath.REPLACE,  # seed 002 §4.3.5: do not retry a recurring 79; escalate/replace
    ),
    94: (
        RemediationPath.RESTART_APP,
        "field practice: contained ECC error → restart the job, the node stays",
        # catalog: RESTART_APP (reset the GPU when convenient). A repeat is a watch finding; the node-level signals
        # of the same GPU (row-remap pending → reset, row-remap failure → replace) take it out when it is failing.
        RemediationPath.WATCH,
    ),
    43: (
        RemediationPath.WATCH,
        "catalog: IGNORE — GPU stopped processing, reported when the application was already stopped; the job's "
        "own restart handles it (field practice restarted the session by hand)",
        RemediationPath.WATCH,
    ),
    64: (
        RemediationPath.REPLACE,
        # deliberate deviation: the catalog says RESET_GPU, but a failed remap means the bank has no spare rows left
        # (NVIDIA memory error management): a reset cannot bring the memory back, so the node goes straight to a spare
        "row remapping failed: the bank is out of spare rows (NVIDIA memory error management); replace "
        "(deliberately deeper than the catalog's RESET_GPU: a reset cannot restore spare rows)",
        RemediationPath.REPLACE,
    ),
    63: (
        RemediationPath.WATCH,
        "catalog IGNORE, but a row remap was recorded: watch; the row-remap-pending signal drives the reset",
        RemediationPath.WATCH,
    ),
    92: (
        RemediationPath.WATCH,
        "catalog IGNORE; a high single-bit ECC rate (the driver's own ECC-storm detector) is an early warning for "
        "48/64: triage weighs a swap at the job's next checkpoint",
        RemediationPath.WATCH,
    ),
}

# XIDs that announce a failure rather than report one: triage weighs them as early warnings (a swap at the job's
# next checkpoint against waiting), as it does GpuEarlyWarning alerts. 92: the driver's ECC-storm detector.
EARLY_WARNING_XIDS: frozenset[int] = frozenset({92})


def _build() -> dict[int, XidEntry]:
    table: dict[int, XidEntry] = {}
    for code, mnemonic, bucket in _CATALOG:
        # Resolution is a StrEnum, so test for it, not for str
        resolution = bucket if isinstance(bucket, Resolution) else FOLDED_BUCKETS[bucket]
        folded = resolution is not bucket
        bucket_name = str(bucket)
        source = SOURCE_CATALOG
        confidence = "catalog" if code in _CATALOG_DESCRIPTIONS else "mnemonic"
        description = _CATALOG_DESCRIPTIONS.get(code) or _describe(mnemonic, code)
        if code in SEED_002_TABLE_3 and code not in FOLLOW_CATALOG_OVER_SEED_002:
            resolution = SEED_002_TABLE_3[code][0]
            source = f"{SOURCE_SEED_002}; {SOURCE_CATALOG}"
            confidence = "seed-002"
        path, reason, recurrence = _PATH_OVERRIDES.get(code) or _BUCKET_POLICY[bucket if folded else resolution]
        if code in SEED_002_TABLE_3 and code not in _PATH_OVERRIDES and code not in FOLLOW_CATALOG_OVER_SEED_002:
            action = SEED_002_TABLE_3[code][1]
            reason = f"field practice: {_SEED_002_NAMES[code]} → {resolution.value} ({action})"
            if resolution is not bucket:
                reason += f"; NVIDIA catalog says {bucket_name}"
                if _BUCKET_POLICY[bucket][2] is not RemediationPath.IGNORE:
                    recurrence = _BUCKET_POLICY[bucket][2]  # the catalog's escalation still applies on recurrence
        table[code] = XidEntry(
            code=code,
            name=mnemonic or f"XID_{code}",
            description=description,
            resolution=resolution,
            path=path,
            reason=reason,
            recurrence_path=recurrence,
            source=source,
            catalog_bucket=bucket_name,
            investigatory=_INVESTIGATORY.get(code, ""),
            confidence=confidence,
        )
    return table


def _describe(mnemonic: str, code: int) -> str:
    if not mnemonic:
        return f"XID {code} (the catalog gives no mnemonic or description yet)"
    words = mnemonic.removeprefix("ROBUST_CHANNEL_").replace("_", " ").lower()
    return f"{words} (from the mnemonic)"


CATALOG: dict[int, XidEntry] = _build()


def _check_code(xid: object) -> int:
    if isinstance(xid, bool) or not isinstance(xid, int):
        raise ValueError(f"XID must be an integer, got {type(xid).__name__} {xid!r}")
    if not XID_MIN <= xid <= XID_MAX:
        raise ValueError(f"XID {xid} out of range: must be {XID_MIN}..{XID_MAX}")
    return xid


def parse_xid(text: str) -> int:
    """Text (CLI argument, label value) → XID code; ValueError naming what was wrong."""
    raw = str(text).strip()
    try:
        value = int(raw, 10)
    except ValueError:
        raise ValueError(f"XID must be a whole number, got {text!r}") from None
    return _check_code(value)


def lookup(xid: int) -> XidEntry:
    """The catalog entry for `xid`; an UNKNOWN/ESCALATE entry for codes not in the table (never dropped)."""
    code = _check_code(xid)
    entry = CATALOG.get(code)
    if entry is not None:
        return entry
    return XidEntry(
        code=code,
        name=f"XID_{code}",
        description="not in gpu-remedy's XID catalog",
        resolution=Resolution.UNKNOWN,
        path=RemediationPath.ESCALATE,
        reason="unknown XID: a human decides",
        recurrence_path=RemediationPath.ESCALATE,
        source="none",
        catalog_bucket="",
        confidence="unknown",
    )


def explain(xid: int) -> dict[str, Any]:
    """`lookup` as a JSON-ready dict (enum values as strings)."""
    entry = lookup(xid)
    out = asdict(entry)
    out["resolution"] = entry.resolution.value
    out["path"] = entry.path.value
    out["recurrence_path"] = entry.recurrence_path.value
    out["known"] = entry.known
    return out


# XID 154's message carries the action: "GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)".
RECOVERY_ACTIONS: dict[str, RemediationPath] = {
    "none": RemediationPath.IGNORE,
    "drain p2p": RemediationPath.RESET_GPU,
    "drain and reset": RemediationPath.RESET_GPU,
    "gpu reset required": RemediationPath.RESET_GPU,
    "node reboot required": RemediationPath.REBOOT,
}


# Classes whose fix needs the GPU or the node itself (a reset, a power cycle, hands on it): until then the node is
# unsafe to run work, so an escalation also quarantines it. Application errors, informational codes and "contact
# support" / unknown codes say nothing about the node: escalation asks a person and notifies, the node keeps working.
NODE_UNSAFE: frozenset[Resolution] = frozenset({
    Resolution.RESET_GPU, Resolution.RESTART_BM, Resolution.RESTART_VM, Resolution.WORKFLOW_XID_48,
    Resolution.WORKFLOW_NVLINK_ERR, Resolution.WORKFLOW_NVLINK5_ERR, Resolution.CHECK_MECHANICALS,
})
NODE_UNSAFE_PATHS = frozenset({RemediationPath.RESET_GPU, RemediationPath.REBOOT, RemediationPath.REPLACE})


def unsafe_to_run(xid: int | None, path: RemediationPath | None = None) -> bool:
    """Should an escalation keep this node out of work? Yes when the XID's class (or, for a signal without an XID,
    the path its rule chose) says the node itself needs fixing."""
    if xid is not None:
        entry = lookup(xid)
        return entry.resolution in NODE_UNSAFE or entry.path in NODE_UNSAFE_PATHS
    return path in NODE_UNSAFE_PATHS


# XIDs 144-150 (NVLink5): the catalog's "Xid 144-150 Decode" sheet gives a resolution per (unit, subcode, error
# status). The kernel line prints the unit, Fatal/Nonfatal, then the registers:
#   NVRM: Xid (PCI:0018:01:00): 145, RLW_RXPIPE Nonfatal XC0 i0 Link 13 (0x0409a0c2 0x00000008 0x00000001 ...)
# the first is IntrInfo, whose bits 20-25 are the subcode; the second is the error status. The word "Fatal" is not
# the resolution: XID 149 NETIR_LINK_EVT subcodes 38 and 40 print "Fatal" and the catalog says IGNORE.
# Source: NVIDIA Xid-Catalog.xlsx, sheet "Xid 144-150 Decode" (docs.nvidia.com/deploy/xid-errors/
# analyzing-xid-catalog.html), as transcribed in leptonai/gpud components/accelerator/nvidia/xid/catalog_generated.go
# @ 73e270e3e0fd490ec5c33e144ad894de7d6c4d21 (generated from that xlsx); subcode = IntrInfo bits 20-25 and error
# status = the second register as gpud's decoder reads them (gpud PR #1174 prints "err status 0x00000008" for the
# RLW_RXPIPE line above). tests/data/nvidia_xid_catalog.txt carries the same rows for a cross-check.
NVLINK5_XIDS = frozenset(range(144, 151))

_IGN, _RST, _154 = "IGNORE", "RESET_GPU", "XID_154_EVAL"
_TLW = ((0x1, _IGN), (0x2, _IGN), (0x4, _RST), (0x80000000, _IGN))
# (xid, unit as the catalog names it, subcode, ((error status, bucket), ...))
_NVL5_SHEET: tuple[tuple[int, str, int, tuple[tuple[int, str], ...]], ...] = (
    (144, "SAW_MVB", 0, ((0x1, _IGN), (0x2, _RST), (0x4, _IGN), (0x8, _IGN), (0x10, _RST), (0x20, _IGN))),
    (145, "RLW_CTRL", 0, ((0x80000000, _IGN),)),
    (145, "RLW_REMAP", 0, ((0x1, _154), (0x2, _154), (0x4, _154), (0x8, _154), (0x10, _154), (0x20, _154),
                           (0x40, _RST), (0x80, _RST), (0x100, _IGN), (0x200, _IGN), (0x80000000, _IGN))),
    (145, "RLW_RSPCOL", 0, ((0x1, _IGN), (0x2, _RST), (0x80000000, _IGN))),
    (145, "RLW_RXPIPE", 0, ((0x1, _IGN), (0x2, _IGN), (0x4, _IGN), (0x8, _IGN), (0x80000000, _IGN))),
    (145, "RLW_SRC_TRACK", 0, ((0x1, _RST), (0x2, _IGN), (0x4, _154), (0x8, _154), (0x10, _RST), (0x20, _RST),
                               (0x80000000, _IGN))),
    (145, "RLW_TAGSTATE", 0, ((0x1, _IGN), (0x2, _RST), (0x10000, _IGN), (0x20000, _RST), (0x100000, _RST),
                              (0x80000000, _IGN))),
    (146, "TLW_CTRL", 0, _TLW),
    (146, "TLW_RX/TLW_RX_PIPE0/TLW_RX_PIPE1", 0, _TLW),
    (146, "TLW_TX/TLW_TX_PIPE0/TLW_TX_PIPE1", 0, _TLW),
    (147, "TREX", 0, ((0x1, _IGN), (0x80000000, _IGN))),
    (148, "NVLPW_CTRL/NVLPW", 0, ((0x80000000, _IGN),)),
    (149, "NETIR/NETIR_INT", 0, ((0x0, _RST),)),
    (149, "NETIR_BER_EVENT", 0, ((0x0, _IGN), (0x1, _IGN), (0x2, _IGN), (0x3, _IGN))),
    *((149, "NETIR_LINK_EVT/NETIR_LINK_DOWN", sub, ((0x0, _RST),))
      for sub in (0, 1, 2, 4, 10, 15, 16, 17, 18, 21, 22, 32, 33, 34, 35, 36, 37, 42, 43)),
    (149, "NETIR_LINK_EVT/NETIR_LINK_DOWN", 38, ((0x0, _IGN),)),  # INVESTIGATE_SW/USER
    (149, "NETIR_LINK_EVT/NETIR_LINK_DOWN", 40, ((0x0, _IGN),)),  # INVESTIGATE_HOST
    (149, "NETIR_MFDE_EVENT", 0, ((0x1, _RST), (0x3, _IGN), (0x4, _RST), (0x5, _RST), (0x7, _RST))),
    (150, "MSE_WATCHDOG", 0, ((0x0, _RST),)),
)
NVL5_RULES: dict[tuple[int, str, int, int], str] = {
    (xid, alias, sub, status): bucket
    for xid, units, sub, statuses in _NVL5_SHEET for alias in units.split("/") for status, bucket in statuses
}
_NVL5_PATH = {_IGN: RemediationPath.WATCH, _154: RemediationPath.WATCH, _RST: RemediationPath.RESET_GPU}
# unit word, severity word, then the first two registers in ( ) or [ ]; no lazy scan (linear on any line)
_NVL5_LINE = re.compile(
    r"(?:Xid \([^)]{0,64}\):\s*(?P<xid>\d{1,5})\s*,\s*)?(?P<unit>[A-Z][A-Z0-9_]{1,40})\s+(?P<sev>Fatal|Non-?fatal|Nonfatal)\b"
    r"[^(\[\n]{0,80}[(\[]\s*(?P<info>0x[0-9a-fA-F]{1,8})(?:[\s,]+(?P<status>0x[0-9a-fA-F]{1,8}))?",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Nvlink5Decode:
    """An XID 144-150 line read against the catalog's decode sheet."""

    xid: int
    unit: str  # as printed, e.g. NETIR_LINK_EVT
    fatal_word: bool  # the line says Fatal (not the resolution)
    subcode: int  # IntrInfo bits 20-25
    error_status: int | None  # the second register; None when the line prints only IntrInfo
    bucket: str  # the sheet's resolution (IGNORE | RESET_GPU | XID_154_EVAL), "" when the sheet has no row for it

    @property
    def path(self) -> RemediationPath | None:
        return _NVL5_PATH.get(self.bucket)


def decode_nvlink5(message: str, xid: int | None = None) -> Nvlink5Decode | None:
    """Decode an XID 144-150 line (or its message part); None when it carries no unit/severity/registers."""
    m = _NVL5_LINE.search(message[:2000])
    if m is None:
        return None
    code = xid if xid is not None else (int(m.group("xid")) if m.group("xid") else None)
    if code not in NVLINK5_XIDS:
        return None
    unit = m.group("unit").upper()
    info = int(m.group("info"), 16)
    sub = (info >> 20) & 0x3F
    status = int(m.group("status"), 16) if m.group("status") else None
    candidates = {b for (x, u, sc, st), b in NVL5_RULES.items()
                  if x == code and u == unit and sc == sub and (status is None or st == status)}
    bucket = candidates.pop() if len(candidates) == 1 else ""  # two answers for one line: not decoded
    return Nvlink5Decode(code, unit, m.group("sev").lower() == "fatal", sub, status, bucket)


def nvlink5_subcode_path(message: str, xid: int | None = None) -> RemediationPath | None:
    """The catalog's decode of an XID 144-150 line: WATCH for IGNORE / "follow the XID 154" rows, RESET_GPU for
    RESET_GPU rows. A line the sheet does not cover falls back to the driver's word: WATCH for Nonfatal,
    RESET_GPU for Fatal; None when the line says neither."""
    decoded = decode_nvlink5(message, xid)
    if decoded is not None and decoded.path is not None:
        return decoded.path
    low = f" {message.lower()} "
    if " nonfatal " in low or " non-fatal " in low:
        return RemediationPath.WATCH
    if " fatal " in low:
        return RemediationPath.RESET_GPU
    return None


def recovery_action_path(message: str) -> RemediationPath | None:
    """Path named by an XID 154 message's new recovery action, or None if the message names none we know."""
    low = message.lower()
    marker = low.rfind(" to ")
    tail = low[marker + 4 :] if marker >= 0 else low
    for text, path in RECOVERY_ACTIONS.items():
        if f"({text})" in tail:
            return path
    return None

"""Walk NVIDIA's whole XID catalog (tests/data/nvidia_xid_catalog.txt, transcribed with its source) and check that
gpu-remedy does what NVIDIA's immediate-action bucket says, or a deviation the catalog module documents."""

from __future__ import annotations

from pathlib import Path

import pytest

from remedy.domain.xid import CATALOG, NVL5_RULES, decode_nvlink5, lookup, nvlink5_subcode_path, unsafe_to_run
from remedy.domain.xid import RemediationPath as P

SOURCE = Path(__file__).resolve().parents[1] / "data" / "nvidia_xid_catalog.txt"

# What each NVIDIA bucket means for gpu-remedy's triage.
EXPECTED = {
    "CONTACT_SUPPORT": {P.ESCALATE},
    "RESTART_APP": {P.RESTART_APP},
    "IGNORE": {P.IGNORE, P.WATCH},  # recorded; WATCH also shows it to a person
    "RESET_GPU": {P.RESET_GPU},
    "RESTART_BM": {P.REBOOT},
    "RESTART_VM": {P.REBOOT},
    "CHECK_MECHANICALS": {P.REPLACE},  # hands on the node: a spare takes its place
    "WORKFLOW_XID_45": {P.WATCH},  # act on the XID it follows
    "WORKFLOW_XID_48": {P.RESET_GPU},
    "WORKFLOW_NVLINK_ERR": {P.RESET_GPU},
    "WORKFLOW_NVLINK5_ERR": {P.RESET_GPU},  # by default; the subcode decode below refines it
    "UPDATE_SWFW": {P.ESCALATE},
    "XID_154": {P.ESCALATE},  # without the message; with it, the recovery action decides
    "CHECK_UVM": {P.ESCALATE},
    "NONE": {P.WATCH, P.ESCALATE},  # no bucket: shown to a person, never a reset, reboot or replacement
}
# gpu-remedy's deliberate deviations, each explained in the entry's reason.
DEVIATIONS = {64: (P.REPLACE, "deliberately deeper than the catalog")}


def _rows() -> dict[int, str]:
    rows: dict[int, str] = {}
    for line in SOURCE.read_text().splitlines():
        if not line.strip() or line.startswith("#") or line.startswith("NVL5 "):
            continue
        bucket, _, codes = line.partition(":")
        for part in codes.split(","):
            lo, _, hi = part.strip().partition("-")
            for code in range(int(lo), int(hi or lo) + 1):
                assert code not in rows, f"XID {code} listed twice in the transcription"
                rows[code] = bucket.strip()
    return rows


ROWS = _rows()


def test_the_transcription_covers_every_code_once() -> None:
    assert sorted(ROWS) == list(range(1, 173))
    assert set(CATALOG) >= set(ROWS)


@pytest.mark.parametrize("code", sorted(ROWS))
def test_each_xid_follows_nvidia_or_a_documented_deviation(code: int) -> None:
    bucket, entry = ROWS[code], lookup(code)
    if code in DEVIATIONS:
        path, why = DEVIATIONS[code]
        assert entry.path is path and why in entry.reason
    else:
        assert entry.path in EXPECTED[bucket], f"XID {code}: NVIDIA {bucket}, gpu-remedy {entry.path.value}"
    if bucket != "NONE":
        assert entry.catalog_bucket == bucket  # NVIDIA's own bucket stays visible in `remedy xid explain`
    if bucket in ("RESTART_APP", "IGNORE", "NONE", "WORKFLOW_XID_45"):
        # an application error or a notice never takes a node out by itself, however often it recurs
        assert entry.recurrence_path not in (P.RESET_GPU, P.REBOOT, P.REPLACE, P.ESCALATE) or bucket == "NONE"
        assert not unsafe_to_run(code)


def test_the_deviations_the_issue_named_are_resolved() -> None:
    assert lookup(43).path is P.WATCH and lookup(43).resolution.value == "IGNORE"
    assert lookup(108).path is P.IGNORE and lookup(160).path is P.IGNORE
    assert all(not unsafe_to_run(c) for c in range(162, 173))
    assert lookup(94).recurrence_path is P.WATCH  # a second contained ECC error is a watch finding, not a swap


def test_nvlink5_subcodes_follow_the_decode_sheet_not_the_fatal_word() -> None:
    # SAW_MVB status 0x8: the sheet says IGNORE (Non-fatal)
    nonfatal = "NVRM: Xid (PCI:0000:01:00): 144, SAW_MVB Nonfatal XC0 i0 Link 0 (0x00000001 0x00000008 0x0 0x0 0x0 0x0)"
    assert nvlink5_subcode_path(nonfatal) is P.WATCH
    # XID 149 NETIR_LINK_EVT: 0x026001c6 is subcode 38 (bits 20-25), IGNORE although the line says "Fatal"
    # (issue 30: it used to reset the GPU); 0x025001c6 is subcode 37 (peer device), RESET_GPU.
    sub38 = "NVRM: Xid (PCI:0000:00:00): 149, NETIR_LINK_EVT Fatal XC0 i0 Link 00 (0x026001c6 0x00000000 0x0 0x0)"
    sub37 = "NVRM: Xid (PCI:0000:00:00): 149, NETIR_LINK_EVT Fatal XC0 i0 Link 00 (0x025001c6 0x00000000 0x0 0x0)"
    sub40 = "NVRM: Xid (PCI:0000:00:00): 149, NETIR_LINK_EVT Fatal XC0 i0 Link 00 (0x028001c6 0x00000000 0x0 0x0)"
    d = decode_nvlink5(sub38)
    assert d is not None and (d.subcode, d.error_status, d.bucket, d.fatal_word) == (38, 0, "IGNORE", True)
    assert nvlink5_subcode_path(sub38) is P.WATCH and nvlink5_subcode_path(sub40) is P.WATCH
    assert nvlink5_subcode_path(sub37) is P.RESET_GPU
    # RLW_REMAP status 0x4: "follow the XID 154 that comes with it" → watch here, the 154 carries the action
    assert nvlink5_subcode_path("NVRM: Xid (PCI:0000:01:00): 145, RLW_REMAP Nonfatal XC0 i0 Link 3 (0x00000004 0x00000004)") is P.WATCH
    # A unit the sheet does not list falls back to the driver's word; no word and no registers: not decided
    assert nvlink5_subcode_path("NVRM: Xid (PCI:0000:01:00): 149, NETIR_NEW_UNIT Fatal XC0 (0x07f00000 0x0)") is P.RESET_GPU
    assert nvlink5_subcode_path("NVRM: Xid (PCI:0000:01:00): 145, pid=1") is None


def test_nvlink5_decode_table_matches_the_transcribed_sheet() -> None:
    sheet: dict[tuple[int, str, int, int], str] = {}
    for line in SOURCE.read_text().splitlines():
        if not line.startswith("NVL5 "):
            continue
        _, xid, units, sub, status, bucket, *_ = line.split()
        for unit in units.split("/"):
            sheet[(int(xid), unit, int(sub.removeprefix("subcode=")), int(status.removeprefix("status="), 16))] = bucket
    assert len(sheet) >= 90 and sheet == NVL5_RULES

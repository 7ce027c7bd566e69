"""XID catalog: coverage, enum integrity, seed 002 Table 3 exactly as published, unknown/out-of-range handling."""

from __future__ import annotations

import pytest

from remedy.domain.xid import (
    CATALOG,
    SEED_002_TABLE_3,
    RemediationPath,
    Resolution,
    explain,
    lookup,
    parse_xid,
    recovery_action_path,
)

COMMON = [8, 13, 31, 32, 38, 43, 44, 45, 48, 56, 57, 61, 62, 63, 64, 68, 69, 74, 79, 92, 94, 95, 109, 110, 119,
          120, 121, 122, 123, 136, 140, 143, 144, 145, 146, 147, 148, 149, 150, 151, 154, 155, 156, 157, 158]


@pytest.mark.parametrize("code", COMMON)
def test_common_xids_are_catalogued(code: int) -> None:
    entry = lookup(code)
    assert entry.known and entry.code == code
    assert entry.resolution is not Resolution.UNKNOWN
    assert entry.source.startswith(("NVIDIA Xid catalog", "field practice"))


def test_every_entry_maps_to_enum_values_with_a_reason() -> None:
    assert len(CATALOG) >= 150
    for code, e in CATALOG.items():
        assert isinstance(e.path, RemediationPath) and isinstance(e.recurrence_path, RemediationPath), code
        assert isinstance(e.resolution, Resolution), code
        assert e.reason and "\n" not in e.reason, code
        assert e.confidence in {"catalog", "mnemonic", "seed-002"}, code


def test_seed_002_table_3_exactly_as_published() -> None:
    # Seed 002 Table 3: hardware rows 79/119/145/149, application rows 31/43/94.
    published = {
        79: Resolution.RESTART_BM, 119: Resolution.RESET_GPU, 145: Resolution.RESET_GPU, 149: Resolution.RESET_GPU,
        31: Resolution.RESTART_APP, 43: Resolution.RESTART_APP, 94: Resolution.RESTART_APP,
    }
    assert {c: r for c, (r, _) in SEED_002_TABLE_3.items()} == published
    for code, resolution in published.items():
        if code == 43:  # gpu-remedy follows NVIDIA's catalog (IGNORE) here, see FOLLOW_CATALOG_OVER_SEED_002
            assert lookup(code).resolution is Resolution.IGNORE and lookup(code).path is RemediationPath.WATCH
            continue
        assert lookup(code).resolution is resolution
        assert lookup(code).confidence == "seed-002"
    assert lookup(79).path is RemediationPath.REBOOT  # "reboot the node"
    assert {lookup(c).path for c in (119, 145, 149)} == {RemediationPath.RESET_GPU}
    assert {lookup(c).path for c in (31, 94)} == {RemediationPath.RESTART_APP}


def test_seed_overrides_keep_the_catalog_bucket_visible() -> None:
    # NVIDIA's catalog says IGNORE for 43 and the NVLink5 workflow for 145/149; seed 002 overrides, we keep both.
    assert lookup(43).catalog_bucket == "IGNORE" and "catalog: IGNORE" in lookup(43).reason
    assert lookup(31).catalog_bucket == "RESTART_APP"
    assert lookup(145).catalog_bucket == "WORKFLOW_NVLINK5_ERR"
    assert lookup(79).catalog_bucket == "RESTART_BM"


def test_xid_79_recurrence_stops_retrying() -> None:
    # seed 002 §4.3.5: when 79 recurs, stop retrying and escalate/replace.
    assert lookup(79).recurrence_path is RemediationPath.REPLACE


def test_remap_failure_xid_is_replace_and_catalog_buckets_map_sensibly() -> None:
    assert lookup(64).path is RemediationPath.REPLACE
    assert lookup(48).resolution is Resolution.WORKFLOW_XID_48 and lookup(48).path is RemediationPath.RESET_GPU
    assert lookup(74).resolution is Resolution.WORKFLOW_NVLINK_ERR
    assert lookup(151).path is RemediationPath.REBOOT  # RESTART_VM
    assert lookup(14).path is RemediationPath.IGNORE
    assert lookup(56).resolution is Resolution.CONTACT_SUPPORT and lookup(56).path is RemediationPath.ESCALATE


@pytest.mark.parametrize("code", [1000, 9999, 65535, 173])
def test_unknown_xid_escalates(code: int) -> None:
    e = lookup(code)
    assert e.resolution is Resolution.UNKNOWN
    assert e.path is RemediationPath.ESCALATE
    assert e.reason == "unknown XID: a human decides"


@pytest.mark.parametrize("bad", [0, -1, 65536, 10**9])
def test_out_of_range_is_a_clear_error(bad: int) -> None:
    with pytest.raises(ValueError, match=rf"XID {bad} out of range: must be 1\.\.65535"):
        lookup(bad)


@pytest.mark.parametrize("bad", ["79", 79.0, None, True])
def test_non_integer_is_a_clear_error(bad: object) -> None:
    with pytest.raises(ValueError, match="XID must be an integer"):
        lookup(bad)  # type: ignore[arg-type]


def test_parse_xid_text() -> None:
    assert parse_xid(" 79 ") == 79
    with pytest.raises(ValueError, match="whole number"):
        parse_xid("7x9")
    with pytest.raises(ValueError, match="out of range"):
        parse_xid("-3")


def test_explain_is_json_ready() -> None:
    d = explain(79)
    assert d["code"] == 79 and d["path"] == "reboot" and d["resolution"] == "RESTART_BM"
    assert d["recurrence_path"] == "replace" and d["known"] is True
    assert explain(4242)["path"] == "escalate" and explain(4242)["known"] is False


def test_xid_154_message_names_the_action() -> None:
    msg = "NVRM: Xid (PCI:0000:3b:00): 154, GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)"
    assert recovery_action_path(msg) is RemediationPath.REBOOT
    assert recovery_action_path("... from 0x2 (Node Reboot Required) to 0x1 (GPU Reset Required)") is RemediationPath.RESET_GPU
    assert recovery_action_path("something else") is None


def test_folded_buckets_keep_nvidias_word() -> None:
    # Buckets the shared Resolution enum lacks are folded onto a member; catalog_bucket stays verbatim.
    assert (lookup(45).catalog_bucket, lookup(45).resolution, lookup(45).path) == ("WORKFLOW_XID_45", Resolution.IGNORE, RemediationPath.WATCH)
    assert (lookup(154).catalog_bucket, lookup(154).resolution) == ("XID_154", Resolution.CONTACT_SUPPORT)
    assert (lookup(78).catalog_bucket, lookup(159).catalog_bucket) == ("UPDATE_SWFW", "CHECK_UVM")
    assert {e.catalog_bucket for e in CATALOG.values()} >= {"WORKFLOW_XID_48", "WORKFLOW_NVLINK_ERR", "WORKFLOW_NVLINK5_ERR", "CHECK_MECHANICALS"}

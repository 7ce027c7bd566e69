"""Parsers round 3 (issue 30 item 6, 5): incomplete output is never a PASS, every nccl row layout reads busbw,
"fallen off the bus" is XID 79, Talos / iso / localised prefixes keep node and time, SXid triplets are one event,
XID 144-150 follow NVIDIA's decode sheet. Through the CLI (exit codes) on samples published by others
(tests/realdata/SOURCES.md, section "Parsers round 3"); a truncated report is a real report cut short."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timezone
from pathlib import Path

import pytest

from remedy.cli import main
from remedy.detect.kernel_log import _prefix, parse_kernel_log
from remedy.health.nccl import parse_nccl

HERE = Path(__file__).parent
SAMPLES = HERE / "samples"
R3 = SAMPLES / "parsers3"
HEALTH = HERE.parent / "health" / "samples"


def run(capsys, *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    out, _ = capsys.readouterr()
    return code, out


def cut(tmp_path: Path, src: Path, keep: int) -> str:
    """The first `keep` lines of a real report: what a truncated Job log or a paste holds."""
    p = tmp_path / f"cut_{keep}_{src.name}"
    p.write_text("\n".join(src.read_text().splitlines()[:keep]) + "\n")
    return str(p)


# --- nvidia-smi -q -----------------------------------------------------------------------------------------

def test_nvidia_smi_with_fewer_gpu_blocks_than_attached_is_incomplete(capsys, tmp_path) -> None:
    src = HEALTH / "nvidia_smi_q_h100.txt"  # "Attached GPUs : 2"; the second block starts at line 111
    rc, out = run(capsys, "health", "parse", "nvidia-smi", cut(tmp_path, src, 110), "--expect-gpus", "2")
    assert rc == 1
    assert out.splitlines()[0] == "nvidia-smi: INCOMPLETE"
    assert "1 of 2 GPU blocks (report cut short, the last one seen is GPU 00000000:18:00.0)" in out
    rc, out = run(capsys, "health", "parse", "nvidia-smi", str(src), "--expect-gpus", "2", "--json")
    assert json.loads(out)["incomplete"] == []  # the whole report has both blocks


def test_nvidia_smi_block_cut_before_temperature_is_incomplete(capsys, tmp_path) -> None:
    src = SAMPLES / "thamada_L4_nvidia_smi_q.txt"  # Temperature at line 165
    rc, out = run(capsys, "health", "parse", "nvidia-smi", str(src), "--expect-gpus", "1", "--json")
    assert rc in (0, 1) and json.loads(out)["status"] != "incomplete"
    rc, out = run(capsys, "health", "parse", "nvidia-smi", cut(tmp_path, src, 150), "--expect-gpus", "1", "--json")
    d = json.loads(out)
    assert rc == 1 and d["verdict"] == "fail"
    assert d["incomplete"] == ["GPU 00000000:01:00.0: no 'Temperature' (block cut short)"]
    # the L4's x8 link (of x16) is a real finding, so the headline stays FAIL; the missing part is listed with it
    assert d["status"] == "fail" and any(r.startswith("incomplete output: GPU 00000000:01:00.0") for r in d["reasons"])


# --- dcgmi diag ----------------------------------------------------------------------------------------------

def test_dcgm_table_cut_after_a_category_header_is_incomplete(capsys) -> None:
    rc, out = run(capsys, "health", "parse", "dcgm-diag", str(SAMPLES / "dcgm_issue253_text_4_2_3_excerpt.txt"))
    assert rc == 1 and out.splitlines()[0] == "dcgm-diag: INCOMPLETE"
    assert "category 'Hardware' has no test rows (table cut after its header)" in out


def test_dcgm_table_cut_anywhere_is_never_a_pass(capsys, tmp_path) -> None:
    src = SAMPLES / "ramble_dcgmi_diag_r3_text_3_3_9.txt"
    lines = src.read_text().splitlines()
    rc, out = run(capsys, "health", "parse", "dcgm-diag", str(src))
    assert rc == 0 and out.splitlines()[0] == "dcgm-diag: PASS"
    first_row = next(i for i, ln in enumerate(lines) if ln.startswith("| ") and "Pass" in ln)
    for keep in range(first_row + 1, len(lines)):  # every cut inside the table, down to one line short
        rc, out = run(capsys, "health", "parse", "dcgm-diag", cut(tmp_path, src, keep))
        assert rc == 1 and out.splitlines()[0] == "dcgm-diag: INCOMPLETE", (keep, out)


# --- nccl-tests ----------------------------------------------------------------------------------------------

def test_nccl_rows_without_a_header_read_busbw(capsys) -> None:
    rc, out = run(capsys, "health", "parse", "nccl", str(R3 / "mooncake_pr3484_nccl_rows_no_header.txt"), "--json")
    sizes = json.loads(out)["measurements"]["sizes"]
    assert sizes["33554432"]["busbw_gbps"] == 300.51 and sizes["32768"]["busbw_gbps"] == 3.07
    run_ = parse_nccl((R3 / "mooncake_pr3484_nccl_rows_no_header.txt").read_text())
    assert [r.root for r in run_.rows] == [-1] * 11 and run_.rows[-1].in_place.busbw_gbps == 300.52


@pytest.mark.parametrize("row, busbw, in_place", [
    # nccl-tests 2.x with root and redop (gcm_nccl_allreduce_8xa100.txt's layout), no header
    ("33554432 8388608 float sum -1 195.40 171.72 300.51 0 195.40 171.73 300.52 0", 300.51, 300.52),
    # without the redop column (tables of collectives that reduce nothing), no header
    ("33554432 8388608 float -1 195.40 171.72 300.51 0 195.40 171.73 300.52 0", 300.51, 300.52),
    ("33554432 8388608 float 195.40 171.72 300.51 0 195.40 171.73 300.52 0", 300.51, 300.52),
    # the older table without root, with the float "error" column (nccl_tests_issue176_old_error_column.txt)
    ("4096 1024 float sum 93.73 0.04 0.09 1e-06 93.15 0.04 0.09 1e-06", 0.09, 0.09),
    # a time of 10 ms or more prints without a decimal point ("%7.0f"): not a root
    ("2147483648 536870912 float sum -1 10937 196.35 343.61 0 10925 196.57 343.99 0", 343.61, 343.99),
    ("2147483648 536870912 float 10937 196.35 343.61 0 10925 196.57 343.99 0", 343.61, 343.99),
    # out-of-place only
    ("33554432 8388608 float sum -1 195.40 171.72 300.51 0", 300.51, None),
])
def test_nccl_row_layouts(row: str, busbw: float, in_place: float | None) -> None:
    r = parse_nccl(row).rows[0]
    assert r.out_of_place.busbw_gbps == busbw
    assert (r.in_place.busbw_gbps if r.in_place else None) == in_place


# --- kernel log ----------------------------------------------------------------------------------------------

def signals(capsys, name: str, *extra: str) -> tuple[int, dict]:
    rc, out = run(capsys, "signals", "parse", "dmesg", str(R3 / name), "--json", "--node", "n0", *extra)
    return rc, json.loads(out)


def test_sxid_triplets_are_one_event_each_and_exit_zero(capsys) -> None:
    rc, d = signals(capsys, "nvtrust_issue124_sxid_triplets.log")
    assert rc == 0
    assert [(s["signal"]["labels"]["link"], s["signal"]["labels"]["severity"]) for s in d["signals"]] == [
        ("44", "non-fatal"), ("45", "non-fatal"), ("46", "non-fatal")]
    assert d["summary"]["continued"] == 4 and d["summary"]["orphan_details"] == 1 and d["summary"]["unparsed"] == 0
    assert d["signals"][0]["signal"]["labels"]["detail"].startswith("Severity 0 Engine instance 44")


def test_gpu_fallen_off_the_bus_without_an_xid_line_is_xid_79(capsys) -> None:
    rc, d = signals(capsys, "nvsentinel_gpu_fallen_three_lines.log", "--gpu-map", "0000:b3:00=5")
    assert rc == 0 and len(d["signals"]) == 1
    s, v = d["signals"][0]["signal"], d["signals"][0]["verdict"]
    assert (s["xid"], s["gpu"], s["labels"]["bus_id"], s["node"]) == (79, 5, "0000:b3:00", "n0")
    assert v["path"] == "reboot"  # NVIDIA: XID 79 → RESTART_BM, as NVSentinel maps this message


def test_gpu_fallen_off_the_bus_with_its_xid_79_is_one_event(capsys) -> None:
    rc, d = signals(capsys, "nvsentinel_gpu_fallen_then_xid79.log")
    assert rc == 0 and [s["signal"]["xid"] for s in d["signals"]] == [79]
    assert "pid=12345" in d["signals"][0]["signal"]["raw"]  # the Xid line is the one kept
    assert d["summary"]["continued"] == 1


@pytest.mark.parametrize("line, bus", [
    ("NVRM: The NVIDIA GPU 0000:05:00.0 (PCI ID: 10de:1e07) installed in this system has fallen off the bus and is "
     "not responding to commands.", "0000:05:00"),  # the one-line form of the same printf
    ("[Wed Jul 31 23:14:18 2024] NVRM: GPU 0000:3b:00.0: GPU has fallen off the bus.", "0000:3b:00"),
])
def test_other_fallen_off_the_bus_forms(line: str, bus: str) -> None:
    r = parse_kernel_log(line, node="n1")
    assert [(s.xid, s.labels["bus_id"]) for s in r.signals] == [(79, bus)] and r.unparsed == 0


def test_talos_prefix_keeps_node_and_time() -> None:
    lines = (R3 / "talos_rpi5_issue11_kern_excerpt.log").read_text().splitlines()
    host, at = _prefix(lines[0], None, None)
    assert host == "mc-pt1-pkp-srv-1a" and at == datetime(2025, 9, 13, 20, 46, 45, 810476, tzinfo=UTC)
    xid = lines[0].split("]: ", 1)[0] + "]: NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=python3, GPU has fallen off the bus."
    s = parse_kernel_log(xid).signals[0]
    assert (s.node, s.at, s.xid) == ("mc-pt1-pkp-srv-1a", at, 79)


@pytest.mark.parametrize("line, node, at", [
    # util-linux `dmesg --time-format iso`: stamp only, the node comes from --node
    ("2026-11-21T10:00:01,123456+00:00 NVRM: Xid (PCI:0000:3b:00): 48, pid=7, name=x, DBE", "n0",
     datetime(2026, 11, 21, 10, 0, 1, 123456, tzinfo=UTC)),
    # journalctl short under de_DE / fr_FR / es_ES / ru_RU / ja_JP locales (glibc %b)
    ("Dez 21 10:00:01 gpu-7 kernel: NVRM: Xid (PCI:0000:3b:00): 48, DBE", "gpu-7",
     datetime(2026, 12, 21, 10, 0, 1, tzinfo=UTC)),
    ("févr. 3 07:08:09 gpu-7 kernel: NVRM: Xid (PCI:0000:3b:00): 48, DBE", "gpu-7",
     datetime(2026, 2, 3, 7, 8, 9, tzinfo=UTC)),
    ("ago 30 11:43:09 gpu-7 kernel: NVRM: Xid (PCI:0000:3b:00): 48, DBE", "gpu-7",
     datetime(2026, 8, 30, 11, 43, 9, tzinfo=UTC)),
    ("ноя 21 10:00:01 gpu-7 kernel: NVRM: Xid (PCI:0000:3b:00): 48, DBE", "gpu-7",
     datetime(2026, 11, 21, 10, 0, 1, tzinfo=UTC)),
    ("11月 21 10:00:01 gpu-7 kernel: NVRM: Xid (PCI:0000:3b:00): 48, DBE", "gpu-7",
     datetime(2026, 11, 21, 10, 0, 1, tzinfo=UTC)),
])
def test_iso_and_localised_prefixes_keep_node_and_time(capsys, tmp_path, line: str, node: str, at: datetime) -> None:
    p = tmp_path / "k.log"
    p.write_text(line + "\n")
    rc, out = run(capsys, "signals", "parse", "dmesg", str(p), "--json", "--node", "n0", "--year", "2026")
    s = json.loads(out)["signals"][0]["signal"]
    assert rc == 0 and s["node"] == node and datetime.fromisoformat(s["at"]) == at


# --- XID 144-150 subcodes ------------------------------------------------------------------------------------

def test_nvlink5_subcodes_through_the_cli(capsys) -> None:
    rc, d = signals(capsys, "gpud_nvl5_subcode_37_38.log")
    paths = [r["verdict"]["path"] for r in d["signals"]]
    assert rc == 0 and paths == ["reset-gpu", "watch"]  # subcode 37 RESET_GPU; 38 IGNORE although it says Fatal
    rc, d = signals(capsys, "gpud_pr1174_nvlink5_kmsg.log")
    assert [r["verdict"]["path"] for r in d["signals"]] == ["reset-gpu", "reset-gpu", "watch"]  # 149.0, 149.37, 145 RLW_RXPIPE 0x8



# Words from NVIDIA's decode table that mean nothing to an operator; the explanations say what happens instead.
_JARGON = ("IGNORE", "RESET_GPU", "XID_154_EVAL", "bucket", "catalog:", "WORKFLOW_", "non-fatal (catalog")


def test_nvlink5_subcode_explanations_say_what_happens_in_operator_words(capsys) -> None:
    rc, d = signals(capsys, "gpud_nvl5_subcode_37_38.log")
    reset, ignore = (r["verdict"]["explanation"] for r in d["signals"])
    # subcode 38: NVIDIA's catalog says no recovery although the driver printed "Fatal": no reset
    assert "subcode 38" in ignore and "link 0" in ignore and "although the line says 'Fatal'" in ignore
    assert "software or a user action on the link, not at the GPU" in ignore
    assert "gpu-remedy does not reset the GPU" in ignore
    # subcode 37: the catalog asks for a reset, and says what happens if it recurs
    assert "subcode 37" in reset and "gpu-remedy resets the GPU" in reset and "the node is replaced" in reset
    for text in (reset, ignore):
        assert not any(j in text for j in _JARGON), text


@pytest.mark.parametrize("line, path, says", [
    # the two real lines of gpud's sample (subcode 37 and 38) and subcode 40 of the same unit (catalog: host)
    ("NVRM: Xid (PCI:0000:00:00): 149, NETIR_LINK_EVT Fatal XC0 i0 Link 00 (0x025001c6 0x00000000 0x00000000 "
     "0x00000000 0x00000000 0x00000000)", "reset-gpu", "must be reset to recover the link"),
    ("NVRM: Xid (PCI:0000:00:00): 149, NETIR_LINK_EVT Fatal XC0 i0 Link 00 (0x026001c6 0x00000000 0x00000000 "
     "0x00000000 0x00000000 0x00000000)", "watch", "gpu-remedy does not reset the GPU"),
    ("NVRM: Xid (PCI:0000:00:00): 149, NETIR_LINK_EVT Fatal XC0 i0 Link 00 (0x028001c6 0x00000000 0x0 0x0)",
     "watch", "points at the host machine around the GPU"),
    # RLW_REMAP status 0x1: the driver reports the recovery in the XID 154 that follows
    ("NVRM: Xid (PCI:0000:01:00): 145, RLW_REMAP Nonfatal XC0 i0 Link 3 (0x00000004 0x00000001)", "watch",
     "reports it in the XID 154 that follows"),
    # a unit NVIDIA's table does not list: the driver's own word decides
    ("NVRM: Xid (PCI:0000:01:00): 149, NETIR_NEW_UNIT Fatal XC0 (0x07f00000 0x0)", "reset-gpu",
     "has no entry for it; the line says 'Fatal'"),
])
def test_xid_explain_decodes_the_line_an_operator_pastes(capsys, line, path, says) -> None:
    code = line.split("): ", 1)[1].split(",", 1)[0]
    rc, out = run(capsys, "xid", "explain", code, "--line", line)
    (shown,) = [ln for ln in out.splitlines() if ln.startswith("  this line:")]
    assert rc == 0 and shown.startswith(f"  this line:   {path} — ") and says in shown, shown
    assert not any(j in shown for j in _JARGON), shown
    rc, out = run(capsys, "xid", "explain", code, "--line", line, "--json")
    assert json.loads(out)["line"]["path"] == path


def test_xid_explain_without_a_line_says_subcodes_decide(capsys) -> None:
    rc, out = run(capsys, "xid", "explain", "149")
    assert rc == 0 and "not by the word 'Fatal'" in out and "--line" in out
    rc, out = run(capsys, "xid", "explain", "79")
    assert "subcodes:" not in out
    code = main(["xid", "explain", "79", "--line", "NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus."])
    assert code == 2 and "XID 79 has none" in capsys.readouterr().err


def test_dcgm_json_cut_anywhere_is_incomplete_never_bad_input(capsys, tmp_path) -> None:
    """`dcgmi diag -j` cut mid-way (a truncated Job log, a paste) is incomplete (exit 1, says where it was cut), like
    the table form, not bad input (exit 2); a failure already visible before the cut keeps the verdict FAIL."""
    passing = SAMPLES / "dcgm3_real_output_with_nulls.txt"  # banner + DCGM 3.x JSON, every test PASS
    failing = SAMPLES / "dcgm3_per_gpu_diagmanager.json"  # sm_stress FAIL on GPU 0, 2, 3, then targeted_stress
    rc, out = run(capsys, "health", "parse", "dcgm-diag", str(passing))
    assert rc == 0 and out.splitlines()[0] == "dcgm-diag: PASS"

    def parse_cut(src: Path, keep: int) -> tuple[int, dict]:
        p = tmp_path / f"cut_{keep}_{src.name}"
        p.write_text(src.read_text()[:keep])
        rc, out = run(capsys, "health", "parse", "dcgm-diag", str(p), "--json")
        return rc, json.loads(out)

    text = passing.read_text()
    for keep in range(text.index("{") + 1, len(text.rstrip()), 23):  # cuts all through the JSON
        rc, d = parse_cut(passing, keep)
        assert rc == 1 and d["status"] == "incomplete", (keep, d["reasons"])
        (missing,) = d["incomplete"]
        assert missing.startswith("the JSON report is cut short") and "missing" in missing, (keep, missing)
    # a cut in the middle names the last test it saw
    rc, d = parse_cut(passing, 1500)
    assert d["incomplete"] == ["the JSON report is cut short after test 'Graphics Processes' (8 bracket(s) never "
                               "closed): the rest of the run is missing"]
    # cut after the sm_stress failures in NVIDIA's per-GPU sample: the verdict stays FAIL and the missing rest (two
    # more stress tests) is listed with it
    raw = failing.read_text()
    rc, d = parse_cut(failing, raw.index('"targeted_stress"'))
    assert rc == 1 and d["status"] == "fail" and d["measurements"]["failed_entities"] == ["GPU 0", "GPU 2", "GPU 3"]
    assert d["incomplete"] and d["incomplete"][0].startswith("the JSON report is cut short after test")


def test_dcgm_json_that_is_not_a_cut_is_still_bad_input(capsys, tmp_path) -> None:
    for name, body in (("wrong_bracket", '{"DCGM GPU Diagnostic": {"version": "3.1.0", "test_categories": [}}'),
                       ("missing_comma", '{"DCGM GPU Diagnostic": {"version": "3.1.0" "test_categories": [')):
        p = tmp_path / f"{name}.json"
        p.write_text(body)
        code = main(["health", "parse", "dcgm-diag", str(p)])
        _, err = capsys.readouterr()
        assert code == 2 and "not valid JSON" in err and "Traceback" not in err, (name, err)

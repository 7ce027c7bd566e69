"""`remedy xid explain` and `remedy signals parse` through remedy.cli.main on the sample files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from remedy.cli import main

DATA = Path(__file__).parent / "data"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_xid_explain_text_and_json(capsys) -> None:
    rc, out, _ = run(capsys, "xid", "explain", "79")
    assert rc == 0 and "XID 79: GPU has fallen off the bus" in out and "path:        reboot" in out
    rc, out, _ = run(capsys, "xid", "explain", "79", "--json")
    d = json.loads(out)
    assert rc == 0 and d["resolution"] == "RESTART_BM" and d["recurrence_path"] == "replace"
    rc, out, _ = run(capsys, "xid", "explain", "4242", "--json")
    assert json.loads(out)["path"] == "escalate"


@pytest.mark.parametrize("arg, msg", [("0", "XID 0 out of range"), ("x9", "XID must be a whole number, got 'x9'")])
def test_xid_explain_bad_input(capsys, arg: str, msg: str) -> None:
    rc, _, err = run(capsys, "xid", "explain", arg)
    assert rc == 2 and err.strip() == f"remedy: error: {msg}" + (": must be 1..65535" if "range" in msg else "")


def test_parse_dmesg(capsys) -> None:
    rc, out, _ = run(capsys, "signals", "parse", "dmesg", str(DATA / "dmesg_sample.log"), "--json",
                     "--node", "n0", "--gpu-map", "0000:3b:00=3", "--year", "2026")
    d = json.loads(out)
    assert rc == 1  # the sample has unparsed lines on purpose
    assert d["summary"]["matched"] == 8 and d["summary"]["unparsed"] == 1 and d["summary"]["continued"] == 1
    first = d["signals"][0]
    assert first["signal"]["gpu"] == 3 and first["verdict"]["path"] == "reboot"


def test_parse_dcgm_text(capsys) -> None:
    rc, out, _ = run(capsys, "signals", "parse", "dcgm", str(DATA / "dcgm_metrics.txt"))
    assert rc == 1 and "10 signal(s)" in out and "blanks=3" in out
    assert "gpu1 row-remap-failure → replace" in out
    assert "unparsed: line 49: this is not a sample line {" in out


def test_parse_alertmanager_and_joblog(capsys, tmp_path: Path) -> None:
    rc, out, _ = run(capsys, "signals", "parse", "alertmanager", str(DATA / "alertmanager_webhook.json"), "--json")
    d = json.loads(out)
    assert rc == 0 and d["summary"]["signals"] == 5 and d["summary"]["resolved"] == 1
    rc, out, _ = run(capsys, "signals", "parse", "joblog", str(DATA / "job.log"), "--node", "gpu-node-17", "--json")
    assert {r["verdict"]["path"] for r in json.loads(out)["signals"]} == {"isolate"}
    clean = tmp_path / "clean.log"
    clean.write_text("step 1 | loss: 2.5\n")
    rc, out, _ = run(capsys, "signals", "parse", "joblog", str(clean))
    assert rc == 0 and "0 signal(s)" in out


def test_parse_errors_are_one_line(capsys, tmp_path: Path) -> None:
    rc, _, err = run(capsys, "signals", "parse", "dmesg", str(tmp_path / "missing.log"))
    assert rc == 2 and err.strip() == f"remedy: error: file not found: {tmp_path / 'missing.log'}"
    bad = tmp_path / "bad.json"
    bad.write_text('{"version": "4"}')
    rc, _, err = run(capsys, "signals", "parse", "alertmanager", str(bad))
    assert rc == 2 and err.strip() == "remedy: error: receiver: missing field (+2 more)"
    rc, _, err = run(capsys, "signals", "parse", "dmesg", str(DATA / "dmesg_sample.log"), "--gpu-map", "0000:3b:00")
    assert rc == 2 and "--gpu-map: expected BUS=INDEX" in err

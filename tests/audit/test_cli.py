import json
from pathlib import Path

import pytest

from remedy.cli import main

from .helpers import table13_pair

SAMPLES = Path(__file__).parent / "samples"


def _run(capsys, *argv):
    rc = main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


@pytest.mark.parametrize(
    "delta, interval, expect",
    [
        ("18s", "133.5m", ["0.22%", "2.20%", "2.2 h"]),
        ("31.7s", "199m", ["optimum every 59.7 min", "0.27%", "3.22%"]),
        ("30s", "81.5m", ["optimum every 58.1 min", "= 1.72%", "0.61%", "= 1.82%", "1.4× the optimum"]),
    ],
)
def test_checkpoint_interval_text(capsys, delta, interval, expect):
    rc, out, _ = _run(capsys, "checkpoint", "interval", "--delta", delta, "--mtbf", "56.2h", "--interval", interval)
    assert rc == 0
    for piece in expect:
        assert piece in out


def test_checkpoint_interval_json_from_samples_and_failures(capsys):
    rc, out, _ = _run(capsys, "checkpoint", "interval", "--spike-samples", "2.0", "--failures", "23",
                      "--observed-hours", "1294", "--interval", "81.5m", "--json")  # fmt: skip
    data = json.loads(out)
    assert rc == 0 and data["delta_s"] == pytest.approx(30.0) and data["mtbf_s"] == pytest.approx(1294 / 23 * 3600)
    assert data["current"]["interval_s"] == 4890 and data["ratio"] == pytest.approx(4890 / data["t_opt_s"])


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--delta", "18"], "--delta: cannot read '18' as a duration"),
        (["--delta", "18s", "--failures", "3"], "--failures needs --observed-hours"),
        (["--delta", "18s", "--failures", "0", "--observed-hours", "10"], "no failures in 10 observed hours"),
    ],
)
def test_checkpoint_interval_operator_errors(capsys, argv, message):
    rc, _, err = _run(capsys, "checkpoint", "interval", *argv)
    assert rc == 2 and err.startswith("remedy: error: ") and message in err and len(err.strip().splitlines()) == 1


def test_audit_nfs_two_snapshots(tmp_path, capsys):
    before, after = table13_pair("WRITE")
    (tmp_path / "b").write_text(before)
    (tmp_path / "a").write_text(after)
    rc, out, _ = _run(capsys, "audit", "nfs", "--mountstats", str(tmp_path / "a"), "--before", str(tmp_path / "b"),
                      "--node", "gpu074")  # fmt: skip
    assert rc == 1  # a finding: starved of RPC slots (docs/operations.md: exit codes)
    assert "RPC slot starvation: 92% of WRITE latency is waiting for a slot" in out
    assert "the storage link is 1.4% used; raising bandwidth will not help" in out
    assert "remedy: raise the client RPC slot limit" in out


def test_audit_nfs_json_and_link_override(tmp_path, capsys):
    before, after = table13_pair("WRITE")
    (tmp_path / "b").write_text(before)
    (tmp_path / "a").write_text(after)
    rc, out, _ = _run(capsys, "audit", "nfs", "--mountstats", str(tmp_path / "a"), "--before", str(tmp_path / "b"),
                      "--link-gbps", "400", "--json")  # fmt: skip
    [m] = json.loads(out)["mounts"]
    assert rc == 1 and f"{m['link_utilization']:.1%}" == "0.7%"  # same bytes on a link twice as fast
    assert m["verdict"]["kind"] == "rpc-slot-starvation"
    write = next(o for o in m["ops"] if o["op"] == "WRITE")
    assert round(write["slot_wait_ms"]) == 1495


def test_audit_nfs_single_snapshot_counts_skipped(capsys):
    rc, out, _ = _run(capsys, "audit", "nfs", "--mountstats", str(SAMPLES / "v3_tcp.mountstats"))
    assert rc == 1 and "since mount (24 h)" in out and "(4 non-NFS mounts skipped)" in out


@pytest.mark.parametrize(
    "content, message",
    [
        ("device proc mounted on /proc with fstype proc\n", "no NFS mounts found (1 other mounts skipped: proc)"),
        ("device 1:/ mounted on /x with fstype nfs4 statvers=1.1\n\topts:\trw,vers=4.1\n\tage:\t5\n\tevents:\t1 2",
         "line 4: file ends mid-line"),
    ],
)
def test_audit_nfs_bad_input_is_one_line(tmp_path, capsys, content, message):
    f = tmp_path / "ms"
    f.write_text(content)
    rc, _, err = _run(capsys, "audit", "nfs", "--mountstats", str(f))
    assert rc == 2 and message in err and len(err.strip().splitlines()) == 1

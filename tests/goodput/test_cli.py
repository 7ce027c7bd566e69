"""`remedy goodput` and `remedy simulate` through the real CLI entry point."""

from __future__ import annotations

import json

import pytest

from remedy.cli import main


def test_goodput_worked_example_json(capsys):
    rc = main(["goodput", "--gpus", "1000", "--mtbf", "8h", "--checkpoint-every", "30m", "--checkpoint-cost", "1m",
               "--remediation", "60m", "--json"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert out["published_percent"] == 81
    assert out["lost_minutes"] == pytest.approx(273.0)
    assert out["mtbf_source"] == "given"


def test_goodput_text_and_mtbf_from_gpu_count(capsys):
    assert main(["goodput", "--gpus", "16384", "--remediation", "5m"]) == 0
    text = capsys.readouterr().out
    assert "MTBF 1.80 h (Meta's figures for 16384 GPUs" in text
    assert "Young/Daly optimum" in text
    assert "goodput G = " in text


@pytest.mark.parametrize(
    "argv,message",
    [
        (["goodput"], "give --mtbf"),
        (["goodput", "--mtbf", "8x"], "--mtbf: cannot read '8x'"),
        (["goodput", "--mtbf", "8h", "--checkpoint-every", "1m", "--checkpoint-cost", "2m"], "must be shorter"),
        (["goodput", "--gpus", "0"], "argument --gpus: must be greater than 0, got 0"),
        (["goodput", "--gpus", "-3"], "argument --gpus: must be greater than 0, got -3"),
    ],
)
def test_goodput_operator_errors_exit_2_with_one_line(capsys, argv, message):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("remedy: error: ") and message in err and err.count("\n") == 1


def test_simulate_json_one_policy(capsys):
    assert main(["simulate", "--scenario", "seed002-63", "--policy", "auto-retry", "--days", "20", "--seed", "4",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["scenario"] == "seed002-63" and set(out["pooled_goodput"]) == {"auto-retry"}
    (r,) = out["runs"]
    assert r["policy"] == "auto-retry" and r["scenario"] == "seed002-63" and r["days"] == 20
    assert 0 <= r["goodput"] <= 1
    for key in ("checkpoint", "failure_loss", "queue_wait", "downtime_p50_minutes", "downtime_p90_minutes",
                "failed_retry_gpu_hours", "spares_consumed", "retry_chain_success", "missing_domain"):
        assert key in r


def test_simulate_all_policies_table(capsys):
    assert main(["simulate", "--scenario", "seed002-63", "--days", "10"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:4] == ["scenario", "policy", "seed", "goodput"]
    assert [ln.split()[1] for ln in lines[2:10]] == ["manual", "auto-retry", "auto-replace", "auto-replace-reboot",
                                                      "gpu-remedy", "gpu-remedy/no-warnings",
                                                      "gpu-remedy/repair-at-once", "gpu-remedy/told-warning-precision"]
    assert "against auto-replace on the same seeds:" in lines
    assert "against auto-replace-reboot on the same seeds:" in lines


def test_simulate_rejects_bad_values(capsys):
    assert main(["simulate", "--scenario", "seed002-63", "--days", "-3"]) == 2
    assert "argument --days: must be greater than 0, got -3" in capsys.readouterr().err
    assert main(["simulate", "--scenario", "nowhere"]) == 2

"""Job-log symptoms: NCCL watchdog timeouts and NaN/zero losses."""

from __future__ import annotations

from pathlib import Path

import pytest

from remedy.detect.joblog import parse_job_log
from remedy.detect.signals import SignalKind, classify
from remedy.domain.xid import RemediationPath as P

DATA = Path(__file__).parent / "data"
WATCHDOG = ("[rank3]:[E1121 10:10:21.123456 4321 ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog caught collective operation "
            "timeout: WorkNCCL(SeqNum=120412, OpType=ALLREDUCE, NumelIn=1048576, NumelOut=1048576, Timeout(ms)=600000) "
            "ran for 600021 milliseconds before timing out.")


def test_sample_file() -> None:
    r = parse_job_log((DATA / "job.log").read_text(), node="gpu-node-17", job="llm-pretrain")
    assert (r.lines, r.nccl_timeouts, r.losses, r.bad_losses, r.unparsed, r.ignored) == (10, 2, 6, 3, 1, 1)
    kinds = {s.kind: s for s in r.signals}
    assert set(kinds) == {SignalKind.NCCL_TIMEOUT, SignalKind.LOSS_NAN}
    nccl = kinds[SignalKind.NCCL_TIMEOUT]
    assert nccl.value == pytest.approx(600.021)
    assert nccl.labels == {"seq": "120412", "op": "ALLREDUCE", "rank": "3", "count": "2", "first_line": "9", "job": "llm-pretrain"}
    assert kinds[SignalKind.LOSS_NAN].labels["first_line"] == "4" and kinds[SignalKind.LOSS_NAN].labels["count"] == "3"
    assert {classify(s).path for s in r.signals} == {P.ISOLATE}


@pytest.mark.parametrize("line", ["step 5 | loss: nan", "loss=NaN", "{'loss': nan, 'epoch': 1}", "lm loss: 0.0000E+00 |",
                                  "loss: 0.0000", "loss: inf", '"loss": -inf'])
def test_bad_losses(line: str) -> None:
    (s,) = parse_job_log(line, node="n").signals
    assert s.kind is SignalKind.LOSS_NAN


@pytest.mark.parametrize("line", ["loss: 2.3412", "lm loss: 2.339812E+00", "val_loss: nan", "no loss here", "total_loss=0.0"])
def test_healthy_or_unrelated_lines(line: str) -> None:
    assert parse_job_log(line, node="n").signals == []


def test_watchdog_line() -> None:
    (s,) = parse_job_log(WATCHDOG, node="n").signals
    assert s.kind is SignalKind.NCCL_TIMEOUT and s.labels["op"] == "ALLREDUCE"


def test_node_required() -> None:
    with pytest.raises(ValueError, match="node must be non-empty"):
        parse_job_log("loss: nan", node="")

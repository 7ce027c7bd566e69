"""`remedy lemon candidates|clear`: an operator sees the nodes held out of the spare pool and clears one found
sound; the next spare selection may pick it again. Exit codes: 1 while candidates exist, 2 for bad input."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timezone

import pytest

from remedy import runtime
from remedy.cli import main
from remedy.domain.model import Node, Topology


@pytest.fixture
def ledger_env(tmp_path, monkeypatch):
    monkeypatch.setenv("REMEDY_DB_URL", f"sqlite:///{tmp_path / 'ledger.db'}")
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    runtime.reset()
    led = runtime.ledger()
    led.migrate()
    led.upsert_nodes([Node(name=n, topology=Topology(rack="r1")) for n in ("gpu001", "gpu002")])
    yield led
    runtime.reset()


def test_a_person_clears_a_candidate_and_it_is_gone_from_the_list(ledger_env, capsys):
    from remedy.spares.lemons import lemon_candidates, record_review

    record_review(ledger_env, {"gpu001": {"decision": "deferred", "reason": "4 XID 79 in 9 days"}},
                  reviewed_at=datetime.now(UTC), requested_by="lemon-review")
    assert main(["lemon", "candidates", "--json"]) == 1  # a node held out of the pool: a finding
    out = capsys.readouterr().out
    assert list(json.loads(out[out.index("{"):])["candidates"]) == ["gpu001"]
    assert main(["lemon", "clear", "gpu001", "--by", "alice", "--why", "PSU swapped"]) == 0
    assert "no longer a lemon candidate" in capsys.readouterr().out
    assert lemon_candidates(ledger_env) == {}
    assert main(["lemon", "candidates"]) == 0 and "no lemon candidates" in capsys.readouterr().out


def test_clearing_a_node_that_is_no_candidate_or_unknown_is_one_line_exit_2(ledger_env, capsys):
    assert main(["lemon", "clear", "gpu002", "--by", "alice", "--why", "x"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "gpu002 is not a lemon candidate" in err
    assert main(["lemon", "clear", "gpu999", "--by", "alice", "--why", "x"]) == 2
    assert "gpu999" in capsys.readouterr().err

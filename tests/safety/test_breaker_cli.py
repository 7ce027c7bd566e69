"""`remedy breaker`: an operator pauses automation in a scope and re-closes it; both are recorded in the ledger."""

from __future__ import annotations

import json

import pytest

from remedy import runtime
from remedy.cli import main


@pytest.fixture
def ledger_env(tmp_path, monkeypatch):
    monkeypatch.setenv("REMEDY_DB_URL", f"sqlite:///{tmp_path / 'ledger.db'}")
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    runtime.reset()
    yield
    runtime.reset()


def test_open_status_close_are_recorded(ledger_env, capsys):
    assert main(["breaker", "open", "cluster:cluster", "--by", "alice", "--reason", "driver rollout"]) == 0
    assert main(["breaker", "status", "--json"]) == 1  # a breaker open: a finding
    out = capsys.readouterr().out
    rows = json.loads(out[out.index("{"):])["not_closed"]
    assert [(r["scope"], r["state"]) for r in rows] == [("cluster:cluster", "open")]
    from tasks.gate import load_board

    assert load_board().state_of("cluster:cluster").value == "open"  # rebuilt from the ledger
    assert main(["breaker", "close", "cluster:cluster", "--by", "bob"]) == 0
    events = runtime.ledger().breaker_events()
    assert [(e.from_state, e.to_state, e.by) for e in events] == [("closed", "open", "alice"), ("open", "closed", "bob")]
    assert load_board().state_of("cluster:cluster").value == "closed"


def test_unknown_scope_is_a_clear_error(ledger_env, capsys):
    assert main(["breaker", "open", "bogus", "--by", "a", "--reason", "b"]) == 2
    assert "unknown breaker scope 'bogus'" in capsys.readouterr().err
    assert runtime.ledger().breaker_events() == []

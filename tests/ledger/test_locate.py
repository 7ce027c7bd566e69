"""Operator commands read the ledger the running stack writes, say where they read from, and never create an empty
one (issue 16, item 3)."""

from __future__ import annotations

import pytest

from remedy.cli import main


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("REMEDY_DB_URL", raising=False)
    monkeypatch.delenv("REMEDY_CONFIG", raising=False)
    yield tmp_path
    from remedy import runtime

    runtime.reset()


def _stack_ledger(workdir):
    from remedy.ledger import Ledger

    (workdir / "var" / "stack").mkdir(parents=True)
    led = Ledger(f"sqlite:///{workdir / 'var/stack/ledger.db'}")
    led.migrate()
    return led


def test_breaker_status_reads_the_stacks_ledger_and_says_so(workdir, capsys, monkeypatch):
    led = _stack_ledger(workdir)
    led.record_breaker_event("rack", "rack-2", "closed", "open", reason="3 nodes in 60 s", by="gate")
    led.record_breaker_event("cluster", "cluster", "closed", "open", reason="driver rollout", by="alice")
    led.close()
    assert main(["breaker", "status"]) == 1  # breakers open: a finding
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "ledger: sqlite:///var/stack/ledger.db (remedy up ledger)"
    assert "rack-2" in out and "cluster" in out and "all breakers closed" not in out
    assert not (workdir / "gpu-remedy.db").exists()


def test_no_ledger_is_one_line_and_creates_nothing(workdir, capsys):
    assert main(["breaker", "status"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("remedy: error: no ledger found (looked in var/stack/ledger.db, var/demo/ledger.db)")
    assert err.count("\n") == 1
    assert main(["ledger", "history", "gpu042"]) == 2
    assert "no ledger found" in capsys.readouterr().err
    assert list(workdir.iterdir()) == []


def test_an_explicit_ledger_wins(workdir, capsys):
    led = _stack_ledger(workdir)
    led.close()
    assert main(["breaker", "status", "--db", f"sqlite:///{workdir / 'nowhere.db'}"]) == 2
    assert "does not exist; not creating an empty one" in capsys.readouterr().err
    assert not (workdir / "nowhere.db").exists()

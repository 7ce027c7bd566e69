"""`remedy ledger migrate|history|incidents` through the real entry point, on both backends."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timezone

import pytest

from remedy.cli import main
from remedy.domain.model import Action, ActionOutcome, Incident, IncidentStatus, Node, NodeState
from remedy.ledger import Ledger
from remedy.ledger.migrate import head_revision

T0 = datetime(2026, 11, 20, 8, 0, tzinfo=UTC)


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request: pytest.FixtureRequest, tmp_path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'cli.db'}"
    return request.getfixturevalue("fresh_postgres_url")


def _seed(url: str) -> int:
    with Ledger(url) as led:
        led.upsert_node(Node("gpu-001", gpu_count=8))
        led.transition("gpu-001", NodeState.ACTIVE, reason="burn-in passed", requested_by="burn-in/1", at=T0)
        rec, _ = led.start_action(Action(kind="cordon_node", node="gpu-001", requested_by="replace/2",
                                         started_at=T0.replace(minute=5)))
        led.finish_action(rec.id, ActionOutcome.SUCCEEDED)
        inc, _ = led.open_incident(Incident("gpu-001", "xid", gpu=2, xid=79, first_seen=T0, last_seen=T0),
                                   window_seconds=600)
        old, _ = led.open_incident(Incident("gpu-002", "row-remap-failure", gpu=0, first_seen=T0, last_seen=T0),
                                   window_seconds=600, severity="warning")
        led.set_incident_status(old.id, IncidentStatus.RESOLVED)
        return inc.id


def test_migrate_history_incidents(url: str, capsys) -> None:
    assert main(["ledger", "migrate", "--db", url]) == 0
    assert f"ledger schema at {head_revision()} (was empty)" in capsys.readouterr().out
    assert main(["ledger", "migrate", "--db", url]) == 0
    assert "already up to date" in capsys.readouterr().out
    open_id = _seed(url)

    assert main(["ledger", "history", "gpu-001", "--db", url]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["TIME", "(UTC)", "KIND", "BY", "WHAT"]
    assert "2026-11-20 08:00:00" in lines[1] and "unmanaged → active: burn-in passed" in lines[1]
    assert "cordon_node succeeded" in lines[2] and "replace/2" in lines[2]

    assert main(["ledger", "history", "gpu-001", "--db", url, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["node"] == "gpu-001" and [e["kind"] for e in out["entries"]] == ["transition", "action"]

    assert main(["ledger", "incidents", "--open", "--json", "--db", url]) == 0
    open_only = json.loads(capsys.readouterr().out)
    assert [(i["id"], i["node"], i["xid"], i["status"]) for i in open_only] == [(open_id, "gpu-001", 79, "open")]
    assert main(["ledger", "incidents", "--db", url]) == 0
    table = capsys.readouterr().out.splitlines()
    assert len(table) == 3 and "row-remap-failure" in table[2] and "resolved" in table[2]


def test_operator_errors_are_one_line_exit_2(url: str, capsys, tmp_path) -> None:
    # Not migrated yet: say what to run.
    if url.startswith("sqlite"):
        assert main(["ledger", "history", "gpu-001", "--db", url]) == 2
        assert "ledger database not found" in capsys.readouterr().err
        assert not (tmp_path / "cli.db").exists()  # reading does not create the file
    else:
        assert main(["ledger", "incidents", "--db", url]) == 2
        assert f"schema revision none, expected {head_revision()}: run `remedy ledger migrate`" in capsys.readouterr().err
    main(["ledger", "migrate", "--db", url])
    capsys.readouterr()
    assert main(["ledger", "history", "gpu-404", "--db", url]) == 2
    err = capsys.readouterr().err
    assert err == "remedy: error: node not found: gpu-404\n"


def test_unreachable_database_and_default_url_from_config(tmp_path, monkeypatch, capsys) -> None:
    assert main(["ledger", "incidents", "--db", "postgresql+psycopg://nobody@127.0.0.1:1/none"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("remedy: error: ledger database postgresql+psycopg://nobody@127.0.0.1:1/none:")
    assert len(err.strip().splitlines()) == 1
    monkeypatch.setenv("REMEDY_DB_URL", f"sqlite:///{tmp_path / 'configured.db'}")
    assert main(["ledger", "migrate"]) == 0
    assert (tmp_path / "configured.db").exists()
    assert main(["ledger", "incidents", "--json"]) == 0
    assert json.loads(capsys.readouterr().out.split("\n", 1)[1]) == []


def test_history_by_column_says_who_not_the_run_name_and_uuid(tmp_path, capsys) -> None:
    """Automation is `gpu-remedy run <first 8 of its id>`; a person's name stays as recorded; --json keeps it all."""
    url = f"sqlite:///{tmp_path / 'by.db'}"
    run = "flow-run:replace gpu-001 (XID 79):1e0b1591-2fc7-45c7-82e7-3bf37bf4dad0"
    with Ledger(url) as led:
        led.migrate()
        led.upsert_node(Node("gpu-001", gpu_count=8))
        led.transition("gpu-001", NodeState.ACTIVE, reason="adopted", requested_by=run, at=T0)
        rec, _ = led.start_action(Action(kind="cordon_node", node="gpu-001", requested_by="alice",
                                         started_at=T0.replace(minute=5)))
        led.finish_action(rec.id, ActionOutcome.SUCCEEDED)
    assert main(["ledger", "history", "gpu-001", "--db", url]) == 0
    lines = capsys.readouterr().out.splitlines()
    by = lines[0].index("BY")
    assert lines[1][by:].startswith("gpu-remedy run 1e0b1591 ") and "3bf37bf4dad0" not in lines[1]
    assert lines[2][by:].startswith("alice ")
    assert max(len(line) for line in lines) < 100
    assert main(["ledger", "history", "gpu-001", "--db", url, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["entries"][0]["by"] == run

"""Closing a breaker by hand (`remedy breaker close`) answers the approvals paused on it: the held runs resume and
go on, instead of waiting for their timeout to deny them while `breaker status` says all closed. Real parts: a
Prefect server, the simulator, replace-node runs held by the rack breaker, the CLI in this process."""

from __future__ import annotations

import pytest

from tests.approvals.helpers import rack_storm, remedy_env, wait_for, wait_paused_approval  # noqa: F401
from tests.fixtures.prefect import run_to_state

pytestmark = pytest.mark.prefect


def test_breaker_close_resumes_the_runs_paused_on_it(prefect_server, sim_factory, remedy_env, capsys):  # noqa: F811
    from remedy.cli import main

    sim = sim_factory(nodes=32, spares=8)
    runtime, runs = rack_storm(remedy_env, sim, run_to_state, APPROVALS__TIMEOUT_SECONDS=600,
                               BREAKER__SPARE_RESERVE=0)
    led = runtime.ledger()
    asked = wait_paused_approval(led, kind="breaker:rack:rack-2", timeout=180)

    capsys.readouterr()
    assert main(["breaker", "close", "rack-2", "--by", "alice"]) == 0
    out = capsys.readouterr().out
    assert "rack:rack-2: open → closed" in out
    assert f"approval {asked.id} (breaker:rack:rack-2): approve by alice — run resumed" in out
    answer = led.get_approval(asked.id)
    assert (answer.decision, answer.decided_by) == ("approve", "alice")
    assert "closed by alice" in answer.reason
    # the run that asked goes on past the gate: it is no longer paused, and ends without being held
    from tests.approvals.helpers import flow_state

    final = wait_for("the resumed run to finish", lambda: (st := flow_state(asked.flow_run_id)) not in (
        "PAUSED", "RUNNING", "PENDING", "SCHEDULED") and st, timeout=300)
    assert final == "COMPLETED", final
    assert [a for a in led.approvals(pending=True) if a.kind.startswith("breaker:")] == []
    for t in runs.values():  # let the others end before the fixtures stop (their outcome is not this test's)
        try:
            t.result(timeout=300)
        except BaseException:  # noqa: BLE001
            pass

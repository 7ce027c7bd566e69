"""Isolate a NaN / zero-loss fault to nodes or to code — seed 004's bisection as a Prefect flow.

    check the input → quarantine the suspects (taint) → per round: label each batch, run the smoke test on every
    batch in parallel, follow the logs and stop a batch at the first matching line → release healthy batches at
    once → split the diverging ones (remedy.isolate.FaultIsolation) → verdict in plain words → report

The search itself (batches, splitting, the minimum node count, the code vs infrastructure rule) is
`remedy.isolate.search.FaultIsolation`, Prefect-free; this flow only runs its rounds on the cluster. Whatever happens
(an error, a smoke test that never answers) every node the flow quarantined is released in a `finally`, except the
nodes the verdict names, which stay quarantined for a person.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from prefect import flow, get_run_logger
from prefect.artifacts import create_markdown_artifact
from prefect.futures import as_completed
from prefect.task_runners import ThreadPoolTaskRunner

from remedy import runtime
from remedy.domain.model import NodeState
from remedy.isolate.decisions import (
    FinalRelease,
    check_request,
    dry_run_text,
    final_release,
    held_nodes,
    nodes_cell,
    plain_verdict,
    quarantine_in_ledger,
    timed_out_message,
    timed_out_only,
)
from remedy.isolate.search import BatchOutcome, FaultIsolation, IsolationResult
from tasks.isolation import (
    IsolationTimedOut,
    check_template,
    compile_pattern,
    default_smoke_test,
    label_batch,
    new_label_value,
    quarantine_pool,
    release_nodes,
    run_smoke_test,
)
from tasks.ledger import set_node_state, sync_fleet
from tasks.tags import tag_this_run_with_nodes

DEFAULT_PATTERN = r"loss: (nan|0\.0000)"  # seed 004: "Once loss: nan or loss: 0.0000 is captured"


def _run_name() -> str:
    from prefect.runtime import flow_run

    suspects = flow_run.parameters.get("suspects") or []
    return f"isolate fault over {len(suspects)} node(s)"


# Prefect 3.9 types `task_runner` as TaskRunner[PrefectFuture] (invariant): its own thread-pool runner does not fit
@flow(name="isolate-fault", flow_run_name=_run_name,
      task_runner=ThreadPoolTaskRunner(max_workers=16))  # type: ignore[arg-type]
def isolate_fault(
    suspects: list[str],
    smoke_test: dict | None = None,
    pattern: str = DEFAULT_PATTERN,
    min_nodes: int | None = None,
    incident_id: int | None = None,
    time_limit_seconds: float = 600,
    dry_run: bool | None = None,
) -> dict[str, Any]:
    """Find the node(s) behind a diverging job, or show it is the code.

    suspects: the nodes the job ran on. smoke_test: a batch/v1 Job manifest (the user's training step) whose
    `spec.template.spec.nodeSelector` has the slot `divergence-job-id: <anything>`; None = the built-in smoke test.
    pattern: a regular expression; the first log line it matches marks the batch as diverged. min_nodes: smallest
    batch the test may run on (default lemon.isolation.min_nodes). time_limit_seconds: per smoke test; a test that
    neither matches nor finishes by then is inconclusive (retested once). Returns the verdict, the nodes, the rounds.
    """
    log = get_run_logger()
    settings = runtime.settings()
    dry_run = settings.dry_run if dry_run is None else dry_run
    started = datetime.now(UTC)

    # 1. Check the input before touching a node: a bad request changes nothing.
    check_request(suspects, time_limit_seconds)
    compile_pattern(pattern)
    template = check_template(smoke_test) if smoke_test is not None else default_smoke_test()
    search = FaultIsolation(list(suspects), min_nodes, settings.lemon.isolation)  # ValueError on a bad pool
    cluster = runtime.cluster()
    for node in suspects:
        cluster.get_node(node)  # NodeNotFound names the first unknown node
    run_id = new_label_value()[:8]
    outcome: dict[str, Any] = {"suspects": list(suspects), "dry_run": dry_run, "run_id": run_id,
                               "min_nodes": search.min_nodes, "pattern": pattern, "incident_id": incident_id}
    if dry_run:
        first = search.plan_round()
        return outcome | {"status": "planned", "verdict": None, "rounds_used": 0,
                          "plan": [list(b.nodes) for b in first],
                          "verdict_text": dry_run_text(suspects, len(first))}

    sync_fleet()
    # 2. Quarantine the pool: nothing new lands on a suspect while it is tested (seed 004: taint).
    pool = quarantine_pool(list(suspects), run_id, dry_run, incident_id=incident_id)
    pool_release = _PoolRelease(run_id, dry_run, list(pool.already_out), incident_id)
    rounds: list[dict[str, Any]] = []
    result: IsolationResult | None = None
    try:
        # 3. Rounds: every batch of a round runs at once; a healthy batch goes back to the pool as soon as it ends.
        while not search.done:
            _one_round(search, template, pattern, time_limit_seconds, pool_release, rounds, log)
        result = search.result
    finally:
        # 4. Nothing stays quarantined by accident: on an error, or when nothing could be concluded, release all.
        pool_release.finish(final_release(suspects, pool_release.released_at, result), search.round, log)

    # 5. Verdict: the nodes it names stay quarantined (ledger + pool label) for a person / the replace flow, and the
    #    run carries their tags, so filtering runs by one of them finds the run that named it.
    held = list(held_nodes(result))
    tag_this_run_with_nodes(held, stage="isolate", dry_run=dry_run)
    for n in quarantine_in_ledger(result):
        set_node_state(n, NodeState.QUARANTINED.value, reason=f"fault isolation: {result.reason}"[:500],
                       dry_run=dry_run, incident_id=incident_id)
    outcome |= {
        "status": result.verdict.value,
        "verdict": result.verdict.value,
        "verdict_text": plain_verdict(result),
        "bad_nodes": list(result.bad_nodes),
        "suspect_batches": [list(b) for b in result.narrowed_batches],
        "held": held,
        "released": [n for n in suspects if n in pool_release.released_at],
        "released_at": pool_release.released_at,
        "not_released": pool_release.not_released,
        "failed_batches": [list(b) for b in result.failed_batches],
        "rounds_used": result.rounds_used,
        "tests_run": result.tests_run,
        "tests_bound": result.tests_bound,
        "effort": result.effort,
        "rounds": rounds,
        "reason": result.reason,
        "started_at": started.isoformat(),
        "finished_at": datetime.now(UTC).isoformat(),
    }
    _report(outcome)
    if timed_out_only(result):
        raise IsolationTimedOut(timed_out_message(pattern, time_limit_seconds, result.tests_run, len(suspects)))
    return outcome


class _PoolRelease:
    """Releases nodes back to the pool once each, remembering when and why (and which a person must untaint)."""

    def __init__(self, run_id: str, dry_run: bool, already_out: list[str], incident_id: int | None) -> None:
        self.run_id, self.dry_run, self.already_out, self.incident_id = run_id, dry_run, already_out, incident_id
        self.released_at: dict[str, dict[str, Any]] = {}
        self.not_released: dict[str, str] = {}  # node → why releasing it failed

    def __call__(self, nodes: list[str], why: str, rnd: int) -> None:
        nodes = [n for n in nodes if n not in self.released_at]
        if not nodes:
            return
        done = release_nodes(nodes, why, self.run_id, self.dry_run, keep_tainted=self.already_out,
                             incident_id=self.incident_id)
        at = datetime.fromtimestamp(done.at, UTC).isoformat()
        for n in done.released:
            self.released_at[n] = {"round": rnd, "at": at, "why": why}
        self.not_released.update(done.failed)

    def finish(self, final: FinalRelease, rnd: int, log: Any) -> None:
        if final.leftover:
            self(list(final.leftover), final.why, rnd)
        if final.keep:  # held nodes keep the taint, lose the batch label
            release_nodes.fn(list(final.keep), "held", self.run_id, self.dry_run, keep_tainted=list(final.keep),
                             incident_id=self.incident_id)
        if self.not_released:
            log.error("could not release %s: untaint them by hand", ", ".join(sorted(self.not_released)))


def _one_round(search: FaultIsolation, template: dict, pattern: str, time_limit_seconds: float,
               release: _PoolRelease, rounds: list[dict[str, Any]], log: Any) -> None:
    """Label every batch, run all smoke tests at once, release each healthy batch as it ends, then let the search
    split the diverging ones."""
    batches = search.plan_round()
    labels = {b.id: new_label_value() for b in batches}
    for b in batches:
        label_batch(list(b.nodes), labels[b.id], release.run_id, release.dry_run, incident_id=release.incident_id)
    futures = {
        run_smoke_test.submit(b.id, list(b.nodes), labels[b.id], template, pattern, time_limit_seconds,
                              release.run_id, incident_id=release.incident_id): b
        for b in batches
    }
    outcomes: dict[str, BatchOutcome] = {}
    for fut in as_completed(list(futures)):
        b = futures[fut]
        answer = fut.result()
        outcomes[b.id] = answer.outcome
        rounds.append({"round": b.round, "batch": b.id, "nodes": list(b.nodes), "retest": b.retest,
                       "outcome": answer.verdict.value, "detail": answer.outcome.detail, "seconds": answer.seconds})
        if answer.healthy:
            release(list(b.nodes), f"batch {b.id} trained normally", b.round)
    for event in search.record(outcomes):
        release(list(event.nodes), event.reason, event.round)
    log.info("round %d: %s", search.round, ", ".join(f"{k}={'x' if v.diverged else 'ok'}" for k, v in outcomes.items()))


def _report(out: dict[str, Any]) -> None:
    lines = [f"### Fault isolation: {out['verdict']}", "", out["verdict_text"], "",
             f"- suspects: {len(out['suspects'])}, minimum batch {out['min_nodes']} node(s), "
             f"pattern `{out['pattern']}`",
             f"- rounds used: **{out['rounds_used']}** ({out['effort']})",
             f"- still quarantined: {', '.join(out['held']) or 'none'}", "",
             "| round | batch | nodes | outcome | detail | seconds |", "|---|---|---|---|---|---|"]
    for r in out["rounds"]:
        nodes = nodes_cell(r["nodes"])
        detail = r["detail"][:120].replace("|", "/")
        lines.append(f"| {r['round']} | {r['batch']} | {nodes} | {r['outcome']} | {detail} | {r['seconds']} |")
    create_markdown_artifact(key=f"isolate-fault-{out['run_id']}", markdown="\n".join(lines),
                             description="Bisection fault isolation: rounds and verdict")

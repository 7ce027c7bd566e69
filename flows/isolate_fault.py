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

from datetime import datetime, timezone
from typing import Any

from prefect import flow, get_run_logger
from prefect.artifacts import create_markdown_artifact
from prefect.futures import as_completed
from prefect.task_runners import ThreadPoolTaskRunner

from remedy import runtime
from remedy.domain.durations import human_duration
from remedy.domain.model import NodeState
from remedy.isolate.search import BatchOutcome, FaultIsolation, IsolationResult, Verdict
from tasks.isolation import (
    IsolationTimedOut, check_template, compile_pattern, default_smoke_test, label_batch, new_label_value,
    quarantine_pool, release_nodes, run_smoke_test,
)
from tasks.ledger import set_node_state, sync_fleet
from tasks.tags import tag_this_run_with_nodes

DEFAULT_PATTERN = r"loss: (nan|0\.0000)"  # seed 004: "Once loss: nan or loss: 0.0000 is captured"


def _run_name() -> str:
    from prefect.runtime import flow_run

    suspects = flow_run.parameters.get("suspects") or []
    return f"isolate fault over {len(suspects)} node(s)"


@flow(name="isolate-fault", flow_run_name=_run_name, task_runner=ThreadPoolTaskRunner(max_workers=16))
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
    started = datetime.now(timezone.utc)

    # 1. Check the input before touching a node: a bad request changes nothing.
    if not isinstance(suspects, (list, tuple)) or not suspects:
        raise ValueError("isolate_fault: the suspect list is empty; name the nodes the diverging job ran on")
    compile_pattern(pattern)
    if not isinstance(time_limit_seconds, (int, float)) or not time_limit_seconds > 0:
        raise ValueError(f"isolate_fault: time_limit_seconds must be > 0, got {time_limit_seconds!r}")
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
                          "verdict_text": f"dry-run: would quarantine {len(suspects)} node(s) and test "
                                          f"{len(first)} batches in round 1"}

    sync_fleet()
    # 2. Quarantine the pool: nothing new lands on a suspect while it is tested (seed 004: taint).
    pool = quarantine_pool(list(suspects), run_id, dry_run, incident_id=incident_id)
    already_out = list(pool["already_out"])
    released_at: dict[str, dict[str, Any]] = {}
    not_released: dict[str, str] = {}  # node → why releasing it failed (a person must untaint it)
    rounds: list[dict[str, Any]] = []
    result: IsolationResult | None = None

    def release(nodes: list[str], why: str, rnd: int) -> None:
        nodes = [n for n in nodes if n not in released_at]
        if not nodes:
            return
        done = release_nodes(nodes, why, run_id, dry_run, keep_tainted=already_out, incident_id=incident_id)
        at = datetime.fromtimestamp(done["at"], timezone.utc).isoformat()
        for n in done["released"]:
            released_at[n] = {"round": rnd, "at": at, "why": why}
        not_released.update(done["failed"])

    try:
        # 3. Rounds: every batch of a round runs at once; a healthy batch goes back to the pool as soon as it ends.
        while not search.done:
            batches = search.plan_round()
            labels = {b.id: new_label_value() for b in batches}
            for b in batches:
                label_batch(list(b.nodes), labels[b.id], run_id, dry_run, incident_id=incident_id)
            futures = {
                run_smoke_test.submit(b.id, list(b.nodes), labels[b.id], template, pattern, time_limit_seconds,
                                      run_id, incident_id=incident_id): b
                for b in batches
            }
            outcomes: dict[str, BatchOutcome] = {}
            for fut in as_completed(list(futures)):
                b = futures[fut]
                res = fut.result()
                outcomes[b.id] = BatchOutcome(res["diverged"], res["timed_out"], res["detail"])
                rounds.append({"round": b.round, "batch": b.id, "nodes": list(b.nodes), "retest": b.retest,
                               "outcome": "diverged" if res["diverged"] else "timed out" if res["timed_out"]
                               else "healthy", "detail": res["detail"], "seconds": res["seconds"]})
                if not res["diverged"] and not res["timed_out"]:
                    release(list(b.nodes), f"batch {b.id} trained normally", b.round)
            for event in search.record(outcomes):
                release(list(event.nodes), event.reason, event.round)
            log.info("round %d: %s", search.round, ", ".join(f"{k}={'x' if v.diverged else 'ok'}"
                                                               for k, v in outcomes.items()))
        result = search.result
    finally:
        # 4. Nothing stays quarantined by accident: on an error, or when nothing could be concluded, release all.
        keep = set(_held(result)) if result is not None else set()
        leftover = [n for n in suspects if n not in released_at and n not in keep]
        if leftover:
            release(leftover, "isolation ended without blaming these nodes" if result else "isolation failed",
                    search.round)
        if keep:  # held nodes keep the taint, lose the batch label
            release_nodes.fn(sorted(keep), "held", run_id, dry_run, keep_tainted=sorted(keep), incident_id=incident_id)
        if not_released:
            log.error("could not release %s: untaint them by hand", ", ".join(sorted(not_released)))

    # 5. Verdict: the nodes it names stay quarantined (ledger + pool label) for a person / the replace flow, and the
    #    run carries their tags, so filtering runs by one of them finds the run that named it.
    tag_this_run_with_nodes(list(_held(result)), stage="isolate", dry_run=dry_run)
    if result.verdict is Verdict.INFRASTRUCTURE:
        for n in result.suspects:
            set_node_state(n, NodeState.QUARANTINED.value, reason=f"fault isolation: {result.reason}"[:500],
                           dry_run=dry_run, incident_id=incident_id)
    outcome |= {
        "status": result.verdict.value,
        "verdict": result.verdict.value,
        "verdict_text": plain_verdict(result),
        "bad_nodes": list(result.bad_nodes),
        "suspect_batches": [list(b) for b in result.narrowed_batches],
        "held": list(_held(result)),
        "released": [n for n in suspects if n in released_at],
        "released_at": released_at,
        "not_released": not_released,
        "failed_batches": [list(b) for b in result.failed_batches],
        "rounds_used": result.rounds_used,
        "tests_run": result.tests_run,
        "tests_bound": result.tests_bound,
        "effort": result.effort,
        "rounds": rounds,
        "reason": result.reason,
        "started_at": started.isoformat(),
        "finished_at": datetime.now(timezone.utc).isoformat(),
    }
    _report(outcome)
    if _timed_out_only(result):
        raise IsolationTimedOut(
            f"isolate_fault: no smoke test reached a verdict: pattern {pattern!r} never matched and the test did not "
            f"finish within {human_duration(time_limit_seconds)} ({result.tests_run} test(s)); all {len(suspects)} node(s) "
            "released — check the pattern and the time limit"
        )
    return outcome


def _timed_out_only(result: IsolationResult) -> bool:
    return (result.verdict is Verdict.INCONCLUSIVE and bool(result.inconclusive_batches)
            and not (result.bad_nodes or result.narrowed_batches or result.unresolved_groups))


def _held(result: IsolationResult | None) -> tuple[str, ...]:
    """Nodes that stay quarantined: what the verdict blames, and batches no test could clear (unless that is all)."""
    if result is None or _timed_out_only(result):
        return ()
    return tuple(result.held)


def plain_verdict(r: IsolationResult) -> str:
    """The verdict in an operator's words, with the effort beside the bound."""
    if r.verdict is Verdict.CODE:
        return (f"Code: every batch diverges, more of them than bad nodes could explain, so the cause is the training "
                f"code or its data, not the hardware. All {len(r.released)} nodes went back to the pool ({r.effort}).")
    if r.verdict is Verdict.INFRASTRUCTURE:
        named = ", ".join(r.suspects)
        return (f"Infrastructure: the divergence follows {named}. They stay quarantined; the other "
                f"{len(r.released)} node(s) went back to the pool ({r.effort}).")
    if r.verdict is Verdict.NOT_REPRODUCED:
        return (f"Not reproduced: no batch diverged, so no node can be blamed (intermittent, or it needs the whole "
                f"job's scale). All {len(r.released)} nodes went back to the pool ({r.effort}).")
    return f"Inconclusive — {r.reason} ({r.effort})."


def _report(out: dict[str, Any]) -> None:
    lines = [f"### Fault isolation: {out['verdict']}", "", out["verdict_text"], "",
             f"- suspects: {len(out['suspects'])}, minimum batch {out['min_nodes']} node(s), "
             f"pattern `{out['pattern']}`",
             f"- rounds used: **{out['rounds_used']}** ({out['effort']})",
             f"- still quarantined: {', '.join(out['held']) or 'none'}", "",
             "| round | batch | nodes | outcome | detail | seconds |", "|---|---|---|---|---|---|"]
    for r in out["rounds"]:
        n = r["nodes"]
        nodes = ", ".join(n) if len(n) <= 6 else f"{n[0]} … {n[-1]} ({len(n)})"
        detail = r["detail"][:120].replace("|", "/")
        lines.append(f"| {r['round']} | {r['batch']} | {nodes} | {r['outcome']} | {detail} | {r['seconds']} |")
    create_markdown_artifact(key=f"isolate-fault-{out['run_id']}", markdown="\n".join(lines),
                             description="Bisection fault isolation: rounds and verdict")

"""Burn in new or repaired GPU nodes: prove each one before it may carry a training job (seed 000, seed 001).

    sync → burn-in taint + state burn-in → the level's single-node suite on every node at once
         → multi-node NCCL over groups of the batch's idle nodes (levels that have it)
         → pass: validated-at, spare taint, state spare │ fail: quarantine → repair record → repair, Slack notice,
                                                         │       retirement candidate after N failures

One task run per node carries its whole single-node suite, so a 64-node batch takes about as long as its slowest
node (thread-pool task runner) without flooding the server with one task run per check. A progress artifact and
a table of each check's state per node are kept current while it runs.
"""

from __future__ import annotations

import time
import uuid
from typing import Any
from uuid import UUID

from prefect import flow, get_run_logger, unmapped
from prefect.artifacts import (
    create_markdown_artifact,
    create_progress_artifact,
    create_table_artifact,
    update_progress_artifact,
)
from prefect.task_runners import ThreadPoolTaskRunner

from remedy import runtime
from remedy.health import suite_for
from remedy.health.burn_in_decisions import (
    MultiNodeStart,
    check_batch,
    failed_members,
    first_verdicts,
    group_error,
    judge_repair,
    known_good,
    lone_node_check,
    no_peer_to_isolate,
    node_error,
    pairing_rounds,
    plan_multi_node,
    settle_multi_node,
    summarise,
)
from remedy.health.results import BurnInVerdict, GroupCheck
from tasks.burn_in import BOARD, burn_in_node, conclude_burn_in, nccl_groups, run_nccl_group
from tasks.ledger import sync_fleet

MAX_PARALLEL_NODES = 64  # thread-pool workers: nodes checked at once (each mostly waits on its Jobs)
TABLE_EVERY_SECONDS = 10.0  # a new version of the check-state table at most this often while running


def _run_name() -> str:
    from prefect.runtime import flow_run

    p = flow_run.parameters
    nodes = list(p.get("nodes") or [])
    more = f" (+{len(nodes) - 1} more)" if len(nodes) > 1 else ""
    return f"burn-in {nodes[0] if nodes else '(no nodes)'}{more} {p.get('level', 'standard')}"


# Prefect 3.9 types `task_runner` as TaskRunner[PrefectFuture] (invariant): its own thread-pool runner does not fit
@flow(name="burn-in", flow_run_name=_run_name,
      task_runner=ThreadPoolTaskRunner(max_workers=MAX_PARALLEL_NODES))  # type: ignore[arg-type]
def burn_in(nodes: list[str], level: str = "standard", dry_run: bool | None = None) -> dict[str, Any]:
    settings = runtime.settings()
    dry_run = settings.dry_run if dry_run is None else dry_run
    nodes = check_batch(nodes)
    specs = suite_for(level, settings.health)  # ValueError names an unknown level before anything is touched
    multi = [s for s in specs if s.multi_node]
    log = get_run_logger()

    # 1. The ledger knows every node (topology, adopted state) before any moves.
    sync_fleet()
    board = _board_key()
    BOARD.start(board, nodes, [s.id for s in specs])
    progress: UUID = create_progress_artifact(  # type: ignore[assignment]  # called in a sync flow: a UUID
        0.0, key="burn-in-progress", description=f"burn-in {level}: {len(nodes)} node(s), checks done")

    # 2. Every node at once: burn-in taint, state burn-in, its single-node suite (and its verdict, if that is all).
    futures = burn_in_node.map(nodes, level=unmapped(level), dry_run=unmapped(dry_run), board=unmapped(board),
                               conclude_now=unmapped(not multi))
    results = dict(zip(nodes, _collect(futures, nodes, board, progress, level)))

    # 3. Multi-node NCCL over groups of the nodes that passed alone; a failed group is re-paired with a known-good
    #    node to tell which member is slow (seed 004: isolate by halving, here halves of two).
    if multi:
        _multi_node(results, level, dry_run, board)
        ready = [n for n, r in results.items() if r["status"] == "checked"]
        finals = conclude_burn_in.map(ready, level=unmapped(level), checks=[results[n]["checks"] for n in ready],
                                      dry_run=unmapped(dry_run))
        for n, r in zip(ready, _collect(finals, ready, board, progress, level)):
            results[n] = r

    # 4. The story: final progress, check states per node, a summary.
    update_progress_artifact(progress, 100.0)
    rows = BOARD.rows(board)
    BOARD.forget(board)
    outcome = summarise(results, level, dry_run)
    _report(outcome, rows)
    log.info("burn-in %s: %s", level, outcome["counts"])
    return outcome


def _board_key() -> str:
    from prefect.runtime import flow_run

    return str(flow_run.id or uuid.uuid4())


def _collect(futures, nodes: list[str], board: str, progress, level: str) -> list[dict[str, Any]]:
    """Wait for the node tasks, keeping the progress artifact (and now and then the table) current. A task that
    failed for good leaves its node where it was (in burn-in): an error of ours never sends a node to repair."""
    from prefect.futures import wait

    last_pct, last_table, pending = -1.0, time.monotonic(), list(futures)
    while pending:
        _, not_done = wait(pending, timeout=1.0)
        pending = list(not_done)
        pct = round(100.0 * BOARD.fraction(board), 1)
        if pct != last_pct and pending:
            update_progress_artifact(progress, pct)
            last_pct = pct
        if pending and time.monotonic() - last_table > TABLE_EVERY_SECONDS:
            create_table_artifact(key="burn-in-checks", table=BOARD.rows(board),
                                  description=f"burn-in {level}: each check's state per node (running)")
            last_table = time.monotonic()
    out = []
    for node, f in zip(nodes, futures):
        r = f.result(raise_on_failure=False)
        if isinstance(r, BurnInVerdict):
            out.append(r.to_dict())
        else:  # the task failed for good: its exception
            BOARD.finish_node(board, node, "error")
            out.append(node_error(node, r))
    return out


def _multi_node(results: dict[str, dict], level: str, dry_run: bool, board: str) -> None:
    """Attach the multi-node NCCL verdict to each checked node (results[n]['checks'] grows by one)."""
    plan = plan_multi_node(results)
    for n in plan.skipped:
        BOARD.finish_node(board, n, "skipped")
    checked = list(plan.checked)
    groups = nccl_groups(checked)
    if plan.start is MultiNodeStart.LONE:
        spec = next(s for s in suite_for(level, runtime.settings().health) if s.multi_node)
        results[checked[0]]["checks"].append(lone_node_check(spec.id, spec.check))
        BOARD.set(board, checked[0], spec.id, "warn")
        return
    for n in checked:
        BOARD.set(board, n, _multi_id(level), "running")
    ids = [f"{uuid.uuid4().hex[:6]}-{i}" for i in range(len(groups))]
    runs = _group_results(run_nccl_group.map(groups, group_id=ids, level=unmapped(level), dry_run=unmapped(dry_run)))
    verdict_of = first_verdicts(groups, runs)
    # Isolate: each member of a failed group runs again beside a node whose group passed.
    suspects, good = failed_members(groups, runs), known_good(groups, runs)
    for rnd in pairing_rounds(suspects, good):
        pairs = [list(p) for p in rnd.pairs]
        ids = [f"{uuid.uuid4().hex[:6]}-iso{rnd.first + i}" for i in range(len(pairs))]
        again = _group_results(run_nccl_group.map(pairs, group_id=ids, level=unmapped(level),
                                                  dry_run=unmapped(dry_run)))
        for (s, peer), r in zip(rnd.pairs, again):
            verdict_of[s] = judge_repair(s, peer, verdict_of[s], r)
    if suspects and not good:
        for s in suspects:
            verdict_of[s] = no_peer_to_isolate(verdict_of[s])
    for n in checked:
        mark = settle_multi_node(results[n], verdict_of[n], _multi_id(level))
        BOARD.set(board, n, mark.check_id, mark.state)


def _group_results(futures) -> list[dict]:
    """Each group's verdict; a group task that failed for good (API down, …) is an 'error', never a node's fail."""
    out = []
    for f in futures:
        r = f.result(raise_on_failure=False)
        out.append(r.to_dict() if isinstance(r, GroupCheck) else group_error(r))
    return out


def _multi_id(level: str) -> str:
    return next(s.id for s in suite_for(level, runtime.settings().health) if s.multi_node)


def _report(outcome: dict[str, Any], rows: list[dict[str, str]]) -> None:
    level = outcome["level"]
    create_table_artifact(key="burn-in-checks", table=rows, description=f"burn-in {level}: each check's state per node")
    lines = [f"### burn-in ({level}){' — dry-run: nothing changed' if outcome['dry_run'] else ''}", "",
             "| node | outcome | why |", "|---|---|---|"]
    for node, r in sorted(outcome["nodes"].items()):
        why = (r.get("why") or "").replace("|", "\\|").replace("\n", " ")
        flag = " (retirement candidate)" if r.get("retirement_candidate") else ""
        lines.append(f"| {node} | {r['status']}{flag} | {why[:300]} |")
    create_markdown_artifact(key="burn-in-summary", markdown="\n".join(lines), description="burn-in outcome per node")

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

from prefect import flow, get_run_logger, unmapped
from prefect.artifacts import create_markdown_artifact, create_progress_artifact, create_table_artifact, \
    update_progress_artifact
from prefect.task_runners import ThreadPoolTaskRunner

from remedy import runtime
from remedy.health import suite_for
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


def check_batch(nodes: Any) -> list[str]:
    """The node list a burn-in was given, or a one-line ValueError saying what is wrong with it."""
    if not isinstance(nodes, (list, tuple)) or not nodes:
        raise ValueError(f"burn_in needs a non-empty list of node names, got {nodes!r}")
    bad = [n for n in nodes if not isinstance(n, str) or not n.strip()]
    if bad:
        raise ValueError(f"burn_in: node names must be non-empty strings, got {bad[:3]!r}")
    seen, dupes = set(), []
    for n in nodes:
        (dupes.append(n) if n in seen else seen.add(n))
    if dupes:
        raise ValueError(f"burn_in: nodes listed twice: {', '.join(sorted(set(dupes)))}")
    return list(nodes)


@flow(name="burn-in", flow_run_name=_run_name, task_runner=ThreadPoolTaskRunner(max_workers=MAX_PARALLEL_NODES))
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
    progress = create_progress_artifact(0.0, key="burn-in-progress",
                                        description=f"burn-in {level}: {len(nodes)} node(s), checks done")

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
    outcome = _summarise(results, level, dry_run)
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
        if isinstance(r, BaseException) or not isinstance(r, dict):
            BOARD.finish_node(board, node, "error")
            r = {"node": node, "status": "error", "passed": False, "checks": [],
                 "why": f"could not check: {type(r).__name__}: {r}"[:500]}
        out.append(r)
    return out


def _multi_node(results: dict[str, dict], level: str, dry_run: bool, board: str) -> None:
    """Attach the multi-node NCCL verdict to each checked node (results[n]['checks'] grows by one)."""
    checked = [n for n, r in results.items() if r["status"] == "checked" and r["passed"]]
    for n, r in results.items():
        if r["status"] == "checked" and not r["passed"]:
            BOARD.finish_node(board, n, "skipped")
    groups = nccl_groups(checked)
    if len(checked) == 1:
        only = checked[0]
        spec = next(s for s in suite_for(level, runtime.settings().health) if s.multi_node)
        results[only]["checks"].append({"id": spec.id, "check": spec.check, "verdict": "warn", "job": None,
                                        "reasons": ["warning: no other idle node in the batch to pair with"]})
        BOARD.set(board, only, spec.id, "warn")
        return
    for n in checked:
        BOARD.set(board, n, _multi_id(level), "running")
    ids = [f"{uuid.uuid4().hex[:6]}-{i}" for i in range(len(groups))]
    runs = _group_results(run_nccl_group.map(groups, group_id=ids, level=unmapped(level), dry_run=unmapped(dry_run)))
    good = [n for g, r in zip(groups, runs) if r["verdict"] in ("pass", "warn", "planned") for n in g]
    verdict_of: dict[str, dict] = {}
    for g, r in zip(groups, runs):
        for n in g:
            verdict_of[n] = r
    # Isolate: each member of a failed group runs again beside a node whose group passed.
    suspects = [n for g, r in zip(groups, runs) if r["verdict"] == "fail" for n in g]
    if suspects and good:
        # Rounds, so a known-good node is in one group at a time (its group label holds one value).
        pairs, again = [], []
        for start in range(0, len(suspects), len(good)):
            round_pairs = [[s, peer] for s, peer in zip(suspects[start:start + len(good)], good)]
            ids = [f"{uuid.uuid4().hex[:6]}-iso{start + i}" for i in range(len(round_pairs))]
            again += _group_results(run_nccl_group.map(round_pairs, group_id=ids, level=unmapped(level),
                                                       dry_run=unmapped(dry_run)))
            pairs += round_pairs
        for (s, peer), r in zip(pairs, again):
            first = verdict_of[s]
            if r["verdict"] == "error":
                pass
            elif r["verdict"] == "fail":
                r = r | {"reasons": r["reasons"] + [f"also failed beside known-good {peer} (first group: "
                                                    f"{', '.join(first['group'])})"]}
            else:
                r = r | {"reasons": [f"warning: group {', '.join(first['group'])} failed, but {s} passed beside "
                                     f"known-good {peer}"], "verdict": "warn"}
            verdict_of[s] = r
    elif suspects:
        for s in suspects:
            first = verdict_of[s]
            verdict_of[s] = first | {"reasons": first["reasons"] + ["no known-good node in the batch to isolate "
                                                                    "the slow member"]}
    for n in checked:
        r = verdict_of[n]
        if r["verdict"] == "error":  # our failure, not the node's: it stays in burn-in for a re-run
            results[n] |= {"status": "error", "passed": False, "why": r["reasons"][0]}
            BOARD.set(board, n, _multi_id(level), "error")
            continue
        results[n]["checks"].append(r)
        results[n]["passed"] = r["verdict"] != "fail"
        BOARD.set(board, n, r["id"], r["verdict"])


def _group_results(futures) -> list[dict]:
    """Each group's verdict; a group task that failed for good (API down, …) is an 'error', never a node's fail."""
    out = []
    for f in futures:
        r = f.result(raise_on_failure=False)
        if not isinstance(r, dict):
            r = {"id": "nccl-multi-node", "check": "nccl", "group": [], "verdict": "error",
                 "reasons": [f"could not run the multi-node sweep: {type(r).__name__}: {r}"[:500]]}
        out.append(r)
    return out


def _multi_id(level: str) -> str:
    return next(s.id for s in suite_for(level, runtime.settings().health) if s.multi_node)


def _summarise(results: dict[str, dict], level: str, dry_run: bool) -> dict[str, Any]:
    counts: dict[str, int] = {}
    for r in results.values():
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    return {
        "level": level, "dry_run": dry_run, "counts": counts, "nodes": results,
        "spares": sorted(n for n, r in results.items() if r["status"] in ("spare", "planned-spare")),
        "failed": sorted(n for n, r in results.items() if r["status"] in ("repair", "planned-repair")),
        "skipped": sorted(n for n, r in results.items() if r["status"] == "skipped"),
        "errors": sorted(n for n, r in results.items() if r["status"] == "error"),
        "retirement_candidates": sorted(n for n, r in results.items() if r.get("retirement_candidate")),
    }


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

"""Fault-isolation scenario: a training job's loss turned to NaN; bisect the pool to the node(s) behind it (seed 004)."""

from __future__ import annotations

from typing import Any

from remedy.errors import RemedyError
from remedy.scenarios import DemoContext, Scenario

DEFAULT_BAD = ("gpu023",)


def nan_loss(ctx: DemoContext) -> dict[str, Any]:
    from flows.isolate_fault import isolate_fault  # imported before the fault, so import time is not search time
    from remedy import runtime
    from remedy.sim.faults import inject

    settings = runtime.settings()
    pool = sorted(n.name for n in runtime.cluster().list_gpu_nodes()
                  if n.labels.get(settings.labels.pool) == settings.labels.job_pool_value)
    bad = list(ctx.options.get("bad") or DEFAULT_BAD)
    unknown = [b for b in bad if b not in pool]
    if unknown:
        raise RemedyError(f"--bad {','.join(unknown)}: not in the training pool ({pool[0]} … {pool[-1]}, "
                          f"{len(pool)} nodes)")
    if len(set(bad)) != len(bad):
        raise RemedyError(f"--bad names a node twice: {','.join(bad)}")
    if len(bad) == len(pool):
        raise RemedyError("--bad names every node of the pool: nothing would be left to compare against")
    for node in bad:
        inject(ctx.sim.cluster, "divergent", node)
    ctx.say(f"planted divergent node(s) {', '.join(bad)}: a training step there gives loss: nan")
    ctx.say(f"isolating over the training pool of {len(pool)} nodes …")
    out = isolate_fault(suspects=pool, dry_run=ctx.dry_run)
    found = out.get("bad_nodes", []) + [n for b in out.get("suspect_batches", []) for n in b]
    ctx.say(out["verdict_text"])
    if not ctx.dry_run:
        ctx.say(f"{out['effort']}; found {', '.join(found) or 'nothing'}, planted {', '.join(bad)}")
    return {
        "node": ",".join(found),
        "status": out["status"],
        "verdict": out.get("verdict"),
        "verdict_text": out["verdict_text"],
        "planted": bad,
        "found": found,
        "rounds_used": out["rounds_used"],
        "tests_run": out.get("tests_run", 0),
        "released": len(out.get("released", [])),
        "held": out.get("held", []),
        "rounds": out.get("rounds", []),
    }


SCENARIOS = [
    Scenario("nan-loss", "training loss turned to NaN: bisect the training pool to the bad node(s)",
             nan_loss, ok_statuses=("infrastructure", "code", "planned")),
]

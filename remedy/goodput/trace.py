"""A failure trace drawn from a scenario: what fails, where and when, fixed in advance.

The discrete-event simulator draws its failures as it runs; to compare it with the real stack both must see the same
failures. `draw_trace` draws them once from a scenario (job MTBF on the wall clock, the fault mix with its fix
depths, rack events); `FleetSim(..., trace=...)` replays them and `bench/fleet_replay.py` injects them into the
Kubernetes-API simulator. A slot is a position in the job (the n-th of its nodes), not a node: which node holds it
depends on what the policy replaced before.

What a trace leaves out, on purpose: lemons (a few hours of trace hardly shows a repeat offender) and early warnings
(no detector in the real stack to announce them yet).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from remedy.goodput.scenarios import Scenario

RACK = "rack"  # a trace event that drops a whole rack (PDU, leaf switch) until `clears_after_minutes`


@dataclass(frozen=True)
class TraceEvent:
    minute: float  # since the trace started, on the wall clock
    kind: str  # a fault kind of the scenario's mix, or RACK
    needs: str  # lowest fix that clears it (restart / reset / reboot / replace), or "upstream" for a rack
    slot: int | None = None  # job slot that fails (fault events)
    rack: int | None = None  # rack that goes down (RACK events)
    xid: int | None = None
    gpu: int | None = None
    signal: str = ""
    not_ready: bool = False
    clears_after_minutes: float | None = None  # RACK: the upstream cause is fixed after this long

    def to_dict(self) -> dict:
        return {k: v for k, v in asdict(self).items() if v not in (None, "", False)}


def draw_trace(sc: Scenario, *, hours: float, seed: int = 0, racks: int | None = None) -> list[TraceEvent]:
    """Failures over `hours` of wall clock: job failures at 1 / job MTBF (every hour counts, as if the job trained
    throughout), each on a uniformly drawn slot with a fault from the mix; rack events at the scenario's rate over
    `racks` racks (default: the scenario's fleet in racks of `rack_size`). Sorted by time."""
    if not hours > 0:
        raise ValueError(f"hours must be positive, got {hours!r}")
    rng = np.random.default_rng([seed, 7])
    horizon = hours * 60.0
    shares = np.array([k.share for k in sc.fault_mix], dtype=float)
    shares /= shares.sum()
    events: list[TraceEvent] = []
    t = 0.0
    while True:
        t += float(rng.exponential(sc.job_mtbf_hours * 60.0))
        if t >= horizon:
            break
        kind = sc.fault_mix[int(rng.choice(len(sc.fault_mix), p=shares))]
        levels, probs = zip(*kind.needs)
        p = np.array(probs, dtype=float)
        needs = levels[int(rng.choice(len(levels), p=p / p.sum()))]
        xid = int(rng.choice(kind.xids)) if kind.xids else None
        gpu = int(rng.integers(sc.gpus_per_node)) if kind.xids else None
        events.append(TraceEvent(t, kind.name, needs, slot=int(rng.integers(sc.training_nodes)), xid=xid, gpu=gpu,
                                 signal=kind.signal, not_ready=kind.not_ready))
    n_racks = racks if racks is not None else -(-sc.total_nodes // sc.rack_size)
    rate = sc.rack_events_per_rack_year * n_racks / (365 * 24 * 60)
    for when in np.sort(rng.uniform(0, horizon, rng.poisson(rate * horizon))).tolist():
        events.append(TraceEvent(when, RACK, "upstream", rack=int(rng.integers(n_racks)), signal="node-not-ready",
                                 not_ready=True, clears_after_minutes=sc.rack_event_hours * 60.0))
    return sorted(events, key=lambda e: e.minute)


def timeline_goodput(down: list[tuple[float, float]], horizon: float, interval: float, cost: float) -> dict[str, float]:
    """Goodput of a job that was down during `down` (minutes, may overlap) within [0, horizon], accounted as the
    simulator accounts a run (FleetSim._close_phase): each up period checkpoints every `interval` minutes (each
    costing `cost`), restarting the count when it starts; an up period ended by a failure loses the partial interval
    since its last checkpoint; the last one, cut by the horizon, keeps it. No checkpoint reload."""
    merged: list[list[float]] = []
    for a, b in sorted((max(0.0, a), min(horizon, b)) for a, b in down if b > 0 and a < horizon):
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    useful = checkpoint = rollback = 0.0
    periods = [(start, a, True) for start, (a, _) in zip([0.0] + [b for _, b in merged], merged)]
    periods.append(((merged[-1][1] if merged else 0.0), horizon, False))
    for a, b, failed in periods:
        elapsed = max(0.0, b - a)
        done = int(elapsed // interval)
        partial = elapsed - done * interval
        checkpoint += done * cost
        useful += done * (interval - cost)
        if failed:
            rollback += partial
        else:
            checkpoint += max(0.0, partial - (interval - cost))
            useful += min(partial, interval - cost)
    down_minutes = sum(b - a for a, b in merged)
    return {"goodput": useful / horizon if horizon else 0.0, "useful": useful, "checkpoint": checkpoint,
            "rollback": rollback, "down": down_minutes, "stops": float(len(merged))}

"""Seeded simulated fleet histories for lemon-scoring tests, the bench and the policy simulator.

Shape follows seed 002's cluster: 63 nodes, 73 days, 224 multi-node sessions that each leave 3 nodes out.
Planted populations, each with ground truth:

- lemons: fail under load several times the fleet rate, mostly the same XID on one bad GPU, pass the validation
  that follows (idle checks are clean) and cycle back into service (seed 000);
- busy-but-healthy nodes: close to full-time load, so proportionally more incidents at the ordinary rate;
- deliberately isolated healthy nodes: an operator keeps them out of most sessions (seed 002 §4.3.1: gpu074 100%);
- ordinary nodes: rare independent failures;
- one correlated rack event: every node in one rack reports NotReady within minutes (a PDU, not the nodes).

Deterministic for a given seed; no I/O.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from remedy.lemon.records import ExclusionRecord, IncidentRecord, NodeHistory, ValidationRecord

XIDS = (79, 94, 145, 149, 119, 31, 43, 48)
NODE_LEVEL_XIDS = (79, 145, 149, 119, 48)  # a lemon fails for reasons of its own: node-level XIDs only
START = datetime(2025, 9, 20, tzinfo=UTC)


@dataclass(frozen=True)
class FleetHistory:
    histories: tuple[NodeHistory, ...]
    lemons: frozenset[str]
    busy: frozenset[str]
    isolated: frozenset[str]
    rack_event: frozenset[str]
    start: datetime
    now: datetime


def _poisson(rng: random.Random, mu: float) -> int:
    # Knuth's method: fine for the small means used here, and stable across Python versions (unlike numpy streams).
    limit, k, p = math.exp(-mu), 0, 1.0
    while True:
        p *= rng.random()
        if p <= limit:
            return k
        k += 1


def simulate_fleet(
    seed: int,
    *,
    nodes: int = 63,
    days: int = 73,
    lemons: int = 4,
    busy: int = 6,
    isolated: int = 2,
    rack_size: int = 8,
    base_rate: float = 0.04,
    lemon_rate: float = 0.25,
    sessions: int = 224,
    excluded_per_session: int = 3,
    start: datetime = START,
) -> FleetHistory:
    """A fleet history with planted lemons; rates are incidents per node-day under load."""
    if lemons + busy + isolated > nodes:
        raise ValueError(f"simulate_fleet: {lemons}+{busy}+{isolated} planted nodes exceed the fleet of {nodes}")
    rng = random.Random(seed)
    names = [f"gpu{i + 1:03d}" for i in range(nodes)]
    shuffled = rng.sample(names, len(names))
    lemon_set = frozenset(shuffled[:lemons])
    busy_set = frozenset(shuffled[lemons : lemons + busy])
    iso_set = frozenset(shuffled[lemons + busy : lemons + busy + isolated])
    now = start + timedelta(days=days)

    def at(day: float) -> datetime:
        return start + timedelta(days=day)

    incidents: dict[str, list[IncidentRecord]] = {n: [] for n in names}
    validations: dict[str, list[ValidationRecord]] = {n: [] for n in names}
    exposure: dict[str, float] = {}

    def fail_then_validate(node: str, day: float, xid: int | None, gpu: int | None, signal: str, pass_p: float) -> None:
        ref = f"{node}-i{len(incidents[node])}"
        incidents[node].append(IncidentRecord(at(day), signal, xid, gpu, ref))
        check_day = day + rng.uniform(4, 48) / 24
        if rng.random() > pass_p:  # first check fails, the repair/retry passes a day later
            validations[node].append(ValidationRecord(at(check_day), False, "burn-in", ref + "-v0"))
            check_day += 1
        validations[node].append(ValidationRecord(at(check_day), True, "burn-in", ref + "-v1"))

    for node in names:
        if node in lemon_set:
            exposure[node] = rng.uniform(30, 55)
            # A node-level XID: a repeating application error (31, 43, 94) is the job's, not a lemon (attribution).
            bad_gpu, bad_xid = rng.randrange(8), rng.choice((79, 48, 145, 149))
            # Fails again every few days of load: a renewal process (not Poisson), so a planted lemon always behaves
            # like one; the gap scales with the share of time the node spends under load.
            load_share = exposure[node] / days
            day = rng.uniform(0, 6)
            while day < days - 2:
                same = rng.random() < 0.7
                fail_then_validate(
                    node,
                    day,
                    bad_xid if same else rng.choice(NODE_LEVEL_XIDS),
                    bad_gpu if same else rng.randrange(8),
                    "xid",
                    0.95,  # a lemon passes idle validation: that is how it gets back in
                )
                day += rng.uniform(0.5, 1.5) / (lemon_rate * load_share)
        else:
            # Busy nodes carry load nearly all the time; isolated ones sit in single-node sessions most of it.
            exposure[node] = (
                rng.uniform(66, 73) if node in busy_set else rng.uniform(10, 25) if node in iso_set else rng.uniform(25, 50)
            )
            for _ in range(_poisson(rng, base_rate * exposure[node])):
                fail_then_validate(node, rng.uniform(0, days - 2), rng.choice(XIDS), rng.randrange(8), "xid", 0.85)

    # One rack loses power: every node in it goes NotReady within five minutes.
    racks = [names[i : i + rack_size] for i in range(0, nodes, rack_size)]
    rack = rng.choice(racks)
    event_day = rng.uniform(5, days - 5)
    for node in rack:
        fail_then_validate(node, event_day + rng.uniform(0, 5) / 1440, None, None, "node-not-ready", 1.0)

    # Session exclusions: weighted draw without replacement; isolated nodes are kept out on purpose most of the time.
    weight = {n: 40.0 if n in iso_set else 6.0 if n in lemon_set else 1.0 for n in names}
    exclusions: dict[str, list[ExclusionRecord]] = {n: [] for n in names}
    for s in range(sessions):
        t = at((s + rng.random()) * days / sessions)
        pool = list(names)
        for _ in range(excluded_per_session):
            pick = rng.choices(pool, weights=[weight[n] for n in pool])[0]
            pool.remove(pick)
            deliberate = pick in iso_set or (pick in lemon_set and rng.random() < 0.5)
            exclusions[pick].append(ExclusionRecord(t, f"session-{s:03d}", deliberate))

    histories = tuple(
        NodeHistory(
            n,
            round(exposure[n], 2),
            tuple(sorted(incidents[n], key=lambda i: i.time)),
            tuple(sorted(validations[n], key=lambda v: v.time)),
            tuple(exclusions[n]),
        )
        for n in names
    )
    return FleetHistory(histories, lemon_set, busy_set, iso_set, frozenset(rack), start, now)


def precision_recall(flagged: set[str] | frozenset[str], truth: set[str] | frozenset[str]) -> tuple[float, float]:
    """(precision, recall) of flagged nodes against the planted lemons; 1.0 where the denominator is empty."""
    hit = len(set(flagged) & set(truth))
    precision = hit / len(flagged) if flagged else 1.0
    recall = hit / len(truth) if truth else 1.0
    return precision, recall

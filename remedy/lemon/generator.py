"""A fleet history with the populations that fool a lemon score, each with ground truth (issue 14's example:
200 nodes, 60 days, 8 lemons, 20 busy-but-healthy nodes).

Planted:

- lemons at three severities: hardware that fails again under load every few load-days (severe 2–4, moderate 4–7,
  mild 7–9 load-days between failures), mostly the same node-level XID on one GPU, now and then another hardware
  signal on that GPU or a failed spare check; a check after each failure passes (a lemon passes idle validation and
  cycles back into service, seed 000);
- busy-but-healthy nodes: under load nearly all the time, running user jobs that hit application XIDs (13, 31, 43,
  94) dozens of times, often on the same GPU, with alerts re-sent by Alertmanager every 4 h while still firing (the
  old receiver made each re-send an incident, escalated as a recurrence; a check then passed), non-fatal NVLink5
  lines the catalog says to ignore (the old catalog reset the GPU for them), transient throttling that triage
  watched and closed as ignored; hardware faults at the ordinary rate, their alerts re-sent too;
- noisy neighbours: nodes that share jobs with a lemon, so its crashes show up on them as NCCL timeouts, NaN loss
  and XID 43, each followed by a passing check; they also ran a misbehaving job whose faults, node-level as they
  look, isolation traced to the code (cause "job");
- ordinary nodes: rare hardware faults, a few application XIDs;
- one rack event: every node of one rack NotReady within five minutes (a PDU, not the nodes);
- one lemon GPU moved into another node mid-window (its board serial goes with it) and one lemon node re-created
  under a new name with the same GPUs: the truth is the node holding the lemon hardware now.

Every GPU has a board serial, carried on its incidents as the exporter's labels would carry it. Deterministic for
a seed; no I/O.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from remedy.lemon.history import (
    _poisson,  # one Poisson draw, stable across Python versions
    precision_recall,  # noqa: F401 - one scorer of flagged vs planted, re-exported
)
from remedy.lemon.records import IncidentRecord, NodeHistory, ValidationRecord

START = datetime(2026, 1, 5, tzinfo=UTC)
GPUS = 8
APP_XIDS = (13, 31, 43, 94)  # NVIDIA RESTART_APP / IGNORE classes: the job's errors
LEMON_XIDS = (79, 48, 119, 145, 149)  # node-level: fell off the bus, DBE, GSP timeout, NVLink5 fatal
HARDWARE_SIGNALS = ("row-remap-pending", "nvlink-error", "pcie-degraded")
SEVERITY_GAP = {"severe": (2.0, 4.0), "moderate": (4.0, 7.0), "mild": (7.0, 9.0)}  # load-days between failures
# The shape of the driver's NVLink5 line; the catalog decodes a Nonfatal subcode as ignore.
NVLINK5_NONFATAL = "NVRM: Xid (PCI:0000:{bus:02x}:00): {xid}, RLW_REMAP Nonfatal XC0 i0 Link {link:02d} (0x004505c6)"


@dataclass(frozen=True)
class PlantedFleet:
    histories: tuple[NodeHistory, ...]
    lemons: frozenset[str]  # nodes holding lemon hardware now: what scoring is judged against
    severity: dict[str, str]  # lemon node → severe | moderate | mild
    busy: frozenset[str]
    neighbours: frozenset[str]
    rack_event: frozenset[str]
    moved: dict[str, tuple[str, str]]  # GPU serial → (node it left, node it is in now)
    recreated: dict[str, str]  # old node name → new node name
    inventory: dict[str, str]  # GPU serial → node now, as NVML or the exporter reports it (moved/re-created GPUs)
    start: datetime
    now: datetime
    seed: int = 0
    counts: dict[str, int] = field(default_factory=dict)  # incidents planted per population, for the bench


def generate_fleet(
    seed: int,
    *,
    nodes: int = 200,
    days: int = 60,
    lemons: int = 8,
    busy: int = 20,
    neighbours: int = 12,
    rack_size: int = 8,
    hardware_rate: float = 0.006,  # node-level faults per load-day on a healthy node
    app_rate: float = 0.05,  # application XIDs per load-day on an ordinary node
    busy_app_rate: tuple[float, float] = (0.3, 0.7),
    start: datetime = START,
) -> PlantedFleet:
    """A planted fleet history; see the module docstring for the populations."""
    if lemons < 2 or lemons + busy + neighbours + 1 > nodes:
        raise ValueError(f"generate_fleet: {lemons} lemons (≥ 2) + {busy} busy + {neighbours} neighbours + 1 "
                         f"receiver of a moved GPU must fit in {nodes} nodes")
    rng = random.Random(seed)
    now = start + timedelta(days=days)
    names = [f"gpu{i:04d}" for i in range(nodes)]
    shuffled = rng.sample(names, nodes)
    lemon_nodes = shuffled[:lemons]
    busy_set = set(shuffled[lemons : lemons + busy])
    neighbour_nodes = shuffled[lemons + busy : lemons + busy + neighbours]
    ordinary = shuffled[lemons + busy + neighbours :]
    serial = {n: [f"1654{seed % 100:02d}{i:04d}{g}" for g in range(GPUS)] for i, n in enumerate(names)}

    def at(day: float) -> datetime:
        return start + timedelta(days=day)

    exposure = {n: (rng.uniform(55, days) if n in busy_set else rng.uniform(35, 55) if n in lemon_nodes
                    else rng.uniform(20, 50)) for n in names}
    incidents: dict[str, list[IncidentRecord]] = {n: [] for n in names}
    validations: dict[str, list[ValidationRecord]] = {n: [] for n in names}
    counts = {"lemon": 0, "busy-app": 0, "collateral": 0, "job-caused": 0, "hardware": 0, "app": 0, "resent": 0}

    def record(node: str, day: float, signal: str, *, xid: int | None = None, gpu: int | None = None,
               status: str = "resolved", cause: str = "", raw: str = "", occurrence: str = "",
               serial_of: str | None = None) -> IncidentRecord:
        ref = f"{node}-i{len(incidents[node])}"
        sn = serial[serial_of or node][gpu] if gpu is not None else ""
        rec = IncidentRecord(at(day), signal, xid, gpu, ref, status=status, cause=cause, gpu_serial=sn, raw=raw,
                             occurrence=occurrence or f"am-{ref}")
        incidents[node].append(rec)
        return rec

    def check_after(node: str, day: float, pass_p: float = 0.85) -> None:
        """The check that let the node back in: passes (after a failed verify, now and then)."""
        t = day + rng.uniform(4, 40) / 24
        ref = f"{node}-v{len(validations[node])}"
        if rng.random() > pass_p:
            validations[node].append(ValidationRecord(at(t), False, "post-fix verify", ref + "f"))
            t += rng.uniform(2, 6) / 24
        validations[node].append(ValidationRecord(at(t), True, "burn-in", ref))

    def app_xids(node: str, mu: float, favourite_share: float) -> None:
        fav_gpu, fav_xid = rng.randrange(GPUS), rng.choice(APP_XIDS)
        for _ in range(_poisson(rng, mu)):
            fav = rng.random() < favourite_share
            gpu, xid = (fav_gpu, fav_xid) if fav else (rng.randrange(GPUS), rng.choice(APP_XIDS))
            day = rng.uniform(0, days - 0.5)
            first = record(node, day, "xid", xid=xid, gpu=gpu, status="ignored" if xid == 43 else "resolved")
            counts["busy-app" if node in busy_set else "app"] += 1
            # Alertmanager re-sends a still-firing alert every repeat_interval (4 h): the old receiver opened an
            # incident per re-send and escalated the "recurrence"; the alert identity is the same.
            if node in busy_set and rng.random() < 0.4:
                for r in range(rng.randint(1, 3)):
                    record(node, day + 4 * (r + 1) / 24, "xid", xid=xid, gpu=gpu, status="escalated",
                           occurrence=first.occurrence)
                    counts["resent"] += 1
                check_after(node, day + 0.5, 1.0)

    def hardware_faults(node: str, rate: float) -> None:
        for _ in range(_poisson(rng, rate * exposure[node])):
            day = rng.uniform(0, days - 1)
            if rng.random() < 0.7:
                first = record(node, day, "xid", xid=rng.choice(LEMON_XIDS), gpu=rng.randrange(GPUS))
            else:
                first = record(node, day, rng.choice(HARDWARE_SIGNALS), gpu=rng.randrange(GPUS))
            counts["hardware"] += 1
            check_after(node, day)
            if node in busy_set and rng.random() < 0.5:  # still firing while the busy node waits to drain
                for r in range(rng.randint(1, 3)):
                    record(node, day + 4 * (r + 1) / 24, first.signal, xid=first.xid, gpu=first.gpu,
                           status="escalated", occurrence=first.occurrence)
                    counts["resent"] += 1

    def transient_throttle(node: str, mu: float) -> None:
        # A node under load all day runs hot now and then; triage watched each and closed it (ignored).
        for _ in range(_poisson(rng, mu)):
            record(node, rng.uniform(0, days), rng.choice(("thermal-throttle", "hw-slowdown")),
                   gpu=rng.randrange(GPUS), status="ignored")

    def nvlink5_nonfatal(node: str, mu: float) -> None:
        for _ in range(_poisson(rng, mu)):
            gpu, xid = rng.randrange(GPUS), rng.choice((145, 149))
            # The old catalog reset the GPU for every 144-150 without decoding the subcode: closed as resolved.
            record(node, rng.uniform(0, days), "xid", xid=xid, gpu=gpu, status="resolved",
                   raw=NVLINK5_NONFATAL.format(bus=0x18 + gpu, xid=xid, link=rng.randrange(18)))

    # --- lemons ------------------------------------------------------------------------------------------------
    severities = ["severe", "moderate", "mild"]
    severity = {n: severities[i % 3] for i, n in enumerate(lemon_nodes)}
    mover, recreate = lemon_nodes[0], lemon_nodes[1]
    receiver = ordinary.pop()  # the node the moved GPU goes into
    move_day, recreate_day = rng.uniform(25, 35), rng.uniform(25, 35)
    new_name = f"{recreate}-b"
    incidents[new_name], validations[new_name] = [], []
    serial[new_name] = serial[recreate]
    lemon_fail_days: dict[str, list[float]] = {}
    moved: dict[str, tuple[str, str]] = {}
    for node in lemon_nodes:
        bad_gpu, bad_xid = rng.randrange(GPUS), rng.choice(LEMON_XIDS)
        lo, hi = SEVERITY_GAP[severity[node]]
        load_share = exposure[node] / days
        day = rng.uniform(0, 5)
        fail_days = []
        while day < days - 1:
            where, gpu, serial_of = node, bad_gpu, None
            if node == mover and day >= move_day:
                where, gpu, serial_of = receiver, (bad_gpu + 3) % GPUS, node  # another slot, the same board
            elif node == recreate and day >= recreate_day:
                where = new_name
            u = rng.random()
            if u < 0.12:  # a spare-cycle check finds it broken between jobs
                validations[where].append(ValidationRecord(at(day), False, "spare cycle", f"{where}-sc{day:.0f}"))
            elif u < 0.25:
                record(where, day, rng.choice(HARDWARE_SIGNALS), gpu=gpu, serial_of=serial_of)
            else:
                record(where, day, "xid", xid=bad_xid, gpu=gpu, serial_of=serial_of)
            counts["lemon"] += 1
            check_after(where, day, 0.95)
            fail_days.append(day)
            day += rng.uniform(lo, hi) / load_share
        lemon_fail_days[node] = fail_days
        if node == mover:
            moved[serial[node][bad_gpu]] = (node, receiver)
    # The mover's slot got a fresh board; the receiver's slot now holds the lemon GPU.
    inventory = {sn: receiver for sn in moved} | {sn: new_name for sn in serial[recreate]}

    # --- noisy neighbours: collateral of a lemon's crashes, and a misbehaving job of their own -----------------
    neighbour_of = {nb: lemon_nodes[i % lemons] for i, nb in enumerate(neighbour_nodes)}
    for nb, lemon in neighbour_of.items():
        for day in lemon_fail_days[lemon]:
            if rng.random() < 0.8:
                t = day + rng.uniform(1, 10) / 1440
                kind = rng.random()
                if kind < 0.6:
                    record(nb, t, "nccl-timeout", status="escalated")
                elif kind < 0.8:
                    record(nb, t, "loss-nan", status="escalated")
                else:
                    record(nb, t, "xid", xid=43, gpu=rng.randrange(GPUS), status="resolved")
                counts["collateral"] += 1
                check_after(nb, t, 1.0)
        for _ in range(rng.randint(3, 5)):
            day, gpu = rng.uniform(0, days - 1), rng.randrange(GPUS)
            record(nb, day, "xid", xid=rng.choice((119, 79)), gpu=gpu, cause="job")
            counts["job-caused"] += 1
            check_after(nb, day, 1.0)

    # --- everyone: application XIDs, hardware faults at the ordinary rate, non-fatal NVLink5 lines --------------
    for node in names:
        if node in busy_set:
            app_xids(node, rng.uniform(*busy_app_rate) * exposure[node], 0.5)
            nvlink5_nonfatal(node, 3.0)
            transient_throttle(node, 0.1 * exposure[node])
        else:
            app_xids(node, app_rate * exposure[node], 0.2)
            nvlink5_nonfatal(node, 0.3)
        if node not in lemon_nodes:
            hardware_faults(node, hardware_rate)

    # --- one rack loses power --------------------------------------------------------------------------------
    rack_start = rng.randrange(0, nodes - rack_size)
    rack = names[rack_start : rack_start + rack_size]
    event_day = rng.uniform(5, days - 5)
    for node in rack:
        where = new_name if node == recreate and event_day >= recreate_day else node
        record(where, event_day + rng.uniform(0, 5) / 1440, "node-not-ready")
        check_after(where, event_day, 1.0)

    # --- histories: the re-created node's old name is gone; its load is split at the re-creation ---------------
    share = recreate_day / days
    exposure[new_name] = exposure[recreate] * (1 - share)
    exposure[recreate] *= share
    histories = tuple(
        NodeHistory(n, round(exposure[n], 2), tuple(sorted(incidents[n], key=lambda i: i.time)),
                    tuple(sorted(validations[n], key=lambda v: v.time)), in_fleet=(n != recreate))
        for n in names + [new_name]
    )
    truth = (set(lemon_nodes) - {mover, recreate}) | {receiver, new_name}
    sev = {n: severity[n] for n in lemon_nodes if n not in (mover, recreate)}
    sev |= {receiver: severity[mover], new_name: severity[recreate]}
    return PlantedFleet(histories, frozenset(truth), sev, frozenset(busy_set), frozenset(neighbour_nodes),
                        frozenset(rack), moved, {recreate: new_name}, inventory, start, now, seed, counts)


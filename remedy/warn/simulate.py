"""Seeded traces with planted faults for the early-warning tests and bench/early_warning.py.

Each generator returns a Trace: the input frame a detector reads, the planted faults (node, onset of the precursor,
time of the failure it should precede) and the node-days covered (for false-positive rates). `faults=0` gives a
healthy fleet: noisy, with single-sample spikes and common-mode swings, but nothing that should raise a warning.
Levels follow seed 002 (interrupts ~300K per 30 s at peers, 30 s samples, gpu124's remaps ~200 in a week then 254)
and seed 001 (an outage past ~7 s kills the NCCL connection).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import numpy as np
import pandas as pd

from remedy.warn.peers import PEER_SIGNALS

START = datetime(2025, 10, 1, tzinfo=UTC)


@dataclass(frozen=True)
class PlantedFault:
    node: str
    metric: str
    onset: datetime  # precursor begins
    failure: datetime  # the failure a warning must precede
    component: str = ""


@dataclass(frozen=True)
class Trace:
    frame: pd.DataFrame
    faults: tuple[PlantedFault, ...]
    nodes: tuple[str, ...]
    start: datetime
    end: datetime

    @property
    def node_days(self) -> float:
        return len(self.nodes) * (self.end - self.start).total_seconds() / 86400


def _names(n: int) -> list[str]:
    return [f"gpu{i + 1:03d}" for i in range(n)]


# Peer level, noise σ (log scale), what a failing node's precursor moves towards (× level).
_PEER_LEVELS = {
    "node_intr_total": (300_000.0, 0.04, 0.3),  # gpu071: 300K at peers → 70–100K
    "node_procs_running": (48.0, 0.06, 0.05),  # dropped to ~0
    "node_mountstats_nfs_operations_response_time_seconds_total:GETATTR": (0.5, 0.10, 6.0),  # gpu096 spike
    "node_vmstat_pgpgout": (2000.0, 0.10, 8.0),  # gpu096 spike
}
assert set(_PEER_LEVELS) == set(PEER_SIGNALS)


def peer_trace(seed: int, *, nodes: int = 60, hours: float = 6.0, faults: int = 2, step_s: int = 30,
               job: str = "job-1", severity: float = 1.0, start: datetime = START) -> Trace:
    """One job on `nodes` nodes; `faults` of them drift away from their peers before failing. `severity` scales
    how far the precursor moves (1.0 = seed 002's levels, e.g. interrupts to 0.3×; 0.2 = to 0.86×)."""
    rng = np.random.default_rng(seed)
    names = _names(nodes)
    n_t = int(hours * 3600 / step_s)
    times = pd.date_range(start, periods=n_t, freq=f"{step_s}s")
    t_sec = np.arange(n_t) * step_s
    planted = []
    factor = {m: np.ones((nodes, n_t)) for m in _PEER_LEVELS}
    for idx in rng.choice(nodes, size=faults, replace=False):
        metric = list(_PEER_LEVELS)[int(rng.integers(len(_PEER_LEVELS)))]
        onset_s = rng.uniform(3600, hours * 3600 - 3600)
        fail_s = onset_s + rng.uniform(5, 30) * 60
        target = 1 + (_PEER_LEVELS[metric][2] - 1) * severity
        ramp = np.clip((t_sec - onset_s) / (fail_s - onset_s), 0, 1)
        factor[metric][idx] = 1 + (target - 1) * ramp
        planted.append(PlantedFault(names[idx], metric, start + timedelta(seconds=onset_s),
                                    start + timedelta(seconds=fail_s), job))
    frames = []
    for metric, (level, sigma, _) in _PEER_LEVELS.items():
        common = np.exp(0.15 * np.sin(t_sec / 1800.0 * np.pi) + rng.normal(0, 0.03, n_t))  # checkpoints, phases
        noise = np.exp(rng.normal(0, sigma, (nodes, n_t)))
        spikes = rng.random((nodes, n_t)) < 0.001  # one-sample blips (a cron job, a log flush)
        noise = np.where(spikes, noise * rng.choice([0.25, 4.0], size=(nodes, n_t)), noise)
        values = level * common * noise * factor[metric]
        frames.append(pd.DataFrame({
            "time": np.tile(times, nodes), "job": job, "node": np.repeat(names, n_t),
            "metric": metric, "value": values.ravel(),
        }))
    return Trace(pd.concat(frames, ignore_index=True), tuple(planted), tuple(names), start,
                 start + timedelta(seconds=n_t * step_s))


def step_trace(seed: int, *, nodes: int = 32, hours: float = 6.0, faults: int = 2, step_s: int = 60,
               job: str = "job-1", start: datetime = START) -> Trace:
    """Per-node step compute time (mean per minute); faulty nodes slow down gradually until 50% slower."""
    rng = np.random.default_rng(seed)
    names = _names(nodes)
    n_t = int(hours * 3600 / step_s)
    times = pd.date_range(start, periods=n_t, freq=f"{step_s}s")
    t_sec = np.arange(n_t) * step_s
    common = 1.2 * np.exp(rng.normal(0, 0.03, n_t))  # data-dependent step cost moves every node together
    values = common * np.exp(rng.normal(0, 0.02, (nodes, n_t)))
    hiccup = rng.random((nodes, n_t)) < 0.003  # a GC pause or a slow batch: one step, not a trend
    values = np.where(hiccup, values * 1.4, values)
    planted = []
    for idx in rng.choice(nodes, size=faults, replace=False):
        onset_s = rng.uniform(1800, hours * 3600 - 5400)
        fail_s = onset_s + rng.uniform(20, 60) * 60  # thermal slowdown grows until the job is declared degraded
        values[idx] *= 1 + 0.5 * np.clip((t_sec - onset_s) / (fail_s - onset_s), 0, 1)
        planted.append(PlantedFault(names[idx], "step_time_seconds", start + timedelta(seconds=onset_s),
                                    start + timedelta(seconds=fail_s), job))
    frame = pd.DataFrame({"time": np.tile(times, nodes), "job": job, "node": np.repeat(names, n_t),
                          "step_time_seconds": values.ravel()})
    return Trace(frame, tuple(planted), tuple(names), start, start + timedelta(seconds=n_t * step_s))


def remap_trace(seed: int, *, nodes: int = 16, gpus: int = 8, days: int = 73, faults: int = 2,
                sample_hours: float = 6.0, start: datetime = START) -> Trace:
    """Correctable-remap counters. Most GPUs barely move; some grow steadily (not a warning); planted GPUs follow
    gpu124: slow for weeks, then > 200 in a week; the GPU vanishes (samples stop) when it reaches 254."""
    rng = np.random.default_rng(seed)
    names = _names(nodes)
    n_t = int(days * 24 / sample_hours)
    t_days = np.arange(n_t) * sample_hours / 24
    times = pd.date_range(start, periods=n_t, freq=f"{int(sample_hours * 3600)}s")
    series = {(n, g): rng.poisson(0.1 * sample_hours / 24, n_t) for n in names for g in range(gpus)}
    for key in rng.choice(len(series), size=max(1, len(series) // 10), replace=False):
        n, g = list(series)[key]
        series[(n, g)] = rng.poisson(rng.uniform(2, 6) * sample_hours / 24, n_t)  # steady, busy but not worsening
    planted = []
    keys = list(series)
    for key in rng.choice(len(keys), size=faults, replace=False):
        n, g = keys[key]
        accel = rng.uniform(28, 50)
        rate = 0.5 + 32 * np.clip(1 - np.exp(-(t_days - accel) / 2.0), 0, None)  # per day
        steps = rng.poisson(rate * sample_hours / 24)
        total = np.cumsum(steps)
        gone = int(np.argmax(total >= 254)) if (total >= 254).any() else n_t - 1
        series[(n, g)] = steps[: gone + 1]
        planted.append(PlantedFault(n, "correctable_remaps", start + timedelta(days=float(accel)),
                                    start + timedelta(days=float(t_days[gone])), f"GPU {g}"))
    frames = [
        pd.DataFrame({"time": times[: len(v)], "node": n, "gpu": g, "correctable_remaps": np.cumsum(v).astype(float)})
        for (n, g), v in series.items()
    ]
    return Trace(pd.concat(frames, ignore_index=True), tuple(planted), tuple(names), start,
                 start + timedelta(days=days))


def ib_trace(seed: int, *, nodes: int = 32, ports: int = 4, days: float = 3.0, faults: int = 2,
             start: datetime = START) -> Trace:
    """Port state changes. Healthy ports flap rarely and briefly (seed 001: one isolated flap is normal); planted
    ports flap more often and for longer until one outage passes the ~7 s transport timeout (the crash)."""
    rng = np.random.default_rng(seed)
    names = _names(nodes)
    span = days * 86400
    rows = []
    port_names = [f"mlx5_{p}/1" for p in range(ports)]
    for n in names:
        for p in port_names:
            for at in np.sort(rng.uniform(0, span, rng.poisson(0.3 * days))):
                rows += [(at, n, p, "down"), (at + rng.uniform(0.2, 1.5), n, p, "up")]
    planted = []
    for idx in rng.choice(nodes * ports, size=faults, replace=False):
        n, p = names[idx // ports], port_names[idx % ports]
        at, dur = rng.uniform(3600, span / 2), 0.3
        onset = at
        while dur < 7.0:
            rows += [(at, n, p, "down"), (at + dur, n, p, "up")]
            at += dur + rng.uniform(10, 40) * 60
            dur *= rng.uniform(1.3, 1.6)
        rows += [(at, n, p, "down"), (at + dur, n, p, "up")]  # the outage that kills the run
        planted.append(PlantedFault(n, "ib_port_down_seconds", start + timedelta(seconds=onset),
                                    start + timedelta(seconds=at + 7.0), p))
    frame = pd.DataFrame(rows, columns=["sec", "node", "port", "state"])
    frame.insert(0, "time", pd.Timestamp(start) + pd.to_timedelta(frame.pop("sec"), unit="s"))
    return Trace(frame, tuple(planted), tuple(names), start, start + timedelta(seconds=span))

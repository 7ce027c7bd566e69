"""Clusters the policy simulator can play: a `Scenario` model, read from YAML files.

The shipped scenarios are files in `remedy/goodput/scenario_files/` (one per cluster); `remedy simulate
--scenario-file FILE.yaml` plays any other. Every number in a file cites its source; where no source gives a
figure the file says it is an assumption and why it was chosen. These are simulation inputs, not gpu-remedy
thresholds: the thresholds the gpu-remedy policy applies come from `remedy.config.RemedySettings`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from remedy.domain.yamlsafe import YamlLimitError, load_yaml

# How deep a fix a fault needs, in the order the in-place ladder tries them.
RESTART, RESET, REBOOT, REPLACE, UPSTREAM = "restart", "reset", "reboot", "replace", "upstream"
FIX_LEVELS = (RESTART, RESET, REBOOT, REPLACE)


@dataclass(frozen=True)
class FaultKind:
    """One row of seed 002 Table 2 and what actually clears it (probability per fix level)."""

    name: str
    share: float  # seed 002 Table 2, share of the 17 failure events
    xids: tuple[int, ...]  # what the driver logs; empty = no XID (NotReady, fail-slow)
    signal: str  # incident signal name as gpu-remedy's detectors call it
    needs: tuple[tuple[str, float], ...]  # (lowest fix that clears it, probability)
    not_ready: bool = False  # the node drops out of the cluster (kubelet stops reporting)
    # UPSTREAM in `needs`: the cause is outside the node (a switch or cable, host maintenance): nothing on the node
    # clears it, it clears by itself this long after it hit, and the node itself needs no repair
    upstream_minutes: float = 0.0


# Seed 002 Table 2 (63-node B200 cluster, 55 days, 17 events). The `needs` split is an
# assumption (no seed publishes it), set from NVIDIA's resolution buckets in seed 002 Table 3
# (94 → RESTART_APP, 119/145/149 → RESET_GPU, 79 → RESTART_BM) with a share that does not clear.
# It is calibrated so that what a plain restart clears (ECC 0.118 × 0.9 + other 0.294 × 0.7 ≈ 31 %)
# lands near seed 002's 33.3 % auto-retry chain success (4 of 12 chains, §4.3.4).
FAULT_MIX: tuple[FaultKind, ...] = (
    FaultKind("nvlink", 0.294, (145, 149), "xid", ((RESET, 0.6), (REBOOT, 0.2), (REPLACE, 0.2))),
    FaultKind("ecc", 0.118, (94,), "xid", ((RESTART, 0.9), (REPLACE, 0.1))),
    FaultKind("fell-off-bus", 0.118, (79,), "xid", ((REBOOT, 0.5), (REPLACE, 0.5))),
    FaultKind("gsp-timeout", 0.059, (119,), "xid", ((RESET, 0.7), (REBOOT, 0.2), (REPLACE, 0.1))),
    FaultKind("unreachable", 0.118, (), "node-not-ready", ((REBOOT, 0.6), (REPLACE, 0.4)), not_ready=True),
    FaultKind("fail-slow", 0.294, (), "fail-slow", ((RESTART, 0.7), (REPLACE, 0.3))),
)
FAULT_BY_NAME = {k.name: k for k in FAULT_MIX}


class Scenario(BaseModel):
    """A cluster, its failure process and its recovery costs."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="Short name used on the command line.")
    description: str = Field("", description="What this cluster is and where its numbers come from.")
    training_nodes: int = Field(gt=0, description="Nodes the gang-scheduled job needs; it runs only with all of them.")
    gpus_per_node: int = Field(8, gt=0, description="GPUs per node (8 for DGX/HGX).")
    spares: int = Field(ge=0, description="Warm spare nodes at the start.")
    days: float = Field(gt=0, le=3650, description="Simulated wall-clock days (at most ten years).")
    job_mtbf_hours: float = Field(gt=0, description="Mean training hours between job-interrupting failures, lemons included.")
    checkpoint_interval_minutes: float = Field(gt=0, description="Time between checkpoint starts while training.")
    checkpoint_cost_minutes: float = Field(ge=0, description="Training paused per checkpoint.")
    restart_loading_median_minutes: float = Field(
        0.0, ge=0, description="Checkpoint reload before training resumes (seed 002 §4.2.3: median 31, mean 33)."
    )
    restart_loading_sigma: float = Field(
        0.354, ge=0, description="Log-normal shape of reload time; 0.354 gives seed 002's mean 33 for median 31."
    )
    lemon_fraction: float = Field(
        0.0, ge=0, le=1, description="Share of nodes that pass checks but keep failing under load (lemons)."
    )
    lemon_rate_factor: float = Field(
        1.0, ge=1, description="A lemon's failure rate relative to a good node's."
    )
    rack_size: int = Field(4, gt=0, description="Nodes per rack (one PDU / leaf switch failure domain).")
    rack_events_per_rack_year: float = Field(
        0.0, ge=0, description="Correlated events (PDU, leaf switch) that drop a whole rack, per rack per year."
    )
    rack_event_hours: float = Field(
        2.0, gt=0, description="How long the upstream cause lasts before the rack comes back by itself."
    )
    spare_join_minutes: float = Field(
        4.0, ge=0, description="A promoted warm spare joins the job this long after the drain (seed 000: 4 min)."
    )
    warning_share: float = Field(
        0.0, ge=0, le=1, description="Share of node failures an early-warning detector flags before they happen."
    )
    warning_lead_minutes: float = Field(
        60.0, gt=0, description="How long before the failure the warning comes."
    )
    false_warnings_per_true: float = Field(
        0.5, ge=0, description="Warnings on nodes that would not have failed, per true warning."
    )
    elastic_short_nodes: int = Field(
        0, ge=0, description="An elastic job (PyTorchJob elasticPolicy, elastic Indexed Job) may train this many nodes "
        "short: it restarts on the survivors at once and grows back when a spare has joined. 0: gang-scheduled.",
    )
    elastic_resize_minutes: float = Field(
        0.5, ge=0, description="One re-rendezvous of an elastic job (shrink, grow or a hot spare taking a rank), on "
        "top of the checkpoint reload.",
    )
    hot_spares: int = Field(
        0, ge=0, description="Spares (of `spares`) kept joined to the job, idle: a failure swaps one in within "
        "`elastic_resize_minutes`; their GPUs count in the goodput denominator for every policy.",
    )
    repair_days: float = Field(3.0, gt=0, description="A node sent to repair returns to burn-in after this long.")
    burn_in_hours: float = Field(6.0, ge=0, description="Burn-in before a repaired node is a warm spare again.")
    manual_mean_minutes: float | None = Field(
        60.0,
        description="Mean of the manual runbook (page+triage+replace+validate+restart). The seed-000 steps are "
        "drawn uniformly, then scaled to this mean; None keeps the steps as listed (mean 82.5 min).",
    )
    failure_clock: Literal["training", "wall"] = Field(
        "training",
        description="'training': failures accrue per hour of training (Meta's and seed 002's MTBF are per job "
        "runtime hour). 'wall': job nodes fail on the wall clock, stalled or not, as seed 000's arithmetic "
        "counts them (3 failures per 24 h).",
    )
    on_call_engineers: int = Field(
        1, ge=1, description="Engineers working incidents at once; more incidents queue (seed 000: 'an engineer gets paged')."
    )
    efficiency: float = Field(1.0, gt=0, le=1, description="Compute efficiency e in G = (1 − (c+f+q)) × e.")
    fault_mix: tuple[FaultKind, ...] = Field(
        FAULT_MIX,
        description="What fails, in what share, with which XIDs, and the lowest fix that clears it (probabilities). "
        "Default: seed 002 Table 2.",
    )
    published: dict[str, Any] = Field(
        default_factory=dict, description="What the source reports for this cluster, printed beside the simulation."
    )

    @field_validator("fault_mix", mode="before")
    @classmethod
    def _read_fault_mix(cls, value: Any) -> Any:
        """YAML form: `{name, share, xids: [..], signal, needs: {restart|reset|reboot|replace: p}, not_ready}`."""
        if not isinstance(value, (list, tuple)):
            return value
        out = []
        for item in value:
            if isinstance(item, FaultKind):
                out.append(item)
                continue
            if not isinstance(item, dict):
                raise ValueError(f"a fault_mix entry must be a mapping, got {item!r}")
            unknown = set(item) - {"name", "share", "xids", "signal", "needs", "not_ready", "source", "upstream_hours",
                                     "upstream_minutes"}
            if unknown:
                raise ValueError(f"fault {item.get('name', '?')!r}: unknown key(s) {', '.join(sorted(unknown))}")
            needs = item.get("needs") or {}
            if isinstance(needs, (list, tuple)):  # a dumped scenario: ((level, p), ...)
                needs = dict(needs)
            if not isinstance(needs, dict) or not needs or set(needs) - {*FIX_LEVELS, UPSTREAM}:
                raise ValueError(f"fault {item.get('name', '?')!r}: needs must map {'/'.join((*FIX_LEVELS, UPSTREAM))} "
                                 f"to probabilities, got {needs!r}")
            hours = item.get("upstream_hours", 0.0)
            if "upstream_minutes" in item:  # a dumped scenario (FaultKind's own field)
                hours = item["upstream_minutes"] / 60.0 if isinstance(item["upstream_minutes"], (int, float)) else hours
            if isinstance(hours, bool) or not isinstance(hours, (int, float)) or hours < 0:
                raise ValueError(f"fault {item.get('name', '?')!r}: upstream_hours must be a number ≥ 0, got {hours!r}")
            if needs.get(UPSTREAM) and not hours > 0:
                raise ValueError(f"fault {item.get('name', '?')!r}: an upstream cause needs upstream_hours (how long "
                                 f"until it is fixed upstream)")
            if any(not isinstance(p, (int, float)) or p < 0 for p in needs.values()) or not sum(needs.values()) > 0:
                raise ValueError(f"fault {item.get('name', '?')!r}: needs probabilities must be ≥ 0 and not all 0")
            share = item.get("share")
            if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0 <= share < float("inf"):
                raise ValueError(f"fault {item.get('name', '?')!r}: share must be a number ≥ 0, got {share!r}")
            out.append(FaultKind(str(item.get("name", "?")), float(share), tuple(int(x) for x in item.get("xids") or ()),
                                 str(item.get("signal", "xid" if item.get("xids") else "fail-slow")),
                                 tuple((k, float(v)) for k, v in needs.items()), bool(item.get("not_ready", False)),
                                 float(hours) * 60.0))
        if not out:
            raise ValueError("fault_mix needs at least one fault")
        if not sum(k.share for k in out) > 0:
            raise ValueError("fault_mix shares must not all be 0")
        return tuple(out)

    @model_validator(mode="after")
    def _checkpoint_fits(self) -> Scenario:
        if self.checkpoint_cost_minutes >= self.checkpoint_interval_minutes:
            raise ValueError("checkpoint_cost_minutes must be shorter than checkpoint_interval_minutes")
        return self

    @model_validator(mode="after")
    def _hot_spares_fit(self) -> Scenario:
        if self.hot_spares > self.spares:
            raise ValueError("hot_spares are taken from spares: at most spares")
        return self

    @property
    def total_nodes(self) -> int:
        return self.training_nodes + self.spares

    @property
    def job_gpus(self) -> int:
        return self.training_nodes * self.gpus_per_node


SCENARIO_DIR = Path(__file__).resolve().parent / "scenario_files"


SCENARIO_MAX_NUMBER = 1e9


class ScenarioFileError(ValueError):
    """A scenario file that cannot be played; the message names the file and the field."""


def load_scenario_file(path: str | Path) -> Scenario:
    """Read one scenario YAML file; ScenarioFileError names the file and what is wrong."""
    path = Path(path)
    try:  # size/nesting/alias limits, and every number finite and below 1e9 (no field needs more; 1e300 days hangs)
        data = load_yaml(path.read_bytes(), str(path), max_abs_number=SCENARIO_MAX_NUMBER)
    except OSError as exc:
        raise ScenarioFileError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    except YamlLimitError as exc:
        raise ScenarioFileError(str(exc)) from None
    if not isinstance(data, dict):
        raise ScenarioFileError(f"{path}: expected a mapping of scenario fields, got {type(data).__name__}")
    try:
        return Scenario.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "scenario"
        raise ScenarioFileError(f"{path}: {where}: {first['msg']}") from None


def _shipped() -> dict[str, Scenario]:
    found = [load_scenario_file(p) for p in sorted(SCENARIO_DIR.glob("*.yaml"))]
    order = {"seed000-1k": 0, "seed002-63": 1, "meta-16k": 2}  # the historical order first, then by name
    return {s.name: s for s in sorted(found, key=lambda s: (order.get(s.name, 9), s.name))}


SCENARIOS = _shipped()


def scenario(name: str, **overrides: object) -> Scenario:
    """A named scenario, optionally with fields replaced (`days=30`); unknown names/fields say so."""
    if name not in SCENARIOS:
        raise ValueError(f"unknown scenario {name!r} (choose from: {', '.join(SCENARIOS)})")
    base = SCENARIOS[name]
    unknown = set(overrides) - set(Scenario.model_fields)
    if unknown:
        raise ValueError(f"unknown scenario field(s): {', '.join(sorted(unknown))}")
    return Scenario.model_validate({**base.model_dump(), **overrides})

"""Every Prefect deployment of gpu-remedy, declared once as plain data.

The embedded stack (`remedy up`) turns these into deployments on the local server and runs them in its warm
dispatcher; the production render (`deployments/prefect.yaml`, Kubernetes work pool) reads the same list. Keep
runtime details (ports, pools, images) out of here.

Adding a flow is one line in DEPLOYMENTS. A spec whose module or function does not exist makes `remedy up` fail
at start (`check_entrypoints`), never skip silently. Periodic flows: spare-cycle every 6 h, lemon-review and
nfs-audit daily, fleet-dashboard every 10 min.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from remedy.errors import RemedyError

INCIDENT_OPENED = "remedy.incident.opened"


@dataclass(frozen=True)
class EventTrigger:
    """Start a run when an event matches (Prefect's DeploymentEventTrigger, reactive, threshold 1).

    Template every parameter as `{{ event.payload.get('k', '') }}`: a key missing from the payload otherwise makes
    the server drop the action with only a log line (shared/notes/environment.md).
    """

    expect: tuple[str, ...]
    match: dict[str, str]
    parameters: dict[str, str]
    name: str = ""


@dataclass(frozen=True)
class Schedule:
    """Periodic runs: `interval_seconds` or a `cron` expression (UTC)."""

    interval_seconds: float | None = None
    cron: str | None = None

    def __post_init__(self) -> None:
        if (self.interval_seconds is None) == (self.cron is None):
            raise ValueError("a schedule needs exactly one of interval_seconds or cron")


@dataclass(frozen=True)
class DeploymentSpec:
    name: str
    entrypoint: str  # "module:function" of the @flow
    description: str = ""
    parameters: dict[str, Any] = field(default_factory=dict)
    triggers: tuple[EventTrigger, ...] = ()
    schedules: tuple[Schedule, ...] = ()
    tags: tuple[str, ...] = ()

    @property
    def module(self) -> str:
        return self.entrypoint.partition(":")[0]

    @property
    def function(self) -> str:
        return self.entrypoint.partition(":")[2]


def _payload(key: str) -> str:
    return "{{ event.payload.get('%s', '') }}" % key


INCIDENT_TRIGGER = EventTrigger(
    name="incident-opened-starts-triage",
    expect=(INCIDENT_OPENED,),
    match={"prefect.resource.id": "remedy.node.*"},
    parameters={"incident_id": _payload("incident_id"), "node": _payload("node"), "signal": _payload("signal"),
                "xid": _payload("xid"), "detected_at": _payload("detected_at"), "ledger": _payload("ledger")},
)

HOUR = 3600.0

DEPLOYMENTS: tuple[DeploymentSpec, ...] = (
    DeploymentSpec("triage", "flows.triage:triage", "Classify a new incident and start its remediation.",
                   triggers=(INCIDENT_TRIGGER,), tags=("remedy", "detect")),
    DeploymentSpec("replace-node", "flows.replace_node:replace_node",
                   "Swap a failed node for a warm spare (started by triage, or by an operator).",
                   tags=("remedy", "replace")),
    DeploymentSpec("fix-in-place", "flows.fix_in_place:fix_in_place",
                   "Restart the app, reset the GPU or reboot the node, as the XID says (started by triage).",
                   tags=("remedy", "remediate")),
    DeploymentSpec("escalate", "flows.escalate:escalate", "Hand a node to a human with the evidence.",
                   tags=("remedy", "remediate")),
    DeploymentSpec("isolate-fault", "flows.isolate_fault:isolate_fault",
                   "Find the bad node behind a job-level symptom by bisection.", tags=("remedy", "isolate")),
    DeploymentSpec("burn-in", "flows.burn_in:burn_in", "Validate nodes before they carry work.",
                   tags=("remedy", "spares")),
    DeploymentSpec("retire-node", "flows.retire_node:retire_node", "Retire a lemon: out of the fleet, RMA report.",
                   tags=("remedy", "lemon")),
    DeploymentSpec("spare-cycle", "flows.spare_cycle:spare_cycle", "Re-validate spares older than the freshness window.",
                   schedules=(Schedule(interval_seconds=6 * HOUR),), tags=("remedy", "spares")),
    DeploymentSpec("lemon-review", "flows.lemon_review:lemon_review", "Score the fleet for lemons; retire the worst.",
                   schedules=(Schedule(interval_seconds=24 * HOUR),), tags=("remedy", "lemon")),
    DeploymentSpec("nfs-audit", "flows.nfs_audit:nfs_audit", "Checkpoint-I/O audit of every node's NFS mounts.",
                   schedules=(Schedule(interval_seconds=24 * HOUR),), tags=("remedy", "audit")),
    DeploymentSpec("warning-scan", "flows.warning_scan:warning_scan",
                   "Early warnings: nodes drifting from their job's peers, InfiniBand down time creeping up.",
                   schedules=(Schedule(interval_seconds=600),), tags=("remedy", "detect")),
    DeploymentSpec("fleet-dashboard", "flows.fleet_dashboard:fleet_dashboard", "Pools, breakers, incidents, lemons.",
                   schedules=(Schedule(interval_seconds=600),), tags=("remedy",)),
)


def by_name(name: str) -> DeploymentSpec:
    for spec in DEPLOYMENTS:
        if spec.name == name:
            return spec
    raise RemedyError(f"no deployment named {name!r}; known: {', '.join(s.name for s in DEPLOYMENTS)}")


def load_flow(spec: DeploymentSpec):
    """Import the spec's flow object; RemedyError naming the spec if the module or function is missing."""
    try:
        module = importlib.import_module(spec.module)
    except ModuleNotFoundError as exc:
        raise RemedyError(f"deployment {spec.name}: module {spec.module} not found ({exc})") from None
    fn = getattr(module, spec.function, None)
    if fn is None or not hasattr(fn, "fn"):
        raise RemedyError(f"deployment {spec.name}: {spec.entrypoint} is not a Prefect flow")
    return fn


def check_entrypoints(specs: tuple[DeploymentSpec, ...] = DEPLOYMENTS) -> dict[str, Any]:
    """Load every flow (name → flow object); the first missing one raises, so the stack never starts half-deployed."""
    names = [s.name for s in specs]
    if len(set(names)) != len(names):
        raise RemedyError(f"duplicate deployment names in {names}")
    return {spec.name: load_flow(spec) for spec in specs}


def trigger_parameters(trigger: EventTrigger, payload: dict[str, Any]) -> dict[str, Any]:
    """What the trigger's templates render to for this event payload (the embedded fast path uses it to create
    the same run the trigger would)."""
    return {name: payload.get(name, "") for name in trigger.parameters}


def runner_deployment(spec: DeploymentSpec, flow=None, *, triggers_enabled: bool = True):
    """The spec as a Prefect RunnerDeployment (no work pool: the embedded dispatcher runs it).

    `triggers_enabled=False` keeps the automations visible but off (the embedded stack starts triage itself)."""
    from prefect.client.schemas.actions import DeploymentScheduleCreate
    from prefect.client.schemas.schedules import CronSchedule, IntervalSchedule
    from prefect.events import DeploymentEventTrigger

    flow = flow or load_flow(spec)
    triggers = [
        DeploymentEventTrigger(name=t.name or None, expect=set(t.expect), match=t.match, parameters=t.parameters,
                               enabled=triggers_enabled)
        for t in spec.triggers
    ]
    schedules = []
    for s in spec.schedules:
        sched = IntervalSchedule(interval=timedelta(seconds=s.interval_seconds)) if s.interval_seconds \
            else CronSchedule(cron=s.cron)
        schedules.append(DeploymentScheduleCreate(schedule=sched, active=True))
    return flow.to_deployment(
        name=spec.name, description=spec.description or None, parameters=dict(spec.parameters),
        triggers=triggers or None, schedules=schedules or None, tags=list(spec.tags),
    )

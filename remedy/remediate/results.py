"""Typed results of triage's and the in-place runbook's tasks (issue 29, item 2): what a task read or decided, as a
small frozen dataclass instead of a dict. Plain Python, no Prefect."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from datetime import datetime
from enum import StrEnum
from typing import Any

from remedy.domain.model import IncidentStatus
from remedy.remediate.choice import WarningAction


@dataclass(frozen=True)
class IncidentFacts:
    """The incident as the ledger has it (a dict shaped like IncidentRecord: the policy's input), how often this
    fault was seen in the lookback, the node's lifecycle state, and whether a gone run's work is to be continued."""

    incident: dict[str, Any]
    recurrences: int
    node_state: str | None
    orphaned: bool = False  # acting under a run whose lease expired
    resumes: bool = False  # a gone run of this incident cordoned the node itself
    recovering: bool = False  # a gone run had replaced the node and was repairing it off the critical path


@dataclass(frozen=True)
class RemediationChoice:
    """The expected-cost comparison (remedy.remediate.choice.choose) with the facts it was made on."""

    option: str
    reason: str
    options: list[dict[str, Any]] = field(default_factory=list)
    spares_ready: int = 0
    tried_depth: int = -1
    unreachable: bool = False
    markdown: str = ""

    def summary(self, *extra: str) -> dict[str, Any]:
        """What a run's result shows of it (the artifact has the markdown)."""
        keys = ("option", "reason", "options", "spares_ready", *extra)
        return {k: getattr(self, k) for k in keys}


@dataclass(frozen=True)
class ClosedIncident:
    """The incident's status after a close (the remediation's own word stands when it closed it already)."""

    id: int
    status: IncidentStatus


@dataclass(frozen=True)
class WarningWeighed:
    """An early warning weighed (remedy.remediate.choice.choose_on_warning): swap at a checkpoint boundary, or wait
    for the failure. The cost and record fields are None when the warning was not weighed at all (the node runs no
    part of the job, or the job publishes no checkpoint cadence); `checking`: acting would pay on the prior, but the
    detector's own record must show it first."""

    node: str
    action: WarningAction
    acts: bool
    why: str
    act_cost_minutes: float | None = None
    wait_cost_minutes: float | None = None
    spares_ready: int | None = None
    spare_reserve: int | None = None
    minutes_to_next_checkpoint: float | None = None
    detector: str | None = None
    precision: float | None = None
    precision_judged: int | None = None
    precision_followed: int | None = None
    wait_for_checkpoint_seconds: float | None = None
    checking: bool = False
    markdown: str = ""

    def held_for_record(self, checking: str) -> WarningWeighed:
        """Not swapped: the detector's record must show first what the prior promises (`checking` says why)."""
        return replace(self, action=WarningAction.WAIT, acts=False, checking=True,
                       why=f"not swapped: {checking[0].lower()}{checking[1:]}",
                       markdown=f"{self.markdown}\n\n**{checking}**")

    def summary(self) -> dict[str, object]:
        """What the triage run's result shows of it (the artifact has the markdown; unweighed fields left out)."""
        shown = {k: v for k, v in asdict(self).items() if k != "markdown" and v is not None}
        return shown | {"action": self.action.value}


@dataclass(frozen=True)
class RemediationClaim:
    """May this run act on the incident (tasks.ledger.claim_remediation)? `holder` is who holds it now; when not
    claimed, `settled` (resolved, ignored, escalated: nobody acts again), a live lease or a running holder says why;
    when taken over from a gone run, `took_over_from` and the actions it left unfinished (`abandoned`)."""

    claimed: bool
    holder: str = ""
    settled: IncidentStatus | None = None
    holder_state: str | None = None  # the holder's Prefect state, when that decided
    holder_lease_expires_at: datetime | None = None  # the holder's live lease
    took_over_from: str | None = None
    abandoned: tuple[int, ...] = ()


# ------------------------------------------------------------------ the cluster's and the in-place fix's steps
def _known(cls: type, detail: Mapping[str, Any]) -> dict[str, Any]:
    """The recorded detail's keys that are fields of `cls` (a ledger record may carry more, or older keys)."""
    names = {f.name for f in fields(cls)}
    return {k: v for k, v in detail.items() if k in names}


@dataclass(frozen=True)
class NodeChange:
    """A cordon, uncordon, taint or label change on a node (or, in a dry run, the change planned), as its ledger
    action recorded it (remedy.adapters.cluster.Change); `changed` False: the node already was so (idempotent);
    `replayed`: a re-run found it done and did not repeat it. `cordoned_before`: who held the cordon before a fix's
    quarantine (gpu-remedy or a person); `cordoned_by`: a person's cordon kept after a fix."""

    node: str
    action: str = ""
    changed: bool = False
    dry_run: bool = False
    detail: str = ""
    cordoned_before: str | None = None
    cordoned_by: str | None = None
    replayed: bool = False

    @classmethod
    def from_record(cls, detail: Mapping[str, Any]) -> NodeChange:
        return cls(**_known(cls, detail))


@dataclass(frozen=True)
class IntakeReleased:
    """End of triage: was the receiver's quarantine of the node lifted (and the uncordon), or why not."""

    released: bool
    why: str = ""
    change: NodeChange | None = None


@dataclass(frozen=True)
class Drained:
    """A drain (remedy.adapters.cluster.DrainReport) as its ledger action recorded it: the pods evicted, skipped
    (DaemonSet, mirror, finished), not evicted (pod → why), refused whatever the wait, force-deleted."""

    node: str
    evicted: tuple[str, ...] = ()
    skipped: tuple[str, ...] = ()
    not_evicted: Mapping[str, str] = field(default_factory=dict)
    refused: Mapping[str, str] = field(default_factory=dict)
    blocked_retries: int = 0
    force_deleted: tuple[str, ...] = ()
    seconds: float = 0.0
    dry_run: bool = False
    replayed: bool = False

    @property
    def complete(self) -> bool:
        return not self.not_evicted

    @classmethod
    def from_record(cls, detail: Mapping[str, Any]) -> Drained:
        known = _known(cls, detail)
        for k in ("evicted", "skipped", "force_deleted"):
            known[k] = tuple(known.get(k) or ())
        for k in ("not_evicted", "refused"):
            known[k] = dict(known.get(k) or {})
        return cls(**known)

    def summary(self, *keys: str) -> dict[str, Any]:
        """What a run's result shows of it (lists and maps as JSON has them)."""
        shown: dict[str, Any] = {}
        for k in keys:
            v = getattr(self, k)
            shown[k] = list(v) if isinstance(v, tuple) else dict(v) if isinstance(v, Mapping) else v
        return shown


class _JobSize:
    """What both waits for a job report: how many of its pods run (`ready`) of those it needs (`desired`)."""

    ready: int
    desired: int

    @property
    def full(self) -> bool:
        return self.ready >= self.desired

    def to_dict(self) -> dict[str, Any]:
        fields_: dict[str, Any] = asdict(self)  # type: ignore[call-overload]  # every subclass is a dataclass
        return fields_ | {"full": self.full}


@dataclass(frozen=True)
class WorkloadBack(_JobSize):
    """The job after a promotion: its pod on the promoted node (`on_node`), how many of its pods run (`ready`) of
    those it needs (`desired`), and how long the wait took."""

    ready: int
    desired: int
    on_node: bool
    seconds: float = 0.0


@dataclass(frozen=True)
class Joined:
    """Did the promoted node really join the pool (Ready, schedulable, every GPU allocatable), and if not why."""

    node: str
    joined: bool
    why: str
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Resized:
    """A training workload's size set through its controller (or planned); `refused`: the controller said no
    (an elastic job's min:max range), nothing changed."""

    job: str
    nodes: int
    changed: bool
    refused: str = ""
    dry_run: bool = False
    via: str = ""
    detail: str = ""
    replayed: bool = False

    @classmethod
    def from_record(cls, detail: Mapping[str, Any]) -> Resized:
        """From the action's recorded detail (a grow-back that found nothing to do says why under `why`)."""
        known = _known(cls, detail)
        known["refused"] = str(known.get("refused") or "")
        known["detail"] = str(known.get("detail") or detail.get("why") or "")
        return cls(**known)

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v != "" or k in ("job",)}


@dataclass(frozen=True)
class CheckpointBoundary:
    """Did the job checkpoint after the wait began (`at`, ISO), the boundary where a swap loses no work; `asked`:
    the job was asked for one now (`request_detail`: what the ask wrote), else its next scheduled one was awaited."""

    reached: bool
    asked: bool
    why: str
    at: str | None = None
    request_detail: str | None = None
    dry_run: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}


@dataclass(frozen=True)
class AppRestarted:
    """The training pods deleted on the node for its controller to recreate (the node stays in the pool)."""

    node: str
    namespace: str
    restarted: tuple[str, ...]
    dry_run: bool = False
    replayed: bool = False

    @classmethod
    def from_record(cls, detail: Mapping[str, Any]) -> AppRestarted:
        known = _known(cls, detail)
        return cls(**known | {"restarted": tuple(known.get("restarted") or ())})


@dataclass(frozen=True)
class StateSet:
    """The node's lifecycle state set by an in-place fix (the ledger's word, mirrored on the pool label)."""

    node: str
    from_state: str | None
    to: str
    dry_run: bool = False
    replayed: bool = False

    @classmethod
    def from_record(cls, detail: Mapping[str, Any]) -> StateSet:
        prior = detail.get("from")
        return cls(str(detail["node"]), None if prior is None else str(prior), str(detail["to"]),
                   bool(detail.get("dry_run")), bool(detail.get("replayed")))


@dataclass(frozen=True)
class QuarantinedForFix:
    """A node taken out for an in-place fix: cordon, quarantine taint, ledger state quarantined."""

    cordon: NodeChange
    taint: NodeChange
    state: StateSet


@dataclass(frozen=True)
class ReleasedAfterFix:
    """Back in service after a verified fix: untaint, uncordon (or a person's cordon kept), state active."""

    untaint: NodeChange
    uncordon: NodeChange
    state: StateSet

    @property
    def kept_operator_cordon(self) -> bool:
        return self.uncordon.cordoned_by is not None


@dataclass(frozen=True)
class NodeJobRun:
    """A Job pinned to the node (GPU reset, reboot, NVML probe), as its ledger action recorded it
    (remedy.adapters.cluster.JobResult); phase Succeeded | Failed | Timeout | Planned."""

    name: str
    node: str
    succeeded: bool
    phase: str
    logs: str = ""
    seconds: float = 0.0
    dry_run: bool = False
    replayed: bool = False

    @classmethod
    def from_record(cls, detail: Mapping[str, Any]) -> NodeJobRun:
        return cls(**_known(cls, detail))


class RebootVia(StrEnum):
    EC2 = "ec2"  # the cloud's reboot of the instance
    JOB = "job"  # a privileged Job running the host's `systemctl reboot`


@dataclass(frozen=True)
class Rebooted:
    """A reboot asked for (through EC2 or a privileged Job); `boot_id_before`: the kubelet's boot ID before, so
    the wait for Ready knows a reboot happened however fast. `succeeded`/`phase`/`logs`: the Job's, when a Job."""

    node: str
    via: RebootVia
    boot_id_before: str = ""
    succeeded: bool = True
    phase: str = ""
    logs: str = ""
    dry_run: bool = False
    replayed: bool = False


@dataclass(frozen=True)
class GpuProbe:
    """The NVML probe's verdict after a fix (pass | warn | fail | error | planned); `passed`: not fail/error."""

    verdict: str
    passed: bool
    reasons: tuple[str, ...] = ()
    job: str = ""


@dataclass(frozen=True)
class NodeBackUp:
    """After a reboot: Ready again (`ready`), seen NotReady on the way or with a new boot ID, how long it took."""

    ready: bool
    saw_not_ready: bool = False
    new_boot: bool = False
    seconds: float = 0.0
    dry_run: bool = False


@dataclass(frozen=True)
class JobBack(_JobSize):
    """After an app restart: the job's pod runs on the node again (`back_on_node`), the job's size, and whether the
    node lacks the GPUs one of its pods requests (`gpus_short`: the pod cannot come back)."""

    back_on_node: bool
    ready: int
    desired: int
    gpus_short: bool = False
    seconds: float = 0.0


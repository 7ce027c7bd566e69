"""The one configuration model for gpu-remedy.

Every threshold, budget, label key and endpoint lives here (or in a section class under
`remedy.settings`, composed below), read once from a YAML file plus `REMEDY_*` environment
variables. Invalid configuration fails at start with the field and the reason
(`ConfigError`), never half-way through a remediation.

Precedence: explicit keyword arguments > environment (`REMEDY_DRY_RUN=true`,
`REMEDY_DRAIN__GRACE_PERIOD_SECONDS=10`) > YAML file (`REMEDY_CONFIG` or `--config`) > defaults.
"""

from __future__ import annotations

import difflib
import os
import typing
from enum import StrEnum
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, Field, SecretStr, ValidationError, model_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from remedy.settings.audit import NfsAuditSettings
from remedy.settings.health import HealthCheckSettings
from remedy.settings.leases import LeaseSettings
from remedy.settings.lemon import LemonSettings
from remedy.settings.receiver import IntakeQuarantineSettings, NodeIdentitySettings, ReceiverLimits
from remedy.settings.safety import BreakerSettings, LadderSettings, SpareSettings
from remedy.settings.signals import SignalThresholds
from remedy.settings.triage import TriageSettings


class ConfigError(ValueError):
    """Configuration that cannot be used; the message names the field and the reason."""


class ClusterMode(StrEnum):
    SIMULATOR = "simulator"
    KUBECONFIG = "kubeconfig"
    IN_CLUSTER = "in-cluster"


class ClusterAccess(BaseModel):
    mode: ClusterMode = Field(
        ClusterMode.SIMULATOR,
        description="How to reach the Kubernetes API: the embedded simulator, a kubeconfig, or the pod's service account.",
    )
    simulator_url: str = Field(
        "http://127.0.0.1:8001", description="Base URL of `remedy sim serve` when mode is simulator."
    )
    kubeconfig: str | None = Field(None, description="Path to a kubeconfig (mode kubeconfig); default ~/.kube/config.")
    context: str | None = Field(None, description="kubeconfig context to use; default the current context.")
    jobs_namespace: str = Field("gpu-remedy", description="Namespace where health-check and fix Jobs run.")
    request_timeout_seconds: float = Field(10.0, gt=0, description="Per-request timeout against the API server.")
    api_retries: int = Field(
        3, ge=0, le=10,
        description="Retries of a Kubernetes API call that met a connection error or a busy answer (429, 502, 503, "
        "504, or a 5xx with Retry-After; Retry-After is honoured) before giving up.",
    )
    node_selector: str = Field(
        "nvidia.com/gpu.present=true",
        description="Label selector that picks the GPU nodes gpu-remedy manages.",
    )
    list_page_size: int = Field(
        500, ge=1, le=10000,
        description="Every list is read in pages of this many objects (`limit` / `continue`), as kubectl does (its "
        "--chunk-size defaults to 500): one request never asks the API server for a 12,500-node or 100,000-pod "
        "answer at once. A continue token that expired (410) restarts the list once.",
    )


class TopologyLabels(BaseModel):
    """Node label keys that carry topology and lifecycle; differ between providers, so configurable."""

    zone: str = Field("topology.kubernetes.io/zone", description="Availability zone label.")
    rack: str = Field("remedy.io/rack", description="Rack label (failure domain for the breaker).")
    switch: str = Field("remedy.io/switch", description="Leaf switch label (failure domain).")
    pdu: str = Field("remedy.io/pdu", description="Power distribution unit label (failure domain).")
    gpu_product: str = Field("nvidia.com/gpu.product", description="GPU model label (GPU feature discovery).")
    gpu_count: str = Field("nvidia.com/gpu.count", description="GPUs per node label (GPU feature discovery).")
    instance_type: str = Field("node.kubernetes.io/instance-type", description="Cloud instance type label.")
    pool: str = Field("remedy.io/pool", description="gpu-remedy's lifecycle state of the node, mirrored from the ledger.")
    job_pool_value: str = Field("active", description="Pool label value the training job's nodeSelector asks for.")


class TaintKeys(BaseModel):
    quarantine: str = Field("remedy.io/quarantine", description="NoSchedule taint on a node under remediation.")
    spare: str = Field("remedy.io/spare", description="NoSchedule taint keeping workloads off warm spares.")
    burn_in: str = Field("remedy.io/burn-in", description="NoSchedule taint on nodes in burn-in validation.")
    retired: str = Field("remedy.io/retired", description="NoExecute taint on retired (lemon) nodes.")
    tolerated: list[str] = Field(
        default_factory=lambda: ["nvidia.com/gpu"],
        description="Taint keys providers and operators put on every GPU node (GKE and others: nvidia.com/gpu="
        "present:NoSchedule). GPU workloads tolerate them, so a promoted spare carrying one has still joined, and "
        "gpu-remedy's node Jobs tolerate them too.",
    )


class DrainSettings(BaseModel):
    grace_period_seconds: int = Field(
        30, ge=0, le=3600, description="Pod termination grace so the job can checkpoint (seed 000: 30 s)."
    )
    eviction_deadline_seconds: float = Field(
        300.0, gt=0, description="Give up evicting (PodDisruptionBudget 429s) after this long and report what is left."
    )
    pdb_backoff_seconds: float = Field(1.0, gt=0, description="First back-off after a 429; doubles up to 30 s.")
    force_delete_when_not_ready: bool = Field(
        True,
        description="A NotReady node's kubelet cannot confirm that evicted pods stopped: they stay Terminating, and "
        "a Job with a podFailurePolicy (the training job) never replaces them, so the job cannot move to its spare. "
        "When the node is NotReady at the drain, mark it node.kubernetes.io/out-of-service and force-delete its "
        "evicted pods (grace 0, as `kubectl delete pod --force`; non-graceful node shutdown). Kubernetes warns that a node only partitioned may still run them; false: leave them Terminating "
        "for a person (force delete, or the node.kubernetes.io/out-of-service taint).",
    )


class CapacityBudget(BaseModel):
    """How much capacity automation may take out of service on its own (medik8s maxUnhealthy)."""

    max_nodes_in_remediation: int = Field(
        4, ge=0, description="Absolute cap on nodes cordoned by automation at once; beyond it a human must approve."
    )
    max_percent_in_remediation: float = Field(
        10.0, ge=0, le=100, description="Same cap as a percentage of managed GPU nodes; the stricter of the two wins."
    )


class ApprovalSettings(BaseModel):
    timeout_seconds: float = Field(
        3600.0, gt=0, description="How long a paused flow waits for a person; then the safe default (deny) applies."
    )
    reminder_after_seconds: float = Field(
        900.0, gt=0, description="Post a reminder when an approval is still open after this long."
    )
    approvers: list[str] = Field(
        default_factory=list,
        description="Names of the people who may answer an approval in the Prefect UI form (Slack approvers are "
        "slack.approvers, by user id). The Prefect API has no authentication of its own: put it behind one "
        "(docs/operations.md), or anyone who reaches it can type a name from this list.",
    )


class ReconfirmSettings(BaseModel):
    """Just before a drain for replacement, a reboot or a retirement: does the fault still hold?"""

    enabled: bool = Field(True, description="Re-check the alert and probe the GPUs before anything destructive.")
    probe_timeout_seconds: int = Field(
        120, gt=0, le=3600, description="The NVML probe Job's time limit (a probe that cannot run is no verdict).")
    recheck_after_seconds: float = Field(
        10.0, ge=0, le=600,
        description="When the probe finds no GPU at all (the driver may still be loading after a boot), probe once "
        "more after this long; GPUs present then means a monitor artefact, not a fault.")


class WorkloadKind(StrEnum):
    """The API kind of the training workload (remedy.adapters.workloads drives each through its own controller)."""

    JOB = "Job"  # batch/v1
    JOBSET = "JobSet"  # jobset.x-k8s.io/v1alpha2
    PYTORCHJOB = "PyTorchJob"  # kubeflow.org/v1


class WorkloadSettings(BaseModel):
    """The gang-scheduled training job whose nodes gpu-remedy keeps at full size."""

    namespace: str = Field("training", description="Namespace of the training workload.")
    job: str = Field("llm-pretrain", description="Name of the training workload (a Job: parallelism = nodes).")
    kind: WorkloadKind = Field(
        WorkloadKind.JOB,
        description="Its kind: 'Job' (batch/v1), 'JobSet' (jobset.x-k8s.io/v1alpha2) or 'PyTorchJob' "
        "(kubeflow.org/v1). Suspend, resize and restart go through that kind's controller; a workload labelled "
        "kueue.x-k8s.io/queue-name is suspended and resumed through its Kueue Workload (spec.active).")
    replicated_job: str = Field(
        "workers", description="JobSet only: the replicatedJob whose replicas are resized (ignored when the JobSet "
        "has just one).")
    resume_timeout_seconds: float = Field(
        600.0, gt=0, description="How long to wait for the job to be back at full size after a promotion."
    )
    reload_minutes: float = Field(
        31.0, ge=0,
        description="Minutes the job needs to load its checkpoint and train again after any restart (seed 002 "
        "§4.2.3: median 31 min). Every option pays it; it is why a fix that may not hold costs more than a spare.")
    checkpoint_cost_minutes: float = Field(
        1.0, ge=0,
        description="Minutes one checkpoint stops training (seed 000: 1 min). An extra checkpoint asked for on an "
        "early warning pays it once; the job's cadence it publishes itself (remedy.domain.checkpoints).")
    min_nodes: int | None = Field(
        None, ge=1,
        description="Elastic jobs (torchrun --nnodes=MIN:MAX): the fewest nodes the job may run with. None = not elastic.",
    )
    when_no_spare: str = Field(
        "wait", pattern="^(wait|shrink)$",
        description="Elastic jobs with no spare ready: 'wait' for one (escalate), or 'shrink' the job by one node "
        "while it stays at or above min_nodes (seed 003: torchrun continues with fewer nodes).",
    )


class SlackSettings(BaseModel):
    base_url: str = Field("https://slack.com/api/", description="Slack Web API base URL (a local stub in tests).")
    bot_token: SecretStr = Field(SecretStr(""), description="Bot token (xoxb-…); empty disables Slack.")
    signing_secret: SecretStr = Field(SecretStr(""), description="Signing secret for v0 request signatures.")
    channel: str = Field("#gpu-remedy", description="Channel for approvals and notices.")
    approvers: list[str] = Field(default_factory=list, description="Slack user ids allowed to approve.")
    timeout_seconds: float = Field(
        3.0, gt=0, le=30,
        description="Give up on a Slack call after this long; flows go on (the Prefect UI approval path still works).",
    )


class AwsSettings(BaseModel):
    region: str = Field("us-east-1", description="AWS region.")
    endpoint_url: str | None = Field(None, description="Override endpoint (moto server in tests).")
    archive_bucket: str = Field("gpu-remedy-archive", description="S3 bucket for RMA reports and audit archives.")
    archive_dir: str | None = Field(
        None, description="Write RMA reports and audit archives as files under this directory instead of to S3. "
        "`remedy up` sets it to <workdir>/archive when no S3 is configured (no endpoint_url, no AWS credentials).")


class ReceiverSettings(BaseModel):
    host: str = Field("127.0.0.1", description="Bind address of the alert receiver.")
    port: int = Field(8686, ge=0, le=65535, description="Port of the alert receiver (0 = pick a free one).")
    token: SecretStr = Field(
        SecretStr(""),
        description="Bearer token Alertmanager must send. No default: `remedy receiver serve` refuses to start on a "
        "non-loopback address without one; `remedy up` generates one for its session.",
    )
    execute_token: SecretStr = Field(
        SecretStr(""),
        description="Bearer token of the open-loop go-ahead (POST /v1/remediations/{incident}/execute), held by the "
        "break-fix system; distinct from `token` so Alertmanager's credential cannot run remediations. Empty: the "
        "endpoint refuses every call.",
    )
    limits: ReceiverLimits = Field(default_factory=ReceiverLimits, description="Bounds on what the receiver accepts.")
    quarantine: IntakeQuarantineSettings = Field(
        default_factory=IntakeQuarantineSettings,
        description="Cordon a failed node at intake, before the flows start (bounded; see remedy.safety.intake).")
    identity: NodeIdentitySettings = Field(
        default_factory=NodeIdentitySettings,
        description="Which node an alert is about: label order, your own labels, the cluster index's age.")
    dedup_window_seconds: float = Field(
        600.0, gt=0, description="Hold-down: the same alert firing again this soon after it was last seen (flapping), "
        "or another alert for the same node+GPU+fault while its incident is still open, is the same incident. A "
        "re-send of one occurrence (same Alertmanager fingerprint and startsAt) is the same incident at any age.",
    )


class RemedySettings(BaseSettings):
    """gpu-remedy configuration. See docs/architecture.md for how each section is used."""

    model_config = SettingsConfigDict(env_prefix="REMEDY_", env_nested_delimiter="__", extra="forbid")

    dry_run: bool = Field(False, description="Plan, record and show every step; change nothing on cluster or cloud.")
    db_url: str = Field(
        "sqlite:///gpu-remedy.db",
        description="Fleet ledger database URL (SQLite file by default; postgresql+psycopg://… in production).",
    )
    cluster: ClusterAccess = Field(default_factory=ClusterAccess)
    labels: TopologyLabels = Field(default_factory=TopologyLabels)
    taints: TaintKeys = Field(default_factory=TaintKeys)
    drain: DrainSettings = Field(default_factory=DrainSettings)
    budget: CapacityBudget = Field(default_factory=CapacityBudget)
    breaker: BreakerSettings = Field(default_factory=BreakerSettings)
    ladder: LadderSettings = Field(default_factory=LadderSettings)
    spares: SpareSettings = Field(default_factory=SpareSettings)
    signals: SignalThresholds = Field(default_factory=SignalThresholds)
    health: HealthCheckSettings = Field(default_factory=HealthCheckSettings)
    lemon: LemonSettings = Field(default_factory=LemonSettings)
    nfs: NfsAuditSettings = Field(default_factory=NfsAuditSettings)
    approvals: ApprovalSettings = Field(default_factory=ApprovalSettings)
    reconfirm: ReconfirmSettings = Field(default_factory=ReconfirmSettings)
    workload: WorkloadSettings = Field(default_factory=WorkloadSettings)
    slack: SlackSettings = Field(default_factory=SlackSettings)
    aws: AwsSettings = Field(default_factory=AwsSettings)
    receiver: ReceiverSettings = Field(default_factory=ReceiverSettings)
    triage: TriageSettings = Field(default_factory=TriageSettings)
    leases: LeaseSettings = Field(default_factory=LeaseSettings)

    @model_validator(mode="after")
    def _cluster_access_complete(self) -> RemedySettings:
        if self.cluster.mode is ClusterMode.KUBECONFIG and self.cluster.kubeconfig:
            if not Path(self.cluster.kubeconfig).expanduser().exists():
                raise ValueError(f"cluster.kubeconfig: file not found: {self.cluster.kubeconfig}")
        return self

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # Layering (YAML < environment < keyword overrides) is done in load_settings.
        return (init_settings,)


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err["loc"]) or "config"
    return f"{where}: {err['msg']}"


def load_settings(path: str | os.PathLike[str] | None = None, **overrides: Any) -> RemedySettings:
    """Read YAML (path, else $REMEDY_CONFIG, else defaults), then REMEDY_* environment, then `overrides`.

    Raises ConfigError naming the field."""
    path = path or os.environ.get("REMEDY_CONFIG")
    data: dict[str, Any] = {}
    if path:
        p = Path(path)
        if not p.exists():
            raise ConfigError(f"config file not found: {p}")
        if p.is_dir():
            raise ConfigError(f"{p}: is a directory, not a config file")
        from remedy.domain.yamlsafe import YamlLimitError, load_yaml

        try:  # size, nesting and alias limits: a hostile or broken file is one line, never a traceback
            loaded = load_yaml(p.read_bytes(), str(p)) or {}
        except YamlLimitError as exc:
            raise ConfigError(str(exc)) from None
        except OSError as exc:
            raise ConfigError(f"{p}: cannot read it ({exc.strerror or exc})") from None
        if not isinstance(loaded, dict):
            raise ConfigError(f"{p}: top level must be a mapping of sections, got {type(loaded).__name__}")
        data = loaded
    # A misspelt key at any depth (drain: {grace_period_secnds: 10}) is an error naming its path, not a default
    # quietly kept; pydantic itself only refuses unknown keys at the top level.
    unknown = unknown_key(RemedySettings, data)
    if unknown:
        raise ConfigError(f"{unknown[0]}: unknown setting in {path}{unknown[1]}")
    env = _env_overrides()
    unknown = unknown_key(RemedySettings, env)
    if unknown:
        variable = "REMEDY_" + unknown[0].upper().replace(".", "__")
        raise ConfigError(f"{unknown[0]}: unknown setting (environment variable {variable}){unknown[1]}")
    # Layers, lowest first: YAML, environment variables, keyword overrides (a caller's explicit value, e.g. a CLI
    # flag, beats an exported REMEDY_* variable); each overrides the one below field by field.
    try:
        base = RemedySettings(**_deep_merge(data, overrides))
        if env:
            merged = _deep_merge(_deep_merge(base.model_dump(mode="python"), env), overrides)
            base = RemedySettings.model_validate(_unwrap_secrets(merged))
        return base
    except ValidationError as exc:
        raise ConfigError(_first_error(exc)) from None


def unknown_key(model: type[BaseModel], data: Any, path: str = "") -> tuple[str, str] | None:
    """The first key in `data` (at any depth) that `model` has no field for: (its dotted path, a hint)."""
    if not isinstance(data, dict):
        return None
    fields = model.model_fields
    names = set(fields) | {f.alias for f in fields.values() if f.alias}
    for key, value in data.items():
        where = f"{path}{key}"
        if key not in names:
            near = difflib.get_close_matches(str(key), sorted(fields), n=1)
            hint = f"; did you mean {path}{near[0]}?" if near else f"; known here: {', '.join(sorted(fields))}"
            return where, hint
        field = fields.get(key) or next(f for f in fields.values() if f.alias == key)
        for sub, items in _nested_models(field.annotation, value):
            for index, item in items:
                found = unknown_key(sub, item, f"{where}{index}.")
                if found:
                    return found
    return None


def _nested_models(annotation: Any, value: Any):
    """(model, [(index text, value)]) for each section model a field holds: itself, a list of them, optional."""
    args = typing.get_args(annotation)
    origin = typing.get_origin(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield annotation, [("", value)]
    elif origin in (list, tuple) and args and isinstance(value, list):
        for arg in args:
            if isinstance(arg, type) and issubclass(arg, BaseModel):
                yield arg, [(f"[{i}]", v) for i, v in enumerate(value)]
    elif origin is dict and len(args) == 2 and isinstance(value, dict):
        if isinstance(args[1], type) and issubclass(args[1], BaseModel):
            yield args[1], [(f".{k}", v) for k, v in value.items()]
    elif args:  # Optional / Union
        for arg in args:
            if isinstance(arg, type) and issubclass(arg, BaseModel):
                yield arg, [("", value)]


def _env_overrides() -> dict[str, Any]:
    """REMEDY_A__B=value → {"a": {"b": "value"}} (pydantic validates the types)."""
    out: dict[str, Any] = {}
    for key, value in os.environ.items():
        if not key.startswith("REMEDY_") or key == "REMEDY_CONFIG":
            continue
        parts = key[len("REMEDY_") :].lower().split("__")
        if parts[0] not in RemedySettings.model_fields:  # e.g. REMEDY_NVML selects a library, not a setting
            continue
        node = out
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        if value.startswith("[") or value.startswith("{"):
            try:
                value = yaml.safe_load(value)
            except yaml.YAMLError:
                pass
        node[parts[-1]] = value
    return out


def _deep_merge(base: dict[str, Any], top: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in top.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = _deep_merge(out[k], v)
        else:
            out[k] = v
    return out


def _unwrap_secrets(value: Any) -> Any:
    if isinstance(value, SecretStr):
        return value.get_secret_value()
    if isinstance(value, dict):
        return {k: _unwrap_secrets(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_unwrap_secrets(v) for v in value]
    return value

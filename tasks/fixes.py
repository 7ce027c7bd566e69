"""In-place fix steps as Prefect tasks: restart the job's pods, quarantine/release, GPU reset, reboot, NVML verify.

Each side effect goes through `tasks.ledger.act` with a key scoped to the ladder attempt (`fix-<attempt id>:…`),
so a retried task replays instead of acting twice, while a later attempt in the same incident (reset, then
reboot) really acts again. `dry_run` is passed down to the adapters, never branched on here.
"""

from __future__ import annotations

import time
from dataclasses import asdict, replace
from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from remedy import runtime
from remedy.adapters.cluster import ClusterPort, NodeJobSpec, Taint
from remedy.domain.model import NodeState
from remedy.domain.names import object_name
from remedy.remediate.operator import CordonOwner, cordon_owner
from remedy.remediate.results import (
    AppRestarted,
    Drained,
    GpuProbe,
    JobBack,
    NodeBackUp,
    NodeChange,
    NodeJobRun,
    QuarantinedForFix,
    Rebooted,
    RebootVia,
    ReleasedAfterFix,
    StateSet,
)
from remedy.safety.intake import intake_owner
from tasks.leases import fence, node_fence
from tasks.ledger import act, requester
from tasks.retry import retrying
from tasks.story import say

RETRY = retrying(1, 2)
NVIDIA_SMI_IMAGE = "nvcr.io/nvidia/cuda:12.8.0-base-ubuntu22.04"


def _key(attempt_id: int, what: str) -> str:
    return f"fix-{attempt_id}:{what}"


@task(name="restart_app", task_run_name="restart-app-{node}", timeout_seconds=300, **RETRY)
def restart_app(node: str, namespace: str, attempt_id: int, dry_run: bool,
                incident_id: int | None = None) -> AppRestarted:
    """Delete the training pods on the node (the job controller recreates them). The node stays in the pool."""
    cluster = runtime.cluster(dry_run)

    def restart() -> dict[str, Any]:
        names = cluster.restart_pods(node, namespace, fence=node_fence(incident_id))
        return {"node": node, "namespace": namespace, "restarted": names, "dry_run": dry_run}

    return AppRestarted.from_record(act("restart_app", node, restart, incident_id=incident_id, dry_run=dry_run,
                                        key=_key(attempt_id, "restart_app")))


@task(name="quarantine_node", task_run_name="quarantine-{node}", timeout_seconds=120, **RETRY)
def quarantine_node(node: str, reason: str, attempt_id: int, dry_run: bool,
                    incident_id: int | None = None) -> QuarantinedForFix:
    """Cordon + quarantine taint + ledger state quarantined (mirrored on the pool label). The cordon's record says
    who held the node's cordon before (`cordoned_before`): a person's cordon is kept after the fix (release_node)."""
    settings = runtime.settings()
    cluster = runtime.cluster(dry_run)
    # the receiver may have cordoned this node for the same incident already: this run takes that cordon over
    adopt = intake_owner(incident_id) if incident_id is not None else None

    def cordon() -> dict[str, Any]:
        before = _cordon_owner(cluster, node)
        return asdict(cluster.cordon(node, reason=reason, by=requester(), adopt=adopt,
                                     fence=node_fence(incident_id))) | {
            "cordoned_before": before.value}

    cordoned = act("cordon_node", node, cordon, key=_key(attempt_id, "cordon"), incident_id=incident_id,
                   dry_run=dry_run)
    tainted = act("taint_node", node, lambda: asdict(cluster.set_taints(
        node, add=[Taint(settings.taints.quarantine)], fence=node_fence(incident_id))),
        key=_key(attempt_id, "taint"), incident_id=incident_id, dry_run=dry_run)
    return QuarantinedForFix(NodeChange.from_record(cordoned), NodeChange.from_record(tainted),
                             _set_state(node, NodeState.QUARANTINED, reason, attempt_id, dry_run, incident_id))


@task(name="release_node", task_run_name="release-{node}", timeout_seconds=120, **RETRY)
def release_node(node: str, reason: str, attempt_id: int, dry_run: bool,
                 incident_id: int | None = None) -> ReleasedAfterFix:
    """Back in service after a verified fix: uncordon, untaint, ledger state active. A cordon a person set (no
    gpu-remedy annotation) stays: recorded as `keep_operator_cordon`, never lifted (remedy.remediate.operator)."""
    from remedy.remediate.operator import keep_cordon_why, may_uncordon

    settings = runtime.settings()
    cluster = runtime.cluster(dry_run)
    untainted = act("untaint_node", node, lambda: asdict(cluster.set_taints(
        node, remove=[settings.taints.quarantine], fence=node_fence(incident_id))),
        key=_key(attempt_id, "untaint"), incident_id=incident_id, dry_run=dry_run)
    if may_uncordon(_cordon_owner(cluster, node)):
        uncordoned = act("uncordon_node", node,
                         lambda: asdict(cluster.uncordon(node, reason=reason, by=requester(),
                                                         fence=node_fence(incident_id))),
                         key=_key(attempt_id, "uncordon"), incident_id=incident_id, dry_run=dry_run)
    else:
        why = keep_cordon_why(node)
        uncordoned = act("keep_operator_cordon", node, lambda: {"node": node, "changed": False, "detail": why,
                                                                "cordoned_by": CordonOwner.PERSON.value},
                         key=_key(attempt_id, "keep-cordon"), incident_id=incident_id, dry_run=dry_run)
    return ReleasedAfterFix(NodeChange.from_record(untainted), NodeChange.from_record(uncordoned),
                            _set_state(node, NodeState.ACTIVE, reason, attempt_id, dry_run, incident_id))


def _cordon_owner(cluster: ClusterPort, node: str) -> CordonOwner:
    """Who holds the node's cordon right now (gpu-remedy's annotation, or a person's bare cordon)."""
    from remedy.adapters.kubernetes import ANN_CORDONED_BY

    live = cluster.get_node(node)
    return cordon_owner(live.unschedulable, live.annotations.get(ANN_CORDONED_BY))


def _set_state(node: str, state: NodeState, reason: str, attempt_id: int, dry_run: bool,
               incident_id: int | None) -> StateSet:
    settings = runtime.settings()

    def change() -> dict[str, Any]:
        led = runtime.ledger()
        if dry_run:
            current = led.get_node(node).state
            return {"node": node, "from": current.value if current else None, "to": state.value, "dry_run": True}
        rec = led.transition(node, state, reason=reason, requested_by=requester(),
                             idempotency_key=_key(attempt_id, f"state-{state.value}"),
                             incident_id=incident_id, fence=fence(incident_id))  # a run taken over moves nothing
        runtime.cluster(dry_run).set_labels(node, {settings.labels.pool: state.value}, node_fence(incident_id))
        return {"node": node, "from": rec.from_state.value if rec.from_state else None, "to": state.value}

    return StateSet.from_record(act(f"set_state_{state.value}", node, change, incident_id=incident_id,
                                    dry_run=dry_run, key=_key(attempt_id, f"set_state_{state.value}")))


@task(name="drain_for_fix", task_run_name="drain-{node}", timeout_seconds=1800, **RETRY)
def drain_for_fix(node: str, attempt_id: int, dry_run: bool, incident_id: int | None = None) -> Drained:
    settings = runtime.settings()

    def drain() -> dict[str, Any]:
        report = runtime.cluster(dry_run).drain(node, grace_period_seconds=settings.drain.grace_period_seconds,
                                                deadline_seconds=settings.drain.eviction_deadline_seconds,
                                                fence=node_fence(incident_id))
        return asdict(report) | {"complete": report.complete}

    return Drained.from_record(act("drain_node", node, drain, incident_id=incident_id, dry_run=dry_run,
                                   key=_key(attempt_id, "drain")))


def _job(node: str, check: str, attempt_id: int, dry_run: bool, incident_id: int | None, *,
         command: tuple[str, ...] = (), env: tuple[tuple[str, str], ...] = (), privileged: bool = False,
         timeout_seconds: int = 600, image: str | None = None, spec: NodeJobSpec | None = None) -> NodeJobRun:
    job = spec or NodeJobSpec(name=object_name("remedy", check, node, attempt_id), node=node, check=check,
                              command=tuple(command), env=tuple(env), privileged=privileged,
                              timeout_seconds=timeout_seconds)
    if image and spec is None:
        job = replace(job, image=image)
    return NodeJobRun.from_record(act(f"job_{check}", node, lambda: asdict(runtime.cluster(dry_run).run_node_job(
        job, fence=node_fence(incident_id))), incident_id=incident_id, dry_run=dry_run,
        key=_key(attempt_id, f"job-{check}")))


@task(name="reset_gpu", task_run_name="reset-gpu-{node}", timeout_seconds=1800, **RETRY)
def reset_gpu(node: str, gpu: int | None, attempt_id: int, dry_run: bool, incident_id: int | None = None,
              timeout_seconds: int = 300) -> NodeJobRun:
    """`nvidia-smi -r -i N` in a privileged Job on the node (all GPUs when the fault names none)."""
    index = "all" if gpu is None else str(gpu)
    command = ("nvidia-smi", "-r") + (() if gpu is None else ("-i", index))
    return _job(node, "gpu-reset", attempt_id, dry_run, incident_id, command=command,
                env=(("GPU_INDEX", index),), privileged=True, timeout_seconds=timeout_seconds,
                image=NVIDIA_SMI_IMAGE)


@task(name="verify_gpus", task_run_name="verify-{node}", timeout_seconds=1800, **RETRY)
def verify_gpus(node: str, attempt_id: int, dry_run: bool, incident_id: int | None = None,
                phase: str = "after-fix") -> GpuProbe:
    """The NVML probe Job on the node; its JSON report's verdict says whether the fix held."""
    from remedy.health.suite import CheckOutputError, probe_output_result, suite_for

    settings = runtime.settings()
    from remedy.health.jobs import check_job

    spec = next(c for c in suite_for("quick", settings.health) if c.check == "nvml-probe")
    job = _job(node, "nvml-probe", attempt_id, dry_run, incident_id, spec=check_job(
        spec, name=object_name("remedy-nvml-probe", node, attempt_id), nodes=[node], settings=settings.health))
    if job.dry_run:
        return GpuProbe("planned", True, job=job.name)
    try:
        result = probe_output_result(job.logs)
    except CheckOutputError as exc:
        return GpuProbe("error", False, (str(exc),), job.name)
    verdict = result.verdict.value
    return GpuProbe(verdict, verdict != "fail", tuple(result.reasons), job.name)


@task(name="reboot_node", task_run_name="reboot-{node}", timeout_seconds=600, **RETRY)
def reboot_node(node: str, attempt_id: int, dry_run: bool, incident_id: int | None = None) -> Rebooted:
    """EC2 reboot when the node is an EC2 instance (and we talk to a real cluster), else a privileged reboot Job."""
    from remedy.adapters.aws import Ec2Nodes, instance_id_from_provider_id
    from remedy.config import ClusterMode

    settings = runtime.settings()
    live = runtime.cluster().get_node(node)
    instance = instance_id_from_provider_id(live.provider_id)
    # The simulator's providerIDs are made up: rebooting "its" instance would reboot nothing.
    if instance and settings.cluster.mode is not ClusterMode.SIMULATOR:
        cloud = Ec2Nodes.from_settings(settings, dry_run=dry_run)

        def reboot() -> dict[str, Any]:
            runtime.cluster(dry_run).fence_node(node, node_fence(incident_id))  # right before (remedy.safety.fence)
            return asdict(cloud.reboot(instance)) | {"via": "ec2"}

        done = act("reboot_instance", node, reboot, incident_id=incident_id, dry_run=dry_run,
                   key=_key(attempt_id, "reboot"))
        say("%s %s: EC2 instance %s", "would reboot" if dry_run else "rebooting", node, instance)
        return Rebooted(node, RebootVia.EC2, live.boot_id, dry_run=bool(done.get("dry_run")),
                        replayed=bool(done.get("replayed")))
    # the host's systemd, from a privileged pod sharing the host's PID namespace (the template sets hostPID)
    job = _job(node, "reboot", attempt_id, dry_run, incident_id, privileged=True, timeout_seconds=300,
               command=("nsenter", "--target", "1", "--mount", "--uts", "--ipc", "--net", "--pid", "--",
                        "systemctl", "reboot"))
    say("%s %s: a privileged reboot Job on the node", "would reboot" if dry_run else "rebooting", node)
    return Rebooted(node, RebootVia.JOB, live.boot_id, job.succeeded, job.phase, job.logs, job.dry_run, job.replayed)


@task(name="wait_node_ready", task_run_name="wait-ready-{node}", timeout_seconds=7200, cache_policy=NO_CACHE)
def wait_node_ready(node: str, timeout_seconds: float, dry_run: bool, down_grace_seconds: float = 120.0,
                    boot_id_before: str = "") -> NodeBackUp:
    """Wait for the reboot to take the node NotReady, then for it to be Ready again. A new boot ID (the kubelet's
    status.nodeInfo.bootID) says the reboot already happened, however fast: without it a reboot over before the
    first look cost `down_grace_seconds` of real time on the job's critical path, whatever the cluster's clock."""
    if dry_run:
        return NodeBackUp(True, dry_run=True)
    cluster = runtime.cluster()
    start = time.monotonic()
    saw_down = False
    while time.monotonic() - start < timeout_seconds:
        live = cluster.get_node(node)
        ready = live.ready
        saw_down = saw_down or not ready
        rebooted = bool(boot_id_before and live.boot_id and live.boot_id != boot_id_before)
        if ready and (saw_down or rebooted or time.monotonic() - start > min(down_grace_seconds, timeout_seconds / 2)):
            return NodeBackUp(True, saw_down, rebooted, round(time.monotonic() - start, 2))
        time.sleep(0.2)
    return NodeBackUp(False, saw_down, seconds=round(time.monotonic() - start, 2))


@task(name="wait_job_back", task_run_name="wait-{job}-back-on-{node}", timeout_seconds=7200, cache_policy=NO_CACHE)
def wait_job_back(node: str, namespace: str, job: str, timeout_seconds: float, dry_run: bool) -> JobBack:
    """After a restart: wait until the job's pod runs on the node again and report the job's size. When the node
    has fewer allocatable GPUs than one of the job's pods requests (the device plugin took a faulty GPU out), the
    pod cannot come back: say so at once rather than after the whole timeout on the job's critical path."""
    cluster = runtime.cluster()
    start = time.monotonic()
    need = 0 if dry_run else _gpus_per_pod(cluster, namespace, job)

    def running_here() -> bool:
        return any(p["metadata"].get("namespace") == namespace and not p["metadata"].get("deletionTimestamp")
                   and (p["metadata"].get("labels") or {}).get("job-name") == job
                   and p.get("status", {}).get("phase") == "Running" for p in cluster.pods_on_node(node))

    def cannot_fit() -> bool:
        return bool(need) and cluster.get_node(node).allocatable_gpus < need

    back = dry_run or running_here()
    short = False
    while not back and time.monotonic() - start < timeout_seconds:
        short = cannot_fit()
        if short:
            break
        time.sleep(0.2)
        back = running_here()
    ready, desired = cluster.workload_size(namespace, job)
    while not dry_run and back and ready < desired and time.monotonic() - start < timeout_seconds:
        time.sleep(0.2)
        ready, desired = cluster.workload_size(namespace, job)
    return JobBack(back, ready, desired, short, round(time.monotonic() - start, 2))


def _gpus_per_pod(cluster: ClusterPort, namespace: str, job: str) -> int:
    """nvidia.com/gpu one pod of the Job requests (limits when no request), from its pod template; 0 if unknown."""
    try:
        spec = cluster.read_job(namespace, job).get("spec", {}).get("template", {}).get("spec", {})
    except Exception:  # no such Job (yet): nothing to compare with, wait as before
        return 0
    total = 0
    for c in spec.get("containers") or []:
        res = c.get("resources") or {}
        value = (res.get("requests") or {}).get("nvidia.com/gpu") or (res.get("limits") or {}).get("nvidia.com/gpu")
        try:
            total += int(value or 0)
        except (TypeError, ValueError):
            pass
    return total

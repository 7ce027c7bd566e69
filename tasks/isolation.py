"""Fault-isolation side effects as Prefect tasks (seed 004): quarantine the suspect pool, label a batch, run the
smoke test on it while reading its logs, release healthy nodes.

One task per batch, not per node (the Prefect server persists only ~20 task runs/s); inside, every node's change
still goes through `tasks.ledger.act`, so the ledger holds one action per node with its own timestamp and an
idempotency key scoped to this isolation run (an incident may be isolated more than once).

The smoke test is a Job template whose pods select their nodes through the batch label
(`spec.template.spec.nodeSelector["divergence-job-id"]`, the seed's name): labelling a batch and setting that one
value targets the Job at exactly those nodes, one pod per node.

Fencing (remedy.safety.fence): run for an incident (triage's isolate path), every taint and label is a fenced
Node write, and each is preceded by a fence check on the incident's own node — the node a takeover fences when it
claims the incident (tasks.leases.hold_incident_node). The suspects carry this run's fence after its first write
and a takeover's replay never writes them, so their own fence alone would let a stale run through. Run for no
incident (a person isolating a fault across the fleet from the CLI or the UI) nothing is fenced: no run holds
anything another could take over.
"""

from __future__ import annotations

import copy
import re
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, replace
from functools import partial
from typing import Any

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from remedy import runtime
from remedy.adapters.cluster import NodeJobSpec, Taint
from remedy.errors import RemedyError
from remedy.isolate.decisions import Quarantined, Released, SmokeAnswer, read_smoke_answer
from remedy.ledger.errors import LeaseLost
from remedy.safety.fence import NodeFence
from tasks.leases import node_fence
from tasks.ledger import act
from tasks.retry import retrying

BATCH_LABEL = "divergence-job-id"  # seed 004: "Label Batch A nodes with divergence-job-id: <uuid-a>"
SLOT = "<batch>"  # placeholder value of the node-selector slot in a template
RETRY = retrying(1, 2, 4)


class SmokeTestTemplateError(RemedyError):
    """The smoke-test Job template cannot be targeted at a batch of nodes."""


class IsolationTimedOut(RemedyError):
    """No smoke test reached a verdict within the time limit; every quarantined node was released."""


# ---------------------------------------------------------------------------------------------- plain helpers
def default_smoke_test(steps: int = 5, step_seconds: float = 2.0, image: str | None = None) -> dict:
    """The built-in smoke test: a few training steps printing `step N loss: X` (the node-job template, batch form)."""
    spec = NodeJobSpec(
        name="smoke-test", node=SLOT.strip("<>"), check="smoke-test",
        env=(("STEPS", str(steps)), ("STEP_SECONDS", f"{step_seconds:g}")),
        node_selector=((BATCH_LABEL, SLOT),),
    )
    if image:
        spec = replace(spec, image=image)
    return runtime.cluster().render_node_job(spec)


def check_template(manifest: Any) -> dict:
    """A deep copy of `manifest` if it is a Job with the node-selector slot; else SmokeTestTemplateError (one line)."""
    if not isinstance(manifest, dict):
        raise SmokeTestTemplateError(
            f"smoke-test template must be a Job manifest (a mapping), got {type(manifest).__name__}")
    if manifest.get("kind") != "Job":
        raise SmokeTestTemplateError(f"smoke-test template must be kind Job, got kind {manifest.get('kind')!r}")
    pod_spec = ((manifest.get("spec") or {}).get("template") or {}).get("spec")
    if not isinstance(pod_spec, dict) or not pod_spec.get("containers"):
        raise SmokeTestTemplateError("smoke-test template has no spec.template.spec.containers: nothing to run")
    selector = pod_spec.get("nodeSelector")
    if not isinstance(selector, dict) or BATCH_LABEL not in selector:
        raise SmokeTestTemplateError(
            f"smoke-test template has no node-selector slot: spec.template.spec.nodeSelector must contain "
            f"'{BATCH_LABEL}' (its value is replaced by each batch's id), so the Job runs on one batch only"
        )
    others = sorted(k for k in selector if k != BATCH_LABEL)
    if "kubernetes.io/hostname" in others:
        raise SmokeTestTemplateError(
            "smoke-test template pins one host (nodeSelector kubernetes.io/hostname): it could never run on a batch"
        )
    return copy.deepcopy(manifest)


def batch_manifest(template: dict, *, job_name: str, label_value: str, nodes: int, namespace: str,
                   quarantine_taint: str, time_limit_seconds: float) -> dict:
    """The template aimed at one batch: its label value in the slot, one pod per node, tolerating the quarantine."""
    m = copy.deepcopy(template)
    meta = m.setdefault("metadata", {})
    meta["name"], meta["namespace"] = job_name, namespace
    meta.setdefault("labels", {})[BATCH_LABEL] = label_value
    spec = m["spec"]
    spec["parallelism"] = spec["completions"] = nodes
    spec["backoffLimit"] = 0
    spec["activeDeadlineSeconds"] = max(1, int(time_limit_seconds) + 60)  # our own limit acts first
    spec["template"].setdefault("metadata", {}).setdefault("labels", {})[BATCH_LABEL] = label_value
    pod = spec["template"]["spec"]
    pod["nodeSelector"][BATCH_LABEL] = label_value
    # One pod per node of the batch, as the seed's test needs (a real scheduler could stack two on one node).
    pod.setdefault("affinity", {}).setdefault("podAntiAffinity", {}).setdefault(
        "requiredDuringSchedulingIgnoredDuringExecution", []).append(
        {"labelSelector": {"matchLabels": {BATCH_LABEL: label_value}}, "topologyKey": "kubernetes.io/hostname"})
    tolerations = pod.setdefault("tolerations", [])
    if not any(t.get("key") == quarantine_taint for t in tolerations):
        tolerations.append({"key": quarantine_taint, "operator": "Exists"})
    return m


def compile_pattern(pattern: Any) -> re.Pattern[str]:
    if not isinstance(pattern, str) or not pattern:
        raise ValueError(f"failure pattern must be a non-empty regular expression, got {pattern!r}")
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"failure pattern {pattern!r} is not a valid regular expression: {exc}") from None


def new_label_value() -> str:
    """A fresh batch id, valid as a label value (seed 004: a uuid per batch)."""
    return uuid.uuid4().hex[:16]


def _as_dict(change: Callable[..., Any], *args: Any, **kwargs: Any) -> dict[str, Any]:
    """One node change as the ledger records it (the node as the change left it)."""
    return asdict(change(*args, **kwargs))


class _Fenced:
    """The incident's fence for this run's batch writes; `home` is the incident's node. None fence: no incident
    (fleet-level isolation), nothing fenced."""

    def __init__(self, cluster: Any, incident_id: int | None) -> None:
        self.cluster = cluster
        self.fence: NodeFence | None = node_fence(incident_id)
        self.home = runtime.ledger().get_incident(incident_id).node if self.fence and incident_id is not None else ""

    def write(self, change: Callable[..., Any], node: str, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """`change(node, *args, fence=…)` after checking the fence on the incident's node (a takeover's claim put
        its fence there: refused with FenceLost); the write itself carries the fence and its precondition too."""
        if self.fence is not None and node != self.home:
            self.cluster.fence_node(self.home, self.fence)
        return _as_dict(change, node, *args, fence=self.fence, **kwargs)


# ---------------------------------------------------------------------------------------------- tasks
@task(name="quarantine_pool", task_run_name="quarantine-{run_id}", timeout_seconds=300, **RETRY)
def quarantine_pool(nodes: list[str], run_id: str, dry_run: bool, incident_id: int | None = None) -> Quarantined:
    """Taint every suspect NoSchedule (nothing new lands there); report which were already out of service."""
    settings = runtime.settings()
    cluster = runtime.cluster(dry_run)
    key = settings.taints.quarantine
    fenced = _Fenced(cluster, incident_id)
    already = []
    for node in nodes:
        n = cluster.get_node(node)
        if n.has_taint(key) or n.unschedulable:
            already.append(node)  # someone else took it out: we leave it as we found it at the end
        act("taint_node", node, partial(fenced.write, cluster.set_taints, node, add=[Taint(key)]),
            incident_id=incident_id, dry_run=dry_run, key=f"isolate-{run_id}:quarantine:{node}")
    return Quarantined(tuple(nodes), tuple(already))


@task(name="label_batch", task_run_name="label-batch-{label_value}", timeout_seconds=300, **RETRY)
def label_batch(nodes: list[str], label_value: str, run_id: str, dry_run: bool,
                incident_id: int | None = None) -> None:
    """Set the batch label on every node of the batch (the smoke test's Job selects its nodes by it)."""
    cluster = runtime.cluster(dry_run)
    fenced = _Fenced(cluster, incident_id)
    for node in nodes:
        act("label_node", node, partial(fenced.write, cluster.set_labels, node, {BATCH_LABEL: label_value}),
            incident_id=incident_id, dry_run=dry_run, key=f"isolate-{run_id}:label:{node}:{label_value}")


@task(name="release_nodes", task_run_name="release-{why}", timeout_seconds=300, **RETRY)
def release_nodes(nodes: list[str], why: str, run_id: str, dry_run: bool, keep_tainted: list[str] | None = None,
                  incident_id: int | None = None) -> Released:
    """Back to the pool: remove the batch label and our quarantine taint (not one that was there before us)."""
    settings = runtime.settings()
    cluster = runtime.cluster(dry_run)
    fenced = _Fenced(cluster, incident_id)
    keep = set(keep_tainted or [])
    released: list[str] = []
    failed: dict[str, str] = {}
    for node in nodes:
        # One node that cannot be released (gone, API error) must not keep the others quarantined.
        try:
            act("label_node", node, partial(fenced.write, cluster.set_labels, node, {BATCH_LABEL: None}),
                incident_id=incident_id, dry_run=dry_run, key=f"isolate-{run_id}:unlabel:{node}")
            if node not in keep:
                act("untaint_node", node,
                    partial(fenced.write, cluster.set_taints, node, remove=[settings.taints.quarantine]),
                    incident_id=incident_id, dry_run=dry_run, key=f"isolate-{run_id}:release:{node}")
        except LeaseLost:  # another run holds the incident now (a fenced write refused): the rest is its to release
            raise
        except Exception as exc:  # noqa: BLE001 — reported back, the flow says which nodes a person must release
            failed[node] = f"{type(exc).__name__}: {exc}"[:300]
            get_run_logger().error("could not release %s: %s", node, failed[node])
            continue
        released.append(node)
    return Released(tuple(released), failed, why, time.time())


@task(name="run_smoke_test", task_run_name="smoke-test-{batch_id}", timeout_seconds=4 * 3600, cache_policy=NO_CACHE)
def run_smoke_test(batch_id: str, nodes: list[str], label_value: str, template: dict, pattern: str,
                   time_limit_seconds: float, run_id: str, incident_id: int | None = None) -> SmokeAnswer:
    """Run the smoke test on one batch; follow every pod's log and stop the Job at the first line matching
    `pattern` (fail fast, seed 004). The ledger records {diverged, timed_out, detail, seconds, job} (a re-run
    replays it); the flow gets the typed answer."""
    log = get_run_logger()
    settings = runtime.settings()
    cluster = runtime.cluster(False)
    ns = settings.cluster.jobs_namespace
    job = f"smoke-{label_value}"
    manifest = batch_manifest(template, job_name=job, label_value=label_value, nodes=len(nodes), namespace=ns,
                              quarantine_taint=settings.taints.quarantine, time_limit_seconds=time_limit_seconds)
    regex = compile_pattern(pattern)

    def go() -> dict:
        start = time.monotonic()
        cluster.create_job(manifest)  # exists already: a retried task created this batch's Job; follow it
        try:
            out = _follow_until_verdict(cluster, job, len(nodes), regex, start + time_limit_seconds)
        finally:
            cluster.delete_job(job)  # a match, a timeout or done: nothing of this batch keeps running
        out |= {"seconds": round(time.monotonic() - start, 3), "job": job, "batch": batch_id, "nodes": list(nodes)}
        log.info("batch %s (%d nodes): %s", batch_id, len(nodes), out["detail"])
        return out

    return read_smoke_answer(act("smoke_test", f"batch:{label_value}", go, incident_id=incident_id, dry_run=False,
                                 key=f"isolate-{run_id}:smoke:{label_value}"))


def _follow_until_verdict(cluster, job: str, expected_pods: int, regex: re.Pattern[str], deadline: float) -> dict:
    watch = _BatchWatch(cluster, expected_pods, regex, deadline)
    try:
        return watch.run(job)
    finally:
        watch.close()


class _BatchWatch:
    """Follow every pod's log of one smoke-test Job in its own thread (the first matching line wins) while polling
    the Job for completion. The streams get a connection pool of their own (adapter.log_follower): a 15-node batch
    would otherwise crowd out the Job polling."""

    def __init__(self, cluster, pods: int, regex: re.Pattern[str], deadline: float) -> None:
        self.cluster, self.pods, self.regex, self.deadline = cluster, pods, regex, deadline
        self._logs = cluster.log_follower(pods)
        self.hit = threading.Event()
        self.line = ""
        self._lock = threading.Lock()
        self.following: dict[str, threading.Thread] = {}

    def close(self) -> None:
        self._logs.close()

    def _lines(self, pod: str, timeout: float):
        return self._logs.lines(pod, timeout)

    def _follow(self, pod: str) -> None:
        while not self.hit.is_set() and time.monotonic() < self.deadline:
            try:
                for line in self._lines(pod, max(1.0, self.deadline - time.monotonic())):
                    if self.regex.search(line):
                        with self._lock:
                            self.line = self.line or f"{pod}: {line.strip()}"
                        self.hit.set()
                        return
                return  # the pod finished and its log ended
            except Exception:  # pod not started yet (400) or a dropped stream: try again shortly
                time.sleep(0.05)

    def run(self, job: str) -> dict:
        pattern = self.regex.pattern
        while True:
            if self.hit.is_set():
                return {"diverged": True, "timed_out": False, "detail": f"matched: {self.line}"}
            status = self.cluster.job_status(job)
            for pod in self.cluster.job_pods(job):
                name = pod["metadata"]["name"]
                if name not in self.following and (pod.get("spec") or {}).get("nodeName"):
                    t = threading.Thread(target=self._follow, args=(name,), daemon=True, name=f"follow-{name}")
                    self.following[name] = t
                    t.start()
            succeeded, failed = int(status.get("succeeded") or 0), int(status.get("failed") or 0)
            if succeeded + failed >= self.pods or failed:
                # Finished: let the followers read what is left of the logs before deciding.
                for t in self.following.values():
                    t.join(timeout=max(0.0, min(5.0, self.deadline - time.monotonic())))
                if self.hit.is_set():
                    continue
                if failed:
                    return {"diverged": False, "timed_out": True,
                            "detail": f"job failed ({failed} pod(s)) without a line matching {pattern!r}: not a "
                                      "divergence (an OOM or a crash); inconclusive"}
                return {"diverged": False, "timed_out": False,
                        "detail": f"trained normally: {succeeded} pod(s) finished, no line matched {pattern!r}"}
            if time.monotonic() >= self.deadline:
                return {"diverged": False, "timed_out": True,
                        "detail": f"no line matched {pattern!r} and the test did not finish within the time limit"}
            self.hit.wait(0.05)

"""Cluster side effects as Prefect tasks: one API action each, named verb_object so UI names grep to code.

Every task takes `dry_run` and passes it down to the adapter (remedy.runtime.cluster); none branches on it.
Only transient failures retry (tasks.retry.transient_only).
"""

from __future__ import annotations

from dataclasses import asdict

from prefect import task
from prefect.cache_policies import NO_CACHE

from remedy import runtime
from remedy.adapters.cluster import NodeJobSpec, Taint
from tasks.retry import transient_only

# Side effects are never cached; only transient failures are retried.
RETRY = dict(retries=3, retry_delay_seconds=[1, 2, 4], retry_condition_fn=transient_only, cache_policy=NO_CACHE)


@task(name="read_node", task_run_name="read-{node}", timeout_seconds=60, **RETRY)
def read_node(node: str) -> dict:
    return asdict(runtime.cluster().get_node(node))


@task(name="cordon_node", task_run_name="cordon-{node}", timeout_seconds=60, **RETRY)
def cordon_node(node: str, reason: str, by: str, dry_run: bool) -> dict:
    return asdict(runtime.cluster(dry_run).cordon(node, reason=reason, by=by))


@task(name="uncordon_node", task_run_name="uncordon-{node}", timeout_seconds=60, **RETRY)
def uncordon_node(node: str, reason: str, by: str, dry_run: bool) -> dict:
    return asdict(runtime.cluster(dry_run).uncordon(node, reason=reason, by=by))


@task(name="taint_node", task_run_name="taint-{node}", timeout_seconds=60, **RETRY)
def taint_node(node: str, dry_run: bool, add: list[str] | None = None, remove: list[str] | None = None,
               effect: str = "NoSchedule") -> dict:
    """`add` and `remove` are taint keys; added taints get value "true" and `effect`."""
    taints = [Taint(key=k, effect=effect) for k in add or []]
    return asdict(runtime.cluster(dry_run).set_taints(node, add=taints, remove=list(remove or [])))


@task(name="label_node", task_run_name="label-{node}", timeout_seconds=60, **RETRY)
def label_node(node: str, labels: dict[str, str | None], dry_run: bool) -> dict:
    return asdict(runtime.cluster(dry_run).set_labels(node, labels))


@task(name="drain_node", task_run_name="drain-{node}", timeout_seconds=1800, **RETRY)
def drain_node(node: str, grace_period_seconds: int, deadline_seconds: float, dry_run: bool) -> dict:
    report = runtime.cluster(dry_run).drain(
        node, grace_period_seconds=grace_period_seconds, deadline_seconds=deadline_seconds
    )
    return asdict(report) | {"complete": report.complete}


@task(name="run_node_job", task_run_name="{check}-{node}", timeout_seconds=4 * 3600, **RETRY)
def run_node_job(node: str, check: str, name: str, dry_run: bool, args: list[str] | None = None,
                 env: dict[str, str] | None = None, privileged: bool = False, timeout_seconds: int = 600,
                 image: str | None = None) -> dict:
    spec = NodeJobSpec(
        name=name, node=node, check=check, args=tuple(args or ()), env=tuple((env or {}).items()),
        privileged=privileged, timeout_seconds=timeout_seconds,
        **({"image": image} if image else {}),
    )
    return asdict(runtime.cluster(dry_run).run_node_job(spec))


@task(name="check_drift", task_run_name="check-drift-{node}", timeout_seconds=60, **RETRY)
def check_drift(node: str) -> dict | None:
    drift = runtime.cluster().detect_drift(node)
    return asdict(drift) if drift else None


@task(name="list_gpu_nodes", timeout_seconds=120, **RETRY)
def list_gpu_nodes() -> list[dict]:
    return [asdict(n) for n in runtime.cluster().list_gpu_nodes()]

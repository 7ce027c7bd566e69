"""A health check as the Job that runs it on real nodes: the check's image, command and GPUs from the settings
(`HealthCheckSettings.runtimes`, a documented default image set), pinned by node affinity, spread one pod per
node by pod anti-affinity when it spans a group.

    check_job(spec, name="dcgm-diag-r1-gpu042-1a2b3", nodes=["gpu042"], settings=health)
    check_job(nccl_multi, name="nccl-group-g1-9f8e7", nodes=["gpu042", "gpu043"], settings=health)

A multi-node check is one Indexed Job over its group (completions = parallelism = nodes): each pod gets its
rank in JOB_COMPLETION_INDEX (set by the Job controller), the group's size and hosts in NCCL_GROUP_SIZE and
NCCL_GROUP_HOSTS, and every GPU of its node.
"""

from __future__ import annotations

from collections.abc import Sequence

from remedy.adapters.cluster import NodeJobSpec
from remedy.health.suite import CheckSpec
from remedy.settings.health import HealthCheckSettings


def check_job(spec: CheckSpec, *, name: str, nodes: Sequence[str], settings: HealthCheckSettings,
              labels: tuple[tuple[str, str], ...] = ()) -> NodeJobSpec:
    """The NodeJobSpec for `spec` on `nodes` (one node, or a multi-node check's group)."""
    if not nodes:
        raise ValueError(f"{spec.id}: no node to run on")
    if spec.multi_node and len(nodes) < 2:
        raise ValueError(f"{spec.id} is a multi-node check: it needs a group of 2 or more nodes, got {list(nodes)}")
    runtime = settings.runtime_for(spec.check)
    gpus = settings.gpus_for(spec.check)
    env: tuple[tuple[str, str], ...] = ()
    if len(nodes) > 1:
        env = (("NCCL_GROUP_SIZE", str(len(nodes))), ("NCCL_GROUP_HOSTS", ",".join(nodes)),
               ("GPUS_PER_NODE", str(gpus)))
    return NodeJobSpec(
        name=name, node=nodes[0], nodes=tuple(nodes), check=spec.check, image=runtime.image,
        command=tuple(runtime.command) if runtime.command else tuple(spec.command), env=env,
        privileged=spec.privileged, gpus=0 if runtime.see_all_gpus else gpus, see_all_gpus=runtime.see_all_gpus,
        timeout_seconds=spec.timeout_seconds, parallelism=len(nodes), labels=labels,
    )

"""Each adapter implements its port: every method the port declares exists, and takes the port's arguments.

mypy checks the same statically (`remedy.runtime.cluster()` is typed `ClusterPort`, `open_archive` returns
`Archive`, `approvals.messages.notifier` a `Notifier`; scripts/lint.sh); this test keeps the check in the
plain test run and shows which method is missing by name.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator

import pytest

from remedy.adapters.archive import Archive, LocalArchive, S3Archive
from remedy.adapters.aws import CloudNodes, Ec2Nodes
from remedy.adapters.cluster import ClusterPort, LogFollower
from remedy.adapters.kubernetes import KubernetesCluster, PodLogFollower
from remedy.adapters.slack import Notifier, SlackNotifier
from remedy.adapters.workloads import BatchJob, JobSet, PyTorchJob, TrainingWorkload
from remedy.config import load_settings


def protocol_methods(port: type) -> list[str]:
    return sorted(n for n, v in vars(port).items() if callable(v) and not n.startswith("_"))


def protocol_attributes(port: type) -> list[str]:
    return sorted(n for n in getattr(port, "__annotations__", {}) if not n.startswith("_"))


def mismatches(port: type, impl: type) -> list[str]:
    """What `impl` lacks of `port`: a missing method, or a port argument the method does not take."""
    out = []
    for name in protocol_methods(port):
        method = getattr(impl, name, None)
        if not callable(method):
            out.append(f"{impl.__name__}.{name} is missing")
            continue
        want = inspect.signature(getattr(port, name)).parameters
        have = inspect.signature(method).parameters
        takes_kwargs = any(p.kind is p.VAR_KEYWORD for p in have.values())
        for arg, p in want.items():
            if arg == "self" or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                continue
            if arg not in have and not takes_kwargs:
                out.append(f"{impl.__name__}.{name} takes no {arg!r}")
            elif arg in have and p.default is not p.empty and have[arg].default is have[arg].empty:
                out.append(f"{impl.__name__}.{name} requires {arg!r}, which the port makes optional")
        for arg, p in have.items():  # an argument the port does not pass must have a default
            if arg not in want and p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                out.append(f"{impl.__name__}.{name} requires {arg!r}, which the port does not pass")
    return out


IMPLEMENTATIONS = [
    (ClusterPort, KubernetesCluster),
    (LogFollower, PodLogFollower),
    (TrainingWorkload, BatchJob),
    (TrainingWorkload, JobSet),
    (TrainingWorkload, PyTorchJob),
    (Archive, S3Archive),
    (Archive, LocalArchive),
    (Notifier, SlackNotifier),
    (CloudNodes, Ec2Nodes),
]


@pytest.mark.parametrize(("port", "impl"), IMPLEMENTATIONS, ids=lambda c: c.__name__)
def test_adapter_implements_every_method_of_its_port(port, impl):
    assert protocol_methods(port), f"{port.__name__} declares no methods"
    assert mismatches(port, impl) == []


def test_cluster_port_declares_the_calls_tasks_make():
    """The seven calls the batch smoke test and the restart check make were once missing from the port."""
    assert {"pods_on_node", "render_node_job", "create_job", "job_status", "job_pods", "log_follower",
            "delete_job"} <= set(protocol_methods(ClusterPort))


def test_the_check_finds_a_missing_method_and_a_missing_argument():
    class HalfFollower:
        def lines(self, pod: str) -> Iterator[str]:  # no timeout
            yield from ()

    assert mismatches(LogFollower, HalfFollower) == [
        "HalfFollower.close is missing", "HalfFollower.lines takes no 'timeout'"]


def test_instances_carry_the_attributes_the_ports_declare(tmp_path):
    """Attributes are set in __init__, so they are checked on objects; none of these talks to a server."""
    settings = load_settings(cluster={"mode": "simulator", "simulator_url": "http://127.0.0.1:9"})
    with KubernetesCluster(settings, dry_run=True) as cluster:
        assert [a for a in protocol_attributes(ClusterPort) if not hasattr(cluster, a)] == []
        assert cluster.dry_run is True
    archive = LocalArchive(tmp_path, dry_run=True)
    assert [a for a in protocol_attributes(Archive) if not hasattr(archive, a)] == []

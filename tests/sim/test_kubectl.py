"""kubectl against the simulator (never reading a user kubeconfig). Missing kubectl fails under CI, skips locally."""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest
from kubernetes import client

KUBECTL = shutil.which("kubectl")
if KUBECTL is None:
    if os.environ.get("CI"):
        pytest.fail("kubectl is not installed: the simulator's kubectl tests must run in CI", pytrace=False)
    pytest.skip("kubectl is not installed (fails under CI)", allow_module_level=True)


def kubectl(sim, *args: str) -> str:
    proc = subprocess.run([KUBECTL, "--kubeconfig=/dev/null", f"--server={sim.url}", "--request-timeout=20s", *args],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, f"kubectl {' '.join(args)} failed: {proc.stderr.strip()}"
    return proc.stdout


def test_get_nodes_prints_the_server_side_table(sim):
    sim.cluster.store.mutate("Node", "", "gpu003", lambda n: n["spec"].__setitem__("unschedulable", True))
    out = kubectl(sim, "get", "nodes").splitlines()
    assert out[0].split() == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    rows = {line.split()[0]: line.split() for line in out[1:]}
    assert len(rows) == 16
    assert rows["gpu001"][1:3] == ["Ready", "<none>"] and rows["gpu001"][4] == "v1.31.4"
    assert rows["gpu003"][1] == "Ready,SchedulingDisabled"
    wide = kubectl(sim, "get", "nodes", "-o", "wide", "-l", "remedy.io/pool=spare").splitlines()
    assert "INTERNAL-IP" in wide[0] and len(wide) == 3


def test_describe_node_shows_labels_and_an_event(sim, core):
    core.create_namespaced_event("default", client.CoreV1Event(
        metadata=client.V1ObjectMeta(name="gpu001.quarantine"),
        # as the kubelet files node events: uid = node name (kubectl describe asks for it)
        involved_object=client.V1ObjectReference(kind="Node", name="gpu001", uid="gpu001", api_version="v1"),
        reason="RemedyQuarantined", message="XID 79 on GPU 3: cordoned by gpu-remedy", type="Warning",
        source=client.V1EventSource(component="gpu-remedy")))
    out = kubectl(sim, "describe", "node", "gpu001")
    assert "remedy.io/rack=rack-1" in out and "nvidia.com/gpu.product=NVIDIA-B200" in out
    assert re.search(r"ProviderID:\s+aws:///sim-a/i-[0-9a-f]{17}", out)
    events = out[out.index("Events:"):]
    assert "RemedyQuarantined" in events and "XID 79 on GPU 3: cordoned by gpu-remedy" in events
    assert "llm-pretrain-" in out and "nvidia-device-plugin-gpu001" in out  # the node's non-terminated pods


def test_cordon_makes_the_node_unschedulable_in_the_sim(sim):
    assert "node/gpu002 cordoned" in kubectl(sim, "cordon", "gpu002")
    assert sim.cluster.node("gpu002")["spec"]["unschedulable"] is True
    assert "node/gpu002 uncordoned" in kubectl(sim, "uncordon", "gpu002")
    assert not sim.cluster.node("gpu002")["spec"].get("unschedulable")


def test_get_events_and_pods_across_namespaces(sim):
    from remedy.sim.faults import inject

    inject(sim.cluster, "not-ready", "gpu005")  # the node controller records NodeNotReady
    events = kubectl(sim, "get", "events", "-A").splitlines()
    assert events[0].split()[:4] == ["NAMESPACE", "LAST", "SEEN", "TYPE"]
    assert any("NodeNotReady" in line and "node/gpu005" in line for line in events[1:])
    pods = kubectl(sim, "get", "pods", "-A").splitlines()
    assert pods[0].split() == ["NAMESPACE", "NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    rows = [line.split() for line in pods[1:]]
    assert len(rows) == 16 * 2 + 14  # device plugin + mirror pod per node, one training pod per active node
    assert sum(1 for r in rows if r[0] == "training" and r[3] == "Running") == 14
    assert {r[0] for r in rows} == {"kube-system", "training"}

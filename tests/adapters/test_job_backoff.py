"""The adapter's drain and the Job controller's pod-failure back-off, on the simulator and a real control plane.

The Job controller waits 10 s x 2^(n-1) (capped at 10 min) after the n-th pod failure since the Job's last success
before it creates a pod, evicted pods its podFailurePolicy ignores included (pkg/controller/job/job_controller.go
v1.36.2, manageJob; backoff_utils.go). A training gang never succeeds, so every drain in its life made the next
replacement wait longer. The drain takes an evicted pod's job-tracking finalizer off while it terminates, as the
controller does for pods it deletes itself, so the Job controller does not count it
(remedy.adapters.kubernetes._leave_job_backoff). bench/job_backoff_real.py measures ten in a row on the real server.
"""

from __future__ import annotations

import time

import pytest

from remedy.adapters.kubernetes import KubernetesCluster
from tests.fixtures.real_k8s import simulator_or_real
from tests.fixtures.sim import settings_for

NS, JOB = "training", "llm-pretrain"


@pytest.fixture(params=["simulator", "real"])
def sim(request):
    return simulator_or_real(request)


def _pods(cluster: KubernetesCluster) -> list[dict]:
    return [p for p in cluster.workload(NS, JOB).pods() if not p["metadata"].get("deletionTimestamp")]


def _full(cluster: KubernetesCluster, want: int) -> bool:
    return sum(1 for p in _pods(cluster) if p["status"].get("phase") == "Running" and any(
        c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions") or [])) >= want


def test_drains_in_a_row_keep_the_training_job_out_of_the_job_controllers_back_off(sim):
    real = hasattr(sim, "kubelet")
    scale = 1.0 if real else 0.2
    sim.cluster.time_scale = scale  # the simulator's back-off: 2 s, 4 s, 8 s here; the real one 10 s, 20 s, 40 s
    with KubernetesCluster(settings_for(sim), watch_nodes=False) as cluster:
        want = len(_pods(cluster))
        first = _pods(cluster)[0]
        assert "batch.kubernetes.io/job-tracking" in first["metadata"]["finalizers"]
        waits = []
        for _ in range(3):
            victim = sorted(p["spec"]["nodeName"] for p in _pods(cluster))[0]
            start = time.monotonic()
            cluster.cordon(victim, reason="XID 79", by="test")
            report = cluster.drain(victim, grace_period_seconds=1, deadline_seconds=30)
            assert report.complete and len(report.evicted) == 1, report
            cluster.uncordon(victim, reason="repaired", by="test")  # room for the replacement
            deadline = time.monotonic() + 60
            while not _full(cluster, want):
                assert time.monotonic() < deadline, "the Job did not come back to full size"
                time.sleep(0.05)
            waits.append(time.monotonic() - start)
        # a counted failure would hold each replacement 10 s x scale, then 20 s, 40 s
        assert max(waits) < 10 * scale * 0.8, waits
        job = cluster.read_job(NS, JOB)
        assert not (job.get("status") or {}).get("failed")

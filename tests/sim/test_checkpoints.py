"""The simulated training job's checkpoint handshake (remedy.sim.checkpoints), read and driven through the adapter
over the official client. The annotations are gpu-remedy's convention with the job (remedy.domain.checkpoints); what
Kubernetes guarantees is only that metadata.annotations round-trips through a merge patch (apimachinery ObjectMeta:
`Annotations map[string]string`; a JSON merge patch, RFC 7386, merges maps key by key)."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta, timezone

import pytest

from remedy.domain.checkpoints import INTERVAL, LAST, REQUESTED, Checkpoints
from remedy.sim.checkpoints import CADENCE, COST
from remedy.sim.cluster import TRAINING_JOB, TRAINING_NAMESPACE
from tests.sim.conformance.wire import wait_for as _wait


@pytest.fixture
def workload(sim):
    from remedy.adapters.kubernetes import KubernetesCluster
    from tests.fixtures.sim import settings_for

    with KubernetesCluster(settings_for(sim), dry_run=False) as cluster:
        yield cluster.workload(TRAINING_NAMESPACE, TRAINING_JOB)


def _annotate(batch, **ann):
    batch.patch_namespaced_job(TRAINING_JOB, TRAINING_NAMESPACE, {"metadata": {"annotations": ann}})


def test_unannotated_job_publishes_nothing(workload):
    seen = workload.checkpoints()
    assert not seen.published and seen.minutes_to_next(datetime.now(UTC)) is None
    assert "remedy.io/last-checkpoint" in seen.why_unpublished()


def test_job_checkpoints_on_its_cadence_and_answers_a_request(workload, batch):
    _annotate(batch, **{CADENCE: "100", COST: "30"})  # 100 simulated s = 1 s at time_scale 0.01
    first = _wait(lambda: workload.checkpoints().last)
    assert first is not None
    seen = workload.checkpoints()
    assert seen.interval_seconds == pytest.approx(1.0)
    assert 0 < seen.minutes_to_next(datetime.now(UTC)) <= 1 / 60
    later = _wait(lambda: (c := workload.checkpoints().last) and c > first and c)
    assert later and 0.7 <= (later - first).total_seconds() <= 3.0  # the cadence, not faster
    # a request is answered after the checkpoint's cost (30 simulated s = 0.3 s), before the next scheduled one
    asked = datetime.now(UTC)
    change = workload.request_checkpoint(asked)
    assert change.changed and REQUESTED in change.via
    assert Checkpoints.from_annotations(batch.read_namespaced_job(TRAINING_JOB, TRAINING_NAMESPACE)
                                        .metadata.annotations).requested == asked
    done = _wait(lambda: workload.checkpoints().since(asked), timeout=3.0)
    assert done


def test_a_short_gang_writes_no_checkpoint(workload, batch, core):
    _annotate(batch, **{CADENCE: "50"})
    assert _wait(lambda: workload.checkpoints().last)
    batch.patch_namespaced_job(TRAINING_JOB, TRAINING_NAMESPACE, {"spec": {"suspend": True}})
    time.sleep(0.2)
    stopped = workload.checkpoints().last
    time.sleep(1.2)  # more than two cadences
    assert workload.checkpoints().last == stopped


def test_bad_annotations_read_as_unpublished():
    now = datetime.now(UTC)
    assert not Checkpoints.from_annotations({LAST: "yesterday", INTERVAL: "600"}).published
    assert not Checkpoints.from_annotations({LAST: now.isoformat(), INTERVAL: "-5"}).published
    c = Checkpoints.from_annotations({LAST: (now - timedelta(seconds=700)).isoformat().replace("+00:00", "Z"),
                                      INTERVAL: "600"})
    assert c.published and c.minutes_to_next(now) == pytest.approx(500 / 60, abs=0.01)

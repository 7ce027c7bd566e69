"""Every conformance test runs against the simulator and, on a development machine with the binaries built
(KUBE_CONTROL_PLANE_BIN, see tests/fixtures/real_k8s.py), against a real v1.36.2 control plane seeded alike.
A test that reaches into the simulator itself, or needs a kubelet, is marked `simulator_only(reason)`."""

from __future__ import annotations

import pytest


def pytest_configure(config):
    config.addinivalue_line("markers", "simulator_only(reason): the test cannot run against a real control plane")


@pytest.fixture(params=["simulator", "real"])
def sim(request):
    if request.param == "simulator":
        yield request.getfixturevalue("sim_factory")(nodes=16, spares=2)
        return
    marker = request.node.get_closest_marker("simulator_only")
    if marker:
        pytest.skip(f"simulator only: {marker.args[0]}")
    yield request.getfixturevalue("real_cluster")

"""Every conformance test runs against the simulator and, on a development machine with the binaries built
(KUBE_CONTROL_PLANE_BIN, see tests/fixtures/real_k8s.py), against a real v1.36.2 control plane seeded alike.
A test that reaches into the simulator itself, or needs a kubelet, is marked `simulator_only(reason)`."""

from __future__ import annotations

import pytest

from tests.fixtures.real_k8s import simulator_or_real


@pytest.fixture(params=["simulator", "real"])
def sim(request, monkeypatch):
    if request.param == "real":
        from tests.sim.conformance import wire

        monkeypatch.setattr(wire, "SLACK", 4.0)  # the real controllers' pace on a loaded machine
    return simulator_or_real(request)

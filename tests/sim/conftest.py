"""Fixtures: a simulated cluster served over HTTP on a free loopback port, and official-client APIs to it."""

from __future__ import annotations

import pytest
from kubernetes import client

from remedy.sim.cluster import build_cluster
from remedy.sim.server import SimServer

# 0.01: a 30 s grace period takes 0.3 s, a 2 s smoke-test step 20 ms
TIME_SCALE = 0.01


@pytest.fixture
def sim():
    with SimServer(build_cluster(nodes=16, spares=2, time_scale=TIME_SCALE)).start() as server:
        yield server


@pytest.fixture
def api_client(sim):
    api = client.ApiClient(client.Configuration(host=sim.url))
    yield api
    api.close()


@pytest.fixture
def core(api_client):
    return client.CoreV1Api(api_client)


@pytest.fixture
def batch(api_client):
    return client.BatchV1Api(api_client)


@pytest.fixture
def policy(api_client):
    return client.PolicyV1Api(api_client)

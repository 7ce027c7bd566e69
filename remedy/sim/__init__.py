"""The Kubernetes-API GPU cluster simulator: the embedded default cluster (`remedy demo`) and the test cluster.

    from remedy.sim import build_cluster, SimServer, inject
    with SimServer(build_cluster(nodes=16, spares=2, time_scale=0.01)).start() as sim:
        ...  # kubernetes.client.Configuration(host=sim.url); kubectl --kubeconfig=/dev/null --server=sim.url
        inject(sim.cluster, "xid", "gpu003", gpu=3, code=79)

Where things are: store.py (objects, resourceVersion), objects.py (the cluster's nodes, pods, training job),
controller.py + jobs.py + disruption.py (the control loop), runners.py (what Job pods do), api.py + server.py
(REST over HTTP), faults.py + alerts.py (injection, Alertmanager webhooks), metrics.py (dcgm-exporter text).
Exports are lazy so `import remedy.sim.health` stays cheap.
"""

from __future__ import annotations

_EXPORTS = {
    "Cluster": "remedy.sim.cluster",
    "build_cluster": "remedy.sim.cluster",
    "load": "remedy.sim.cluster",
    "save": "remedy.sim.cluster",
    "SimServer": "remedy.sim.server",
    "inject": "remedy.sim.faults",
    "FAULT_KINDS": "remedy.sim.faults",
    "register_runner": "remedy.sim.runners",
    "RunResult": "remedy.sim.runners",
    "NodeHealth": "remedy.sim.health",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        import importlib

        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'remedy.sim' has no attribute {name!r}")

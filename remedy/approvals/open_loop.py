"""Open-loop mode (seed 000): in the listed node pools gpu-remedy only decides; an external system says when to act.

A node's pool is its node-group label (EKS, Karpenter, GKE, AKS, or gpu-remedy's own), else its instance type.
"""

from __future__ import annotations

from remedy.domain.model import Node

OPEN_LOOP_KIND = "open-loop"  # approval kind of a decision waiting for POST /v1/remediations/{incident}/execute
PROPOSED_EVENT = "remedy.remediation.proposed"
NODE_POOL_LABELS = (
    "remedy.io/node-pool",
    "eks.amazonaws.com/nodegroup",
    "karpenter.sh/nodepool",
    "cloud.google.com/gke-nodepool",
    "kubernetes.azure.com/agentpool",
)


def node_pool(node: Node) -> str:
    for key in NODE_POOL_LABELS:
        if node.labels.get(key):
            return node.labels[key]
    return node.instance_type


def is_open_loop(node: Node, pools: list[str]) -> bool:
    """True when the node's pool is listed (or the list holds '*')."""
    wanted = {p.strip() for p in pools if p.strip()}
    return "*" in wanted or (bool(node_pool(node)) and node_pool(node) in wanted)

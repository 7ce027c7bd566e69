"""The one label-selector matcher: a metav1.LabelSelector (matchLabels + matchExpressions) against an object's
labels, as the API server reads it (apimachinery pkg/apis/meta/v1/helpers.go, LabelSelectorAsSelector).

The Kubernetes adapter names a pod's PodDisruptionBudgets with it and the simulator decides evictions and pod
(anti-)affinity with it, so both read a selector the same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def selects(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """Do these labels match? A missing selector (None) selects nothing, an empty one ({}) everything (a budget
    with `selector: {}` guards every pod of its namespace). In/NotIn/Exists/DoesNotExist as the server reads them:
    NotIn and DoesNotExist match an object without the key."""
    if selector is None:
        return False
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), set(expr.get("values") or [])
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and key in labels and labels[key] in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True

"""The one label-selector matcher (remedy.domain.selectors), which the adapter and the simulator both import."""

from __future__ import annotations

import pytest

from remedy.domain.selectors import selects

LABELS = {"app": "trainer", "tier": "gpu", "rack": "r1"}


def test_missing_selects_nothing_and_empty_selects_everything():
    assert selects(None, LABELS) is False
    assert selects({}, LABELS) is True
    assert selects({"matchLabels": {}, "matchExpressions": []}, {}) is True


@pytest.mark.parametrize("selector, expected", [
    ({"matchLabels": {"app": "trainer"}}, True),
    ({"matchLabels": {"app": "trainer", "tier": "cpu"}}, False),
    ({"matchLabels": {"zone": "a"}}, False),
    ({"matchExpressions": [{"key": "rack", "operator": "In", "values": ["r1", "r2"]}]}, True),
    ({"matchExpressions": [{"key": "rack", "operator": "In", "values": ["r2"]}]}, False),
    ({"matchExpressions": [{"key": "rack", "operator": "NotIn", "values": ["r1"]}]}, False),
    ({"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["a"]}]}, True),  # no key: not in
    ({"matchExpressions": [{"key": "tier", "operator": "Exists"}]}, True),
    ({"matchExpressions": [{"key": "zone", "operator": "Exists"}]}, False),
    ({"matchExpressions": [{"key": "zone", "operator": "DoesNotExist"}]}, True),
    ({"matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]}, False),
    ({"matchLabels": {"app": "trainer"},
      "matchExpressions": [{"key": "rack", "operator": "In", "values": ["r9"]}]}, False),  # both must hold
])
def test_match_labels_and_expressions(selector, expected):
    assert selects(selector, LABELS) is expected


def test_adapter_and_simulator_use_this_matcher():
    import remedy.sim.controller as controller
    import remedy.sim.disruption as disruption
    from remedy.adapters import kubernetes

    assert disruption.label_match is selects
    assert "remedy.domain.selectors" in open(controller.__file__).read()
    assert kubernetes._selects(None, LABELS) is False and kubernetes._selects({}, LABELS) is True
    assert kubernetes._selects({"matchLabels": {"app": "x"}}, LABELS) is False

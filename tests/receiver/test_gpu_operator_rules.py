"""The NVIDIA GPU operator's own alert rules through the real receiver (issue 30): read, acknowledged, never acted on.

The operator ships PrometheusRules about deploying the GPU software stack (driver, toolkit, CUDA validation, device
plugin) and about its reconcile loop (tests/realdata/SOURCES.md, `nvidia-gpu-operator-rules`). gpu-remedy's remedies
do not fix a driver container that fails to deploy, so each is acknowledged with a reason naming the rule's source
and the `for:` it states, counted, and kept out of the node cap; an XID 79 in the same webhook is still recorded."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from remedy.detect.rulesets import RULES, normalise, read_alert
from remedy.receiver import conformance
from remedy.sim.alerts import webhook_payload

SOURCE = "nvidia-gpu-operator-rules"


def scenarios() -> dict[str, dict]:
    return {s["name"]: s for s in conformance.load() if s["source"] == SOURCE}


def alerts_of(scenario: dict, node: str, pods: list[str]) -> list[dict]:
    names = {"node": node, "ip": "10.0.0.9"} | {f"pod{i}": p for i, p in enumerate(pods)}
    now = datetime.now(UTC)
    return [conformance._alert(a, names, now) for delivery in scenario["deliveries"] for a in delivery]  # noqa: SLF001


def test_every_published_operator_rule_is_in_the_table_with_its_source_and_for() -> None:
    published = {  # rule → `for:` in seconds, as the two rule files state them
        "GPUOperatorNodeDeploymentFailed": 1800, "GPUOperatorNodeDeploymentDriverFailed": 1800,
        "GPUOperatorNodeDeploymentToolkitFailed": 1800, "GPUOperatorNodeDeploymentCudaFailed": 1800,
        "GPUOperatorReconciliationFailed": 3600, "GPUOperatorReconciliationFailedNfdLabelsMissing": 1800,
        "GPUOperatorOpenshiftDriverToolkitEnabledNfdTooOld": 1800,
        "GPUOperatorOpenshiftDriverToolkitEnabledImageStreamMissing": 1800,
        "GPUOperatorOpenshiftDriverToolkitEnabledImageStreamBroken": 1800,
        "GPUOperatorOpenshiftDriverToolkitEnabledImageTagsMissing": 1800,
        "GPUOperatorDriverAutoUpgradeFailures": 1800,
    }
    for name, for_seconds in published.items():
        rule = RULES[normalise(name)]
        assert rule.kind is None and rule.for_seconds == for_seconds, name
        assert rule.source.startswith("NVIDIA/gpu-operator assets/") and "@ " in rule.source, name
    # node-problem-detector's default conditions and NVSentinel's syslog checks are in the table too
    for name in ("KernelDeadlock", "ReadonlyFilesystem", "FrequentKubeletRestart", "FrequentDockerRestart",
                 "FrequentContainerdRestart", "CorruptDockerOverlay2", "KubeletUnhealthy", "ContainerRuntimeUnhealthy"):
        assert RULES[normalise(name)].source.startswith("kubernetes/node-problem-detector"), name
    for name in ("SysLogsXIDError", "SysLogsSXIDError", "SysLogsGPUFallenOff"):
        assert RULES[normalise(name)].source.startswith("NVIDIA/NVSentinel"), name


def test_operator_description_text_is_never_read_as_a_fault() -> None:
    for sc in scenarios().values():
        for a in alerts_of(sc, "gpu001", ["p0", "p1"]):
            if a["labels"]["alertname"].startswith("GPUOperator"):
                reading = read_alert(a["labels"], a["annotations"], a["generatorURL"])
                assert reading.kind is None and reading.by.startswith("rule:NVIDIA/gpu-operator"), a["labels"]


def test_node_deployment_rules_over_http_are_acknowledged_with_their_source(receiver_factory, post, ledger) -> None:
    server = receiver_factory()
    sc = scenarios()["GPU operator: its four node deployment rules fire on one node (driver, toolkit, CUDA, no GPU exposed)"]
    r = post(server, webhook_payload(alerts_of(sc, "gpu004", ["nvidia-node-status-exporter-7xk2q"])))
    assert r.status_code == 200, r.text
    body = r.json()
    assert (body["received"], body["ignored"], body["opened"], body["rejected"]) == (4, 4, 0, 0)
    for ignored in body["ignored_alerts"]:
        assert ignored["code"] == "unhandled" and "NVIDIA/gpu-operator" in ignored["reason"], ignored
        assert "`for: 30m`" in ignored["reason"]
    assert ledger.incidents() == []
    assert server.receiver.metrics.value("remedy_receiver_alerts_ignored_total", reason="unhandled") == 4


def test_operator_level_rules_without_a_node_are_acknowledged(receiver_factory, post, ledger) -> None:
    server = receiver_factory()
    sc = scenarios()["GPU operator: its operator-level rules (reconcile loop, NFD labels, driver auto-upgrade), "
                     "no node label"]
    r = post(server, webhook_payload(alerts_of(sc, "gpu004", [])))
    assert r.status_code == 200 and r.json()["ignored"] == 3 and r.json()["rejected"] == 0, r.text
    assert ledger.incidents() == [] and ledger.actions() == []  # nothing refused, so no refusal row either


@pytest.mark.parametrize("repeat", [1, 3])
def test_an_xid_79_beside_an_operator_rule_is_recorded(receiver_factory, post, ledger, repeat) -> None:
    """One webhook with GPUOperatorNodeDeploymentFailed and a community GPUXidError (value 79) from the operator's
    dcgm-exporter: the XID is recorded; re-sends add nothing."""
    server = receiver_factory()
    sc = scenarios()["GPU operator: GPUOperatorNodeDeploymentFailed and an XID 79 from its dcgm-exporter in one webhook"]
    # no cluster behind this receiver: Hostname is the node itself here (the corpus run resolves the pod)
    payload = webhook_payload(alerts_of(sc, "gpu004", ["nvidia-node-status-exporter-m4d8z", "gpu004"]))
    for _ in range(repeat):
        r = post(server, payload)
        assert r.status_code == 200, r.text
    assert r.json()["ignored"] == 1
    (incident,) = ledger.incidents()
    assert (incident.node, incident.signal, incident.gpu, incident.xid) == ("gpu004", "xid", 3, 79)

"""The real kubectl as an independent client of the simulator: each command an operator (or a runbook) uses next to
gpu-remedy, with the result kubectl documents. kubectl is client-go underneath, so this also pins the simulator
against client-go's reading of the wire (a multi-PDB eviction answered 201 instead of 500, for one, makes
`kubectl drain` wait for a pod that is never evicted).

Skipped, with the reason, when kubectl is not installed (test_kubectl.py fails instead under CI). Never reads a
user kubeconfig."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
import time

import pytest

from tests.sim.conformance.wire import strict, wait_for

KUBECTL = shutil.which("kubectl")
if KUBECTL is None:
    if os.environ.get("CI"):
        pytest.fail("kubectl is not installed: the simulator's kubectl lane must run in CI", pytrace=False)
    pytest.skip("kubectl is not installed: the kubectl lane needs the real client (apt: kubectl >= 1.29; "
                "Debian's kubernetes-client 1.20 is too old for policy/v1)", allow_module_level=True)


def run(sim, *args: str, stdin: str | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([KUBECTL, "--kubeconfig=/dev/null", f"--server={sim.url}", "--request-timeout=20s", *args],
                          capture_output=True, text=True, input=stdin, timeout=timeout)


def ok(sim, *args: str, stdin: str | None = None) -> str:
    proc = run(sim, *args, stdin=stdin)
    assert proc.returncode == 0, f"kubectl {' '.join(args)} failed: {proc.stderr.strip()}"
    return proc.stdout


def node(sim, name: str) -> dict:
    return json.loads(ok(sim, "get", "node", name, "-o", "json"))


def pods_on(sim, name: str, namespace: str = "training") -> list[dict]:
    return json.loads(ok(sim, "get", "pods", "-n", namespace, "--field-selector", f"spec.nodeName={name}",
                         "-o", "json"))["items"]


def budget(sim, name: str, selector: dict, **spec) -> None:
    doc = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
           "metadata": {"name": name, "namespace": "training"}, "spec": {"selector": selector, **spec}}
    assert f"poddisruptionbudget.policy/{name} created" in ok(sim, "create", "--validate=false", "-f", "-",
                                                               stdin=json.dumps(doc))


def test_cordon_and_uncordon(sim):
    """kubectl cordon: "node/NAME cordoned", spec.unschedulable; again: "already cordoned"; uncordon reverses."""
    assert ok(sim, "cordon", "gpu002").strip() == "node/gpu002 cordoned"
    assert ok(sim, "cordon", "gpu002").strip() == "node/gpu002 already cordoned"
    n = node(sim, "gpu002")
    assert n["spec"]["unschedulable"] is True
    assert {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"} in \
        [{k: t[k] for k in ("key", "effect")} for t in n["spec"]["taints"]]
    assert ok(sim, "uncordon", "gpu002").strip() == "node/gpu002 uncordoned"
    assert not node(sim, "gpu002")["spec"].get("unschedulable")


def test_drain_evicts_through_a_budget_that_allows_it(sim):
    """kubectl drain --ignore-daemonsets: cordons, evicts what the PodDisruptionBudget allows, leaves DaemonSet and
    mirror pods, "node/NAME drained"."""
    budget(sim, "one-at-a-time", {"matchLabels": {"app": "llm-pretrain"}}, maxUnavailable=1)
    out = run(sim, "drain", "gpu006", "--ignore-daemonsets", "--timeout=30s")
    assert out.returncode == 0, out.stderr
    assert "node/gpu006 cordoned" in out.stdout and "node/gpu006 drained" in out.stdout
    assert "ignoring DaemonSet-managed Pods: kube-system/nvidia-device-plugin-gpu006" in out.stderr
    assert pods_on(sim, "gpu006") == []
    left = {p["metadata"]["name"] for p in pods_on(sim, "gpu006", "kube-system")}
    assert left == {"nvidia-device-plugin-gpu006", "kube-proxy-gpu006"}


def test_drain_a_budget_forbids_times_out_and_says_why(sim):
    """A budget that allows no disruption: kubectl retries the 429 ("will retry after 5s") until --timeout, then
    exits 1 naming the budget's refusal; the pod still runs."""
    budget(sim, "none", {"matchLabels": {"app": "llm-pretrain"}}, maxUnavailable=0)
    out = run(sim, "drain", "gpu007", "--ignore-daemonsets", "--timeout=3s")
    assert out.returncode == 1
    assert "Cannot evict pod as it would violate the pod's disruption budget." in out.stderr
    assert "global timeout reached: 3s" in out.stderr
    assert [p["metadata"].get("deletionTimestamp") for p in pods_on(sim, "gpu007")] == [None]


def test_drain_a_pod_under_two_budgets_fails_at_once(sim):
    """Two budgets over one pod: the eviction's 500 is not a 429, so kubectl stops at once with the API's words."""
    budget(sim, "by-app", {"matchLabels": {"app": "llm-pretrain"}}, maxUnavailable=3)
    budget(sim, "by-job", {"matchLabels": {"job-name": "llm-pretrain"}}, maxUnavailable=3)
    start = time.monotonic()
    out = run(sim, "drain", "gpu008", "gpu009", "--ignore-daemonsets", "--timeout=20s")
    assert out.returncode == 1 and time.monotonic() - start < 10
    assert "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support." \
        in out.stderr


def test_taint_adds_and_removes_by_key_and_effect(sim):
    """kubectl taint: KEY=VALUE:EFFECT adds; the same key with another effect is a second taint; KEY:EFFECT-
    removes one; KEY- removes every effect of the key."""
    assert ok(sim, "taint", "nodes", "gpu003", "nvidia.com/gpu=present:NoSchedule").strip() == "node/gpu003 tainted"
    ok(sim, "taint", "nodes", "gpu003", "nvidia.com/gpu=present:PreferNoSchedule")
    taints = {(t["key"], t["effect"]) for t in node(sim, "gpu003")["spec"]["taints"]}
    assert taints == {("nvidia.com/gpu", "NoSchedule"), ("nvidia.com/gpu", "PreferNoSchedule")}
    assert ok(sim, "taint", "nodes", "gpu003", "nvidia.com/gpu:NoSchedule-").strip() == "node/gpu003 untainted"
    assert [(t["key"], t["effect"]) for t in node(sim, "gpu003")["spec"]["taints"]] == \
        [("nvidia.com/gpu", "PreferNoSchedule")]
    ok(sim, "taint", "nodes", "gpu003", "nvidia.com/gpu-")
    assert not node(sim, "gpu003")["spec"].get("taints")
    again = run(sim, "taint", "nodes", "gpu003", "nvidia.com/gpu-")
    assert again.returncode == 1 and "not found" in again.stderr


def test_label_and_annotate(sim):
    """kubectl label/annotate: set, refuse to change an existing value without --overwrite, KEY- removes."""
    refused = run(sim, "label", "node", "gpu004", "remedy.io/pool=quarantined")
    assert refused.returncode == 1
    assert "'remedy.io/pool' already has a value (active), and --overwrite is false" in refused.stderr
    assert ok(sim, "label", "node", "gpu004", "remedy.io/pool=quarantined", "--overwrite").strip() == \
        "node/gpu004 labeled"
    ok(sim, "annotate", "node", "gpu004", "remedy.io/why=xid 79")
    meta = node(sim, "gpu004")["metadata"]
    assert meta["labels"]["remedy.io/pool"] == "quarantined" and meta["annotations"]["remedy.io/why"] == "xid 79"
    assert ok(sim, "label", "node", "gpu004", "remedy.io/pool-").strip() == "node/gpu004 unlabeled"
    ok(sim, "annotate", "node", "gpu004", "remedy.io/why-")
    meta = node(sim, "gpu004")["metadata"]
    assert "remedy.io/pool" not in meta["labels"] and "remedy.io/why" not in (meta.get("annotations") or {})


def test_patch_strategic_merge_and_json(sim):
    """kubectl patch: strategic merge (the default) and JSON merge merge maps; a JSON patch applies its operations
    in order and a failing `test` refuses the whole patch."""
    ok(sim, "patch", "node", "gpu005", "-p", '{"metadata":{"labels":{"a":"1"}}}')
    ok(sim, "patch", "node", "gpu005", "--type=merge", "-p", '{"metadata":{"labels":{"b":"2"}}}')
    ok(sim, "patch", "node", "gpu005", "--type=json", "-p",
       '[{"op":"add","path":"/metadata/labels/c","value":"3"},{"op":"remove","path":"/metadata/labels/a"}]')
    labels = node(sim, "gpu005")["metadata"]["labels"]
    assert ("a" not in labels, labels["b"], labels["c"], labels["remedy.io/rack"]) == (True, "2", "3", "rack-1")
    failed = run(sim, "patch", "node", "gpu005", "--type=json", "-p",
                 '[{"op":"test","path":"/metadata/labels/b","value":"9"},{"op":"add","path":"/metadata/labels/d",'
                 '"value":"4"}]')
    assert failed.returncode == 1 and "d" not in node(sim, "gpu005")["metadata"]["labels"]


def test_create_job_and_follow_its_log(sim):
    """kubectl create job NAME --image=IMAGE -- CMD: a batch/v1 Job; `logs -f job/NAME` streams its pod's output
    until the container ends; the Job completes."""
    assert ok(sim, "-n", "gpu-remedy", "create", "job", "hello", "--image=busybox", "--", "sleep", "2").strip() == \
        "job.batch/hello created"
    lines: list[str] = []
    follower = subprocess.Popen([KUBECTL, "--kubeconfig=/dev/null", f"--server={sim.url}", "-n", "gpu-remedy",
                                 "logs", "-f", "job/hello", "--pod-running-timeout=10s"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    reader = threading.Thread(target=lambda: lines.extend(follower.stdout))
    reader.start()
    assert follower.wait(timeout=30) == 0, follower.stderr.read()
    reader.join(timeout=5)
    assert any("sleeping" in line for line in lines) and lines[-1].strip() == "done"
    job = wait_for(lambda: (j := json.loads(ok(sim, "-n", "gpu-remedy", "get", "job", "hello", "-o", "json")))
                   ["status"].get("succeeded") == 1 and j)
    assert {"type": "Complete", "status": "True"}.items() <= next(
        c for c in job["status"]["conditions"] if c["type"] == "Complete").items()


def test_delete_cascade_orphan_keeps_pods_background_deletes_them(sim):
    """kubectl delete --cascade=orphan: the Job goes, its pods stay without an owner; --cascade=background (the
    default) deletes them too."""
    for name in ("keep", "drop"):
        ok(sim, "-n", "gpu-remedy", "create", "job", name, "--image=busybox", "--", "sleep", "600")
    wait_for(lambda: len(json.loads(ok(sim, "-n", "gpu-remedy", "get", "pods", "-o", "json"))["items"]) == 2)
    assert ok(sim, "-n", "gpu-remedy", "delete", "job", "keep", "--cascade=orphan").strip() == \
        'job.batch "keep" deleted'
    ok(sim, "-n", "gpu-remedy", "delete", "job", "drop", "--cascade=background", "--wait=false")
    left = wait_for(lambda: (items := json.loads(ok(sim, "-n", "gpu-remedy", "get", "pods", "-o", "json"))["items"])
                    and all(not p["metadata"].get("deletionTimestamp") for p in items) and items)
    assert [p["metadata"]["labels"]["job-name"] for p in left] == ["keep"]
    assert not left[0]["metadata"].get("ownerReferences")


def test_get_events_shows_what_gpu_remedy_recorded(sim):
    """kubectl get events --field-selector involvedObject.name=NODE: the Events gpu-remedy writes on a Node."""
    from remedy.adapters.kubernetes import KubernetesCluster
    from tests.fixtures.sim import settings_for

    with KubernetesCluster(settings_for(sim)) as cluster:
        cluster.cordon("gpu010", reason="XID 79 on GPU 3", by="gpu-remedy")
    out = ok(sim, "get", "events", "-n", "default", "--field-selector", "involvedObject.name=gpu010")
    assert "RemedyCordon" in out and "Cordoned by gpu-remedy: XID 79 on GPU 3" in out


def test_get_o_json_is_what_the_official_models_read(sim, api_client):
    """kubectl get -o json prints the object as served; the official client's models hold every field of it."""
    n = node(sim, "gpu011")
    assert n["kind"] == "Node" and n["apiVersion"] == "v1"
    strict(api_client, "V1Node", n)
    listed = json.loads(ok(sim, "get", "pods", "-n", "training", "-o", "json"))
    assert listed["kind"] == "List" and listed["items"]
    for pod in listed["items"]:
        strict(api_client, "V1Pod", pod)

"""The simulator's pure parts: cluster layout, selectors, the three patch flavours, save/load."""

from __future__ import annotations

import re

import pytest

from remedy.sim.cluster import Cluster, SimStateError, build_cluster
from remedy.sim.patch import json_patch, merge_patch, strategic_merge
from remedy.sim.selectors import parse_field_selector, parse_label_selector
from remedy.sim.store import ApiError


def _nodes(cluster):
    return {n["metadata"]["name"]: n for n in cluster.store.objects("Node")}


def test_default_cluster_matches_seed_002_shape():
    cluster = build_cluster()  # 63 B200 nodes, 60 training, 3 spares (seed 002)
    nodes = _nodes(cluster)
    assert len(nodes) == 63 and sorted(nodes)[:2] == ["gpu001", "gpu002"] and "gpu063" in nodes
    pools = [n["metadata"]["labels"]["remedy.io/pool"] for n in nodes.values()]
    assert pools.count("spare") == 3 and pools.count("active") == 60
    spares = [n for n in nodes.values() if n["metadata"]["labels"]["remedy.io/pool"] == "spare"]
    assert len({s["metadata"]["labels"]["remedy.io/rack"] for s in spares}) == 3  # distinct racks
    for s in spares:
        assert {"key": "remedy.io/spare", "value": "true", "effect": "NoSchedule"}.items() <= s["spec"]["taints"][0].items()
    n1 = nodes["gpu001"]
    labels = n1["metadata"]["labels"]
    assert labels["remedy.io/rack"] == "rack-1" and labels["remedy.io/switch"] == "leaf-1"
    assert labels["remedy.io/pdu"] == "pdu-1a" and labels["topology.kubernetes.io/zone"] == "sim-a"
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-B200" and labels["nvidia.com/gpu.count"] == "8"
    assert nodes["gpu017"]["metadata"]["labels"]["remedy.io/rack"] == "rack-3"
    assert nodes["gpu017"]["metadata"]["labels"]["remedy.io/switch"] == "leaf-2"  # one leaf per two racks
    assert nodes["gpu008"]["metadata"]["labels"]["remedy.io/pdu"] == "pdu-1b"
    assert re.fullmatch(r"aws:///sim-a/i-[0-9a-f]{17}", n1["spec"]["providerID"])
    assert n1["status"]["allocatable"]["nvidia.com/gpu"] == "8"
    assert {c["type"]: c["status"] for c in n1["status"]["conditions"]}["Ready"] == "True"
    assert cluster.training_size() == 60
    assert len(cluster.health_of("gpu001").gpus) == 8 and not cluster.health_of("gpu001").faulty()


def test_provider_ids_are_stable_per_seed_and_unique():
    a, b = _nodes(build_cluster(nodes=8, spares=1)), _nodes(build_cluster(nodes=8, spares=1))
    assert [n["spec"]["providerID"] for n in a.values()] == [n["spec"]["providerID"] for n in b.values()]
    assert len({n["spec"]["providerID"] for n in a.values()}) == 8
    c = _nodes(build_cluster(nodes=8, spares=1, seed=7))
    assert c["gpu001"]["spec"]["providerID"] != a["gpu001"]["spec"]["providerID"]


def test_more_spares_than_racks_still_spread_and_counted():
    nodes = _nodes(build_cluster(nodes=16, spares=4, nodes_per_rack=8))
    spares = sorted(n for n, o in nodes.items() if o["metadata"]["labels"]["remedy.io/pool"] == "spare")
    assert len(spares) == 4
    racks = [nodes[s]["metadata"]["labels"]["remedy.io/rack"] for s in spares]
    assert racks.count("rack-1") == 2 and racks.count("rack-2") == 2


@pytest.mark.parametrize("kwargs, words", [
    ({"nodes": 0}, "nodes must be >= 1"),
    ({"nodes": 4, "spares": 4}, "spares must be between 0 and nodes-1"),
    ({"time_scale": 0}, "time_scale must be > 0"),
    ({"racks": 0}, "racks must be >= 1"),
])
def test_bad_cluster_shapes_are_refused_with_a_clear_message(kwargs, words):
    with pytest.raises(ValueError, match=words):
        build_cluster(**kwargs)


def test_label_selector_grammar():
    labels = {"pool": "active", "rack": "rack-1", "gpu": "b200"}
    assert parse_label_selector("pool=active,rack==rack-1")(labels)
    assert not parse_label_selector("pool!=active")(labels)
    assert parse_label_selector("rack in (rack-1, rack-2),pool notin (spare)")(labels)
    assert not parse_label_selector("rack in (rack-2)")(labels)
    assert parse_label_selector("gpu,!lemon")(labels)
    assert not parse_label_selector("lemon")(labels)
    assert parse_label_selector("missing!=x")(labels)  # != matches when the key is absent
    with pytest.raises(ApiError) as err:
        parse_label_selector("pool=(bad")
    assert err.value.code == 400


def test_field_selector_and_its_errors():
    pod = {"metadata": {"name": "p", "namespace": "t"}, "spec": {"nodeName": "gpu001"}, "status": {"phase": "Running"}}
    assert parse_field_selector("spec.nodeName=gpu001,status.phase!=Failed,status.phase!=Succeeded", "Pod")(pod)
    assert not parse_field_selector("spec.nodeName=gpu002", "Pod")(pod)
    node = {"metadata": {"name": "gpu001"}, "spec": {}}
    assert parse_field_selector("spec.unschedulable=false", "Node")(node)
    with pytest.raises(ApiError, match="not a known field selector"):
        parse_field_selector("spec.nodeName=gpu001", "Node")


def test_strategic_merge_merges_by_key_and_replaces_atomic_lists():
    node = {"metadata": {"labels": {"a": "1", "b": "2"}},
            "spec": {"taints": [{"key": "x", "effect": "NoSchedule"}, {"key": "y", "effect": "NoSchedule"}]},
            "status": {"conditions": [{"type": "Ready", "status": "True"}, {"type": "DiskPressure", "status": "False"}]}}
    out = strategic_merge(node, {"metadata": {"labels": {"a": None, "c": "3"}},
                                 "spec": {"taints": [{"key": "z", "effect": "NoExecute"}]},
                                 "status": {"conditions": [{"type": "Ready", "status": "False"}]}})
    assert out["metadata"]["labels"] == {"b": "2", "c": "3"}
    assert out["spec"]["taints"] == [{"key": "z", "effect": "NoExecute"}]  # taints are atomic
    assert out["status"]["conditions"] == [{"type": "Ready", "status": "False"}, {"type": "DiskPressure", "status": "False"}]
    assert node["metadata"]["labels"] == {"a": "1", "b": "2"}  # the original is untouched
    pod = {"spec": {"containers": [{"name": "a", "image": "1"}, {"name": "b", "image": "2"}]}}
    out = strategic_merge(pod, {"spec": {"containers": [{"name": "b", "$patch": "delete"}, {"name": "c", "image": "3"}]}})
    assert [c["name"] for c in out["spec"]["containers"]] == ["a", "c"]
    out = strategic_merge(pod, {"spec": {"containers": [{"name": "z", "image": "9"}, {"$patch": "replace"}]}})
    assert out["spec"]["containers"] == [{"name": "z", "image": "9"}]
    out = strategic_merge({"metadata": {"labels": {"a": "1"}}}, {"metadata": {"labels": {"$patch": "replace", "b": "2"}}})
    assert out["metadata"]["labels"] == {"b": "2"}
    out = strategic_merge({"metadata": {"finalizers": ["a", "b"]}}, {"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}})
    assert out["metadata"]["finalizers"] == ["b"]


def test_merge_patch_rfc7386_and_json_patch_rfc6902():
    doc = {"a": {"b": 1, "c": [1, 2]}, "d": 1}
    assert merge_patch(doc, {"a": {"b": None, "c": [3]}, "e": 2}) == {"a": {"c": [3]}, "d": 1, "e": 2}
    out = json_patch(doc, [{"op": "add", "path": "/a/c/-", "value": 9}, {"op": "replace", "path": "/d", "value": 5},
                           {"op": "remove", "path": "/a/b"}, {"op": "copy", "from": "/d", "path": "/f"},
                           {"op": "move", "from": "/f", "path": "/g"}, {"op": "test", "path": "/g", "value": 5}])
    assert out == {"a": {"c": [1, 2, 9]}, "d": 5, "g": 5}
    with pytest.raises(ApiError) as err:
        json_patch(doc, [{"op": "test", "path": "/d", "value": 2}])
    assert err.value.code == 422
    with pytest.raises(ApiError, match="does not exist"):
        json_patch(doc, [{"op": "remove", "path": "/nope/x"}])
    with pytest.raises(ApiError, match="needs 'value'"):
        json_patch(doc, [{"op": "add", "path": "/x"}])


def test_save_load_round_trip_keeps_objects_and_hidden_health(tmp_path):
    from remedy.sim.faults import inject

    cluster = build_cluster(nodes=10, spares=2, time_scale=0.01)
    inject(cluster, "xid", "gpu003", gpu=2, code=79)
    inject(cluster, "lemon", "gpu004")
    cluster.store.mutate("Node", "", "gpu005", lambda n: n["metadata"]["labels"].__setitem__("remedy.io/pool", "quarantined"))
    path = cluster.save(tmp_path / "state.json")
    loaded = Cluster.load(path)
    assert loaded.health_of("gpu003").gpus[2].fallen_off_bus and 79 in loaded.health_of("gpu003").gpus[2].pending_xids
    assert loaded.health_of("gpu004").lemon and not loaded.health_of("gpu006").faulty()
    assert loaded.node("gpu005")["metadata"]["labels"]["remedy.io/pool"] == "quarantined"
    assert loaded.store.dump().keys() == cluster.store.dump().keys()
    for kind, objs in cluster.store.dump().items():
        assert sorted(o["metadata"]["name"] for o in loaded.store.objects(kind)) == sorted(o["metadata"]["name"] for o in objs)
    assert loaded.node("gpu001")["metadata"]["uid"] == cluster.node("gpu001")["metadata"]["uid"]
    assert int(loaded.node("gpu005")["metadata"]["resourceVersion"]) <= loaded.store.resource_version
    assert loaded.training_size() == cluster.training_size() == 8
    assert any("Xid" in line for line in loaded.dmesg["gpu003"])


def test_load_refuses_what_is_not_a_saved_state(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text('{"hello": 1}')
    with pytest.raises(SimStateError, match="not a simulator state"):
        Cluster.load(bad)
    with pytest.raises(SimStateError, match="not found"):
        Cluster.load(tmp_path / "missing.json")
    bad.write_text("{")
    with pytest.raises(SimStateError, match="not JSON"):
        Cluster.load(bad)


def test_a_check_job_running_at_save_finishes_after_load(tmp_path):
    from remedy.sim import api

    cluster = build_cluster(nodes=4, spares=1, time_scale=0.01)
    body = {"metadata": {"name": "probe"}, "spec": {"backoffLimit": 0, "template": {
        "metadata": {"labels": {"remedy.io/check": "sleep"}},
        "spec": {"restartPolicy": "Never", "nodeSelector": {"kubernetes.io/hostname": "gpu002"},
                 "containers": [{"name": "c", "image": "busybox", "args": ["sleep", "50"]}]}}}}
    reply = api.handle(cluster, "POST", "/apis/batch/v1/namespaces/gpu-remedy/jobs", "", {},
                       __import__("json").dumps(body).encode())
    assert reply.code == 201
    [pod] = [p for p in cluster.store.objects("Pod", "gpu-remedy")]
    assert pod["status"]["phase"] == "Running"
    loaded = Cluster.load(cluster.save(tmp_path / "s.json"))
    assert loaded.settle(timeout=5, until=lambda: loaded.store.get("Job", "gpu-remedy", "probe")["status"].get("succeeded") == 1)

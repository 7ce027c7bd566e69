"""The Kubernetes objects of a simulated GPU cluster: nodes, their system pods, the training job.

Label and taint keys are gpu-remedy's config defaults (remedy.config.TopologyLabels / TaintKeys), read
from the config model so the simulated cluster always speaks the labels gpu-remedy expects by default.
"""

from __future__ import annotations

import hashlib
import math
import random
import uuid
from typing import TYPE_CHECKING

from remedy.config import TaintKeys, TopologyLabels
from remedy.sim.health import NodeHealth
from remedy.sim.store import now_iso

if TYPE_CHECKING:
    from remedy.sim.cluster import Cluster

ZONE = "sim-a"
GPU_PRODUCT = "NVIDIA-B200"
INSTANCE_TYPE = "p6-b200.48xlarge"  # 8x B200, the seed 002 cluster's node shape
KUBELET_VERSION = "v1.31.4"
LABELS = TopologyLabels()
SPARE_TAINT = {"key": TaintKeys().spare, "value": "true", "effect": "NoSchedule"}
POOL_LABEL = LABELS.pool
NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease", "training", "gpu-remedy")
DEVICE_PLUGIN = "nvidia-device-plugin-daemonset"
TRAINING_IMAGE = "nvcr.io/nvidia/pytorch:25.01-py3"
WORKLOAD_ANNOTATION = "remedy.io/sim-workload"  # "training": a long-running gang job that never finishes
TERMINATION_GRACE_SECONDS = 30  # seed 000: the drain grace that lets the job checkpoint
SESSIONS_NAMESPACE = "sessions"
SESSION_IMAGE = "nvcr.io/nvidia/pytorch:25.01-py3"
TRAINING_PRIORITY_CLASS = ("gpu-training", 1000)
SESSION_PRIORITY_CLASS = ("interactive", 10)
# seed 002 §4.3.5: multi-node training above single-node sessions. The training class does not preempt by itself
# (preemptionPolicy Never): taking GPUs from running sessions is gpu-remedy's decision, approved by a person.
PRIORITY_CLASSES = (
    (*TRAINING_PRIORITY_CLASS, "Never", "Gang-scheduled multi-node training; waits rather than preempts."),
    (*SESSION_PRIORITY_CLASS, "PreemptLowerPriority", "Single-node interactive sessions (notebooks, debugging)."),
)


def _hex(seed: int, text: str, n: int) -> str:
    return hashlib.sha256(f"{seed}:{text}".encode()).hexdigest()[:n]


def random_suffix(n: int = 5) -> str:
    # the same alphabet Kubernetes' generateName uses (no vowels, no ambiguous characters)
    return "".join(random.choices("bcdfghjklmnpqrstvwxz2456789", k=n))


def _spread(racks: list[int], count: int) -> list[int]:
    """`count` racks spread evenly over the list (deterministic)."""
    n = len(racks)
    return [racks[(k * n) // count] for k in range(count)]


# status.images as a GPU node's kubelet reports them: the node's largest images, at most 50
# (KubeletConfiguration nodeStatusMaxImages, default 50; pkg/kubelet/nodestatus/setters.go Images sorts them by
# size, largest first), each with its digest and tag names. A training node keeps several releases of the big
# framework images, so it reports the full 50 and each Node is ~10 KB larger: every list pays what a real one does
# (a real 12,500-node list took 7-21 s with them, 3.6 s without; docs/scale.md). One tuple shared by every node:
# stored objects are never changed in place, and a tuple is not copied by deep_copy.
_IMAGE_REPOS = (
    ("nvcr.io/nvidia/pytorch", ("25.01-py3", "24.12-py3", "24.10-py3", "24.08-py3", "24.07-py3", "24.05-py3"),
     21_474_836_480),
    ("nvcr.io/nvidia/nemo", ("25.02", "24.12", "24.09", "24.07"), 29_527_900_160),
    ("nvcr.io/nvidia/tritonserver", ("25.01-py3", "24.12-py3", "24.10-py3"), 15_032_385_536),
    ("nvcr.io/nvidia/cuda", ("12.8.0-devel-ubuntu22.04", "12.6.3-devel-ubuntu22.04", "12.4.1-runtime-ubuntu22.04",
                             "12.8.0-base-ubuntu22.04"), 4_294_967_296),
    ("nvcr.io/nvidia/cloud-native/dcgm", ("4.1.1-2-ubuntu22.04", "3.3.9-1-ubuntu22.04"), 2_362_232_012),
    ("ghcr.io/coreweave/nccl-tests", ("12.8.0-devel-ubuntu22.04-nccl2.25.1-1-6f6e2c8",
                                      "12.6.2-devel-ubuntu22.04-nccl2.23.4-1-2ae3ab3"), 9_663_676_416),
    ("nvcr.io/nvidia/k8s/dcgm-exporter", ("4.1.1-4.0.4-ubuntu22.04", "3.3.9-3.6.1-ubuntu22.04"), 1_073_741_824),
    ("nvcr.io/nvidia/k8s-device-plugin", ("v0.17.0", "v0.16.2"), 536_870_912),
    ("nvcr.io/nvidia/gpu-operator", ("v24.9.2", "v24.9.0"), 314_572_800),
    ("nvcr.io/nvidia/cloud-native/k8s-driver-manager", ("v0.7.0",), 209_715_200),
    ("nvcr.io/nvidia/k8s/container-toolkit", ("v1.17.4-ubuntu20.04", "v1.17.3-ubuntu20.04"), 167_772_160),
    ("nvcr.io/nvidia/driver", ("570.86.15-ubuntu22.04", "565.57.01-ubuntu22.04"), 1_288_490_188),
    ("nvcr.io/nvidia/cloud-native/gpu-operator-validator", ("v24.9.2",), 104_857_600),
    ("ghcr.io/gpu-remedy/remedy", ("0.9.0", "0.8.2", "0.8.1"), 943_718_400),
    ("docker.io/ljishen/fio", ("3.36", "3.35"), 31_457_280),
    ("public.ecr.aws/eks/aws-efa-k8s-device-plugin", ("v0.5.6", "v0.5.5"), 94_371_840),
    ("602401143452.dkr.ecr.us-west-2.amazonaws.com/amazon-k8s-cni", ("v1.19.2-eksbuild.1", "v1.18.6-eksbuild.1"),
     115_343_360),
    ("registry.k8s.io/kube-proxy", ("v1.31.4", "v1.30.8"), 30_408_704),
    ("registry.k8s.io/node-problem-detector/node-problem-detector", ("v0.8.20",), 41_943_040),
    ("quay.io/prometheus/node-exporter", ("v1.8.2", "v1.8.1"), 12_582_912),
    ("docker.io/fluent/fluent-bit", ("3.2.4", "3.1.9"), 35_651_584),
    ("registry.k8s.io/pause", ("3.10", "3.9"), 321_126),
)


def _node_images() -> tuple[dict, ...]:
    out = []
    for repo, tags, size in _IMAGE_REPOS:
        for k, tag in enumerate(tags):
            digest = hashlib.sha256(f"{repo}:{tag}".encode()).hexdigest()
            out.append({"names": [f"{repo}@sha256:{digest}", f"{repo}:{tag}"], "sizeBytes": size - k * 1_048_576})
    out.sort(key=lambda i: -i["sizeBytes"])
    return tuple(out[:50])


NODE_IMAGES = _node_images()


def make_node(name: str, index: int, rack: int, pos_in_rack: int, per_rack: int, pool: str, gpus: int,
              seed: int, images: bool = True) -> dict:
    ip = f"10.0.{rack}.{10 + pos_in_rack}"
    pdu = f"pdu-{rack}{'a' if pos_in_rack < math.ceil(per_rack / 2) else 'b'}"
    labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "nvidia.com/gpu.present": "true",
        LABELS.gpu_product: GPU_PRODUCT,
        LABELS.gpu_count: str(gpus),
        LABELS.instance_type: INSTANCE_TYPE,
        LABELS.zone: ZONE,
        "topology.kubernetes.io/region": "us-sim-1",
        LABELS.rack: f"rack-{rack}",
        LABELS.switch: f"leaf-{(rack - 1) // 2 + 1}",
        LABELS.pdu: pdu,
        POOL_LABEL: pool,
    }
    ts = now_iso()
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "providerID": f"aws:///{ZONE}/i-{_hex(seed, name, 17)}",
            "podCIDR": f"10.244.{index % 256}.0/24",
            **({"taints": [dict(SPARE_TAINT, timeAdded=ts)]} if pool == "spare" else {}),
        },
        "status": {
            "capacity": {"cpu": "192", "memory": "2113928980Ki", "nvidia.com/gpu": str(gpus), "pods": "110",
                         "ephemeral-storage": "30485980Ki"},
            "allocatable": {"cpu": "191500m", "memory": "2113314580Ki", "nvidia.com/gpu": str(gpus), "pods": "110",
                            "ephemeral-storage": "28095492Ki"},
            "conditions": node_conditions(True, ts),
            "addresses": [{"type": "InternalIP", "address": ip}, {"type": "Hostname", "address": name}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            **({"images": NODE_IMAGES} if images else {}),
            "nodeInfo": {
                "machineID": _hex(seed, "machine" + name, 32),
                "systemUUID": str(uuid.UUID(_hex(seed, "sys" + name, 32))),
                "bootID": str(uuid.uuid4()),
                "kernelVersion": "6.8.0-1021-aws",
                "osImage": "Ubuntu 22.04.5 LTS",
                "containerRuntimeVersion": "containerd://1.7.24",
                "kubeletVersion": KUBELET_VERSION,
                "kubeProxyVersion": KUBELET_VERSION,
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
        },
    }


def node_conditions(ready: bool, ts: str) -> list[dict]:
    def cond(type_: str, status: str, reason: str, message: str) -> dict:
        return {"type": type_, "status": status, "lastHeartbeatTime": ts, "lastTransitionTime": ts,
                "reason": reason, "message": message}

    if ready:
        ready_cond = cond("Ready", "True", "KubeletReady", "kubelet is posting ready status")
    else:
        ready_cond = cond("Ready", "Unknown", "NodeStatusUnknown", "Kubelet stopped posting node status.")
    return [
        cond("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
        cond("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
        cond("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
        ready_cond,
    ]


def owner_ref(kind: str, name: str, uid: str, api_version: str) -> dict:
    return {"apiVersion": api_version, "kind": kind, "name": name, "uid": uid, "controller": True,
            "blockOwnerDeletion": True}


def _container_status(name: str, image: str, ts: str, ready: bool = True) -> dict:
    return {"name": name, "image": image, "imageID": "", "containerID": f"containerd://{uuid.uuid4().hex}",
            "ready": ready, "started": True, "restartCount": 0, "state": {"running": {"startedAt": ts}}}


def _running_status(node_ip: str, pod_ip: str, containers: list[dict], ts: str) -> dict:
    return {
        "phase": "Running",
        "conditions": [
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": ts},
            {"type": "Initialized", "status": "True", "lastTransitionTime": ts},
            {"type": "ContainersReady", "status": "True", "lastTransitionTime": ts},
            {"type": "Ready", "status": "True", "lastTransitionTime": ts},
        ],
        "hostIP": node_ip,
        "hostIPs": [{"ip": node_ip}],
        "podIP": pod_ip,
        "podIPs": [{"ip": pod_ip}],
        "startTime": ts,
        "qosClass": "Burstable",
        "containerStatuses": [_container_status(c["name"], c.get("image", ""), ts) for c in containers],
    }


def system_pods(node: dict, index: int, ds_uid: str) -> list[dict]:
    """The device-plugin DaemonSet pod and a static (mirror) pod: a drain must skip both."""
    name = node["metadata"]["name"]
    ip = node["status"]["addresses"][0]["address"]
    ts = now_iso()
    plugin_containers = [{"name": "nvidia-device-plugin-ctr", "image": "nvcr.io/nvidia/k8s-device-plugin:v0.17.0"}]
    plugin = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": f"nvidia-device-plugin-{name}", "namespace": "kube-system",
            "labels": {"app.kubernetes.io/name": "nvidia-device-plugin", "name": "nvidia-device-plugin-ds"},
            "ownerReferences": [owner_ref("DaemonSet", DEVICE_PLUGIN, ds_uid, "apps/v1")],
        },
        "spec": {"nodeName": name, "containers": plugin_containers, "priorityClassName": "system-node-critical",
                 "priority": 2000001000, "preemptionPolicy": "PreemptLowerPriority",
                 "tolerations": [{"operator": "Exists"}], "terminationGracePeriodSeconds": 30,
                 "restartPolicy": "Always"},
        "status": _running_status(ip, ip, plugin_containers, ts),
    }
    proxy_containers = [{"name": "kube-proxy", "image": "registry.k8s.io/kube-proxy:v1.31.4"}]
    mirror = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": f"kube-proxy-{name}", "namespace": "kube-system",
            "labels": {"component": "kube-proxy", "tier": "node"},
            "annotations": {
                "kubernetes.io/config.mirror": hashlib.md5(name.encode()).hexdigest(),
                "kubernetes.io/config.hash": hashlib.md5(name.encode()).hexdigest(),
                "kubernetes.io/config.source": "file",
            },
            "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": name, "uid": node["metadata"]["uid"],
                                 "controller": True}],
        },
        "spec": {"nodeName": name, "containers": proxy_containers, "hostNetwork": True,
                 "priorityClassName": "system-node-critical", "priority": 2000001000,
                 "preemptionPolicy": "PreemptLowerPriority", "tolerations": [{"operator": "Exists"}],
                 "restartPolicy": "Always"},
        "status": _running_status(ip, ip, proxy_containers, ts),
    }
    return [plugin, mirror]


def make_training_job(parallelism: int) -> dict:
    """The gang-scheduled pretraining Job: one pod per active node, nodeSelector on the active pool. It declares
    what docs/operations.md asks of a training Job: a podFailurePolicy that ignores disruptions (drains,
    NoExecute taints, PodGC), so the default backoffLimit (6) counts only real crashes."""
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "llm-pretrain", "namespace": "training", "labels": {"app": "llm-pretrain"},
                     "annotations": {WORKLOAD_ANNOTATION: "training"}},
        "spec": {
            "parallelism": parallelism,
            "completions": parallelism,
            "completionMode": "NonIndexed",
            "podFailurePolicy": {"rules": [
                {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
            ]},
            "template": {
                "metadata": {"labels": {"app": "llm-pretrain"}},
                "spec": {
                    "restartPolicy": "Never",  # a podFailurePolicy requires it
                    "priorityClassName": TRAINING_PRIORITY_CLASS[0],
                    "nodeSelector": {POOL_LABEL: LABELS.job_pool_value},
                    "terminationGracePeriodSeconds": TERMINATION_GRACE_SECONDS,
                    "containers": [{
                        "name": "trainer", "image": TRAINING_IMAGE,
                        "command": ["torchrun", "--nnodes", str(parallelism), "--nproc-per-node", "8", "pretrain.py"],
                        "resources": {"limits": {"nvidia.com/gpu": "8"}, "requests": {"nvidia.com/gpu": "8"}},
                    }],
                },
            },
        },
        "status": {},
    }


def priority_class(name: str, value: int, preemption_policy: str, description: str) -> dict:
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
            "value": value, "globalDefault": False, "preemptionPolicy": preemption_policy, "description": description}


def make_session(node: str) -> dict:
    """A single-node interactive session (seed 002 §4.3.5): a bare pod holding all 8 GPUs of one node, low
    priority, pinned to the node by hostname. Created unbound; the scheduler binds it."""
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": f"notebook-{node}", "namespace": SESSIONS_NAMESPACE,
                     "labels": {"app": "interactive-session", "remedy.io/session-node": node}},
        "spec": {
            "priorityClassName": SESSION_PRIORITY_CLASS[0],
            "priority": SESSION_PRIORITY_CLASS[1],
            "preemptionPolicy": "PreemptLowerPriority",
            "nodeSelector": {"kubernetes.io/hostname": node},
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": TERMINATION_GRACE_SECONDS,
            "containers": [{
                "name": "jupyter", "image": SESSION_IMAGE,
                "command": ["jupyter", "lab", "--ip=0.0.0.0", "--no-browser"],
                "resources": {"limits": {"nvidia.com/gpu": "8"}, "requests": {"nvidia.com/gpu": "8"}},
            }],
        },
        "status": {"phase": "Pending"},
    }


def node_event(node: str, reason: str, message: str, type_: str, component: str) -> dict:
    ts = now_iso()
    return {
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": f"{node}.{uuid.uuid4().hex[:16]}", "namespace": "default"},
        "involvedObject": {"kind": "Node", "name": node, "uid": node, "apiVersion": "v1"},
        "reason": reason, "message": message, "type": type_,
        "source": {"component": component, "host": node},
        "firstTimestamp": ts, "lastTimestamp": ts, "count": 1,
        "reportingComponent": component, "reportingInstance": node,
    }


def _pick(members: dict[int, list[int]], count: int, taken: set[int]) -> list[int]:
    """`count` node indexes not in `taken`: the last free node of evenly spread racks, round after round."""
    rack_ids = sorted(members)
    out: list[int] = []
    while len(out) < count:
        free = {r: [i for i in reversed(members[r]) if i not in taken and i not in out] for r in rack_ids}
        racks = [r for r in rack_ids if free[r]]
        if not racks:
            break
        out += [free[r][0] for r in _spread(racks, min(count - len(out), len(racks)))]
    return out


# What GKE (and other providers) put on every GPU node; GPU pods tolerate it through ExtendedResourceToleration.
PROVIDER_GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}


def node_name(prefix: str, i: int, width: int) -> str:
    """gpu01, gpu02 … or, for a prefix with `{n}`, that pattern: "ip-10-0-1-{n}.ec2.internal" names nodes as EKS does
    (a name with dots, to test that names are data: remedy.domain.names)."""
    return prefix.format(n=i + 1) if "{n}" in prefix else f"{prefix}{i + 1:0{width}d}"


def populate(cluster: Cluster, *, nodes: int, spares: int, gpus_per_node: int, racks: int | None,
             nodes_per_rack: int, prefix: str, training_job: bool, sessions: int = 0,
             gpu_taint: bool = False, node_images: bool = True) -> None:
    store = cluster.store
    for ns in NAMESPACES + ((SESSIONS_NAMESPACE,) if sessions else ()):
        store.create("Namespace", {"apiVersion": "v1", "kind": "Namespace",
                                   "metadata": {"name": ns, "labels": {"kubernetes.io/metadata.name": ns}},
                                   "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}})
    per_rack = math.ceil(nodes / racks) if racks else nodes_per_rack
    rack_of = [i // per_rack + 1 for i in range(nodes)]
    members: dict[int, list[int]] = {}
    for i, r in enumerate(rack_of):
        members.setdefault(r, []).append(i)
    rack_ids = sorted(members)
    spare_idx: list[int] = []
    depth = 1
    while len(spare_idx) < spares:  # the last node of evenly spread racks; deeper only if spares > racks
        want = spares - len(spare_idx)
        for r in _spread(rack_ids, min(want, len(rack_ids))):
            if len(members[r]) >= depth and members[r][-depth] not in spare_idx:
                spare_idx.append(members[r][-depth])
        depth += 1
    width = max(3, len(str(nodes)))
    ds = store.create("DaemonSet", {
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": DEVICE_PLUGIN, "namespace": "kube-system"},
        "spec": {"selector": {"matchLabels": {"name": "nvidia-device-plugin-ds"}},
                 "template": {"metadata": {"labels": {"name": "nvidia-device-plugin-ds"}},
                              "spec": {"containers": [{"name": "nvidia-device-plugin-ctr",
                                                       "image": "nvcr.io/nvidia/k8s-device-plugin:v0.17.0"}],
                                       "tolerations": [{"operator": "Exists"}]}}},
        "status": {"desiredNumberScheduled": nodes, "currentNumberScheduled": nodes, "numberReady": nodes,
                   "numberMisscheduled": 0},
    })
    for i in range(nodes):
        name = node_name(prefix, i, width)
        rack = rack_of[i]
        pos = members[rack].index(i)
        pool = "spare" if i in spare_idx else LABELS.job_pool_value
        obj = make_node(name, i, rack, pos, per_rack, pool, gpus_per_node, cluster.seed, node_images)
        if gpu_taint:  # the provider's own taint, as a real GPU node pool has it
            obj["spec"]["taints"] = [*(obj["spec"].get("taints") or []), dict(PROVIDER_GPU_TAINT)]
        node = store.create("Node", obj)
        cluster.health[name] = NodeHealth.healthy(gpus=gpus_per_node, node_index=i + 1)
        cluster.dmesg[name] = ["Linux version 6.8.0-sim (buildd@sim) #1 SMP"]
        for pod in system_pods(node, i, ds["metadata"]["uid"]):
            store.create("Pod", pod)
    for name, value, policy, description in PRIORITY_CLASSES:
        store.create("PriorityClass", priority_class(name, value, policy, description))
    for i in sorted(_pick(members, sessions, set(spare_idx))):
        store.create("Pod", make_session(node_name(prefix, i, width)))
    if training_job:  # as if created through the API: defaulted, its selector bound to its uid
        from remedy.sim.admission import default, fix_job_selector

        job = make_training_job(nodes - spares - sessions)
        default(cluster, "Job", job)
        job["metadata"]["uid"], job["metadata"]["generation"] = str(uuid.uuid4()), 1
        fix_job_selector(job)
        store.create("Job", job)

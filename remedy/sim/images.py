"""What a real node would do with a check pod before the check's own tool gets a say: the container's image must
hold the command (else containerd's StartError, exit 128), and a GPU check must be given GPUs (else the NVIDIA
runtime shows the container none and the tool finds nothing to test).

The simulator used to run a check by its `remedy.io/check` label alone, whatever the image, command or GPU
request; every gpu-remedy check then ran in the DCGM image (which has no `remedy probe`, `all_reduce_perf` or
`fio`) and requested no GPU, and nothing noticed. Images not listed here (the operator's own, gpu-remedy's)
are taken to hold whatever they are asked to run.
"""

from __future__ import annotations

from remedy.sim.index import gpu_request
from remedy.sim.runners import RunResult

# what every base image here has (Ubuntu's, and busybox's for fio's Alpine): shells, coreutils, util-linux
SHELLS = frozenset({"sh", "bash", "/bin/sh", "/bin/bash", "sleep", "cat", "echo", "env", "true", "timeout",
                    "nsenter", "chroot", "ls"})
# Third-party images whose contents are fixed: image name prefix -> executables the checks use from them.
KNOWN_IMAGES: dict[str, frozenset[str]] = {
    "nvcr.io/nvidia/cloud-native/dcgm:": frozenset({"dcgmi", "nv-hostengine", "nvidia-smi"}),
    "ghcr.io/coreweave/nccl-tests:": frozenset({
        "all_reduce_perf", "all_gather_perf", "broadcast_perf", "reduce_scatter_perf", "alltoall_perf",
        "sendrecv_perf", "mpirun", "ssh", "/usr/sbin/sshd", "nvidia-smi", "ibstat"}),
    "ljishen/fio": frozenset({"fio"}),
    "nvcr.io/nvidia/cuda:": frozenset({"nvidia-smi"}),  # injected by the NVIDIA container runtime
}
# Checks whose tool needs GPUs allocated (device plugin) to run at all, and what the tool says without them.
NO_GPU = {
    "dcgm-diag": (226, "Error: Unable to complete diagnostic for group 0. Return: (-24) No GPUs were found "
                       "in the group (nvidia.com/gpu requested: 0)"),
    "nccl": (1, "Cuda failure common.cu:1115 'no CUDA-capable device is detected'"),
    "stress": (1, "gpu-stress: error: no CUDA-capable device is detected"),
}
# Checks that read GPUs without exercising them: a GPU request or NVIDIA_VISIBLE_DEVICES=all will do.
NO_GPU_VIEW = {
    "nvml-probe": (1, '{"verdict": "error", "error": "NVML: no GPU visible in this container (nvidia.com/gpu '
                      'not requested, NVIDIA_VISIBLE_DEVICES not set)"}'),
    "nvidia-smi": (9, "No devices were found"),
}


def _container(pod: dict) -> dict:
    return ((pod.get("spec") or {}).get("containers") or [{}])[0]


def _executable(c: dict) -> str | None:
    words = [str(w) for w in (c.get("command") or []) + (c.get("args") or [])]
    return words[0] if words else None


def sees_all_gpus(c: dict) -> bool:
    return any(e.get("name") == "NVIDIA_VISIBLE_DEVICES" and e.get("value") == "all" for e in c.get("env") or [])


def kubelet_refusal(pod: dict, check: str | None) -> RunResult | None:
    """The run a real node would give this pod instead of the check's (None: the check runs)."""
    c = _container(pod)
    image, exe = c.get("image") or "", _executable(c)
    for prefix, holds in KNOWN_IMAGES.items():
        if image.startswith(prefix) and exe and exe not in holds and exe not in SHELLS:
            return RunResult(128, f'failed to create containerd task: failed to create shim task: OCI runtime '
                                  f'create failed: runc create failed: unable to start container process: exec: '
                                  f'"{exe}": executable file not found in $PATH: unknown ({image})', 0.5)
    gpus = gpu_request(pod.get("spec") or {})
    if check in NO_GPU and gpus == 0:
        code, line = NO_GPU[check]
        return RunResult(code, line, 1.0)
    if check in NO_GPU_VIEW and gpus == 0 and not sees_all_gpus(c):
        code, line = NO_GPU_VIEW[check]
        return RunResult(code, line, 1.0)
    return None

"""Job runners: what a simulated Job's pod "does" on its node, keyed by the pod-template label
`remedy.io/check`. A runner reads (and may change) the node's hidden health and returns a RunResult;
the controller shows its log lines over `seconds` of simulated time, then finishes the pod.

    register_runner("my-check", fn)   # fn(node_name, health, job, cluster) -> RunResult

Jobs without the label run `sleep`. Health-check runners (nvml-probe, dcgm-diag, nccl, stress, ib,
fio) are registered by remedy.sim.checks, imported at the bottom when present.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from remedy.sim.hardware import PCI_BUS, pci_bus_id  # noqa: F401  (runner modules import them from here)
from remedy.sim.health import NodeHealth

if TYPE_CHECKING:
    from remedy.sim.cluster import Cluster


@dataclass
class RunResult:
    exit_code: int
    log: str
    seconds: float = 1.0  # simulated run time; log lines appear evenly over it unless line_times is given
    line_times: list[float] | None = None  # simulated seconds after start at which each log line appears


Runner = Callable[[str, NodeHealth, dict, Any], RunResult]
RUNNERS: dict[str, Runner] = {}
DEFAULT_RUNNER = "sleep"


def register_runner(check: str, fn: Runner) -> None:
    """Register (or replace) the runner for pod-template label `remedy.io/check: <check>`."""
    if not check or not callable(fn):
        raise ValueError("register_runner needs a check name and a callable")
    RUNNERS[check] = fn


def get_runner(check: str | None) -> Runner | None:
    return RUNNERS.get(check or DEFAULT_RUNNER)


# -- helpers for runners: what the Job asked for --
def job_container(job: dict) -> dict:
    containers = job.get("spec", {}).get("template", {}).get("spec", {}).get("containers") or [{}]
    return containers[0]


def job_args(job: dict) -> list[str]:
    """The container's command and args; a `bash -c SCRIPT` adds the script's words, so flags inside a launcher
    script (the multi-node NCCL sweep's mpirun line) are read like plain arguments."""
    import shlex

    c = job_container(job)
    args = [str(a) for a in (c.get("command") or []) + (c.get("args") or [])]
    if len(args) >= 3 and args[0] in ("bash", "sh", "/bin/bash", "/bin/sh") and args[1] == "-c":
        try:
            args += shlex.split(args[2])
        except ValueError:
            pass
    return args


def job_env(job: dict) -> dict[str, str]:
    return {e["name"]: str(e.get("value", "")) for e in job_container(job).get("env") or [] if "name" in e}


def arg_value(args: list[str], *flags: str) -> str | None:
    """Value after any of `flags` (`-i 3`, `--id=3`)."""
    for i, a in enumerate(args):
        for f in flags:
            if a == f and i + 1 < len(args):
                return args[i + 1]
            if a.startswith(f + "="):
                return a.split("=", 1)[1]
    return None


def job_gpu_index(job: dict) -> int | None:
    """GPU index a fix Job targets: env GPU_INDEX/GPU, else `-i N`/`--id N`/`--gpu N` in its args."""
    env = job_env(job)
    raw = env.get("GPU_INDEX") or env.get("GPU") or arg_value(job_args(job), "-i", "--id", "--gpu")
    if raw in (None, "", "all"):
        return None
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"GPU index {raw!r} in Job {job['metadata'].get('name')} is not an integer") from None


def job_seconds(job: dict, default: float) -> float:
    env = job_env(job)
    raw = env.get("SECONDS") or env.get("DURATION_SECONDS")
    if raw is None:
        args = job_args(job)
        if len(args) >= 2 and args[0] == "sleep":
            raw = args[1]
    try:
        return float(raw) if raw is not None else default
    except ValueError:
        return default


# -- built-in runners --
def run_sleep(node: str, health: NodeHealth, job: dict, cluster: Cluster) -> RunResult:
    seconds = job_seconds(job, 1.0)
    return RunResult(0, f"sleeping {seconds:g}s on {node}\ndone", seconds)


def run_gpu_reset(node: str, health: NodeHealth, job: dict, cluster: Cluster) -> RunResult:
    """`nvidia-smi -r -i N`: clears the GPU's pending faults when it can (reset_clears), else exit 1."""
    try:
        index = job_gpu_index(job)
    except ValueError as exc:
        return RunResult(2, str(exc), 1.0)
    targets = health.gpus if index is None else [g for g in health.gpus if g.index == index]
    if not targets:
        return RunResult(2, f"No devices were found with index {index} on {node}", 1.0)
    lines, code = [], 0
    for gpu in targets:
        bus = pci_bus_id(gpu.index)
        if gpu.fallen_off_bus:
            lines.append(f"Unable to determine the device handle for GPU{bus}: Unknown Error")
            lines.append("GPU is lost. Reboot the system to recover this GPU")
            code = 1
        elif not gpu.reset_clears:
            lines.append(f"GPU {bus} could not be reset: the GPU reset did not clear pending errors.")
            code = 1
        else:
            gpu.clear_after_reset()
            lines.append(f"GPU {bus} was successfully reset.")
    if code == 0:
        lines.append("All done.")
    return RunResult(code, "\n".join(lines), 20.0)


def run_reboot(node: str, health: NodeHealth, job: dict, cluster: Cluster) -> RunResult:
    """Node reboot: NotReady for REBOOT_SECONDS (default 180 s simulated), then Ready with faults cleared."""
    seconds = float(job_env(job).get("REBOOT_SECONDS", "180"))
    cluster.reboot_node(node, seconds)
    return RunResult(0, f"Rebooting {node} (back in ~{seconds:g}s)", 1.0)


def run_smoke_test(node: str, health: NodeHealth, job: dict, cluster: Cluster) -> RunResult:
    """A few training steps over the Job's node set; any divergent node turns the loss to nan everywhere."""
    env = job_env(job)
    steps = int(env.get("STEPS", "5"))
    step_seconds = float(env.get("STEP_SECONDS", "2"))
    from remedy.sim.jobs import job_nodes

    peers = job_nodes(cluster, job) or [node]  # the nodes the Job's pods run on
    divergent = any(cluster.health[p].divergent for p in peers if p in cluster.health)
    rng = random.Random(f"{job['metadata'].get('uid')}")
    lines = [f"smoke-test: {len(peers)} node(s), {steps} steps"]
    loss = 10.5
    for step in range(1, steps + 1):
        loss *= 0.93 + rng.random() * 0.02
        lines.append(f"step {step} loss: {'nan' if divergent and step >= 2 else f'{loss:.4f}'}")
    lines.append("smoke-test: FAILED (loss is nan)" if divergent else "smoke-test: PASSED")
    times = [0.0] + [step_seconds * s for s in range(1, steps + 1)] + [step_seconds * steps]
    return RunResult(1 if divergent else 0, "\n".join(lines), step_seconds * steps + 0.5, times)


register_runner("sleep", run_sleep)
register_runner("gpu-reset", run_gpu_reset)
register_runner("reboot", run_reboot)
register_runner("smoke-test", run_smoke_test)


def spread_times(n: int, seconds: float) -> list[float]:
    """Default log timing: lines evenly over the run, the last at its end."""
    if n <= 0:
        return []
    return [seconds * (i + 1) / n if n > 1 else seconds for i in range(n)] if seconds > 0 else [0.0] * n


try:  # the health-check runners, when that module exists
    import remedy.sim.checks  # noqa: F401,E402
except ModuleNotFoundError as exc:
    if exc.name != "remedy.sim.checks":
        raise

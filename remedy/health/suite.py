"""Which checks a validation level runs, as Job specs the burn-in / spare-cycle flows render.

    quick     minutes   nvml probe, dcgmi diag -r 1, ibstat + IB counters
    standard  ~30 min   quick + dcgmi diag -r 2, single-node NCCL sweep, fio checkpoint write/read
    extended  hours     standard + dcgmi diag -r 3|4, GPU stress, multi-node NCCL sweep

Each spec's `check` is the `remedy.io/check` label value of its Job; `parse_check_output` turns that
Job's log into a CheckResult, so the flow never needs to know a tool's format.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from remedy.health.result import CheckOutputError, CheckResult
from remedy.settings.health import HealthCheckSettings

# Prints ibstat, then each error counter as `<sysfs path>: <value>` (read by remedy.health.ib).
IB_SCRIPT = (
    "ibstat && for f in /sys/class/infiniband/*/ports/*/counters/"
    "{symbol_error,link_downed,link_error_recovery,port_rcv_errors}; do echo \"$f: $(cat \"$f\")\"; done"
)
# Checkpoint-shaped I/O: 4 writers then 4 readers of 5 GiB each (~20 GB per node, seed 002).
FIO_ARGS = (
    "fio", "--output-format=json", "--directory=/checkpoints/.remedy-fio", "--size=5g", "--bs=4m",
    "--direct=1", "--ioengine=libaio", "--iodepth=16", "--numjobs=4", "--filename_format=ckpt.$jobnum",
    "--name=ckpt-write", "--rw=write", "--name=ckpt-read", "--rw=read", "--stonewall",
)


# The multi-node sweep, one Indexed Job over the group (remedy.health.jobs.check_job), host network: rank 0
# (JOB_COMPLETION_INDEX 0) runs all_reduce_perf on every GPU of the group through mpirun, which reaches the other
# ranks' sshd on port 2222 by node name (the nccl-tests image has Open MPI and OpenSSH; the key comes from the
# operator's Secret mounted at ~/.ssh, docs/operations.md); then it tells them they may exit.
MULTI_NODE_NCCL_SCRIPT = (
    'if [ "$JOB_COMPLETION_INDEX" = 0 ]; then '
    'H=$(echo "$NCCL_GROUP_HOSTS" | sed "s/\\([^,]*\\)/\\1:$GPUS_PER_NODE/g"); '
    'mpirun --allow-run-as-root -np $((NCCL_GROUP_SIZE * GPUS_PER_NODE)) -H "$H" -mca plm_rsh_args "-p 2222" '
    'all_reduce_perf -b 8 -e 2G -f 2 -g 1; rc=$?; '
    'for h in $(echo "$NCCL_GROUP_HOSTS" | tr , " "); do ssh -p 2222 "$h" touch /tmp/remedy-nccl-done; done; '
    'exit $rc; '
    'else /usr/sbin/sshd -p 2222 && until [ -f /tmp/remedy-nccl-done ]; do sleep 2; done; fi'
)


class Level(StrEnum):
    QUICK = "quick"
    STANDARD = "standard"
    EXTENDED = "extended"


@dataclass(frozen=True)
class CheckSpec:
    id: str  # unique within a suite, e.g. "dcgm-diag-r2"
    check: str  # remedy.io/check label value: nvml-probe | dcgm-diag | nccl | stress | ib | fio
    command: tuple[str, ...]  # what the Job's container runs
    timeout_seconds: int
    privileged: bool  # needs host devices / sysfs beyond the GPU device plugin
    multi_node: bool = False  # runs across a group of nodes (one launcher Job)
    level: Level = Level.QUICK


def _dcgm(level: int, timeout: int, suite_level: Level) -> CheckSpec:
    return CheckSpec(f"dcgm-diag-r{level}", "dcgm-diag", ("dcgmi", "diag", "-r", str(level), "-j"), timeout,
                     privileged=True, level=suite_level)


def suite_for(level: Level | str, settings: HealthCheckSettings | None = None) -> list[CheckSpec]:
    """The checks to run for a validation level, cheapest first."""
    try:
        level = Level(level)
    except ValueError:
        raise ValueError(f"unknown health-check level {level!r} (use quick, standard or extended)") from None
    s = settings or HealthCheckSettings()
    gpus = str(s.gpus_per_node)
    sweep = ("all_reduce_perf", "-b", "8", "-e", "2G", "-f", "2", "-g", gpus)
    probe = ("remedy", "probe", "--json", "--expect-gpus", gpus) + (("--expect-model", s.gpu_model) if s.gpu_model else ())
    quick = [
        CheckSpec("nvml-probe", "nvml-probe", probe, 120, privileged=False),
        _dcgm(1, 600, Level.QUICK),
        CheckSpec("ib", "ib", ("bash", "-c", IB_SCRIPT), 60, privileged=True),
    ]
    standard = [
        _dcgm(2, 1800, Level.STANDARD),
        CheckSpec("nccl-single-node", "nccl", sweep, 900, privileged=False, level=Level.STANDARD),
        CheckSpec("fio", "fio", FIO_ARGS, 1200, privileged=False, level=Level.STANDARD),
    ]
    extended = [
        _dcgm(s.extended_dcgm_level, 4 * 3600 if s.extended_dcgm_level == 4 else 2 * 3600, Level.EXTENDED),
        CheckSpec("stress", "stress", ("gpu-stress", "--seconds", str(s.stress_seconds), "--json"),
                  s.stress_seconds + 600, privileged=False, level=Level.EXTENDED),
        CheckSpec("nccl-multi-node", "nccl", ("bash", "-c", MULTI_NODE_NCCL_SCRIPT),
                  1800, privileged=False, multi_node=True, level=Level.EXTENDED),
    ]
    return {Level.QUICK: quick, Level.STANDARD: quick + standard, Level.EXTENDED: quick + standard + extended}[level]


def parse_check_output(check: str, text: str, settings: HealthCheckSettings | None = None, *,
                       gpu_model: str | None = None, fabric: str | None = None) -> CheckResult:
    """A check Job's log → its judged CheckResult, by the Job's `remedy.io/check` label value."""
    from remedy.health import dcgm, ib, load, nccl, smi

    s = settings or HealthCheckSettings()
    if check == "dcgm-diag":
        return dcgm.check_dcgm_diag(text, warn_fails=s.dcgm_warn_fails)
    if check == "nccl":
        return nccl.check_nccl(text, s.nccl_criteria_for(gpu_model, fabric), require_all_sizes=s.nccl_require_all_sizes)
    if check == "nvidia-smi":
        return smi.check_nvidia_smi(text, s, expect_model=gpu_model)
    if check == "ib":
        return ib.check_ib(text, s.ib, expected_ports=s.ib_ports_per_node)
    if check == "stress":
        return load.check_stress(text, s.stress, s.probe, expect_gpus=s.gpus_per_node)
    if check == "fio":
        return load.check_fio(text, s.fio)
    if check == "nvml-probe":
        return probe_output_result(text)
    raise CheckOutputError(f"unknown check {check!r} (known: {', '.join(CHECKS)})")


CHECKS = ("nvml-probe", "dcgm-diag", "nccl", "nvidia-smi", "ib", "stress", "fio")


def probe_output_result(text: str) -> CheckResult:
    """Read `remedy probe --json` output (a ProbeReport dict, or {"verdict": "error", "error": ...})."""
    import json

    from remedy.health.result import Verdict, tail

    start = text.find("{")
    try:
        doc = json.loads(text[start : text.rfind("}") + 1]) if start >= 0 else None
    except json.JSONDecodeError as exc:
        raise CheckOutputError(f"nvml-probe output is not valid JSON: {exc}") from None
    if not isinstance(doc, dict) or "verdict" not in doc:
        raise CheckOutputError("nvml-probe output has no JSON report with a 'verdict'")
    if doc["verdict"] == "error":
        return CheckResult("nvml-probe", Verdict.FAIL, reasons=[f"cannot probe: {doc.get('error', '?')}"], raw_tail=tail(text))
    findings = doc.get("findings", [])
    reasons = [f"{'warning: ' if f['verdict'] == 'warn' else ''}{f['subject']}: {f.get('message') or f['item']}"
               for f in findings if f["verdict"] != "pass"]
    return CheckResult(
        check="nvml-probe",
        verdict=Verdict(doc["verdict"]),
        measurements={"driver_version": doc.get("driver_version", ""), "gpus": doc.get("gpus", []), "xids": doc.get("xids", [])},
        thresholds={f"{f['subject']}/{f['item']}": f["threshold"] for f in findings if f["threshold"] != "not configured"},
        reasons=reasons,
        raw_tail=tail(text, 5),
    )

"""Health checks: read what validation tools print (dcgmi diag, all_reduce_perf, nvidia-smi -q, ibstat,
fio, the stress Job) and judge it against `HealthCheckSettings`. Prefect-free; the burn-in and
spare-cycle flows run `suite_for(level)` as Jobs and feed each Job's log to `parse_check_output`."""

from remedy.health.result import CheckOutputError, CheckResult, Verdict, worst
from remedy.health.suite import CheckSpec, Level, parse_check_output, suite_for

__all__ = ["CheckOutputError", "CheckResult", "CheckSpec", "Level", "Verdict", "parse_check_output", "suite_for", "worst"]

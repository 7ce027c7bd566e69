"""Health checks on a node as Kubernetes Jobs: run the level's suite, judge each check's output, record it.

The suite (which checks, commands, timeouts) is `remedy.health.suite_for`; the verdict of each output is
`remedy.health.parse_check_output`. Here: run the Jobs (concurrently, one node's checks in sequence), write the
validation to the ledger, and keep a progress artifact current while a long suite runs.
"""

from __future__ import annotations

import uuid
from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from remedy import runtime
from remedy.detect.reconfirm import Reconfirmation
from remedy.domain.durations import human_duration
from remedy.domain.names import object_name
from remedy.health import CheckOutputError, parse_check_output, suite_for
from remedy.health.jobs import check_job
from remedy.health.results import Validation
from tasks.ledger import requester
from tasks.retry import transient_only


def run_check(node: str, spec, gpu_model: str | None, dry_run: bool) -> dict[str, Any]:
    """One check Job on one node → its judged result (a Job that did not finish is a fail with the reason)."""
    name = object_name(spec.id, node, uuid.uuid4().hex[:5])
    job = runtime.cluster(dry_run).run_node_job(check_job(spec, name=name, nodes=[node],
                                                          settings=runtime.settings().health))
    base = {"id": spec.id, "check": spec.check, "job": name}
    return base | judge_job(spec, job, gpu_model)


def judge_job(spec, job, gpu_model: str | None) -> dict[str, Any]:
    """A finished check Job → verdict, reasons, measurements (a Job that timed out fails, whatever it printed)."""
    if job.dry_run:
        return {"verdict": "planned", "reasons": []}
    settings = runtime.settings()
    try:
        result = parse_check_output(spec.check, job.logs, settings.health, gpu_model=gpu_model)
        verdict, reasons, measurements = result.verdict.value, list(result.reasons), result.measurements
    except CheckOutputError as exc:
        verdict, reasons, measurements = "fail", [f"unreadable output: {exc}"], {}
    if job.phase == "Timeout":
        verdict, reasons = "fail", [f"Job did not finish within {human_duration(spec.timeout_seconds)}"] + reasons
    return {"verdict": verdict, "reasons": reasons, "seconds": round(job.seconds, 2),
            "measurements": jsonable(measurements)}


def jsonable(value: Any) -> Any:
    """Measurements as plain JSON values for the ledger (numpy scalars, enums and the like become strings)."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)


@task(name="validate_node", task_run_name="validate-{node}-{level}", cache_policy=NO_CACHE,
      timeout_seconds=6 * 3600, retries=1, retry_delay_seconds=5, retry_condition_fn=transient_only)
def validate_node(node: str, level: str, dry_run: bool, incident_id: int | None = None) -> Validation:
    """Run the level's single-node checks on `node`; record the validation (pass = every check passed)."""
    settings = runtime.settings()
    gpu_model = runtime.cluster().get_node(node).gpu_model or None
    results = [run_check(node, spec, gpu_model, dry_run)
               for spec in suite_for(level, settings.health) if not spec.multi_node]
    failed = [r for r in results if r["verdict"] == "fail"]
    passed = not failed
    summary = "; ".join(f"{r['id']}: {', '.join(r['reasons']) or r['verdict']}" for r in failed) or "all checks passed"
    if not dry_run:
        from tasks.leases import fence

        runtime.ledger().record_validation(node, level=level, passed=passed, requested_by=requester(),
                                           summary={"checks": results}, incident_id=incident_id,
                                           fence=fence(incident_id))
    return Validation(node, level, passed, summary, tuple(results))


@task(name="reconfirm_fault", task_run_name="reconfirm-{node}", cache_policy=NO_CACHE, timeout_seconds=3600)
def reconfirm_fault(node: str, incident_id: int, signal: str, dry_run: bool) -> Reconfirmation:
    """Just before anything destructive: is the alert still firing, does an independent NVML probe still fail, and
    is what we saw a monitor failure? remedy.detect.reconfirm decides; this runs the probe and reads the ledger."""
    import dataclasses
    import time

    from remedy.detect.reconfirm import PROBE_SEES, ProbeLook, reconfirm

    settings = runtime.settings()
    incident = runtime.ledger().get_incident(incident_id)
    evidence = incident.evidence or {}
    texts = [str(evidence.get("raw") or ""), incident.detail or ""]
    first = probe = None
    if signal in PROBE_SEES and not dry_run:
        spec = next(s for s in suite_for("quick", settings.health) if s.check == "nvml-probe")
        spec = dataclasses.replace(spec, id="reconfirm-probe", timeout_seconds=settings.reconfirm.probe_timeout_seconds)
        gpu_model = runtime.cluster().get_node(node).gpu_model or None

        def look() -> ProbeLook:
            r = run_check(node, spec, gpu_model, dry_run)
            return ProbeLook(passed=r["verdict"] in ("pass", "warn"), reasons=tuple(r["reasons"]))

        probe = look()
        if probe.saw_no_gpus:  # the driver may still be loading after a boot: look once more
            first = probe
            time.sleep(settings.reconfirm.recheck_after_seconds)
            probe = look()
    return reconfirm(signal, alert_cleared=bool(evidence.get("alert_cleared_at")), probe=probe, first_probe=first,
                     texts=texts)

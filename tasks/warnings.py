"""Tasks of the early-warning scan: read the detectors' inputs from Prometheus, list the job's nodes, post warnings
to Alertmanager. One side effect each; the detectors themselves are domain code (remedy.warn.scan)."""

from __future__ import annotations

from datetime import datetime, timedelta

import httpx
from prefect import task
from prefect.cache_policies import NO_CACHE

from remedy import runtime
from remedy.audit.prometheus import PrometheusUnavailable
from remedy.errors import RemedyError
from remedy.warn.scan import IB_STATE_QUERY, ScanInputs


class AlertmanagerUnavailable(RemedyError):
    """Alertmanager, or the receiver standing in for it, did not take the warnings (connection refused, timeout,
    HTTP 5xx): worth a retry."""


def _transient(task, task_run, state) -> bool:  # Prefect's retry_condition_fn signature
    try:
        state.result()
    except (PrometheusUnavailable, AlertmanagerUnavailable):
        return True
    except Exception:
        return False
    return False


@task(name="list_job_nodes", task_run_name="list-job-nodes", cache_policy=NO_CACHE, retries=2,
      retry_delay_seconds=[2, 10])  # fmt: skip
def list_job_nodes() -> list[str]:
    """The nodes that run a pod of the training job: the only peers a node is compared with."""
    work = runtime.settings().workload
    return runtime.cluster().workload_nodes(work.namespace, work.job)


@task(name="read_warning_inputs", task_run_name="read-warning-inputs", cache_policy=NO_CACHE, retries=2,
      retry_delay_seconds=[2, 10], retry_condition_fn=_transient)  # fmt: skip
def read_warning_inputs(prometheus_url: str, job: str, job_nodes: list[str], now: datetime) -> ScanInputs:
    """Range queries over the scan window: every peer metric, the port states, the step times if configured."""
    from remedy.audit.prometheus import PrometheusSource

    scan = runtime.settings().lemon.early_warning.scan
    start = now - timedelta(minutes=scan.window_minutes)
    src = PrometheusSource(prometheus_url)
    try:
        peers = {m: src.query_range(q, start, now, scan.step_seconds) for m, q in scan.peer_queries.items()}
        ib = src.query_range(IB_STATE_QUERY, start, now, scan.ib_step_seconds)
        steps = src.query_range(scan.step_time_query, start, now, scan.step_seconds) if scan.step_time_query else None
    finally:
        src.close()
    return ScanInputs(job=job, job_nodes=job_nodes, peer_series=peers, ib_states=ib, step_times=steps)


@task(name="post_warnings", task_run_name="post-{n}-warnings", cache_policy=NO_CACHE, retries=2,
      retry_delay_seconds=[2, 10], retry_condition_fn=_transient)  # fmt: skip
def post_warnings(alertmanager_url: str, alerts: list[dict], n: int) -> int:
    """POST the warnings to Alertmanager's v2 API (as Prometheus posts its alerts); returns how many."""
    url = alertmanager_url.rstrip("/") + "/api/v2/alerts"
    return _post(url, alerts, {}, f"Alertmanager at {alertmanager_url}", len(alerts))


@task(name="post_warnings_to_receiver", task_run_name="post-{n}-warnings-to-the-receiver", cache_policy=NO_CACHE,
      retries=2, retry_delay_seconds=[2, 10], retry_condition_fn=_transient)  # fmt: skip
def post_warnings_to_receiver(receiver_url: str, alerts: list[dict], n: int) -> int:
    """No Alertmanager (the embedded stack): the warnings go straight to gpu-remedy's receiver, as the one webhook
    group Alertmanager would have sent, with the receiver's token. Grouping and silences do not apply on this path;
    the receiver's de-duplication does. Returns how many were posted."""
    token = runtime.settings().receiver.token.get_secret_value()
    body = {"version": "4", "receiver": "gpu-remedy", "status": "firing", "groupKey": "{}:{alertname=\"GpuEarlyWarning\"}",
            "groupLabels": {"alertname": "GpuEarlyWarning"}, "commonLabels": {}, "commonAnnotations": {},
            "externalURL": "", "truncatedAlerts": 0,
            "alerts": [a | {"status": "firing", "fingerprint": _fingerprint(a["labels"])} for a in alerts]}
    return _post(receiver_url, body, {"Authorization": f"Bearer {token}"} if token else {},
                 f"the receiver at {receiver_url}", len(alerts))


def _post(url: str, payload, headers: dict[str, str], who: str, n: int) -> int:
    """POST the warnings; a dead or failing server is transient (the task retries it), a refusal is not: our payload
    or token is wrong, and the line says what the server said."""
    try:
        r = httpx.post(url, json=payload, timeout=10.0, headers=headers)
    except httpx.HTTPError as exc:
        raise AlertmanagerUnavailable(f"{who} did not answer: {exc}") from None
    if r.status_code >= 500:
        raise AlertmanagerUnavailable(f"{who} answered HTTP {r.status_code}")
    if r.status_code >= 400:
        raise RemedyError(f"{who} refused the warnings: HTTP {r.status_code} {r.text.strip()[:200]}")
    return n


def _fingerprint(labels: dict[str, str]) -> str:
    """A stable identity from the labels, as Alertmanager gives every alert one: the same finding is one alert."""
    import hashlib

    return hashlib.sha256(repr(sorted(labels.items())).encode()).hexdigest()[:16]


"""The alert an exporter + Alertmanager would raise for an injected fault, posted as Alertmanager's
webhook payload (version "4") to the cluster's `alert_url`. Posting never raises: the outcome is returned."""

from __future__ import annotations

import json
import logging
import urllib.error
import urllib.request
from datetime import UTC, datetime

log = logging.getLogger(__name__)

RECEIVER = "gpu-remedy"
EXTERNAL_URL = "http://alertmanager.sim.local:9093"
ZERO_TIME = "0001-01-01T00:00:00Z"


def _fnv64a(data: bytes) -> int:
    h = 0xCBF29CE484222325
    for b in data:
        h ^= b
        h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def fingerprint(labels: dict[str, str]) -> str:
    """Prometheus' label-set fingerprint (FNV-64a over sorted name, 0xff, value, 0xff), as Alertmanager shows it."""
    data = b"".join(k.encode() + b"\xff" + str(v).encode() + b"\xff" for k, v in sorted(labels.items()))
    return f"{_fnv64a(data):016x}"


def make_alert(labels: dict[str, str], annotations: dict[str, str], status: str = "firing",
               starts_at: str | None = None) -> dict:
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    return {
        "status": status,
        "labels": dict(labels),
        "annotations": dict(annotations),
        "startsAt": starts_at or now,
        "endsAt": now if status == "resolved" else ZERO_TIME,
        "generatorURL": f"http://prometheus.sim.local:9090/graph?g0.expr={labels.get('alertname', '')}",
        "fingerprint": fingerprint(labels),
    }


def webhook_payload(alerts: list[dict]) -> dict:
    """Alertmanager's webhook body for one group (grouped by alertname, like a default route)."""
    alertname = alerts[0]["labels"].get("alertname", "")
    common = {k: v for k, v in alerts[0]["labels"].items() if all(a["labels"].get(k) == v for a in alerts)}
    common_ann = {k: v for k, v in alerts[0]["annotations"].items()
                  if all(a["annotations"].get(k) == v for a in alerts)}
    return {
        "receiver": RECEIVER,
        "status": "firing" if any(a["status"] == "firing" for a in alerts) else "resolved",
        "alerts": alerts,
        "groupLabels": {"alertname": alertname},
        "commonLabels": common,
        "commonAnnotations": common_ann,
        "externalURL": EXTERNAL_URL,
        "version": "4",
        "groupKey": f'{{}}:{{alertname="{alertname}"}}',
        "truncatedAlerts": 0,
    }


def post(url: str | None, token: str | None, payload: dict, timeout: float = 3.0) -> dict:
    """POST the payload; returns {"posted": bool, "status": code, "error": text}."""
    if not url:
        return {"posted": False, "status": None, "error": "no alert_url configured"}
    req = urllib.request.Request(url, data=json.dumps(payload).encode(), method="POST",
                                 headers={"Content-Type": "application/json", "User-Agent": "Alertmanager/0.25.0"})
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return {"posted": True, "status": resp.status, "error": None}
    except urllib.error.HTTPError as exc:
        log.warning("alert webhook %s answered %s", url, exc.code)
        return {"posted": False, "status": exc.code, "error": f"HTTP {exc.code} from {url}"}
    except (urllib.error.URLError, OSError, ValueError) as exc:
        log.warning("alert webhook %s failed: %s", url, exc)
        return {"posted": False, "status": None, "error": f"cannot post to {url}: {exc}"}

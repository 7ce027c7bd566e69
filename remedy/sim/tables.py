"""Server-side `Table` output (Accept: application/json;as=Table;g=meta.k8s.io), so `kubectl get` prints the
same columns it prints against a real API server."""

from __future__ import annotations

from datetime import UTC, datetime

from remedy.sim.store import parse_iso


def age(ts: str | None) -> str:
    """Kubernetes' short human duration: 45s, 5m, 3h, 2d."""
    if not ts:
        return "<unknown>"
    try:
        secs = int((datetime.now(UTC) - parse_iso(ts)).total_seconds())
    except ValueError:
        return "<unknown>"
    secs = max(0, secs)
    if secs < 120:
        return f"{secs}s"
    if secs < 3600:
        return f"{secs // 60}m"
    if secs < 48 * 3600:
        return f"{secs // 3600}h"
    return f"{secs // 86400}d"


def _col(name: str, type_: str = "string", priority: int = 0, fmt: str = "", desc: str = "") -> dict:
    return {"name": name, "type": type_, "format": fmt, "description": desc or name, "priority": priority}


def _node_row(n: dict) -> list:
    labels = n["metadata"].get("labels") or {}
    ready = next((c.get("status") for c in n.get("status", {}).get("conditions") or [] if c.get("type") == "Ready"),
                 "Unknown")
    status = "Ready" if ready == "True" else "NotReady"
    if n.get("spec", {}).get("unschedulable"):
        status += ",SchedulingDisabled"
    roles = sorted(k.split("/", 1)[1] for k in labels if k.startswith("node-role.kubernetes.io/")) or ["<none>"]
    info = n.get("status", {}).get("nodeInfo") or {}
    addrs = {a.get("type"): a.get("address") for a in n.get("status", {}).get("addresses") or []}
    return [n["metadata"]["name"], status, ",".join(roles), age(n["metadata"].get("creationTimestamp")),
            info.get("kubeletVersion", ""), addrs.get("InternalIP", "<none>"), addrs.get("ExternalIP", "<none>"),
            info.get("osImage", ""), info.get("kernelVersion", ""), info.get("containerRuntimeVersion", "")]


NODE_COLUMNS = [_col("Name", desc="Name must be unique within a namespace."), _col("Status"), _col("Roles"),
                _col("Age"), _col("Version"), _col("Internal-IP", priority=1), _col("External-IP", priority=1),
                _col("OS-Image", priority=1), _col("Kernel-Version", priority=1),
                _col("Container-Runtime", priority=1)]


def _pod_row(p: dict) -> list:
    status = p.get("status") or {}
    containers = p.get("spec", {}).get("containers") or []
    cstats = status.get("containerStatuses") or []
    ready = sum(1 for c in cstats if c.get("ready"))
    restarts = sum(int(c.get("restartCount", 0)) for c in cstats)
    phase = status.get("phase", "Pending")
    reason = phase
    for c in cstats:
        term = (c.get("state") or {}).get("terminated")
        if term:
            reason = "Completed" if term.get("exitCode") == 0 else term.get("reason", "Error")
    if p["metadata"].get("deletionTimestamp"):
        reason = "Terminating"
    return [p["metadata"]["name"], f"{ready}/{len(containers)}", reason, restarts,
            age(p["metadata"].get("creationTimestamp")), status.get("podIP", "<none>"),
            p.get("spec", {}).get("nodeName", "<none>"), "<none>", "<none>"]


POD_COLUMNS = [_col("Name"), _col("Ready"), _col("Status"), _col("Restarts", "string"), _col("Age"),
               _col("IP", priority=1), _col("Node", priority=1), _col("Nominated Node", priority=1),
               _col("Readiness Gates", priority=1)]


def _event_row(e: dict) -> list:
    obj = e.get("involvedObject") or {}
    last = e.get("lastTimestamp") or e.get("eventTime") or e["metadata"].get("creationTimestamp")
    source = (e.get("source") or {}).get("component", "") or e.get("reportingComponent", "")
    return [age(last), e.get("type", ""), e.get("reason", ""), f"{obj.get('kind', '').lower()}/{obj.get('name', '')}",
            obj.get("fieldPath", ""), source, e.get("message", ""), age(e.get("firstTimestamp") or last),
            int(e.get("count", 1) or 1), e["metadata"]["name"]]


EVENT_COLUMNS = [_col("Last Seen"), _col("Type"), _col("Reason"), _col("Object"), _col("Subobject", priority=1),
                 _col("Source", priority=1), _col("Message"), _col("First Seen", priority=1),
                 _col("Count", "integer", priority=1), _col("Name", priority=1)]


def _job_row(j: dict) -> list:
    st = j.get("status") or {}
    conds = {c.get("type"): c.get("status") for c in st.get("conditions") or []}
    status = "Complete" if conds.get("Complete") == "True" else "Failed" if conds.get("Failed") == "True" else "Running"
    completions = j.get("spec", {}).get("completions") or 1
    return [j["metadata"]["name"], status, f"{st.get('succeeded', 0)}/{completions}", "",
            age(j["metadata"].get("creationTimestamp"))]


JOB_COLUMNS = [_col("Name"), _col("Status"), _col("Completions"), _col("Duration"), _col("Age")]


def _pdb_row(p: dict) -> list:
    spec, st = p.get("spec") or {}, p.get("status") or {}
    return [p["metadata"]["name"], str(spec.get("minAvailable", "N/A")), str(spec.get("maxUnavailable", "N/A")),
            int(st.get("disruptionsAllowed", 0)), age(p["metadata"].get("creationTimestamp"))]


PDB_COLUMNS = [_col("Name"), _col("Min Available"), _col("Max Unavailable"), _col("Allowed Disruptions", "integer"),
               _col("Age")]


def _default_row(o: dict) -> list:
    return [o["metadata"]["name"], age(o["metadata"].get("creationTimestamp"))]


DEFAULT_COLUMNS = [_col("Name"), _col("Age")]
ROWS = {"Node": (NODE_COLUMNS, _node_row), "Pod": (POD_COLUMNS, _pod_row), "Event": (EVENT_COLUMNS, _event_row),
        "Job": (JOB_COLUMNS, _job_row), "PodDisruptionBudget": (PDB_COLUMNS, _pdb_row)}


def table(kind: str, objects: list[dict], resource_version: str, cont: str = "", include: str = "Metadata") -> dict:
    columns, row = ROWS.get(kind, (DEFAULT_COLUMNS, _default_row))
    rows = []
    for o in objects:
        r = {"cells": row(o)}
        if include == "Object":
            r["object"] = o
        elif include != "None":
            r["object"] = {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": o["metadata"]}
        rows.append(r)
    meta = {"resourceVersion": resource_version}
    if cont:
        meta["continue"] = cont
    return {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": meta, "columnDefinitions": columns,
            "rows": rows}

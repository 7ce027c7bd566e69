"""Label and field selectors with the real API server's grammar and its error for unsupported fields."""

from __future__ import annotations

import re
from collections.abc import Callable

from remedy.sim.store import bad_request

Requirement = Callable[[dict], bool]

_KEY = r"[A-Za-z0-9]([-A-Za-z0-9_./]*[A-Za-z0-9])?"
_SET_RE = re.compile(rf"^\s*({_KEY})\s+(in|notin)\s*\(([^)]*)\)\s*$")
_OP_RE = re.compile(rf"^\s*({_KEY})\s*(==|!=|=)\s*([-A-Za-z0-9_.]*)\s*$")
_EXISTS_RE = re.compile(rf"^\s*(!?)\s*({_KEY})\s*$")


def _split_top_level(text: str) -> list[str]:
    """Split on commas that are not inside `in (...)` parentheses."""
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return [p for p in parts if p.strip()]


def parse_label_selector(text: str | None) -> Callable[[dict], bool]:
    """`a=b,c!=d,e in (x,y),f notin (z),g,!h` → predicate over a labels dict."""
    if not text or not text.strip():
        return lambda labels: True
    reqs: list[Requirement] = []
    for part in _split_top_level(text):
        m = _SET_RE.match(part)
        if m:
            key, op = m.group(1), m.group(3)
            values = {v.strip() for v in m.group(4).split(",") if v.strip()}
            if op == "in":
                reqs.append(lambda labels, k=key, vs=values: labels.get(k) in vs)
            else:
                reqs.append(lambda labels, k=key, vs=values: labels.get(k) not in vs)
            continue
        m = _OP_RE.match(part)
        if m:
            key, op, value = m.group(1), m.group(3), m.group(4)
            if op == "!=":
                reqs.append(lambda labels, k=key, v=value: labels.get(k) != v)
            else:
                reqs.append(lambda labels, k=key, v=value: k in labels and labels[k] == v)
            continue
        m = _EXISTS_RE.match(part)
        if m:
            key = m.group(2)
            if m.group(1):
                reqs.append(lambda labels, k=key: k not in labels)
            else:
                reqs.append(lambda labels, k=key: k in labels)
            continue
        raise bad_request(f"unable to parse requirement: {part.strip()!r} in labelSelector {text!r}")
    return lambda labels: all(r(labels) for r in reqs)


# Fields each kind accepts in fieldSelector (metadata.name/namespace always), as the real server does.
FIELDS = {
    "Pod": ("spec.nodeName", "spec.restartPolicy", "spec.schedulerName", "spec.serviceAccountName",
            "status.phase", "status.podIP", "status.nominatedNodeName"),
    "Node": ("spec.unschedulable",),
    "Event": ("involvedObject.kind", "involvedObject.namespace", "involvedObject.name", "involvedObject.uid",
              "involvedObject.apiVersion", "involvedObject.resourceVersion", "involvedObject.fieldPath",
              "reason", "reportingComponent", "source", "type"),
    "Namespace": ("status.phase",),
    "Job": ("status.successful",),
}


def _getter(path: str):
    """A fast accessor for one selectable field, rendered as the string the selector compares."""
    if path == "source":
        return lambda o: (o.get("source") or {}).get("component", "")
    if path == "status.successful":
        return lambda o: str((o.get("status") or {}).get("succeeded", 0))
    parts = path.split(".")
    missing = "false" if path == "spec.unschedulable" else ""

    def get(o: dict) -> str:
        cur = o
        for part in parts:
            cur = cur.get(part) if isinstance(cur, dict) else None
            if cur is None:
                return missing
        if isinstance(cur, bool):
            return "true" if cur else "false"
        return str(cur)

    return get


class FieldSelector:
    """A parsed fieldSelector: `match(obj)`, plus `equals` (field -> value) for index lookups."""

    def __init__(self, reqs: list[tuple[str, bool, str]]) -> None:
        self.reqs = [(_getter(f), eq, v) for f, eq, v in reqs]
        self.equals = {f: v for f, eq, v in reqs if eq}

    def match(self, obj: dict) -> bool:
        for get, eq, value in self.reqs:
            if (get(obj) == value) != eq:
                return False
        return True

    __call__ = match


def parse_field_selector(text: str | None, kind: str) -> FieldSelector:
    allowed = ("metadata.name", "metadata.namespace") + FIELDS.get(kind, ())
    reqs = []
    for part in (text or "").split(","):
        if not part.strip():
            continue
        m = re.match(r"^\s*([A-Za-z.]+)\s*(==|!=|=)\s*(.*?)\s*$", part)
        if not m:
            raise bad_request(f"invalid selector: {part!r}; can't understand {part!r}")
        field, op, value = m.groups()
        if field not in allowed:
            raise bad_request(f'"{field}" is not a known field selector: only "{", ".join(allowed)}"')
        reqs.append((field, op != "!=", value))
    return FieldSelector(reqs)

"""`dcgmi diag -r 1|2|3|4 -j` JSON: per-test, per-GPU results for DCGM 3.x and 4.x layouts.

DCGM 3.x: {"DCGM GPU Diagnostic": {"version", "Driver Version Detected", "test_categories": [
              {"category", "tests": [{"name", "results": [{"gpu_id"|"gpu_ids", "status", "info", "warnings"}]}]}]}}
DCGM 4.x: {"DCGM Diagnostic": {"test_categories": [... results with "entity_group", "entity_id", "status",
              "info": [..], "warnings": [{"warning", "error_id", "error_severity"}]} ...]},
           "entity_groups": [...], "metadata": {"version", "Driver Version Detected"}}
Some 4.x builds print the tests flat (`"tests": [{"name", "results": [... "errors": [{"error", "error_id"}]]}]`);
that is read too. Status is Pass / Fail / Warn / Skip (any case). Any Fail fails the check.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from remedy.health.result import CheckOutputError, CheckResult, Judgement, tail

CHECK = "dcgm-diag"
_STATUSES = {"pass", "fail", "warn", "skip", "not run"}


@dataclass
class DcgmTestResult:
    test: str
    category: str
    status: str  # pass | fail | warn | skip | not run
    entity: str  # "GPU 3", "all" when the result is not per entity
    messages: list[str] = field(default_factory=list)  # warnings/errors first, then info


@dataclass
class DcgmDiag:
    layout: str  # "dcgm3" | "dcgm4"
    dcgm_version: str = ""
    driver_version: str = ""
    results: list[DcgmTestResult] = field(default_factory=list)

    def failures(self) -> list[DcgmTestResult]:
        return [r for r in self.results if r.status == "fail"]


def _texts(value: Any, keys: tuple[str, ...] = ("warning", "error", "message", "msg")) -> list[str]:
    if value is None or value == "":
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [t for v in value for t in _texts(v, keys)]
    if isinstance(value, dict):
        for k in keys:
            if k in value:
                text = str(value[k])
                return [f"{text} (error_id {value['error_id']})" if "error_id" in value else text]
        return [json.dumps(value, sort_keys=True)]
    return [str(value)]


def _entity(result: dict) -> str:
    if "entity_id" in result:
        return f"{result.get('entity_group', 'GPU')} {result['entity_id']}"
    for key in ("gpu_id", "gpu_ids"):
        if key in result:
            return f"GPU {result[key]}"
    return "all"


def _tests(root: dict) -> list[tuple[str, dict]]:
    out: list[tuple[str, dict]] = []
    for cat in root.get("test_categories") or []:
        for t in cat.get("tests") or []:
            out.append((str(cat.get("category", "")), t))
    for t in root.get("tests") or []:
        out.append((str(t.get("category", "")), t))
    return out


def parse_dcgm_diag(text: str) -> DcgmDiag:
    """Parse dcgmi diag JSON (3.x or 4.x layout); raise CheckOutputError naming what is missing."""
    # dcgmi may print a banner before the JSON; take the outermost object.
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end < start:
        raise CheckOutputError("dcgm diag output has no JSON object (was it run with -j?)")
    try:
        doc = json.loads(text[start : end + 1])
    except json.JSONDecodeError as exc:
        raise CheckOutputError(f"dcgm diag output is not valid JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise CheckOutputError("dcgm diag JSON top level is not an object")
    if "DCGM GPU Diagnostic" in doc:
        root, layout = doc["DCGM GPU Diagnostic"], "dcgm3"
    elif "DCGM Diagnostic" in doc:
        root, layout = doc["DCGM Diagnostic"], "dcgm4"
    elif "tests" in doc:
        root, layout = doc, "dcgm4"
    else:
        raise CheckOutputError(
            "dcgm diag JSON has neither 'DCGM GPU Diagnostic' (3.x) nor 'DCGM Diagnostic'/'tests' (4.x)"
        )
    meta = {str(k).lower(): v for k, v in (doc.get("metadata") or {}).items()}
    diag = DcgmDiag(
        layout=layout,
        dcgm_version=str(meta.get("version") or meta.get("dcgm version") or root.get("version") or ""),
        driver_version=str(meta.get("driver version detected") or root.get("Driver Version Detected") or ""),
    )
    tests = _tests(root)
    if not tests:
        raise CheckOutputError("dcgm diag JSON lists no tests")
    for category, t in tests:
        name = str(t.get("name") or t.get("test_name") or "?")
        results = t.get("results")
        if not isinstance(results, list) or not results:
            summary = (t.get("test_summary") or {}).get("status")
            if summary:
                results = [{"status": summary}]
            else:
                raise CheckOutputError(f"dcgm diag test {name!r} has no results")
        for r in results:
            status = str(r.get("status", "")).strip().lower()
            if status not in _STATUSES:
                raise CheckOutputError(f"dcgm diag test {name!r}: unknown status {r.get('status')!r}")
            messages = _texts(r.get("warnings")) + _texts(r.get("errors")) + _texts(r.get("info"))
            diag.results.append(DcgmTestResult(name, category, status, _entity(r), messages))
    return diag


def judge_dcgm_diag(diag: DcgmDiag, *, warn_fails: bool = False, raw: str = "") -> CheckResult:
    j = Judgement()
    for r in diag.results:
        detail = f": {'; '.join(r.messages[:2])}" if r.messages else ""
        if r.status == "fail" or (warn_fails and r.status == "warn"):
            j.fail(f"{r.test} {r.status} on {r.entity}{detail}")
        elif r.status == "warn":
            j.warn(f"{r.test} on {r.entity}{detail}")
    counts = {s: sum(1 for r in diag.results if r.status == s) for s in ("pass", "fail", "warn", "skip")}
    tests: dict[str, str] = {}
    order = {"fail": 3, "warn": 2, "pass": 1, "skip": 0, "not run": 0}
    for r in diag.results:  # per test, its worst status across GPUs
        if order[r.status] >= order.get(tests.get(r.test, "skip"), 0):
            tests[r.test] = r.status
    return CheckResult(
        check=CHECK,
        verdict=j.verdict,
        measurements={
            "layout": diag.layout,
            "dcgm_version": diag.dcgm_version,
            "driver_version": diag.driver_version,
            "tests": tests,
            "counts": counts,
            "failed_entities": sorted({r.entity for r in diag.failures()}),
        },
        thresholds={"fail_on": ["fail", "warn"] if warn_fails else ["fail"]},
        reasons=j.reasons,
        raw_tail=tail(raw),
    )


def check_dcgm_diag(text: str, *, warn_fails: bool = False) -> CheckResult:
    return judge_dcgm_diag(parse_dcgm_diag(text), warn_fails=warn_fails, raw=text)

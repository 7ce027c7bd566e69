"""`dcgmi diag -r 1|2|3|4`: per-test, per-GPU results from its JSON (`-j`, DCGM 3.x and 4.x) or its table.

JSON, DCGM 3.x: {"DCGM GPU Diagnostic": {"version", "Driver Version Detected", "test_categories": [
              {"category", "tests": [{"name", "results": [{"gpu_id"|"gpu_ids", "status", "info", "warnings"}]}]}]}}
   3.x builds leave `null` entries in a `tests` array (dcgmi/Diag.cpp skips a retired deployment check without
   compacting; NVIDIA's own test "JsonResult: Deserialize real output" carries them). They are skipped.
JSON, DCGM 4.x: {"DCGM Diagnostic": {"test_categories": [... results with "entity_group", "entity_id", "status",
              "info": [..], "warnings": [{"warning", "error_id", "error_severity"}]}, "test_summary": {"status"} ...]},
           "entity_groups": [...], "metadata": {"version", "Driver Version Detected"}}
   Some 4.x builds print the tests flat (`"tests": [{"name", "results": [... "errors": [{"error", "error_id"}]]}]`).
Text (no -j), both generations:
    |-----  Metadata  ----------+------------------------------------------------|
    | DCGM Version              | 4.4.1                                          |
    +-----  Integration  -------+------------------------------------------------+
    | pcie                      | Fail                                           |     4.x: a summary line, then
    |                           | GPU0: Fail                                     |     one line per entity
    | Warning                   | There was an internal error during the test:   |     -v: messages, cut into
    |                           | 'A child process (2378806) exited with non-ze  |     45-character pieces
    | PCIe                      | Pass - All                                     |     3.x: "Pass - All",
    | SM Stress                 | Fail - GPUs: 0, 2                              |     "Fail - GPUs: 0, 2", ...
Status is Pass / Fail / Warn / Skip / Not Run (any case). Any Fail fails the check. A run that could not start
("Error: Unable to complete diagnostic ...", a JSON `runtime_error`) is a clear CheckOutputError quoting dcgmi.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from remedy.health.limits import bounded_lines, check_size
from remedy.health.result import CheckOutputError, CheckResult, Judgement, tail
from remedy.textinput import as_text

CHECK = "dcgm-diag"
_STATUSES = {"pass", "fail", "warn", "skip", "not run"}
_DATA_INFO_LEN = 45  # dcgmi/Diag.cpp DATA_INFO_TAG_LEN: a message is printed in slices of this many characters


@dataclass
class DcgmTestResult:
    test: str
    category: str
    status: str  # pass | fail | warn | skip | not run
    entity: str  # "GPU 3", "all" when the result is not per entity
    messages: list[str] = field(default_factory=list)  # warnings/errors first, then info


@dataclass
class DcgmDiag:
    layout: str  # "dcgm3" | "dcgm4" (JSON) | "text"; "json" for a JSON report cut before it says which
    dcgm_version: str = ""
    driver_version: str = ""
    results: list[DcgmTestResult] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # what a complete table has and this one lacks

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


def _dicts(value: Any) -> list[dict]:
    """The objects in a JSON array; `null` entries (3.x) and any non-object are skipped, a non-array is empty."""
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _tests(root: dict) -> list[tuple[str, dict]]:
    out: list[tuple[str, dict]] = []
    for cat in _dicts(root.get("test_categories")):
        for t in _dicts(cat.get("tests")):
            out.append((str(cat.get("category", ""))[:80], t))
    for t in _dicts(root.get("tests")):
        out.append((str(t.get("category", "")), t))
    return out


def _status(value: Any, test: str) -> str:
    status = str(value if value is not None else "").strip().lower()
    if status not in _STATUSES:
        raise CheckOutputError(f"dcgm diag test {test!r}: unknown status {str(value)[:40]!r}")
    return status


def _error_lines(text: str) -> list[str]:
    return [ln.strip() for ln in text.splitlines() if ln.strip().startswith("Error:")]


def parse_dcgm_diag(text: str | bytes) -> DcgmDiag:
    """Parse dcgmi diag output (JSON 3.x/4.x or the text table); raise CheckOutputError naming what is missing."""
    text = as_text(text, "dcgm diag output", CheckOutputError)
    check_size(text, "dcgm diag output", CheckOutputError)
    if _TABLE_ROW.search(text) and not text.lstrip().startswith("{"):
        return _parse_text(text)
    # dcgmi may print a banner before the JSON; take the outermost object.
    start, end = text.find("{"), text.rfind("}")
    cut_short = ""  # what a JSON report cut mid-way lacks ("" when it is whole)
    if start < 0:
        if errors := _error_lines(text):
            raise CheckOutputError(f"dcgm diag did not run (no JSON object, no result table): {errors[0][:200]}")
        raise CheckOutputError("dcgm diag output has no JSON object (-j) and no result table")
    try:
        doc = json.loads(text[start : end + 1] if end > start else text[start:])
    except (json.JSONDecodeError, RecursionError) as exc:
        # A report cut mid-way (a truncated Job log, a paste) is a valid JSON prefix: read what it holds and say
        # what is missing, like a table cut short; anything else is not dcgmi's JSON (bad input).
        salvaged = _close_truncated(text[start:].rstrip()) if _cut_at_the_end(text[start:]) else None
        if salvaged is None:
            raise CheckOutputError(f"dcgm diag output is not valid JSON: {str(exc)[:120]}") from None
        doc, cut_short = salvaged
    if not isinstance(doc, dict):
        raise CheckOutputError("dcgm diag JSON top level is not an object")
    if "DCGM GPU Diagnostic" in doc:
        root, layout = doc["DCGM GPU Diagnostic"], "dcgm3"
    elif "DCGM Diagnostic" in doc:
        root, layout = doc["DCGM Diagnostic"], "dcgm4"
    elif "tests" in doc:
        root, layout = doc, "dcgm4"
    elif cut_short:
        return DcgmDiag(layout="json", missing=[
            f"the JSON report is cut short before its diagnostic section ({cut_short}): every test result is missing"])
    else:
        raise CheckOutputError(
            "dcgm diag JSON has neither 'DCGM GPU Diagnostic' (3.x) nor 'DCGM Diagnostic'/'tests' (4.x)"
        )
    if not isinstance(root, dict):
        raise CheckOutputError(f"dcgm diag JSON: the diagnostic section is a {type(root).__name__}, not an object")
    meta_raw = doc.get("metadata")
    meta = {str(k).lower(): v for k, v in meta_raw.items()} if isinstance(meta_raw, dict) else {}
    diag = DcgmDiag(
        layout=layout,
        dcgm_version=str(meta.get("version") or meta.get("dcgm version") or root.get("version") or ""),
        driver_version=str(meta.get("driver version detected") or root.get("Driver Version Detected") or ""),
    )
    tests = _tests(root)
    if not tests and not cut_short:
        reason = root.get("runtime_error") or doc.get("runtime_error") or next(iter(_error_lines(text[:start])), "")
        if reason:
            raise CheckOutputError(f"dcgm diag did not run: {str(reason)[:200]}")
        raise CheckOutputError("dcgm diag JSON lists no tests")
    last = ""
    for category, t in tests:
        name = " ".join(str(t.get("name") or t.get("test_name") or "?").split())[:80]  # one short line
        results = _dicts(t.get("results"))
        if not results:
            summary = t.get("test_summary")
            status = summary.get("status") if isinstance(summary, dict) else None
            if not status:
                if cut_short:
                    continue  # the test the cut went through: its results are what is missing
                raise CheckOutputError(f"dcgm diag test {name!r} has no results")
            results = [{"status": status}]
        for r in results:
            if cut_short and r.get("status") is None:
                continue  # a result cut before its status
            messages = _texts(r.get("warnings")) + _texts(r.get("errors")) + _texts(r.get("info"))
            diag.results.append(DcgmTestResult(name, category, _status(r.get("status"), name), _entity(r), messages))
        last = name
    if cut_short:
        after = f"after test {last!r}" if last else "before any test result"
        diag.missing.append(f"the JSON report is cut short {after} ({cut_short}): the rest of the run is missing")
    return diag


_CLOSE = {"{": "}", "[": "]"}
_LITERAL_START = re.compile(r"[-+.\deE]*|n(?:u(?:ll?)?)?|t(?:r(?:ue?)?)?|f(?:a(?:l(?:se?)?)?)?")


def _cut_at_the_end(chunk: str) -> bool:
    """Does the JSON decoder stop at the end of the text (the text runs out), not at a syntax error inside it?"""
    body = chunk.rstrip()
    try:
        json.loads(body)
    except json.JSONDecodeError as exc:
        # the text ends inside a string, or in the middle of a literal or number ("nu", "fals", "3.")
        return exc.msg.startswith("Unterminated string") or bool(_LITERAL_START.fullmatch(body[exc.pos:]))
    except RecursionError:
        return False
    return False


def _close_truncated(chunk: str) -> tuple[dict, str] | None:
    """A JSON object cut mid-way, closed at its last complete value: (the document, what was cut). None when the
    text is not a JSON prefix (a syntax error before its end, or nothing left open): that is bad input, not a cut.

    One pass over the text keeps the open brackets and, at every comma or opening bracket outside a string, a point
    where everything before is complete; the document is the text up to the last such point with its brackets
    closed (an earlier point if that still does not parse, e.g. a key without its value)."""
    stack: list[str] = []
    cuts: list[tuple[int, str]] = []  # (end of a complete prefix, the closers it needs)
    in_string = escaped = False
    for i, ch in enumerate(chunk):
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
            continue
        if ch == '"':
            in_string = True
        elif ch in _CLOSE:
            stack.append(_CLOSE[ch])
            cuts.append((i + 1, "".join(reversed(stack))))
        elif ch in "}]":
            if not stack or stack.pop() != ch:
                return None  # unbalanced: not a prefix of one JSON object
            if not stack:
                return None  # the object closed: whatever broke the parse is not a cut
        elif ch == "," and stack:
            cuts.append((i, "".join(reversed(stack))))
    if not stack:
        return None
    for end, closers in reversed(cuts[-64:]):  # the last complete prefix that parses
        try:
            doc = json.loads(chunk[:end] + closers)
        except (json.JSONDecodeError, RecursionError):
            continue
        if isinstance(doc, dict):
            return doc, f"{len(stack)} bracket(s) never closed"
    return None


# --- the text table -------------------------------------------------------------------------------

# [ \t]*, never \s*: with re.M a \s* runs across newlines, and on a log of blank lines every line start
# rescanned the rest of the input (40k blank lines took 9 s; issue 32 item 9).
_TABLE_ROW = re.compile(r"^[ \t]*\|[^|\n]*\|[^\n]*\|[ \t]*\r?$", re.M)
_SECTION = re.compile(r"^[|+]-{3,}[ \t]+(?P<name>[A-Za-z][A-Za-z ]{0,60}?)[ \t]+-+\+")
_BORDER = re.compile(r"^\+[-=+]{8,}\+$")
_STATUS_WORD = r"(?P<status>Pass|Fail|Warn|Skip|Not Run)"
_PLAIN = re.compile(rf"^{_STATUS_WORD}$", re.I)
_ALL = re.compile(rf"^{_STATUS_WORD}\s+-\s+All$", re.I)
_LISTED = re.compile(rf"^{_STATUS_WORD}\s+-\s+(?P<group>GPU|Switch|CPU)s?:\s*(?P<ids>\d[\d,\s]*)$", re.I)
_ENTITY = re.compile(rf"^(?P<group>GPU|Switch|NvSwitch|CPU|Link)\s*(?P<id>\d+):\s*{_STATUS_WORD}$", re.I)
_MESSAGE_NAMES = {"warning", "info", "error"}
_META = {"dcgm version": "dcgm_version", "driver version detected": "driver_version"}


@dataclass
class _TextTest:
    name: str
    category: str
    summary: str | None
    entities: list[tuple[str, str]] = field(default_factory=list)  # (entity, status)
    messages: list[list[str]] = field(default_factory=list)  # each message as its printed slices


def _cell(line: str) -> tuple[str, str]:
    """(name, value) of a `| name | value |` row; the value keeps its inner spacing (messages are sliced)."""
    inner = line.strip()[1:-1]
    name, _, value = inner.partition("|")
    return name.strip(), value[1:] if value.startswith(" ") else value


def _parse_text(text: str) -> DcgmDiag:
    diag = DcgmDiag(layout="text")
    category = ""
    tests: list[_TextTest] = []
    current: _TextTest | None = None
    message: list[str] | None = None  # the message whose slices are being read
    rows_in: dict[str, int] = {}  # category → test rows under it, in order
    closed = False  # a border line after the last row: dcgmi always ends its table with one
    for lineno, raw in enumerate(bounded_lines(text, "dcgm diag output", CheckOutputError), 1):
        line = raw.strip()
        if m := _SECTION.match(line):
            category, message, closed = m.group("name").strip(), None, False
            rows_in.setdefault(category, 0)
            continue
        if _BORDER.match(line):
            closed = True
            continue
        if not (line.startswith("|") and line.endswith("|") and line.count("|") >= 3):
            continue  # banners, "...", shell prompts
        closed = False
        name, value = _cell(line)
        shown = value.strip()
        if name == "Diagnostic" and shown == "Result":
            continue
        if category.lower() == "metadata":
            if key := _META.get(name.lower()):
                setattr(diag, key, shown)
            continue
        if name.lower() in _MESSAGE_NAMES:
            if current is None:
                continue  # a system-level message before any test: not a test result
            message = [value]
            current.messages.append(message)
            continue
        if not name:
            if current is None:
                continue
            if m := _ENTITY.match(shown):
                current.entities.append((f"{_group(m.group('group'))} {m.group('id')}", m.group("status").lower()))
                message = None
            elif m := _LISTED.match(shown):
                current.entities += _listed(m)
                message = None
            elif message is not None:
                message.append(value)
            # else: "Code: (000000000000)" and other detail lines under a test
            continue
        # a test row
        message = None
        current = _TextTest(name=name, category=category, summary=None)
        tests.append(current)
        rows_in[category] = rows_in.get(category, 0) + 1
        if m := (_PLAIN.match(shown) or _ALL.match(shown)):
            current.summary = m.group("status").lower()
        elif m := _LISTED.match(shown):
            current.entities += _listed(m)
        else:
            raise CheckOutputError(f"dcgm diag table line {lineno}: test {name[:60]!r} has no status I know: {shown[:40]!r}")
    if not tests:
        if errors := _error_lines(text):
            raise CheckOutputError(f"dcgm diag did not run: {errors[0][:200]}")
        raise CheckOutputError("dcgm diag table lists no tests")
    # A table cut short (a Job log truncated, a paste) must not read as "every test listed passed".
    empty = [c for c, n in rows_in.items() if n == 0 and c.lower() != "metadata"]
    diag.missing += [f"category {c!r} has no test rows (table cut after its header)" for c in empty]
    if not closed:
        diag.missing.append(f"the table has no closing border (cut after test {tests[-1].name!r})")
    for t in tests:
        messages = [" ".join("".join(p.ljust(_DATA_INFO_LEN)[:_DATA_INFO_LEN] for p in msg).split()) for msg in t.messages]
        rows = t.entities or [("all", t.summary or "not run")]
        bad = [i for i, (_, status) in enumerate(rows) if status not in ("pass", "skip")] or [0]
        for i, (entity, status) in enumerate(rows):
            diag.results.append(DcgmTestResult(t.name, t.category, status, entity, messages if i in bad else []))
    return diag


def _group(name: str) -> str:
    return {"gpu": "GPU", "switch": "Switch", "nvswitch": "Switch", "cpu": "CPU", "link": "Link"}[name.lower()]


def _listed(m: re.Match[str]) -> list[tuple[str, str]]:
    status, group = m.group("status").lower(), _group(m.group("group"))
    return [(f"{group} {i}", status) for i in re.findall(r"\d+", m.group("ids"))]


def judge_dcgm_diag(diag: DcgmDiag, *, warn_fails: bool = False, raw: str = "") -> CheckResult:
    j = Judgement()
    for r in diag.results:
        detail = f": {'; '.join(r.messages[:2])}" if r.messages else ""
        if r.status == "fail" or (warn_fails and r.status == "warn"):
            j.fail(f"{r.test} {r.status} on {r.entity}{detail}")
        elif r.status == "warn":
            j.warn(f"{r.test} on {r.entity}{detail}")
    for what in diag.missing:  # after the findings: what failed matters first, then what could not be seen
        j.incomplete(what)
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
        incomplete=j.missing,
    )


def check_dcgm_diag(text: str | bytes, *, warn_fails: bool = False) -> CheckResult:
    text = as_text(text, "dcgm diag output", CheckOutputError)
    return judge_dcgm_diag(parse_dcgm_diag(text), warn_fails=warn_fails, raw=text)

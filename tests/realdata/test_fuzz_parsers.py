"""Arbitrary text and bytes into every tool-output parser: a parse or the parser's one-line error, never a traceback.

Three kinds of input per parser: any text, any bytes, and "near misses" (lines of the real samples, cut, spliced
and mixed with noise), which reach much deeper into a parser than random characters do.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from remedy.audit.mountstats import MountstatsError, parse_mountstats
from remedy.detect.dcgm import parse_dcgm_metrics, signals_from_dcgm
from remedy.detect.joblog import parse_job_log
from remedy.detect.kernel_log import parse_kernel_log
from remedy.health.dcgm import check_dcgm_diag
from remedy.health.ib import check_ib
from remedy.health.nccl import check_nccl
from remedy.health.result import CheckOutputError
from remedy.health.smi import check_nvidia_smi
from remedy.settings.health import HealthCheckSettings, IbThresholds

SAMPLES = Path(__file__).parent / "samples"
HEALTH = HealthCheckSettings()
# Modest by default so the file runs in seconds in CI; REMEDY_FUZZ_EXAMPLES=2000 for a long hunt.
FUZZ = settings(max_examples=int(os.environ.get("REMEDY_FUZZ_EXAMPLES", "150")), deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _lines(*globs: str) -> list[str]:
    out: list[str] = []
    for g in globs:
        for f in sorted(SAMPLES.glob(g)):
            out += f.read_text().splitlines()
    return out


def near_miss(lines: list[str]) -> st.SearchStrategy[str]:
    """Text made of real lines, some cut short or spliced with noise, in any order."""
    real = st.sampled_from(lines)
    cut = st.builds(lambda s, i: s[:i], real, st.integers(0, 200))
    spliced = st.builds(lambda s, i, noise: s[:i] + noise + s[i:], real, st.integers(0, 120), st.text(max_size=8))
    line = st.one_of(real, real, cut, spliced, st.text(max_size=40))
    return st.builds(lambda ls, nl: "\n".join(ls) + ("\n" if nl else ""), st.lists(line, max_size=40), st.booleans())


# JSON in the shapes dcgmi prints, with any value (null, numbers, lists, wrong types) where the real one goes.
_WORDS = ["DCGM GPU Diagnostic", "DCGM Diagnostic", "test_categories", "category", "tests", "name", "results",
          "status", "gpu_id", "gpu_ids", "entity_group", "entity_id", "warnings", "warning", "errors", "error",
          "error_id", "info", "test_summary", "metadata", "version", "Driver Version Detected", "runtime_error",
          "Pass", "Fail", "Warn", "Skip", "PASS", "Not Run"]
_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.sampled_from(_WORDS) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(_WORDS), inner, max_size=5),
    max_leaves=30,
)
_status = st.sampled_from(["Pass", "Fail", "Warn", "Skip", "PASS", "Not Run"]) | _json
_result = st.fixed_dictionaries({"status": _status}, optional={
    "gpu_id": _json, "entity_group": _json, "entity_id": _json, "warnings": _json, "errors": _json, "info": _json})
_test = st.fixed_dictionaries({"name": _json, "results": st.lists(_result | _json, max_size=3) | _json},
                              optional={"test_summary": st.fixed_dictionaries({"status": _status}) | _json})
_category = st.fixed_dictionaries({"category": _json, "tests": st.lists(_test | st.none(), max_size=4) | _json})
_root = st.fixed_dictionaries({}, optional={
    "test_categories": st.lists(_category | _json, max_size=3), "tests": st.lists(_test | _json, max_size=3),
    "version": _json, "runtime_error": _json})
dcgm_json = st.builds(
    json.dumps,
    st.one_of(st.builds(lambda k, r: {k: r}, st.sampled_from(["DCGM GPU Diagnostic", "DCGM Diagnostic"]), _root | _json),
              _root, st.dictionaries(st.sampled_from(_WORDS), _json, min_size=1, max_size=3)),
)


def anything(lines: list[str]) -> st.SearchStrategy[str | bytes]:
    return st.one_of(st.text(), st.binary(), near_miss(lines), near_miss(lines).map(lambda s: s.encode("utf-8", "replace")))


def one_line(exc: BaseException, kind: type[BaseException]) -> None:
    assert isinstance(exc, kind) and isinstance(exc, ValueError), repr(exc)
    message = str(exc)
    assert message and "\n" not in message and len(message) < 600, message


# parsers that report bad lines in their result rather than raising ----------------------------------

@FUZZ
@given(anything(_lines("*.log")))
def test_kernel_log(data):
    r = parse_kernel_log(data, node="n")
    # every line is accounted for once: an event, a later line of one (SXid detail, a fell-off message its Xid 79
    # repeats), the detail of an event the input does not hold, unreadable (counted and sampled), or not ours
    assert r.matched + r.unparsed + r.ignored + r.continued + r.orphan_details == r.lines
    assert len(r.signals) == r.matched == len(r.events)


@FUZZ
@given(anything(_lines("*.prom")))
def test_dcgm_exporter_metrics(data):
    r = parse_dcgm_metrics(data)
    assert r.parsed == len(r.samples)
    signals_from_dcgm(r.samples, node="n")


@FUZZ
@given(anything(_lines("*watchdog*.log", "*loss*.log")))
def test_job_log(data):
    r = parse_job_log(data, node="n")
    assert r.nccl_timeouts + r.losses + r.unparsed + r.ignored == r.lines


# parsers that read one tool's output and refuse what is not it ---------------------------------------

CHECKS = [
    ("dcgm-diag", lambda t: check_dcgm_diag(t), ("*dcgm3*", "*dcgm_issue*", "*dcgmi*", "*text_3*"), CheckOutputError),
    ("nccl", lambda t: check_nccl(t, HEALTH.nccl_criteria_for(None, None)), ("*nccl*.txt",), CheckOutputError),
    ("nvidia-smi", lambda t: check_nvidia_smi(t, HEALTH), ("*smi*",), CheckOutputError),
    ("ibstat", lambda t: check_ib(t, IbThresholds(), expected_ports=8), ("*ibstat*",), CheckOutputError),
    ("mountstats", lambda t: parse_mountstats(t, source="fuzz"), ("*.mountstats",), MountstatsError),
]


@pytest.mark.parametrize("name, parse, globs, error", CHECKS, ids=[c[0] for c in CHECKS])
def test_checks_parse_or_refuse_in_one_line(name, parse, globs, error):
    data = anything(_lines(*globs))
    if name == "dcgm-diag":  # most of the JSON space is reached only through its shapes: weight them
        data = st.one_of(dcgm_json, dcgm_json, data)

    @FUZZ
    @given(data)
    def run(data):
        try:
            parse(data)
        except error as exc:
            one_line(exc, error)

    run()


@pytest.mark.parametrize("parse", [c[1] for c in CHECKS] + [lambda t: parse_kernel_log(t, node="n")],
                         ids=[c[0] for c in CHECKS] + ["kernel-log"])
def test_not_text_at_all_is_a_clear_error(parse):
    with pytest.raises(ValueError, match="expected text or bytes, got int"):
        parse(42)

"""A detector's record (remedy.warn.record): the precision choose_on_warning weighs is learned per detector from
past warnings left to run and whether a failure followed; the assumed share is the prior."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from remedy.warn.record import PastWarning, detector_of, detector_record

NOW = datetime(2026, 11, 28, 12, tzinfo=timezone.utc)
DAY = timedelta(hours=24)


def w(node: str, hours_ago: float, detector: str = "thermal", swapped: bool = False) -> PastWarning:
    return PastWarning(node, NOW - timedelta(hours=hours_ago), detector, swapped)


def test_no_history_is_the_assumed_share():
    rec = detector_record("thermal", [], {}, NOW, DAY, prior=2 / 3)
    assert rec.precision == pytest.approx(2 / 3) and rec.judged == 0
    assert "the assumed share" in rec.sentence() and "no thermal warning left to run" in rec.sentence()


def test_false_alarms_pull_the_precision_down_and_failures_up():
    quiet = [w(f"gpu{i:03d}", 48) for i in range(10)]  # busy but healthy: nothing failed within a day
    rec = detector_record("thermal", quiet, {}, NOW, DAY, prior=2 / 3)
    assert (rec.followed, rec.judged) == (0, 10)
    assert rec.precision == pytest.approx((0 + 10 * 2 / 3) / 20)  # 1/3
    failed = {f"gpu{i:03d}": [NOW - timedelta(hours=40)] for i in range(10)}  # each failed 8 h after its warning
    rec = detector_record("thermal", quiet, failed, NOW, DAY, prior=2 / 3)
    assert (rec.followed, rec.judged) == (10, 10) and rec.precision == pytest.approx((10 + 10 * 2 / 3) / 20)
    assert "10 of the 10 thermal warnings left to run were followed by a failure within 24 h" in rec.sentence()


def test_what_cannot_be_judged_is_not():
    warnings = [
        w("gpu001", 48, swapped=True),  # taken out on it: would it have failed? nobody can tell
        w("gpu002", 2),  # its day is not over and nothing failed yet
        w("gpu003", 48, detector="ib-downtime"),  # another detector's record
    ]
    failures = {"gpu004": [NOW - timedelta(hours=40)],  # a failure on another node
                "gpu002": [NOW - timedelta(hours=3)]}  # a failure before the warning is not one it foretold
    rec = detector_record("thermal", warnings, failures, NOW, DAY, prior=2 / 3)
    assert (rec.followed, rec.judged) == (0, 0)


def test_a_failure_within_the_window_judges_a_warning_at_once():
    rec = detector_record("thermal", [w("gpu002", 2)], {"gpu002": [NOW - timedelta(hours=1)]}, NOW, DAY, prior=0.5)
    assert (rec.followed, rec.judged) == (1, 1)


def test_a_condition_that_keeps_firing_is_one_warning():
    """The scan re-posts a hot node every 10 minutes: 48 posts over 8 hours are one warning, not 48 false alarms."""
    reposted = [w("gpu007", 72 - k / 6) for k in range(48)]
    rec = detector_record("thermal", reposted, {}, NOW, DAY, prior=2 / 3)
    assert rec.judged == 1
    # 60 h ago is still the same condition; 40 h ago, more than a day after it began, is a new warning
    rec = detector_record("thermal", reposted + [w("gpu007", 60), w("gpu007", 40)], {}, NOW, DAY, prior=2 / 3)
    assert rec.judged == 2


def test_the_detector_is_the_alerts_label_or_the_xid():
    assert detector_of("early-warning", None, {"labels": {"detector": "peer-outlier"}}) == "peer-outlier"
    assert detector_of("xid", 92, {"labels": {}}) == "xid-92"
    assert detector_of("early-warning", None, {}) == "unnamed"

"""A detector's record (remedy.warn.record): the precision choose_on_warning weighs is learned per detector from
past warnings left to run and whether a failure followed; the assumed share is the prior."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from remedy.warn.record import PastWarning, detector_of, detector_record

NOW = datetime(2026, 11, 28, 12, tzinfo=UTC)
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


def test_the_lower_bound_is_the_beta_quantile_of_the_record():
    from remedy.warn.record import lower_bound

    assert lower_bound(0, 0) == pytest.approx(0.1, abs=1e-6)  # a flat prior: 10 % of it lies below 0.1
    assert lower_bound(4, 4) == pytest.approx(0.1 ** (1 / 5), abs=1e-6)  # Beta(5, 1): x^5 = 0.1
    assert lower_bound(0, 4) == pytest.approx(1 - 0.9 ** (1 / 5), abs=1e-6)  # Beta(1, 5): 1 - (1-x)^5 = 0.1
    assert lower_bound(10, 50) < lower_bound(20, 50) < lower_bound(40, 50)
    assert lower_bound(1000, 5000) == pytest.approx(0.2, abs=0.01)  # a long record: no overflow, close to 1 in 5


def _record(followed: int, judged: int, acted: int):
    from remedy.warn.record import DetectorRecord

    return DetectorRecord("thermal", 2 / 3, followed, judged, DAY, acted_since_left=acted)


def test_an_unproven_detector_has_one_warning_in_three_left_to_run():
    from remedy.warn.record import keep_checking

    # acting costs 12 min; waiting 2/3 × 47 min: break-even 12/47 ≈ 26 %; no record: shown only 10 %
    assert keep_checking(_record(0, 0, acted=0), act_minutes=12, wait_minutes=2 / 3 * 47) is None
    assert keep_checking(_record(0, 0, acted=1), act_minutes=12, wait_minutes=2 / 3 * 47) is None
    why = keep_checking(_record(0, 0, acted=2), act_minutes=12, wait_minutes=2 / 3 * 47)
    assert why and "acting pays above 26% of its warnings being right" in why
    assert "(0 of 0 judged) shows only 10% with 90% confidence" in why and "one warning in 3" in why


def test_a_detector_whose_record_shows_it_pays_is_no_longer_checked():
    from remedy.warn.record import DetectorRecord, keep_checking

    rec = DetectorRecord("thermal", 2 / 3, 5, 6, DAY, acted_since_left=10)
    assert keep_checking(rec, act_minutes=12, wait_minutes=rec.precision * 47) is None
    noisy = DetectorRecord("thermal", 2 / 3, 5, 25, DAY, acted_since_left=10)  # 1 in 5 right: not shown
    assert keep_checking(noisy, act_minutes=12, wait_minutes=noisy.precision * 47)


def test_acted_on_warnings_are_counted_since_the_last_left_to_run():
    warnings = [w("gpu001", 90, swapped=True), w("gpu002", 80), w("gpu003", 70, swapped=True),
                w("gpu004", 60, swapped=True), w("gpu005", 50, detector="ib", swapped=False)]
    assert detector_record("thermal", warnings, {}, NOW, DAY, prior=2 / 3).acted_since_left == 2
    assert detector_record("ib", warnings, {}, NOW, DAY, prior=2 / 3).acted_since_left == 0

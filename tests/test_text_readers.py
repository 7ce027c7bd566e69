"""The one duration reader and the one ISO-time reader (remedy.domain.durations, remedy.domain.times)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from remedy.domain.durations import DurationError, parse_duration
from remedy.domain.times import parse_iso, parse_iso_or_none
from remedy.errors import RemedyError

NOW = datetime(2026, 11, 22, 1, 0, tzinfo=UTC)


@pytest.mark.parametrize("text, seconds", [("250ms", 0.25), ("45s", 45), ("45 sec", 45), ("30m", 1800),
                                           ("30min", 1800), ("1.5h", 5400), ("1.5HR", 5400), (".5h", 1800),
                                           ("2d", 172800), (" 8h ", 28800)])
def test_duration_units(text, seconds):
    assert parse_duration(text) == pytest.approx(seconds)


def test_a_bare_number_needs_a_default_unit():
    assert parse_duration("30", default_unit="m") == 1800  # the goodput CLI's minutes
    assert parse_duration("30", default_unit="s") == 30
    with pytest.raises(DurationError, match=r"--window: cannot read '30' as a duration"):
        parse_duration("30", what="--window")


def test_zero_only_when_allowed():
    assert parse_duration("0m") == 0  # e.g. no checkpoint reload time
    with pytest.raises(DurationError, match="more than zero"):
        parse_duration("0s", positive=True)


@pytest.mark.parametrize("bad", ["", "8x", "h8", "-5m", "ten minutes", "5 m s", "1e3s"])
def test_duration_errors_are_one_operator_line(bad):
    with pytest.raises(DurationError) as info:
        parse_duration(bad, what="--mtbf")
    assert isinstance(info.value, RemedyError) and isinstance(info.value, ValueError)
    assert str(info.value).startswith("--mtbf: cannot read") and "\n" not in str(info.value)


@pytest.mark.parametrize("text", ["2026-11-22T01:00:00Z", "2026-11-22T01:00:00+00:00", "2026-11-22T02:00:00+01:00",
                                  "2026-11-22T01:00:00.000000Z", " 2026-11-22T01:00:00Z "])
def test_iso_times_with_a_zone(text):
    assert parse_iso(text) == NOW


def test_a_time_without_zone_is_utc_or_refused():
    assert parse_iso("2026-11-22T01:00:00") == NOW  # Kubernetes stamps, our own
    assert parse_iso("2026-11-22T01:00:00").utcoffset() == timedelta(0)
    with pytest.raises(ValueError, match="detected_at must carry a time zone"):
        parse_iso("2026-11-22T01:00:00", what="detected_at", naive="refuse")
    assert parse_iso("2026-11-22T03:00:00+02:00", naive="refuse").tzinfo == timezone(timedelta(hours=2))


def test_iso_errors_name_the_value():
    with pytest.raises(ValueError, match=r"--at must be an ISO-8601 time, got 'yesterday'"):
        parse_iso("yesterday", what="--at")


@pytest.mark.parametrize("value", [None, "", "  ", 17, "soon", ["2026-11-22T01:00:00Z"]])
def test_lenient_reader_for_fields_others_write(value):
    assert parse_iso_or_none(value) is None


def test_lenient_reader_reads_what_the_strict_one_reads():
    assert parse_iso_or_none("2026-11-22T01:00:00Z") == NOW
    assert parse_iso_or_none("2026-11-22T01:00:00") == NOW

"""The warm dispatcher polls Prefect briskly only after an incident woke it (Prefect's trigger creates the run a
moment later) and idles between alerts, so its polling does not compete with the runs for the server's database."""

from __future__ import annotations

from remedy.platform import dispatcher as d


def test_brisk_after_a_wake_then_idle(monkeypatch):
    now = [1000.0]
    monkeypatch.setattr(d.time, "monotonic", lambda: now[0])
    disp = d.Dispatcher({}, poll_seconds=1.0)
    assert disp.next_wait() == 1.0  # between alerts
    disp.wake()
    assert disp.next_wait() == d.BURST_POLL_SECONDS
    now[0] += d.BURST_SECONDS - 0.1
    assert disp.next_wait() == d.BURST_POLL_SECONDS
    now[0] += 0.2
    assert disp.next_wait() == 1.0


def test_a_poll_setting_briskier_than_the_burst_is_kept(monkeypatch):
    disp = d.Dispatcher({}, poll_seconds=0.05)
    disp.wake()
    assert disp.next_wait() == 0.05


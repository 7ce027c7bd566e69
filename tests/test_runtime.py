"""remedy.runtime: one ledger object per process, whichever thread asks first."""

from __future__ import annotations

import threading


def test_threads_asking_at_once_after_a_reset_share_one_ledger(tmp_path, monkeypatch):
    """A flow run and an approver thread both reach for the ledger right after a reset. tasks.leases keeps one lease
    keeper per ledger object: two objects meant two keepers for one run, and the approval wait's keeper ended the
    lease the run still held (its next fenced write was refused, "its lease has ended")."""
    from remedy import runtime

    monkeypatch.setenv("REMEDY_DB_URL", f"sqlite:///{tmp_path / 'ledger.db'}")
    for _ in range(3):
        runtime.reset()
        start = threading.Barrier(8)
        got: list[object] = []

        def ask(start: threading.Barrier = start, got: list[object] = got) -> None:
            start.wait()
            got.append(runtime.ledger())

        threads = [threading.Thread(target=ask) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert len(got) == 8 and len({id(led) for led in got}) == 1
        assert runtime.ledger() is got[0]
    runtime.reset()

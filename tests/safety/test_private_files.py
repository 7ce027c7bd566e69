"""The ledger and the Prefect server's database are born private (0600; their directories 0700) even when the
process that makes them runs under a permissive umask (issue 32, residual risk "ledger and Prefect database files
are 0644"). tests/test_filemodes.py covers the engine's main file and the CLI; these cover what it does not: the
ledger's -wal/-shm, and the Prefect server gpu-remedy starts (its database, -wal/-shm and log)."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from remedy.domain.model import Incident
from remedy.ledger import Ledger


def mode(p: Path) -> int:
    return stat.S_IMODE(p.stat().st_mode)


@contextmanager
def umask(value: int) -> Iterator[None]:
    old = os.umask(value)
    try:
        yield
    finally:
        os.umask(old)


def test_the_ledger_and_its_wal_and_shm_are_0600_under_umask_022(tmp_path: Path) -> None:
    db = tmp_path / "var" / "ledger.db"
    with umask(0o022), Ledger(f"sqlite:///{db}") as led:
        led.migrate()
        led.open_incident(Incident(node="gpu-001", signal="xid", gpu=0, xid=79), window_seconds=600)
        side = [db.with_name(db.name + s) for s in ("-wal", "-shm")]
        assert all(p.exists() for p in side), "WAL mode: the ledger keeps a -wal and -shm while open"
        assert {p.name: oct(mode(p)) for p in (db, *side)} == {p.name: "0o600" for p in (db, *side)}
        assert mode(db.parent) == 0o700


@pytest.mark.prefect
def test_the_prefect_server_gpu_remedy_starts_keeps_its_database_private(tmp_path: Path, monkeypatch) -> None:
    from remedy.prefect_server import start_server, stop_server
    from tests.fixtures.prefect import _free_port, clean_env

    for k in list(os.environ):  # this session's Prefect settings (its test server, its database) are not ours
        if k.startswith("PREFECT_"):
            monkeypatch.delenv(k)
    for k, v in clean_env(tmp_path).items():
        monkeypatch.setenv(k, v)
    workdir = tmp_path / "stack"
    try:
        with umask(0o022):
            start_server(workdir, _free_port(), timeout=240)
        home = workdir / "prefect"
        files = [p for p in home.rglob("*") if p.is_file() and p.name.startswith(("prefect.db", "server.log"))]
        assert {p.name for p in files} >= {"prefect.db", "server.log"}, sorted(p.name for p in home.rglob("*"))
        assert {p.name: oct(mode(p)) for p in files} == {p.name: "0o600" for p in files}
        assert mode(home) == 0o700
    finally:
        stop_server(workdir)

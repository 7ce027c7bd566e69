"""Issue 32 item 10 (residual risk): files gpu-remedy creates are 0600, its directories 0700 (the ledger, the
Prefect home, rendered reports/manifests), through the real engine and the real CLI."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

from sqlalchemy import text

from remedy.domain.filemodes import private_dir, private_sqlite_file
from remedy.ledger.engine import make_engine, write_transaction

REPO = Path(__file__).resolve().parents[1]


def mode(p: Path) -> int:
    return stat.S_IMODE(p.stat().st_mode)


def test_sqlite_ledger_is_created_0600_even_under_a_permissive_umask(tmp_path) -> None:
    old = os.umask(0o022)  # what a library user's process usually has
    try:
        db = tmp_path / "state" / "ledger.db"
        engine = make_engine(f"sqlite:///{db}")
        with write_transaction(engine) as conn:
            conn.execute(text("CREATE TABLE t (x INTEGER)"))
            conn.execute(text("INSERT INTO t VALUES (1)"))
        engine.dispose()
        assert mode(db) == 0o600 and mode(db.parent) == 0o700
        with engine.connect() as conn:  # still a working database
            assert conn.execute(text("SELECT x FROM t")).scalar_one() == 1
    finally:
        os.umask(old)


def test_existing_files_keep_the_operators_mode(tmp_path) -> None:
    f = tmp_path / "ledger.db"
    f.write_bytes(b"")
    os.chmod(f, 0o640)
    private_sqlite_file(f)
    assert mode(f) == 0o640
    before = mode(tmp_path)
    d = tmp_path / "a" / "b"
    private_dir(d)
    assert mode(d) == 0o700 and mode(d.parent) == 0o700  # both created here
    assert mode(tmp_path) == before  # it existed: left alone


def test_cli_creates_private_files(tmp_path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("REMEDY_CONFIG", None)
    out = tmp_path / "rendered"
    # the parent process's umask is 022: what the CLI writes is private anyway
    p = subprocess.run([sys.executable, "-c", "import os, sys; os.umask(0o022); from remedy.cli import main; "
                        "sys.exit(main(sys.argv[1:]))", "deploy", "render", "--out", str(out)],
                       capture_output=True, text=True, env=env, cwd=REPO, timeout=300)
    assert p.returncode == 0, p.stderr
    files = [f for f in out.rglob("*") if f.is_file()]
    assert files, "render --out wrote nothing"
    assert {oct(mode(f)) for f in files} == {oct(0o600)}
    assert {oct(mode(d)) for d in [out, *(d for d in out.rglob("*") if d.is_dir())]} == {oct(0o700)}


def test_main_leaves_the_callers_umask(tmp_path) -> None:
    from remedy.cli import main

    old = os.umask(0o022)
    try:
        main(["xid", "explain", "79", "--json"])
        assert os.umask(0o022) == 0o022
    finally:
        os.umask(old)

"""The PostgreSQL fixture other areas use: loopback only, throwaway settings, one empty database per test."""

from __future__ import annotations

import psycopg
import pytest

_seen: list[str] = []


def _connect(url: str) -> psycopg.Connection:
    return psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://"), autocommit=True)


def test_server_is_loopback_only_and_disposable(postgres_url: str, postgres_server) -> None:
    with _connect(postgres_url) as conn:
        assert conn.execute("SHOW listen_addresses").fetchone()[0] == "127.0.0.1"
        assert conn.execute("SHOW fsync").fetchone()[0] == "off"
        assert conn.execute("SHOW unix_socket_directories").fetchone()[0] == str(postgres_server.root)
        assert conn.execute("SELECT current_database()").fetchone()[0] == "remedy"
        assert conn.execute("SHOW server_version").fetchone()[0].startswith("15.")


@pytest.mark.parametrize("round_", [1, 2])
def test_fresh_database_is_new_and_empty_each_time(fresh_postgres_url: str, postgres_server, round_: int) -> None:
    name = fresh_postgres_url.rsplit("/", 1)[1]
    assert name not in _seen
    with _connect(fresh_postgres_url) as conn:
        tables = conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'").fetchone()[0]
        assert tables == 0
        conn.execute("CREATE TABLE scratch (x int)")
    if _seen:  # the previous test's database was dropped at its teardown
        with _connect(postgres_server.url("postgres")) as conn:
            left = conn.execute("SELECT count(*) FROM pg_database WHERE datname = %s", (_seen[-1],)).fetchone()[0]
        assert left == 0
    _seen.append(name)

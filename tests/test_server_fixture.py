"""The test servers' start-up (tests/fixtures/prometheus.run_server): a server that hangs without answering is
killed and started again on another port, instead of failing the test that needed it."""

from __future__ import annotations

import sys

import httpx
import pytest

from tests.fixtures.prometheus import run_server


def test_a_server_that_hangs_at_start_is_started_again(tmp_path):
    calls = []

    def argv(port: int) -> list[str]:
        calls.append(port)
        if len(calls) == 1:  # the first start hangs: it never listens
            return [sys.executable, "-c", "import time; time.sleep(60)"]
        return [sys.executable, "-m", "http.server", "--bind", "127.0.0.1", str(port)]

    with run_server(argv, "/", tmp_path / "log", timeout=2.0, attempts=2) as url:
        assert httpx.get(url + "/").status_code == 200
    assert len(calls) == 2


def test_a_server_that_never_starts_says_why_once(tmp_path):
    def argv(port: int) -> list[str]:
        return [sys.executable, "-c", "print('no config'); import time; time.sleep(60)"]

    with pytest.raises(RuntimeError, match="did not start in 2 attempts; the last not ready at .* within 1 s"):
        with run_server(argv, "/", tmp_path / "log", timeout=1.0, attempts=2):
            pass

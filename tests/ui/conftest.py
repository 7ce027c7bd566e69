"""One Prefect server with its UI for the UI tests of a pytest process (worker): test_approval_ui.py's stack and its
demos run their flows on it, each under names of their own. Starting one is ~14 CPU-s and 15-50 s on the 2-core CI
machine (issue 28); under pytest-xdist's `--dist loadfile` a worker takes whole files, so only tests in one file are
sure to share it. Package-scoped: it stops after the last test under tests/ui, not at the session's end, since even
idle its services poll (~0.03 CPU-s per second)."""

from __future__ import annotations

import pytest

from tests.fixtures.prefect import prefect_server_process


@pytest.fixture(scope="package")
def ui_prefect_api(tmp_path_factory):
    """The API URL of a real Prefect server with its UI (`remedy up`'s, SQLite), stopped after the last UI test."""
    try:
        with prefect_server_process(tmp_path_factory.mktemp("ui-prefect")) as api:
            yield api
    except RuntimeError as exc:  # the Prefect server did not come up: its log says why
        pytest.fail(str(exc))

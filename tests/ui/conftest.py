"""One Prefect server with its UI for the UI tests of a pytest process (worker): test_approval_ui.py's stack and the
demos of test_prefect_ui.py and test_default_approver.py run their flows on it, each under names of its own.
Starting one is ~10-20 CPU-s and 15-50 s on the 2-core CI machine (issue 28). Package-scoped: it stops after the
last test under tests/ui (a worker runs those one after another), not at the session's end, since even idle its
services poll (~0.03 CPU-s per second)."""

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

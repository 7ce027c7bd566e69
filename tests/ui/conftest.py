"""One Prefect server with its UI for the UI tests of a pytest process (worker): test_approval_ui.py's stack and
test_prefect_ui.py's demo run their flows on it, each under names of its own. Starting one is ~20 CPU-s and
20-45 s on the 2-core CI machine (issue 28)."""

from __future__ import annotations

import pytest

from tests.fixtures.prefect import prefect_server_process


@pytest.fixture(scope="session")
def ui_prefect_api(tmp_path_factory):
    """The API URL of a real Prefect server with its UI (`remedy up`'s, SQLite), stopped at the session's end."""
    try:
        with prefect_server_process(tmp_path_factory.mktemp("ui-prefect")) as api:
            yield api
    except RuntimeError as exc:  # the Prefect server did not come up: its log says why
        pytest.fail(str(exc))

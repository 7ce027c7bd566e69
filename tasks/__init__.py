"""Side effects as Prefect tasks (one action each). See docs/architecture.md."""

from __future__ import annotations

import logging


class _WorkerThreadTimeoutNotice(logging.Filter):
    """Drop Prefect's per-task notice that timeouts cannot interrupt blocking calls in worker threads.

    Our flows run tasks in threads (the dispatcher, concurrent remediations), so the notice would fire on every task
    run and bury the useful lines in the UI. Every blocking call in our tasks carries its own deadline (API request
    timeouts, drain deadline, Job timeout); the task timeout is only the backstop the notice describes.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Timeout of %s seconds configured for this task, but the task is running in a worker thread")


logging.getLogger("prefect.task_runs").addFilter(_WorkerThreadTimeoutNotice())

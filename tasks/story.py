"""The story in the logs: one INFO line per side effect, in the operator's words ("cordoned gpu042: XID 79").

Inside a flow or task run the line goes to the run's log (the Prefect UI shows it); called outside one (a test or
a bench calling a task's `.fn`) it goes to this module's logger instead of raising Prefect's MissingContextError.
"""

from __future__ import annotations

import logging

from prefect import get_run_logger
from prefect.exceptions import MissingContextError

_fallback = logging.getLogger("gpu_remedy.story")


def say(message: str, *args: object) -> None:
    try:
        logger: logging.Logger | logging.LoggerAdapter = get_run_logger()
    except MissingContextError:
        logger = _fallback
    logger.info(message, *args)

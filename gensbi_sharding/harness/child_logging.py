"""``distributed=local``'s children log as the job asked: the user's ``hydra/job_logging`` and ``hydra/hydra_logging``
choices (and their keys, ``hydra.verbose``) reach each child, so ``hydra/job_logging=disabled`` quiets their console as
it quiets one process's; each still keeps its ``process_<i>.log``, where the parent reads what a child refused.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Sequence

from gensbi_sharding.harness.log_file import JobLogFile

__all__ = ["logging_overrides", "keep_process_log", "last_resort_kept", "LOG_FORMAT"]

#: The format of ``conf/hydra/job_logging/gensbi.yaml``'s file handler: what the parent's reads of a log expect.
LOG_FORMAT = "[%(asctime)s][%(name)s][%(levelname)s] - %(message)s"
_LOGGING_KEYS = ("hydra/job_logging", "hydra/hydra_logging", "hydra.job_logging", "hydra.hydra_logging",
                 "hydra.verbose")


def logging_overrides(hydra_overrides: Sequence[str]) -> list[str]:
    """The overrides of ``hydra_overrides`` (Hydra's own, ``HydraConfig.get().overrides.hydra``) that choose how a job
    logs, as given, in order.

    Parameters
    ----------
    hydra_overrides : sequence of str
        The running job's Hydra overrides.
    """
    def key(override: str) -> str:
        return override.split("=", 1)[0].lstrip("+~")

    return [o for o in hydra_overrides if any(key(o) == k or key(o).startswith(k + ".") for k in _LOGGING_KEYS)]


def _unhandled(record: logging.LogRecord) -> bool:
    """Whether no logger between ``record``'s and the root has a handler: what logging's last resort would print."""
    logger = logging.getLogger(record.name)
    while logger.parent is not None:  # (a record reaching the root came up from one that propagates)
        if logger.handlers:
            return False
        logger = logger.parent
    return True


def keep_process_log(path: Path) -> logging.Handler | None:
    """In a ``distributed=local`` child: log to ``path`` (its ``process_<i>.log``) too, where the job's logging config
    writes nothing there (``disabled``, ``none``, one of the user's); the handler added, or None where one writes there.

    What reaches the file is what the config's levels let through (under ``disabled``: errors, the refusals its parent
    reads). Where the root logger has no handler, what logging's last resort printed on stderr (the console, through
    the parent) it still prints: a record no logger below the root handles, a library's error (was, under
    ``disabled``: in the file only, as the job's own logger had the handler that says its errors).

    Parameters
    ----------
    path : Path
        The child's log file.
    """
    root, target = logging.getLogger(), os.path.abspath(path)
    handlers = [h for logger in (root, logging.getLogger("gensbi_sharding")) for h in logger.handlers]
    if any(os.path.abspath(getattr(h, "baseFilename", "")) == target for h in handlers):
        return None
    _last_resort_on_root()  # what printed such records on stderr until now
    handler = JobLogFile(target)
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    root.addHandler(handler)
    return handler


def _last_resort_on_root() -> logging.Handler | None:
    """Where the root logger has no handler, one that prints what logging's last resort did (on stderr, its level, a
    record no logger below the root handles), added and returned; else None."""
    root = logging.getLogger()
    if root.handlers or logging.lastResort is None:
        return None
    last_resort = logging.StreamHandler(sys.stderr)
    last_resort.setLevel(logging.lastResort.level)
    last_resort.addFilter(_unhandled)  # a record a handler below the root shows (the job's errors): said there, once
    root.addHandler(last_resort)
    return last_resort


@contextlib.contextmanager
def last_resort_kept() -> Iterator[None]:
    """While a job runs, a root logger without handlers (``hydra/job_logging=disabled`` or ``none``) gets one that
    prints as logging's last resort did (``_last_resort_on_root``), so absl finds one: its ``log()`` (Orbax's first
    note, e.g. as ``import gensbi.models.flux1`` imports Orbax) runs ``logging.basicConfig()`` on a root without
    handlers, whose stderr handler then printed each error the job's own console handler
    (``log_file.errors_on_console``) had said, again ("ERROR:gensbi_sharding:...")."""
    added = _last_resort_on_root()
    try:
        yield
    finally:
        if added is not None:
            logging.getLogger().removeHandler(added)

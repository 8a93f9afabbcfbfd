"""``distributed=local``'s children log as the job asked: the user's ``hydra/job_logging`` and ``hydra/hydra_logging``
choices (and their keys, ``hydra.verbose``) reach each child, so ``hydra/job_logging=disabled`` quiets their console as
it quiets one process's; each still keeps its ``process_<i>.log``, where the parent reads what a child refused.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Sequence

__all__ = ["logging_overrides", "keep_process_log", "LOG_FORMAT"]

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


def keep_process_log(path: Path) -> logging.Handler | None:
    """In a ``distributed=local`` child: log to ``path`` (its ``process_<i>.log``) too, where the job's logging config
    writes nothing there (``disabled``, ``none``, one of the user's); the handler added, or None where one writes there.

    What reaches the file is what the config's levels let through (under ``disabled``: errors, the refusals its parent
    reads); a config with no handler at all keeps logging's last resort on stderr, which a handler here would end.

    Parameters
    ----------
    path : Path
        The child's log file.
    """
    root, target = logging.getLogger(), os.path.abspath(path)
    handlers = [h for logger in (root, logging.getLogger("gensbi_sharding")) for h in logger.handlers]
    if any(os.path.abspath(getattr(h, "baseFilename", "")) == target for h in handlers):
        return None
    from gensbi_sharding.harness.log_file import JobLogFile

    if not handlers and logging.lastResort is not None:  # what printed this process's warnings on stderr until now
        root.addHandler(logging.lastResort)
    handler = JobLogFile(target)
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    root.addHandler(handler)
    return handler

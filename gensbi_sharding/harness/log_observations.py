"""Which of an sbibm task's observations ``data.x_transform=log`` can condition on, read from the installed
package's files before any run folder is made (``log_observation_problem``, a check of ``sweep_check.job_problem``),
as the run's data step (``tasks.usable_observation``) refuses one once the task is loaded."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from gensbi_sharding.harness.tasks import NUM_OBSERVATIONS, TASKS, observation_file, transform_x

__all__ = ["log_observation_problem", "log_refusal"]


def _read(name: str, k: int) -> np.ndarray | None:
    """Observation ``k`` of task ``name`` as its file holds it (``observation_file``: a header row, then one row of
    values); None where no file reads (no such file, or not one row of numbers): the run then checks it."""
    try:
        return np.loadtxt(observation_file(name, k), delimiter=",", skiprows=1, dtype=np.float32, ndmin=1)
    except (TypeError, OSError, ValueError):
        return None


def _logged(x_o: np.ndarray | None) -> bool:
    """Whether the log of ``x_o`` is finite: every value > 0 (None, no file read: False)."""
    return x_o is not None and bool(np.all(np.isfinite(transform_x("log", x_o))))


def log_observation_problem(data: Any, evaluation: Any) -> str | None:
    """Why ``data.x_transform=log`` cannot condition on an observation the run reads (those ``evaluation`` scores,
    then ``data.num_observation``); None where it can, for another transform, where it is no sbibm task's, or where
    no file reads: the run then checks it.

    Parameters
    ----------
    data, evaluation : DictConfig
        A config's ``data`` and ``eval``.

    Returns
    -------
    str or None
        The refusal, naming the observation's smallest value (not only "holds values <= 0"), and, where the task has
        observations of positive data, the overrides that read only those as a second fix (read from the task,
        not a table of them here, which a new sbibm_jax would leave stale).
    """
    if data.x_transform != "log" or (name := data.name) not in TASKS:
        return None
    asked = list(evaluation.observations or []) if evaluation.enabled else []
    scored = (asked or [data.num_observation]) if evaluation.enabled else []
    for k in dict.fromkeys([*scored, data.num_observation]):
        if (x_o := _read(name, k)) is None or _logged(x_o):
            continue
        return log_refusal(name, k, float(x_o.min()), lambda j: _read(name, j), asked, data.num_observation)
    return None


def log_refusal(name: str, k: int, smallest: float, read: Callable[[int], np.ndarray | None],
                asked: Sequence[int] = (), num_observation: int | None = None) -> str:
    """The one refusal of ``data.x_transform=log`` on observation ``k`` of task ``name``, whose smallest value is
    ``smallest``: the check before any folder (``log_observation_problem``) and the run's once the task is loaded
    (``tasks.usable_observation``) say the same (the second fix too, not data.x_transform=none alone).

    ``read(j)``: observation ``j`` (None where none reads); ``asked``: ``eval.observations`` (scored; empty: none
    asked); ``num_observation``: ``data.num_observation`` (default ``k``). Where the task has observations of
    positive data, the overrides reading only those are a second fix.
    """
    num_observation = k if num_observation is None else num_observation
    refusal = (f"data.x_transform=log needs positive data, but observation {k} of task {name!r} holds "
               f"{smallest:g}: the posterior cannot be conditioned on its log; set data.x_transform=none "
               "(log suits positive data spanning decades, as data=lotka_volterra's)")
    good = [j for j in range(1, NUM_OBSERVATIONS + 1) if _logged(read(j))]
    if not good:
        return refusal
    asked = list(asked)
    keep = [j for j in asked if j in good] or good  # eval.observations: the usable ones asked, else all usable
    # data.num_observation one of those scored (good[0], beside eval.observations=[8], would not be scored)
    fix = [f"data.num_observation={keep[0]}"] * (num_observation not in good) + [
        f"eval.observations=[{','.join(map(str, keep))}]"] * bool(set(asked) - set(good))
    return (f"{refusal}, or keep it and read only observations of positive data ({name}'s "
            f"{', '.join(map(str, good))}): {' '.join(fix)}")

"""Which of an sbibm task's observations ``data.x_transform=log`` can condition on, read from the installed
package's files before any run folder is made (``log_observation_problem``, a check of ``job_check.job_problem``),
as the run's data step (``tasks.usable_observation``) refuses one once the task is loaded: in the same words,
``tasks.log_refusal``'s (there, not here: this module reads tasks', which then imported it back inside a function)."""

from __future__ import annotations

from typing import Any

import numpy as np

from gensbi_sharding.harness.tasks import TASKS, log_refusal, logged_finite, observation_file

__all__ = ["log_observation_problem"]


def _read(name: str, k: int) -> np.ndarray | None:
    """Observation ``k`` of task ``name`` as its file holds it (``observation_file``: a header row, then one row of
    values); None where no file reads (no such file, or not one row of numbers): the run then checks it."""
    try:
        return np.loadtxt(observation_file(name, k), delimiter=",", skiprows=1, dtype=np.float32, ndmin=1)
    except (TypeError, OSError, ValueError):
        return None


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
        if (x_o := _read(name, k)) is None or logged_finite(x_o):
            continue
        return log_refusal(name, k, float(x_o.min()), lambda j: _read(name, j), asked, data.num_observation)
    return None

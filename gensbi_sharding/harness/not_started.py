"""A sweep's job that Hydra made a folder for but never started: ``current_job_dir`` finds that folder,
``mark_not_started`` says so in its ``launch.log``.

Read by launch.py (a Ctrl-C between jobs) and ``interrupt_lines`` (a Ctrl-C as the job started); out of
``sweep_continue``, their home before, so that ``interrupt_lines`` no longer imports ``sweep_continue``, which imports
it. Pure Python: no JAX.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["current_job_dir", "mark_not_started"]


def current_job_dir() -> Path | None:
    """The folder of the last job Hydra set up in this process: where its ``launch.log`` handler writes (Hydra
    configures it as it makes the folder, and restores nothing of its own config once the job is left)."""
    import logging

    for handler in logging.getLogger().handlers:
        if isinstance(handler, logging.FileHandler):
            return Path(handler.baseFilename).parent
    return None


def mark_not_started(job_dir: Any, why: str) -> Path | None:
    """Say in the ``launch.log`` of a job's folder that the job did not start, where it holds no run's record.

    Hydra makes a job's folder (``.hydra/``, an empty ``launch.log``) before the job's function runs; a sweep stopped
    there (Ctrl-C between two jobs, or before its first) left a folder that looked like a run that failed, with no
    word. Its ``.hydra/`` is kept: it is the record of the config the job would have run with, which the continue
    hints read. A folder with a ``metrics.json`` (a job that ran, or the stop landed as the last one ended) is left
    as it is.

    Parameters
    ----------
    job_dir : path-like or None
        The job's folder (``current_job_dir``).
    why : str
        What stopped the sweep, as the console says it.

    Returns
    -------
    Path or None
        The log written to; None where nothing was written.
    """
    if job_dir is None:
        return None
    job_dir = Path(job_dir)
    if not (job_dir / ".hydra").is_dir() or (job_dir / "metrics.json").exists():
        return None
    log_file = job_dir / "launch.log"
    what = f"job {job_dir.name} of the sweep" if (job_dir.parent / "multirun.yaml").is_file() else "this run"
    try:
        with open(log_file, "a", encoding="utf-8") as f:
            f.write(f"{what} did not start ({why}): nothing ran in this folder; .hydra/ holds the config it would "
                    "have run with\n")
    except OSError:  # a note: never worth the stop's exit code
        return None
    return log_file

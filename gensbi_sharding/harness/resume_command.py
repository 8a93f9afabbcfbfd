"""Which ``train.resume`` a printed command that continues a job carries: ``auto``, or the run the job continues.

``train.resume=auto`` continues the job's own newest checkpoint and, in a folder without one, starts from step 0. A
job launched with ``train.resume=<another run>`` (train that run further; ``-m train.resume=<run a>,<run b>``) that
stopped or failed before its first save, or never started, has no checkpoint of its own: its command keeps
``train.resume=<that run>``, which ``run_folder.ensure_fresh`` lets retry such a folder (was: ``auto`` in every
command, so the printed command trained that job from step 0, its status ok, the run it was to continue unused).
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["AUTO", "named_resume", "resume_override", "resumed_here"]

AUTO = "train.resume=auto"


def named_resume(overrides: Sequence[str]) -> str | None:
    """The last ``train.resume=<run>`` of ``overrides`` naming a run (neither ``auto`` nor ``null``), as
    ``train.resume=<value as typed>``; None where there is none.

    Parameters
    ----------
    overrides : sequence of str
        Hydra overrides as typed (``+``/``++`` prefixes allowed), e.g. a job's ``.hydra/overrides.yaml``.

    Returns
    -------
    str or None
    """
    values = [o.split("=", 1)[1] for o in map(str, overrides) if o.lstrip("+").startswith("train.resume=")]
    return f"train.resume={values[-1]}" if values and values[-1].strip() not in ("auto", "null", "") else None


def holds_checkpoint(run_dir: Any) -> bool:
    """Whether ``run_dir/checkpoints`` holds anything: told apart as ``run_folder.ensure_fresh`` does, which lets
    ``train.resume=<another run>`` into a stopped job's folder only without one."""
    checkpoints = Path(run_dir) / "checkpoints"
    return checkpoints.is_dir() and any(checkpoints.iterdir())


def resume_override(overrides: Sequence[str], run_dir: Any) -> str:
    """The ``train.resume`` override of the command that continues the job ``overrides`` launched, in ``run_dir``.

    Parameters
    ----------
    overrides : sequence of str
        The job's own overrides.
    run_dir : path-like
        The job's folder.

    Returns
    -------
    str
        ``train.resume=auto`` once ``run_dir`` holds a checkpoint, or where the job named no run to continue; else
        the job's ``train.resume=<run>``.
    """
    named = named_resume(overrides)
    return AUTO if named is None or holds_checkpoint(run_dir) else named


def resumed_here(command: str, run_dir: Any) -> str:
    """``command`` (a continue command made before ``run_dir`` held a checkpoint: ``distributed=local``'s parent
    makes its processes' at their start) with its ``train.resume`` turned to ``auto`` once ``run_dir`` holds one.

    Parameters
    ----------
    command : str
        A shell command as ``sweep_hints.job_command`` writes it.
    run_dir : path-like
        The job's folder.

    Returns
    -------
    str
    """
    words = shlex.split(command)
    if not holds_checkpoint(run_dir) or not any(w.startswith("train.resume=") for w in words):
        return command
    return " ".join(shlex.quote(AUTO if w.startswith("train.resume=") else w) for w in words)

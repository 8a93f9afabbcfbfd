"""The runs under a folder that is no run itself (``outputs``, ``outputs/<date>``, a ``benchmarks/sbibm.py run`` root).

Given where one run's folder belongs (``sample.py``'s run folder, ``train.resume=``), such a folder was refused with
"pass a run dir", though it holds the very runs meant: the refusal names them, the newest first.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from gensbi_sharding.checkpoint_steps import runs_below  # the library names them too: one scan, both

__all__ = ["job_number_key", "runs_below", "runs_note", "sweep_jobs"]


def runs_note(folder: str | os.PathLike, key: str | None = None, refusal: BaseException | None = None) -> str:
    """What a refusal of ``folder`` adds about the runs under it (``runs_below``): "" when none.

    Parameters
    ----------
    folder : str or os.PathLike
        The folder given where one run's folder belongs.
    key : str, optional
        The setting it was given as (``train.resume``): the newest run is then named as that override, as the
        shell and Hydra read it back (to a Python caller, ``cfg.train.resume='/runs/b'``); else as a path.
    refusal : BaseException, optional
        ``find_checkpoint``'s refusal of ``folder``: where it scanned the folder already, the runs are taken from it
        (its ``runs``), not scanned for again (was: twice, minutes on a folder of thousands of runs).

    Returns
    -------
    str
        E.g. ``"; it holds 3 run folder(s) with a checkpoint, the newest: train.resume=/runs/b"``.
    """
    # find_checkpoint's refusal keeps the runs it scanned for as data; one that refused before scanning (another
    # writer's checkpoint beside the runs, a step cut short) has none: scan then
    below = getattr(refusal, "runs", None)
    if below is None:
        below = runs_below(folder)
    if not below:
        return ""
    from gensbi_sharding.harness.python_words import setting  # launch.py's override, or run(cfg)'s setting

    newest = setting(key, below[0]) if key else str(below[0])
    return f"; it holds {len(below)} run folder(s) with a checkpoint, the newest: {newest}" + ("" if key else
                                                                                         ": pass one of them")


def sweep_jobs(sweep: str | os.PathLike) -> list[Path]:
    """The job folders of the sweep folder ``sweep`` holding a complete checkpoint, by job number: 0, 1, 2, ..., 10
    (not as strings, "0, 1, 10, 11, 2"); a ``hydra.sweep.subdir`` like ``${hydra.job.num}_${rule.name}`` by its
    numbers too ("1_fsdp" before "10_fsdp"), other names after them, alphabetically.

    Parameters
    ----------
    sweep : str or os.PathLike
        A sweep's folder (``multirun.yaml`` in it): its jobs' folders are its children.
    """
    from gensbi_sharding.checkpoint import CHECKPOINT_SUBDIR, committed_steps

    jobs = [j for j in Path(sweep).iterdir() if committed_steps(j / CHECKPOINT_SUBDIR)]
    return sorted(jobs, key=lambda j: job_number_key(j.name))


def job_number_key(name: str) -> tuple:
    """Sort key of a sweep's job folder ``name``: by its numbers (``"2"`` before ``"10"``, ``"1_fsdp"`` before
    ``"10_fsdp"``), names not starting with a digit after them; every list of a sweep's jobs a message names uses it
    (a refused rerun listed "0, 1, 10, 2, 3", sorted as strings).

    Parameters
    ----------
    name : str
        A job folder's name.
    """
    # Runs of ASCII digits compare as numbers (str.isdigit also holds for '²', which int() refuses)
    return not name[:1].isdigit(), [int(part) if k % 2 else part for k, part in enumerate(re.split(r"([0-9]+)", name))]

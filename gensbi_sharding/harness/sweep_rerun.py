"""The refusals of ``-m ... train.resume=auto`` into a sweep folder whose jobs would continue the wrong runs:
``moved_jobs_problem`` (job folders now standing for other swept values) and ``dropped_runs`` (a sweep over runs to
continue, rerun without them).

They read the sweep's jobs (``sweep_plan``), name each unfinished job's command (``sweep_hints``) and a job's run to
continue (``resume_command``); living above the three, they keep ``resume_command`` and ``sweep_plan`` from importing
each other and ``sweep_hints``. Pure Python: no JAX.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gensbi_sharding.harness.resume_command import RESUMABLE, named_resume
from gensbi_sharding.harness.sweep_hints import unfinished_jobs_hint
from gensbi_sharding.harness.sweep_plan import every_job, job_folders, moved_job

__all__ = ["moved_jobs_problem", "dropped_runs"]


def moved_jobs_problem(sweep_dir: Any, all_jobs: Sequence[Sequence[str]],
                       folders: Sequence[str] | None = None) -> str | None:
    """The refusal of ``-m ... train.resume=auto`` whose job folders now stand for other swept values; None if none.

    Job ``i`` continues its folder (``folders``, ``job_folders``; default: folder ``i``): a sweep rerun with its
    values reordered or changed would continue each job from another job's checkpoint (another learning rate,
    rule ...) without a word. Only the keys the sweep varies are compared; a job continued alone with, say, more
    ``train.steps`` still matches. A sweep over runs to continue rerun without them: ``dropped_runs``.
    """
    if (dropped := dropped_runs(sweep_dir, all_jobs)) is not None:
        return dropped
    moved = moved_job(sweep_dir, all_jobs, folders)
    if moved is None:
        return None
    number, want, folder, ran = moved
    from gensbi_sharding.harness.override_grammar import hydra_override  # as typed: a path with a space, quoted

    return (f"{hydra_override('hydra.sweep.dir', sweep_dir)}: job {number} of this sweep ({want}) would continue "
            f"folder {folder}, "
            f"which ran {ran}: train.resume=auto continues each job in the folder of its number; rerun the sweep "
            "with its values in the order it first ran, or choose another hydra.sweep.dir")


def dropped_runs(sweep_dir: Any, all_jobs: Sequence[Sequence[str]]) -> str | None:
    """The refusal of ``-m ... train.resume=auto hydra.sweep.dir=<a sweep over runs to continue>``; None otherwise.

    Refused, since it would run only the jobs whose folders hold a checkpoint, rewrite ``multirun.yaml`` and end
    "sweep done: 1 ok, 0 failed", the job still to continue its run dropped from the sweep and its summary.

    Parameters
    ----------
    sweep_dir : path-like
        The sweep folder, holding the earlier sweep's ``multirun.yaml``.
    all_jobs : sequence of sequence of str
        This command's jobs (``sweep_plan.sweep_jobs``).

    Returns
    -------
    str or None
        Naming each unfinished job's own command (``sweep_hints.unfinished_jobs_hint``).
    """
    from omegaconf import OmegaConf

    from gensbi_sharding.harness.outputs import read_record
    from gensbi_sharding.harness.override_grammar import hydra_override  # as typed: a path with a space quoted

    saved = read_record(Path(sweep_dir) / "multirun.yaml")
    if not OmegaConf.is_dict(saved) or any(named_resume(job) for job in all_jobs):
        return None
    before = every_job(saved)
    named = sorted({named_resume(job) for job in before} - {None})
    if not named:
        return None
    jobs = sorted(m.parent for m in Path(sweep_dir).glob("*/metrics.json"))
    hint = unfinished_jobs_hint(jobs, RESUMABLE, before, sweep_dir, folders=job_folders(saved, before))
    return (f"{hydra_override('hydra.sweep.dir', sweep_dir)} holds a sweep whose jobs continue other runs "
            f"({', '.join(named)}), which "
            "train.resume=auto for the whole sweep would drop: a job without a checkpoint of its own would start "
            "from step 0" + (hint or "; choose another hydra.sweep.dir"))

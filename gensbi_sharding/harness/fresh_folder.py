"""Refusing a folder that holds another run's results: ``ensure_fresh``, and the statuses ``train.resume=auto``
continues (``RESUMABLE``, ``resume_command``'s, named here too). Moved from ``run_folder``, which claims the folder with
it."""

from __future__ import annotations

from pathlib import Path

from omegaconf import OmegaConf

from gensbi_sharding.harness.further_hint import rerun_hint, stopped_hint, train_further_hint
from gensbi_sharding.harness.launch_record import step_folder_names
from gensbi_sharding.harness.outputs import read_metrics
from gensbi_sharding.harness.python_words import said_as, setting
from gensbi_sharding.harness.resume_command import (AUTO, RESUMABLE, auto_problem, folder_resume, holds_checkpoint,
                                                    requeued_step)

__all__ = ["ensure_fresh", "RESUMABLE"]

_DIR = {False: "hydra.run.dir", True: "hydra.sweep.dir"}
_FOLDER = "cfg.output_dir"  # the folder a Python caller (run(cfg)) sets


_AUTO_CONFIG = {"train": {"resume": "auto"}}  # what auto_problem reads of a command's config


def ensure_fresh(out_dir: Path, *, resume_auto: bool = False, resume_from: bool = False,
                 dry_run: bool = False, steps: int | None = None, overrides: list[str] | None = None,
                 multirun: bool = False, resume: str | None = None) -> dict | None:
    """Refuse to run into a folder that holds another run's results.

    With ``resume_auto`` (``train.resume=auto``) a folder whose run ended with a status in ``RESUMABLE`` (preempted,
    interrupted, error), or left checkpoints without metrics (killed), may be continued: the same command, requeued.
    With ``resume_from`` (``train.resume=<another folder>``) such a folder without a complete checkpoint of its own
    is retried (a mistyped path corrected; auto there: ``resume_command.auto_problem``), or with one that continued
    ``resume`` (``requeued_step``: requeued), the command's ``train.resume`` (which sets either flag). A ``dry_run``
    continues nothing: it is refused any folder that holds a run's metrics or checkpoints. A completed run's refusal
    names the command that trains it further into a new folder (``train_further_hint``: ``steps``, the
    ``train.steps`` asked for, the command's ``overrides``); ``multirun``: a job, hydra.sweep.dir named.

    Returns
    -------
    dict or None
        The earlier attempt's metrics when continuing one; None for a fresh folder.

    Raises
    ------
    FileExistsError
        Naming the folder, its metrics.json or checkpoints, and the override to use.
    """
    out_dir = Path(out_dir)
    resume_auto = (resume_auto or resume == "auto") and not dry_run  # a dry run continues nothing
    resume_from = (resume_from or resume not in (None, "", "auto")) and not dry_run
    previous = read_metrics(metrics) if (metrics := out_dir / "metrics.json").exists() else None
    status = (previous or {}).get("status", "unknown")
    has_checkpoints = (checkpoints := out_dir / "checkpoints").is_dir() and any(checkpoints.iterdir())
    stopped = status in ("preempted", "interrupted")  # a failed one's folder takes any command (test_continue_advice)
    if resume_auto and stopped and (problem := auto_problem(out_dir, OmegaConf.create(_AUTO_CONFIG))):
        # Hydra's callback refuses this before a launch; run(cfg) from Python reaches only this check: without it, a
        # stopped continuation of another run was trained afresh from step 0 there, status ok
        raise FileExistsError(problem)
    retry = resume_from and (status in RESUMABLE and not holds_checkpoint(out_dir)  # a first save cut short: none
                             or (previous is None or status in RESUMABLE)
                             and requeued_step(out_dir, resume) is not None)
    # A failed run with no complete step saved: any command reruns there
    if previous is not None and not (resume_auto and status in RESUMABLE) and not retry and not (
            status == "error" and not dry_run and not _holds_complete_step(out_dir, has_checkpoints)):
        hint = (("continue it by its own command" if multirun and resume_from else  # auto: a sweep's jobs from step 0
                 rerun_hint(out_dir, *_again(out_dir), overrides, multirun))
                + f", or choose another {said_as(_DIR[multirun], _FOLDER)}"
                if status in RESUMABLE and not dry_run else "choose another "
                + said_as("hydra.sweep.dir" if multirun else "hydra.run.dir (or hydra.sweep.dir)", _FOLDER)
                + (" for the dry run (a dry run writes only into a fresh folder)" if dry_run else
                   train_further_hint(out_dir, (step_folder_names(out_dir) or [None])[-1], steps, overrides,
                                      multirun=multirun, stopped_early=bool(previous.get("stopped_early")))))
        raise FileExistsError(f"{metrics} already exists (status {status}): this folder holds an earlier run's "
                              f"outputs, which are never overwritten; {hint}")
    if dry_run and has_checkpoints:
        raise FileExistsError(f"{checkpoints} holds a run's checkpoints; a dry run writes only into a fresh "
                              f"folder: choose another {said_as('hydra.run.dir', _FOLDER)} for the dry run")
    # (a failed run's record and only a save cut short: rerun above, not "a run with no record")
    if not (resume_auto or retry or previous is not None) and has_checkpoints:  # the folder as Hydra and the shell
        # read it back, not the raw path; to a Python caller, cfg's settings
        raise FileExistsError(f"{checkpoints} holds the checkpoints of a run with no record (stopped, or its record "
                              f"could not be written); {stopped_hint(out_dir, overrides, multirun)}, or in a "
                              f"new folder with {setting('train.resume', out_dir)}{said_as(' ', ' and ')}"
                              f"{setting('hydra.run.dir', '<new folder>')}")
    return previous


def _again(out_dir: Path) -> tuple[str, str]:
    """What rerunning a stopped run in ``out_dir`` with ``train.resume=auto`` does, as ``rerun_hint``'s ``again`` and
    ``why``: it continues a complete checkpoint; with none (stopped before its first save completed) it starts from
    step 0, which "continue it" would not say. One that named a run to continue (``train.resume=<run>``, which the
    rerun keeps: ``folder_resume``) continues that run's checkpoint."""
    if holds_checkpoint(out_dir) or folder_resume(out_dir) != AUTO:
        return "continue it", ""
    return "start it again", " (it saved no complete checkpoint: it trains from step 0)"


def _holds_complete_step(out_dir: Path, has_checkpoints: bool) -> bool:
    """Whether ``out_dir/checkpoints`` holds a complete step (Orbax's commit recorded), not anything there: a
    failed run whose only save was cut short would be told "rerun with train.resume=auto to continue it", which
    continues nothing and trains from step 0. ``FileExistsError`` (the library's, naming the move) for a step folder cut
    short, which the rerun's first save would refuse."""
    if not has_checkpoints:
        return False
    if holds_checkpoint(out_dir):  # quietly: Orbax's info line would stand above the refusal's one line
        return True
    from gensbi_sharding.checkpoint_lock import check_none_cut_short

    # A step folder cut short (not Orbax's temporary one, which the next run's checkpointer removes) would refuse
    # the rerun's first save, once its folder is claimed and its data simulated: refused here, naming the move.
    check_none_cut_short(out_dir / "checkpoints")
    return False

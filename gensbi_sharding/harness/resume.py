"""Where a run resumes from, and whether it may: the checkpoint ``train.resume`` names, checked before any work.

``resume_point`` finds the step folder (``train.resume=auto``: the run's own newest); ``check_resume_settings`` refuses,
before simulating, settings under which the saved arrays mean something else, naming the overrides that match.
"""

from __future__ import annotations

import logging
import shlex
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from gensbi_sharding.harness.best_job import best_note
from gensbi_sharding.harness.config import ConfigError
from gensbi_sharding.harness.console import EVERY_PROCESS
from gensbi_sharding.harness.fresh_start import fresh_start_words
from gensbi_sharding.harness.runs_below import runs_note, sweep_jobs
from gensbi_sharding.harness.python_words import WITHOUT_RESUME, in_python_words, said_as, setting
from gensbi_sharding.harness.resume_refusal import refuse_resume_settings
from gensbi_sharding.harness.resume_settings import compute_dtype_note
from gensbi_sharding.harness.resume_command import launch_dir, requeued_step
from gensbi_sharding.harness.sampled_checkpoint import rescored_from

__all__ = ["resume_step_dir", "resume_point", "check_resume_settings", "check_resume_in_run", "saved_statistics"]

log = logging.getLogger("gensbi_sharding")


def resume_step_dir(cfg: DictConfig) -> Path | None:
    """The checkpoint step folder ``train.resume`` points at (relative to the launch folder)."""
    if not cfg.train.resume:
        return None
    from gensbi_sharding.checkpoint import CHECKPOINT_SUBDIR, find_checkpoint
    from gensbi_sharding.harness.resume_command import resumed_metrics
    from gensbi_sharding.harness.sampled_checkpoint import SEQUENTIAL, lost_step_metadata

    folder = launch_dir() / Path(cfg.train.resume).expanduser()
    fresh = said_as(*WITHOUT_RESUME)  # "start a new run without train.resume", in the caller's words
    if (folder / "multirun.yaml").is_file():  # a sweep's folder: its checkpoints are its jobs'
        jobs, named = sweep_jobs(folder), lambda job: setting("train.resume", job)  # best-scoring first
        raise ConfigError(f"{setting('train.resume', folder)} is a sweep's folder: " + (
            f"resume one of its jobs, {best_note(jobs, named)}" if jobs else
            f"none of its jobs saved a checkpoint (a dry run saves none): start a new run {fresh}"))
    if (writer := _writing_run(folder)) is not None:
        raise ConfigError(writer)
    try:
        return find_checkpoint(cfg.train.resume, base_dir=launch_dir())
    except FileNotFoundError as err:
        if lost := getattr(err, "unconfirmed", None):  # a step newer than the newest complete one lost its metadata
            raise ConfigError(f"{setting('train.resume', cfg.train.resume)}: {lost}"
                              f"{_source_gone(folder.resolve())}") from None
        metrics = folder / "metrics.json"  # a run's folder that saved no checkpoint: say why
        gone = _source_gone(folder) if lost_step_metadata(folder) else ""  # the step to resume, by its path
        said = _lost_here(folder.resolve()) or str(err) if gone else \
            f"{err}, as {setting('train.resume', '<folder>')}"  # not parent
        if not metrics.is_file():  # the override named, not a bare "checkpoint path ..."
            said = getattr(err, "reason", said) if (below := runs_note(folder, "train.resume", err)) else said
            raise ConfigError(f"{setting('train.resume', cfg.train.resume)}: {said}"
                              f"{below}{gone}; or {said_as('leave train.resume out', 'set cfg.train.resume=None')} "
                              "to start fresh") from None
        if gone:  # ``err`` names the step and the fix (was, status ok: "holds a completed run whose checkpoints are
            raise FileNotFoundError(f"{said}{gone}; or start a new run {fresh}") from None  # gone ...")
        status = (previous := resumed_metrics(metrics, cfg.train.resume)).get("status")
        why = ("is a sequential job's folder (benchmarks/sequential.py), whose rounds keep no checkpoint: start a new "
               f"run {fresh}" if (folder / SEQUENTIAL).is_file() else  # none were kept
               f"holds a dry run (dry_run=true saves no checkpoint): start a new run {fresh}"
               if "dry_run" in previous else f"holds a run that trained nothing and saved no checkpoint: it scored "
               f"the one it resumed from again; resume that one, {setting('train.resume', previous['resumed_from'])}"
               if status == "ok" and rescored_from(previous) else "holds a completed run whose checkpoints are gone "
               f"(no complete step folder in {folder / CHECKPOINT_SUBDIR}): start a new run {fresh}"
               if status == "ok" else f"holds a run that saved no complete checkpoint (status {status}): " + (
                   f"resume the checkpoint it continued, {setting('train.resume', previous['resumed_from'])}, "
                   f"or start a new run {fresh}" if previous.get("resumed_from") else  # none continued:
                   f"start a new run {fresh}"))  # there is no "run it failed to continue"
        raise FileNotFoundError(f"{err}; {folder} {why}") from None


def _lost_here(step: Path) -> str | None:
    """"<step> is not a complete checkpoint (...)" where ``step`` is a step folder that lost its Orbax step metadata
    beside a complete one (``find_checkpoint`` then says to pass its parent, refused: a newer step lost it); else None.
    Worded from the folders, not ``find_checkpoint``'s message cut at "; pass its parent"."""
    from gensbi_sharding.checkpoint_steps import committed_steps, unconfirmed_steps

    if not (step.name.isdigit() and int(step.name) in unconfirmed_steps(step.parent) and committed_steps(step.parent)):
        return None
    return (f"{step} is not a complete checkpoint (its items are there, but not Orbax's step metadata, the record of "
            "its commit (deleted, or left out of a copy): copy the step folder again whole from where it was saved)")


def _source_gone(folder: Path) -> str:
    """What to do where the step ``folder`` designates lost its Orbax step metadata and the folder it was copied from
    is gone (``find_checkpoint``'s fix, copying it again, then cannot be followed): resume the newest complete step
    beside it, named, or, where there is none, say so."""
    from gensbi_sharding.checkpoint_steps import CHECKPOINT_SUBDIR, committed_steps

    checkpoints = folder.parent if folder.name.isdigit() and not (folder / CHECKPOINT_SUBDIR).is_dir() else (
        folder / CHECKPOINT_SUBDIR if (folder / CHECKPOINT_SUBDIR).is_dir() else folder)
    steps = committed_steps(checkpoints)
    return "; if the folder it was copied from is gone, " + (
        f"resume the newest complete step left, {setting('train.resume', checkpoints / str(steps[-1]))}" if steps
        else f"no complete step is left in {checkpoints} to resume")


def _writing_run(folder: Path) -> str | None:
    """Why ``train.resume=<folder>`` (a run's folder, its checkpoints/ or one step) cannot be read now: another
    process holds that run's lock, saving and deleting checkpoints (``train.keep``): the newest step, picked, may
    be deleted before it is read ("checkpoint path '<run>/checkpoints/1400' does not exist; pass a run dir")."""
    from filelock import FileLock, Timeout
    from hydra.core.hydra_config import HydraConfig

    from gensbi_sharding.harness.folder_lock import FolderLock

    run = next((f for f in (folder, folder.parent, folder.parent.parent) if (f / FolderLock.LOCK).is_file()), None)
    own = Path(HydraConfig.get().runtime.output_dir).resolve() if HydraConfig.initialized() else None
    if run is None or run.resolve() == own:  # this job's own folder: its lock is this job's (distributed=local's
        return None  # processes too, whose parent holds it)
    try:
        with FileLock(run / FolderLock.LOCK, timeout=0, is_singleton=True):  # this process's own: re-entered
            return None
    except Timeout:
        pass
    return (f"{setting('train.resume', folder)}: a run is still writing in {run} ({FolderLock(run).holder()}), "
            "and deletes older checkpoints as it saves new ones, so the one picked may be gone before it is read; "
            "wait for that run to end, or copy its newest complete step folder (mkdir -p <copy>/checkpoints; cp -r "
            f"{shlex.quote(str(run / 'checkpoints'))}/<step> <copy>/checkpoints/) and give "
            f"{setting('train.resume', '<copy>')}")


def resume_point(cfg: Any, out: Any) -> Any:
    """The checkpoint step folder a run resumes from, or None to start fresh.

    ``train.resume=auto``: the newest complete checkpoint in the run's own folder
    (requeued with the same command and ``hydra.run.dir``), None if there is none yet.
    Any other value: the folder ``train.resume`` points at (``resume_step_dir``), or where the run's own folder
    holds a checkpoint saved continuing that same run, that one (``requeued_step``). Either way resolved
    (symlinks, ``..``): ``resumed_from`` in ``metrics.json`` keeps naming the checkpoint restored after a
    symlinked folder (``hydra.run.dir=runs/latest``) points elsewhere.
    """
    from gensbi_sharding.checkpoint import CHECKPOINT_SUBDIR, committed_steps

    if cfg.train.resume != "auto":
        if (own := requeued_step(out, cfg.train.resume)) is None:
            with in_python_words():  # run(cfg) from Python: its refusals in the settings it sets
                return resume_step_dir(cfg)
        log.info("train.resume=%s: %s already holds its own checkpoint (step %d) of this continuation, as after a "
                 "requeue: resuming from it", cfg.train.resume, out, own)
        return (Path(out) / CHECKPOINT_SUBDIR / str(own)).resolve()
    steps = committed_steps(out / CHECKPOINT_SUBDIR)
    # a sweep's job never run before (continued after a Ctrl-C) starts in one short line: there is nothing to advise
    log.info("train.resume=auto: %s", f"resuming from step {steps[-1]}" if steps else fresh_start_words(out))
    return (out / CHECKPOINT_SUBDIR / str(steps[-1])).resolve() if steps else None


def check_resume_settings(step_dir: Path, cfg: DictConfig) -> None:
    """Before simulating: ``resume_refusal.refuse_resume_settings`` (the overrides that match the checkpoint in
    ``step_dir``), then a changed schedule or compute dtype is said (a warning when the saved run was unfinished)."""
    from gensbi_sharding.checkpoint import saved_config
    from gensbi_sharding.harness.schedule import schedule_change_note

    refuse_resume_settings(step_dir, cfg)
    saved, now = saved_config(step_dir), OmegaConf.to_container(cfg, resolve=True)
    for note in filter(None, (said(saved, now, int(step_dir.name)) for said in (schedule_change_note,
                                                                                  compute_dtype_note))):
        log.log(logging.WARNING if note[1] else logging.INFO, "%s", note[0], extra=EVERY_PROCESS)  # allowed, but said


def check_resume_in_run(step_dir: Path, cfg: DictConfig) -> None:
    """``check_resume_settings`` as a run makes it: called from Python (``run(cfg)``), its refusals name the settings
    such a caller sets (``python_words``: "set cfg.model.width=32", not launch.py's "add model.width=32", as the
    folder's refusals say them); under launch.py, as they are."""
    with in_python_words():
        check_resume_settings(step_dir, cfg)


def saved_statistics(step_dir: Path | None) -> dict | None:
    """The z-score statistics saved with the checkpoint in ``step_dir`` (None: a fresh run, or a checkpoint
    saved before they were, whose run then recomputes them from its own simulations, with a warning)."""
    if step_dir is None:
        return None
    from gensbi_sharding.checkpoint import saved_info
    from gensbi_sharding.harness.simulation_data import NORMALIZATION

    statistics = saved_info(step_dir).get(NORMALIZATION)
    if statistics is None:
        log.warning("checkpoint %s holds no z-score statistics (saved by an earlier version): they are recomputed "
                    "from this run's simulations, the same only if seed and data.* are as when it was saved",
                    step_dir, extra=EVERY_PROCESS)
    return statistics

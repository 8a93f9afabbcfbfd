"""What ``sample.py`` says when the run it samples has not finished training: stopped, failed, or still training.

``sample.py`` samples a stopped run's newest checkpoint, as documented. It said only "sampling checkpoint
<run>/checkpoints/1 (step 1)": a run Ctrl-C'd during its first steps (of ``train.steps=2000``) gave 10,000 samples
of a barely trained network, written as the run's posterior, with nothing saying the run had stopped or how to finish
it. A warning now names the run's status, the step against its ``train.steps`` and the command that continues it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gensbi_sharding.harness.moved_folder import continue_in
from gensbi_sharding.harness.units import is_int

__all__ = ["unfinished_note", "recorded_command", "recorded_overrides", "training_run"]


def unfinished_note(step_dir: Path, cfg: Any, info: dict | None = None) -> str | None:
    """The warning for sampling ``step_dir`` of a run that has not finished; None for a finished run.

    Parameters
    ----------
    step_dir : Path
        The checkpoint step folder sampled, ``<run>/checkpoints/<step>``.
    cfg : DictConfig or Mapping
        The run's saved config (its ``train.steps``, ``train.patience``).
    info : dict, optional
        The checkpoint's saved info (its early-stopping state: a run whose training early stopping ended is finished,
        whatever became of its evaluation).

    Returns
    -------
    str or None
        E.g. ``"<run> stopped (status interrupted) at step 1 of train.steps=2000: these samples are of a posterior
        trained 1 of its 2000 steps; to finish it: python launch.py ... train.resume=auto hydra.run.dir=<run>, then
        sample again"``; a run with no readable record of its end (killed: SIGKILL, out of memory) is said to have
        left none. None where the run's training ended (status ok, or early stopping ended it, its evaluation cut
        short or not), where the step is not under ``train.steps`` (a run trained further in place), or where its
        folder is not a run's.
    """
    from gensbi_sharding.harness.outputs import read_metrics

    run = step_dir.parent.parent if step_dir.parent.name == "checkpoints" else None
    steps = (cfg.get("train") or {}).get("steps")  # a checkpoint CheckpointWriter saved with a config of its own
    if run is None or not is_int(steps) or not step_dir.name.isdigit() or int(step_dir.name) >= steps:
        return None
    if _stopped_early(cfg, info):  # training ended here: only an evaluation after it may have been cut short
        return None
    step = int(step_dir.name)
    trained = f"at step {step} of train.steps={steps}: these samples are of a posterior trained {step} of its " \
              f"{steps} steps, not the run's result"
    from gensbi_sharding.harness.override_grammar import hydra_override

    own = f"to finish it, continue it with train.resume=auto {hydra_override('hydra.run.dir', run)} and the run's " \
          "own overrides"
    try:
        record = read_metrics(run / "metrics.json")
    except (OSError, ValueError):  # no record (a run still training or killed) or a damaged one
        record = None
    if record is not None and (record.get("status") == "ok" or record.get("stopped_early")):
        return None  # finished, or early stopping ended its training (only its evaluation cut short)
    # Someone writes there: a run still training, or a stopped one continued (train.resume=auto), whose metrics.json
    # is the earlier attempt's until this one ends: not "stopped (status preempted)" with a command already running
    if (writer := training_run(run)) is not None:
        return f"{run}'s run is still training ({writer}); its newest checkpoint is {trained}: sample it again " \
               "when it ends"
    if record is None:
        # No one writes there: the run was killed where it could not record its end (SIGKILL, the OOM killer, a lost
        # machine); its newest checkpoint under train.steps is all that says how far it got.
        missing = "no metrics.json" if not (run / "metrics.json").exists() else "a damaged metrics.json"
        fix = f"to finish it: {command}, then sample again" if (command := recorded_command(run)) else own
        return f"{run} left no record of its end ({missing}: killed by SIGKILL, out of memory, a lost machine?); " \
               f"its newest checkpoint is {trained}; {fix}"
    resume = continue_in(record, run)  # the folder as it is now (moved or copied: not the one it ran in)
    fix = f"to finish it: {resume}, then sample again" if resume else own
    return f"{run} stopped (status {record.get('status')}) {trained}; {fix}"


def recorded_command(run: Path) -> str | None:
    """The command that continues the run in ``run`` as Hydra recorded it there (``recorded_overrides``): a killed
    run, which wrote no record of its end, names none itself; None where Hydra's record is missing or unreadable
    (then the overrides to add are said instead)."""
    from gensbi_sharding.harness.sweep_hints import job_command

    if (record := recorded_overrides(run)) is None:
        return None
    # A sweep's job: hydra.mode=RUN added, as a stopped sweep job's own command has it
    return job_command([*record[0], *record[1]], run, multirun=(run.parent / "multirun.yaml").is_file())


def recorded_overrides(run: Any) -> tuple[list[str], list[str]] | None:
    """Hydra's record of the command that ran in the folder ``run``: its config flags and search path (``hydra.yaml``;
    [] where that is missing) and its overrides (``.hydra/overrides.yaml``); None where the overrides are missing or
    unreadable. The one reading of it: ``recorded_command`` and ``further_hint``'s command of a folder's own settings.
    """
    from omegaconf import OmegaConf

    from gensbi_sharding.harness.outputs import read_record
    from gensbi_sharding.harness.sweep_hints import config_flags, search_path_of

    saved = read_record(Path(run) / ".hydra" / "overrides.yaml")
    if not OmegaConf.is_list(saved):
        return None
    hydra = getattr(read_record(Path(run) / ".hydra" / "hydra.yaml"), "hydra", None)
    flags = [*config_flags(hydra), *search_path_of(OmegaConf.select(hydra, "overrides.hydra", default=None))] \
        if OmegaConf.is_dict(hydra) else []
    return flags, list(map(str, saved))


def training_run(folder: Path) -> str | None:
    """Who holds ``folder``'s run lock (a run still writing there), None if no one does (a run stopped, failed or
    killed: ``unfinished_note``, ``best_job``'s stopped jobs, ``sampled_checkpoint``'s wait for a run).

    Parameters
    ----------
    folder : Path
        A run's folder.
    """
    from filelock import FileLock, Timeout

    from gensbi_sharding.harness.folder_lock import FolderLock

    if not (folder / FolderLock.LOCK).is_file():
        return None
    try:
        with FileLock(folder / FolderLock.LOCK, timeout=0, is_singleton=True):
            return None
    except Timeout:
        return FolderLock(folder).holder()


def _stopped_early(cfg: Any, info: dict | None) -> bool:
    """Whether the checkpoint's early-stopping state (``info``) has run out of ``train.patience``: the run's training
    ended there (``validation.EarlyStopping.exhausted``), even where its end was never recorded."""
    from gensbi_sharding.harness.state import EARLY_STOPPING
    from gensbi_sharding.harness.validation import EarlyStopping  # its rule, not a copy of it

    scalars = (info or {}).get(EARLY_STOPPING) or {}
    patience, since_best = (cfg.get("train") or {}).get("patience"), scalars.get("since_best")
    return is_int(patience) and is_int(since_best) and EarlyStopping(patience=patience, since_best=since_best).exhausted

"""Which ``train.resume`` a printed command that continues a job carries: ``auto``, or the run the job continues.

``train.resume=auto`` continues the job's own newest checkpoint and, in a folder without one, starts from step 0. A
job launched with ``train.resume=<another run>`` (train that run further; ``-m train.resume=<run a>,<run b>``) that
stopped or failed before its first save, or never started, has no checkpoint of its own: its command keeps
``train.resume=<that run>``, which ``fresh_folder.ensure_fresh`` lets retry such a folder (with ``auto``,
the printed command would train that job from step 0, its status ok, the run it was to continue unused).
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["AUTO", "RESUMABLE", "BY_JOB", "named_resume", "resume_override", "folder_resume", "auto_problem",
           "resumed_here", "launch_dir", "requeued_step", "resumed_metrics"]

AUTO = "train.resume=auto"
#: Statuses of a run that ``train.resume=auto`` may continue in its own folder (``fresh_folder.ensure_fresh``).
RESUMABLE = ("preempted", "interrupted", "error")
#: Why a sweep naming runs to continue is continued job by job: ``-m ... train.resume=auto`` starts afresh each job
#: without a checkpoint of its own (``sweep_rerun.dropped_runs`` refuses it: it would run only the jobs with one).
BY_JOB = "each job continues the run its train.resume names, which no one command for the sweep can"


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
    # 'auto' quoted, as a record holds it typed, is auto, not a run named 'auto'; a quoted 'null' names a folder.
    named = values and values[-1].strip() not in ("null", "") and values[-1].strip(" '\"") != "auto"
    return f"train.resume={values[-1]}" if named else None


def holds_checkpoint(run_dir: Any) -> bool:
    """Whether ``run_dir/checkpoints`` holds a complete checkpoint, which ``train.resume=auto`` would continue;
    ``fresh_folder.ensure_fresh`` lets ``train.resume=<another run>`` retry a stopped job's folder only without one.
    (Not anything there: a first save cut short, only Orbax's temporary folder, would make the command ``auto``,
    which trains from step 0.) Orbax's info line "Read Metadata={...}" left out: asked before a run quiets the
    loggers (a folder's refusal from Hydra's callback), it stood above the refusal's one line."""
    from gensbi_sharding.checkpoint import CHECKPOINT_SUBDIR, committed_steps
    from gensbi_sharding.harness.launch_record import quiet_absl

    with quiet_absl():
        return bool(committed_steps(Path(run_dir) / CHECKPOINT_SUBDIR))


def launch_dir() -> Path:
    """The folder the command was launched from, which a relative ``train.resume`` is read against (Hydra's original
    working folder: a job may have changed into its output folder, ``hydra.job.chdir``).

    Returns
    -------
    Path
    """
    from hydra.core.hydra_config import HydraConfig
    from hydra.utils import get_original_cwd

    return Path(get_original_cwd() if HydraConfig.initialized() else ".").absolute()


def requeued_step(run_dir: Any, resume: Any) -> int | None:
    """The step of ``run_dir``'s own newest complete checkpoint where the attempt that saved it continued the run
    ``resume`` names (its saved ``train.resume``, both read against the launch folder): the same command requeued
    after its first save (SLURM, submitit), which continues that checkpoint, not the run's (a refusal, "rerun with
    train.resume=auto", would end the requeued job in error). A checkpoint saved by a ``train.resume=auto`` attempt (one
    continued by hand in between) continued the folder's own older one: its lineage is that one's, read from the
    older checkpoints kept (not another lineage). None otherwise: ``resume`` auto or none, no checkpoint
    of its own, or one saved continuing another run, none, or (every checkpoint kept saved by ``auto``) unknown.

    Parameters
    ----------
    run_dir : path-like
        The job's folder.
    resume : str or None
        This command's ``train.resume``.

    Returns
    -------
    int or None
    """
    from gensbi_sharding.checkpoint import CHECKPOINT_SUBDIR, committed_steps
    from gensbi_sharding.harness.launch_record import quiet_absl

    with quiet_absl():  # asked before a run quiets the loggers (holds_checkpoint): Orbax's read stays unsaid
        steps = committed_steps(Path(run_dir) / CHECKPOINT_SUBDIR)
    if not steps or resume in (None, "", "auto"):
        return None
    saved = next((s for s in (saved_resume(run_dir, step) for step in reversed(steps)) if s != "auto"), None)
    read = lambda value: (launch_dir() / Path(str(value)).expanduser()).resolve()  # noqa: E731
    return steps[-1] if saved not in (None, "") and read(saved) == read(resume) else None


def saved_resume(run_dir: Any, step: int) -> Any:
    """The ``train.resume`` saved with ``run_dir``'s checkpoint ``step``; None where unreadable or none saved.
    (``saved_config`` leaves JAX's backend unstarted: this runs before the run sets its device count.)"""
    from gensbi_sharding.checkpoint import CHECKPOINT_SUBDIR, saved_config

    try:
        return (saved_config(Path(run_dir) / CHECKPOINT_SUBDIR / str(step)).get("train") or {}).get("resume")
    except (OSError, ValueError, AttributeError):  # unreadable, or no config saved: not known to be this one's
        return None


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


def folder_resume(run_dir: Any) -> str:
    """``resume_override`` of the attempt ``run_dir``'s Hydra record (``.hydra/overrides.yaml``) holds: the override
    that continues it there (``train.resume=auto`` in a refusal would train a job that named a run and
    saved no checkpoint from step 0).

    Parameters
    ----------
    run_dir : path-like
        A run's folder, before this attempt's Hydra record is written.

    Returns
    -------
    str
    """
    from omegaconf import OmegaConf

    from gensbi_sharding.harness.outputs import read_record

    ran = read_record(Path(run_dir) / ".hydra" / "overrides.yaml")
    return resume_override(list(map(str, ran)) if OmegaConf.is_list(ran) else _python_resume(run_dir), run_dir)


def _python_resume(run_dir: Any) -> list[str]:
    """``train.resume=<run>`` of the config ``run(cfg)`` from Python gave the attempt ``run_dir``'s ``metrics.json``
    records (Hydra records no overrides of such a run): without it, ``train.resume=auto`` there, where that attempt
    saved no checkpoint, trained a fresh model from step 0, status ok. [] where there is none or no readable record."""
    from gensbi_sharding.harness.outputs import metrics_problem, read_metrics

    metrics = Path(run_dir) / "metrics.json"
    if metrics_problem(metrics) is not None:
        return []
    resume = ((read_metrics(metrics).get("config") or {}).get("train") or {}).get("resume")
    return [] if resume in (None, "") else [f"train.resume={resume}"]


def auto_problem(run_dir: Any, config: Any) -> str | None:
    """The refusal of ``train.resume=auto`` for ``run_dir`` whose earlier attempt continued another run and saved no
    checkpoint of its own (auto would train it from step 0, that run unused, status ok); None otherwise.

    Parameters
    ----------
    run_dir : path-like
        The folder claimed (a sweep's folder holds no record: None; ``sweep_rerun.dropped_runs`` checks sweeps).
    config : DictConfig
        The command's config (``train.resume``).

    Returns
    -------
    str or None
    """
    from omegaconf import OmegaConf

    from gensbi_sharding.harness.python_words import override_said, said_as, setting  # launch.py's, or cfg's

    if OmegaConf.select(config, "train.resume", default=None) != "auto" or (kept := folder_resume(run_dir)) == AUTO:
        return None
    return (f"{setting('hydra.run.dir', run_dir)} holds a run continuing {kept.split('=', 1)[1]} that saved no "
            f"checkpoint of its own: {setting('train.resume', 'auto')} would train it from step 0 instead; rerun "
            f"with {override_said(kept, shlex.quote(kept))} (its own command), or choose another "
            f"{said_as('hydra.run.dir', 'cfg.output_dir')}")


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


def resumed_metrics(metrics: Path, resume: Any) -> dict:
    """The record ``metrics`` of the run ``train.resume`` names, where it holds no complete checkpoint (to say why);
    ``FileNotFoundError`` naming what is wrong with it (``outputs.metrics_problem``) and the fix, which is the resume's
    (not ``read_metrics``'s "choose another hydra.run.dir", of another folder than the run's, or "status None").

    Parameters
    ----------
    metrics : Path
        ``<folder>/metrics.json`` of the folder ``train.resume`` names.
    resume : str
        ``train.resume`` as given.
    """
    from gensbi_sharding.harness.outputs import metrics_problem, read_metrics
    from gensbi_sharding.harness.python_words import WITHOUT_RESUME, said_as, setting  # launch.py's, or cfg's

    if (problem := metrics_problem(metrics)) is None:
        return read_metrics(metrics)
    raise FileNotFoundError(f"{setting('train.resume', resume)}: {metrics.parent} holds no complete "
                            f"checkpoint, and its record {metrics} cannot be read ({problem}): nothing there to "
                            f"resume; start a new run {said_as(*WITHOUT_RESUME)}")

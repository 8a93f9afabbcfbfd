"""The line a stopped sweep job prints after its own command: how to continue the rest of the sweep.

Rerun as a whole (``-m ... train.resume=auto hydra.sweep.dir=<sweep>``), a sweep continues every job only while
none has completed: a sweep folder holding a completed job is refused (its files are never overwritten), the
refusal naming each unfinished job's own command. So once a job has completed, those commands are the ones
printed here: a printed command works as printed (the ``-m`` command would be refused when run).
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gensbi_sharding.harness.paste_command import command_for
from gensbi_sharding.harness.resume_command import BY_JOB, RESUMABLE, named_resume
from gensbi_sharding.harness.sweep_hints import config_flags, hydra_job_overrides, search_path_of, unfinished_jobs_hint

__all__ = ["whole_sweep_hint", "dry_run_sweep", "dry_run_sweep_again", "sweep_again"]


def whole_sweep_hint(run_dir: Any, argv: Sequence[str], *, started: bool = True) -> str:
    """How to continue the sweep a job stopped by Ctrl-C or a preemption belongs to; "" outside a multirun.

    While no other job of the sweep has completed: "to continue the whole sweep, this job and those not started:
    python launch.py -m ... train.resume=auto hydra.sweep.dir=<sweep>". Once one has, that command would be
    refused: "to continue the rest of the sweep, a sweep folder holding completed jobs is never rerun as a whole:
    continue its unfinished jobs (1 never started) one by one: <command> ; <command>", this job's first (more
    than three: ``bash <sweep>/continue_unfinished.sh``), as the refusal names them; with one job left, that
    command alone, and when that job is this one, whose command the line before names, no command again. Those
    commands too where the sweep named a run to continue (``train.resume=<run>``): each job's own keeps it until
    its folder holds a checkpoint, after which ``auto``. A sweep of dry runs continues nothing: "a dry-run sweep has
    nothing to continue: run it again with: python launch.py -m ... hydra.sweep.dir=<sweep>-again" (``dry_run_sweep``).

    Parameters
    ----------
    run_dir : path-like
        The stopped job's folder, ``<sweep>/<job>``.
    argv : sequence of str
        ``sys.argv`` of the command that started the sweep; only ``launch.py``'s is rebuilt.
    started : bool, optional
        False: ``run_dir`` is the folder Hydra made for a job that never started (a preemption between jobs,
        ``sweep_stop.stopped_between_jobs``): it is one of the jobs never started, not a stopped one.

    Returns
    -------
    str
    """
    from gensbi_sharding.harness.override_grammar import hydra_override

    # started=False comes only between a multirun's jobs, where Hydra no longer holds a job's config after a Ctrl-C
    if (started and not hydra_job_overrides()[1]) or not argv or Path(argv[0]).name != "launch.py":
        return ""
    run_dir = Path(run_dir).absolute()
    if dry_run_sweep(run_dir.parent):  # its jobs continue nothing: train.resume=auto is refused with dry_run=true
        return dry_run_sweep_again(run_dir.parent, argv)
    # -m train.resume=<run a>,<run b>: every job's own command (resume_command.BY_JOB)
    if rest := _rest_of_sweep(run_dir, started, BY_JOB if named_resume(argv[1:]) else None):
        return rest
    kept = [a for a in argv[1:] if not a.startswith(("train.resume=", "hydra.sweep.dir="))]
    which = "this job and those not started" if started else "its unfinished jobs and those not started"
    from gensbi_sharding.harness.resume_settings import continue_prefix  # the run's JAX_ENABLE_X64, so it pastes

    return f"to continue the whole sweep, {which}: " + " ".join(
        [continue_prefix(run_dir) + command_for(), *map(shlex.quote, kept), "train.resume=auto",
         hydra_override("hydra.sweep.dir", run_dir.parent)])


def dry_run_sweep(sweep_dir: Any) -> bool:
    """Whether the sweep in ``sweep_dir`` is one of dry runs (``dry_run: true`` in its ``multirun.yaml``).

    Parameters
    ----------
    sweep_dir : path-like
        ``hydra.sweep.dir``.

    Returns
    -------
    bool
    """
    from omegaconf import OmegaConf

    from gensbi_sharding.harness.outputs import read_record

    saved = read_record(Path(sweep_dir) / "multirun.yaml")
    return OmegaConf.is_dict(saved) and OmegaConf.select(saved, "dry_run", default=False) is True


def dry_run_sweep_again(sweep_dir: Any, argv: Sequence[str]) -> str:
    """"a dry-run sweep has nothing to continue: run it again with: <the sweep's command into a new sweep folder>"
    (``argv``, launch.py's, its ``train.resume`` and ``hydra.sweep.dir`` left out): a dry run writes only into a
    fresh folder, and with ``train.resume`` it is refused.

    Parameters
    ----------
    sweep_dir : path-like
        ``hydra.sweep.dir`` of the stopped sweep.
    argv : sequence of str
        ``sys.argv`` of the command that started the sweep.

    Returns
    -------
    str
    """
    from gensbi_sharding.harness.interrupt_lines import unused_folder
    from gensbi_sharding.harness.override_grammar import hydra_override
    from gensbi_sharding.harness.resume_settings import continue_prefix

    sweep_dir = Path(sweep_dir).absolute()
    kept = [a for a in argv[1:] if not a.startswith(("train.resume=", "hydra.sweep.dir="))]
    return "a dry-run sweep has nothing to continue: run it again with: " + " ".join(
        [continue_prefix(sweep_dir) + command_for(), *map(shlex.quote, kept),
         hydra_override("hydra.sweep.dir", unused_folder(sweep_dir))])


def sweep_again(sweep_dir: Any, argv: Sequence[str], env: str) -> str:
    """The sweep's command as typed (``argv``, launch.py's), led by ``env`` (``resume_settings.continue_prefix``), with
    ``train.resume=auto`` and ``hydra.sweep.dir=<sweep_dir>``: what continues every job of a sweep none of whose
    jobs completed; "" where one did (its folder is then never rerun as a whole) or ``argv`` is not launch.py's.

    Parameters
    ----------
    sweep_dir : path-like
        ``hydra.sweep.dir``.
    argv : sequence of str
        ``sys.argv`` of the command that started the sweep.
    env : str
        What the command puts before ``python``.

    Returns
    -------
    str
    """
    import json

    from gensbi_sharding.harness.override_grammar import hydra_override

    def completed(metrics: Path) -> bool:
        try:
            return json.loads(metrics.read_text(encoding="utf-8")).get("status") == "ok"
        except (OSError, ValueError, AttributeError):
            return False

    if not argv or Path(argv[0]).name != "launch.py" or any(map(completed, Path(sweep_dir).glob("*/metrics.json"))):
        return ""
    kept = [a for a in argv[1:] if not a.startswith(("train.resume=", "hydra.sweep.dir="))]
    return " ".join([env + command_for(), *map(shlex.quote, kept), "train.resume=auto",
                     hydra_override("hydra.sweep.dir", Path(sweep_dir).absolute())])


def _rest_of_sweep(run_dir: Path, started: bool, reason: str | None = None) -> str:
    """Each unfinished job's command when another job of ``run_dir``'s sweep completed, or ``reason`` says why no
    whole-sweep command serves; "" otherwise."""
    from omegaconf import OmegaConf

    from gensbi_sharding.harness.outputs import read_record
    from gensbi_sharding.harness.sweep_plan import every_job, job_folders

    sweep = run_dir.parent
    jobs = sorted({m.parent for m in sweep.glob("*/metrics.json")} | ({run_dir} if started else set()))
    saved = read_record(sweep / "multirun.yaml")
    if not OmegaConf.is_dict(saved):  # no sweep folder, or its record damaged
        return ""
    # A stopped job's error line names its own command just before this one (run.py): not repeated here.
    hint = unfinished_jobs_hint(jobs, RESUMABLE, all_jobs := every_job(saved), sweep_dir=sweep,
                                stopped=run_dir if started else None,
                                search_path=[*config_flags(saved.get("hydra")),
                                             *search_path_of(OmegaConf.select(saved, "hydra.overrides.hydra"))],
                                stopped_told=started, folders=job_folders(saved, all_jobs), reason=reason or "")
    return f"to continue the rest of the sweep, {hint[2:]}" if hint else ""

"""A sweep's job folders that their runs would refuse, all refused before the first job starts.

A job stopped with checkpoints and no record (killed, its record unwritten) is refused its folder by its own run
unless ``train.resume`` continues it (``fresh_folder.ensure_fresh``); in a sweep rerun as it was, each such job was
refused as its turn came, one after another, after the earlier jobs had trained. Here the sweep's start
(``folder_claim.RefuseCompletedRun``) makes that check of every job's folder and names them all, with the one command
that continues them. Pure Python: no JAX.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gensbi_sharding.harness.paste_command import command_for
from gensbi_sharding.harness.resume_command import AUTO, named_resume

__all__ = ["fresh_settings", "stopped_jobs_problem"]


def stopped_jobs_problem(sweep_dir: Any, job_dirs: Sequence[Any], jobs: Sequence[Sequence[str]],
                         command: Sequence[str], fresh: dict[str, Any]) -> str | None:
    """The refusal of a sweep whose jobs' folders without a record (``metrics.json``) their runs would refuse: every
    such job named, one a line, with the command that continues them all where there is one. Said before the first
    job starts, not each inside its own run, one after another, after the earlier jobs trained.

    Parameters
    ----------
    sweep_dir : path-like
        ``hydra.sweep.dir``.
    job_dirs : sequence of path-like
        Each job's folder, job ``i`` at index ``i`` (``sweep_plan.job_folders``).
    jobs : sequence of sequence of str
        Each job's overrides (``sweep_plan.every_job``): a job is named by the values the sweep varies.
    command : sequence of str
        The sweep's overrides as typed (and its config flags), e.g. ``["experiment=quick", "seed=0,1"]``.
    fresh : dict
        ``fresh_folder.ensure_fresh``'s settings for the sweep's jobs (``resume``, ``dry_run``, ...): the check each
        job's run makes of its folder as it starts.

    Returns
    -------
    str or None
    """
    from gensbi_sharding.harness.launch_record import step_folder_names
    from gensbi_sharding.harness.override_grammar import hydra_override
    from gensbi_sharding.harness.refusal import listed
    from gensbi_sharding.harness.fresh_folder import ensure_fresh

    refused, held = [], []
    for number, job_dir in enumerate(map(Path, job_dirs)):
        if (job_dir / "metrics.json").exists():  # a job with a record: refused as its record says, job by job
            continue
        try:
            ensure_fresh(job_dir, **fresh)
        except FileExistsError as err:
            refused.append((number, str(err)))
            held.append((job_dir / "checkpoints").is_dir())
    if not refused:
        return None
    swept = {o.split("=", 1)[0] for job in jobs for o in job if any(o not in other for other in jobs)}
    labels = [f"job {n} ({' '.join(o for o in jobs[n] if o.split('=', 1)[0] in swept) or 'its only job'}): "
              for n, _ in refused]
    where = hydra_override("hydra.sweep.dir", sweep_dir)
    one_fix = True  # the fix below, for every job: each line says what its folder holds, not a single run's fix
    if all(held) and fresh.get("resume") in (None, "") and not fresh.get("dry_run"):  # stopped, checkpoints kept
        words = [command_for(), "-m", *map(shlex.quote, (o for o in sweep_command(sweep_dir, command)
                                                         if not o.startswith("train.resume="))), AUTO, where]
        fix = f"continue them all from their checkpoints: {' '.join(words)}, or choose another hydra.sweep.dir"
    elif fresh.get("dry_run"):
        fix = "choose another hydra.sweep.dir for the dry run (a dry run writes only into fresh folders)"
    else:
        one_fix, fix = False, "fix each job's folder as its line says, or choose another hydra.sweep.dir"
    if one_fix:  # "<checkpoints> holds ...; continue it here with ... hydra.run.dir=<new folder>", a run's fix
        refused = [(n, p.split("; ", 1)[0] + "".join(f", newest step {step}" for step in
                                                    step_folder_names(Path(job_dirs[n]))[-1:])) for n, p in refused]
    head = (f"{where}: {len(refused)} of the sweep's {len(jobs)} jobs would be refused their folders, before any job "
            "ran (nothing was written):")
    return f"{listed(head, [p for _, p in refused], labels, together=False)}\n  {fix}"


def sweep_command(sweep_dir: Any, command: Sequence[str]) -> list[str]:
    """``command``, or where its settings (``train.steps``, ``train.resume``, ``hydra.*`` aside) are not those of the
    sweep that ran in ``sweep_dir`` (its ``multirun.yaml``), that sweep's overrides after ``command``'s config flags:
    the sweep its stopped jobs belong to, not the refused command's: ``-m experiment=quick seed=1`` over a seed=0
    sweep's stopped job would be told "continue them all ...: python launch.py -m experiment=quick seed=1
    train.resume=auto ...", which pasted would continue the seed-0 job on seed 1's held-out pairs and draws."""
    from omegaconf import OmegaConf

    from gensbi_sharding.harness.outputs import read_record

    from gensbi_sharding.harness.sweep_hints import config_flags, search_path_of

    record = read_record(Path(sweep_dir) / "multirun.yaml")
    task = OmegaConf.select(record, "hydra.overrides.task", default=None) if OmegaConf.is_dict(record) else None
    if not OmegaConf.is_list(task):
        return list(command)
    # its own search path and config flags, not the command's (a sweep of my_conf's model=small has none)
    flags = [*config_flags(record.hydra), *search_path_of(OmegaConf.select(record, "hydra.overrides.hydra"))]
    flags = flags or [o for o in command if o.startswith(("--config-", "hydra.searchpath="))]
    task = list(map(str, task))

    def settings(words: Sequence[str]) -> list[str]:
        return sorted(o for o in words if not o.startswith(("train.resume=", "train.steps=", "hydra.", "--config-")))

    return list(command) if settings(task) == settings(command) else [*flags, *task]


def fresh_settings(config: Any, sweep: bool) -> dict[str, Any]:
    """``fresh_folder.ensure_fresh``'s settings for a run's or sweep's folders, from its config (``hydra`` section
    kept).

    Parameters
    ----------
    config : DictConfig
        The run's or multirun's config, as a Hydra callback gets it.
    sweep : bool
        Whether it is a multirun: a ``-m train.resume=<a>,<b>`` names runs its config does not hold.

    Returns
    -------
    dict
        ``resume``, ``resume_from``, ``steps``, ``dry_run``, ``multirun``.
    """
    from omegaconf import OmegaConf

    from gensbi_sharding.harness.sweep_plan import command_overrides

    named = sweep and bool(named_resume(command_overrides(config)[0] or []))
    return dict(resume=OmegaConf.select(config, "train.resume", default=None), resume_from=named,
                steps=OmegaConf.select(config, "train.steps"), dry_run=bool(OmegaConf.select(config, "dry_run")),
                multirun=sweep)

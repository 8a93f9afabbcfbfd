"""How to continue a job in its own folder: the command for this job, and for a refused sweep's unfinished ones.

A sweep folder holding completed jobs is never rerun as a whole; these name each unfinished job's own command.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from gensbi_sharding.harness.paste_command import PYTHON, command_for, user_folder
from gensbi_sharding.harness.sweep_plan import (another_sweep, folder_of, job_configuration, never_started,
                                                unstarted_words)
from gensbi_sharding.harness.sweep_retyped import retyped_job

__all__ = ["unfinished_jobs_hint", "shared_folder_problem", "job_command", "continue_command",
           "CONTINUE_ENV", "INLINE_COMMANDS", "CONTINUE_SCRIPT",
           "hydra_job_overrides", "with_search_path", "config_flags", "search_path_of", "SEARCH_PATH"]

#: Set by ``distributed=local``'s parent for its processes: the command that continues the whole job
#: (theirs carry the parent's overrides plus their own).
CONTINUE_ENV = "GENSBI_SHARDING_CONTINUE_COMMAND"

#: Up to this many commands are printed in the refusal's line; more are written to ``CONTINUE_SCRIPT``.
INLINE_COMMANDS = 3
#: The script, in the sweep's folder, holding the commands that continue its unfinished jobs.
CONTINUE_SCRIPT = "continue_unfinished.sh"

#: The script's first lines: what runs its commands, the folder they were printed for (the sweep's), Ctrl-C's exit.
_SCRIPT_HEAD = ("#!/usr/bin/env bash\n# The sweep's unfinished jobs, one command each, each continuing in its own "
                "folder (written when the sweep folder was refused), each run by {}, the Python that ran the sweep.\n"
                "cd {} || exit 1\ntrap 'exit 130' INT\n")

#: The one ``hydra.*`` override a continuing command needs: where a preset of one's own (``model=my_flux1``) is found.
SEARCH_PATH = "hydra.searchpath="


def with_search_path(overrides: Sequence[str]) -> list[str]:
    """``overrides`` led by the job's ``hydra.searchpath=...`` (Hydra keeps it apart) and ``config_flags`` if absent."""
    from hydra.core.hydra_config import HydraConfig

    if not HydraConfig.initialized():
        return list(overrides)
    given = any(o.startswith(SEARCH_PATH) for o in overrides)
    searched = [] if given else search_path_of(HydraConfig.get().overrides.hydra)
    return ([] if any(o.startswith("--config-") for o in overrides) else config_flags()) + searched + list(overrides)


def config_flags(hydra: Any = None) -> list[str]:
    """The ``--config-path``, ``--config-dir`` and ``--config-name`` flags of a run, each one word (``--config-dir=
    /abs/my_conf``); [] for launch.py's own ``conf/config.yaml``. ``hydra``: a run's ``hydra`` node (as its
    ``.hydra/hydra.yaml`` or ``multirun.yaml`` holds it); None: the running job's. Kept by distributed=local's processes
    and every printed command: dropped, ``-cd my_conf -cn my`` (``override model: transformer``) would train
    model=mlp in each process (status ok), and its continue command not find ``my_conf``'s ``experiment=x``."""
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import OmegaConf

    if hydra is None and not HydraConfig.initialized():
        return []
    node = HydraConfig.get() if hydra is None else hydra
    sources = OmegaConf.select(node, "runtime.config_sources", default=None) or []
    # launch.py's conf/ (this clone's, or the clone that saved the record) is no flag
    flags = [f"--config-path={s.path}" for s in sources if s.provider == "main" and s.schema == "file"
             and not os.path.isfile(os.path.join(s.path, "..", "launch.py"))]
    flags += [f"--config-dir={s.path}" for s in sources if s.provider == "command-line"]
    name = OmegaConf.select(node, "job.config_name", default=None)
    return flags + ([f"--config-name={name}"] if name not in (None, "config") else [])


def search_path_of(hydra_overrides: Any) -> list[str]:
    """The ``hydra.searchpath=`` entries of Hydra's ``overrides.hydra`` node (None: none), read unresolved: an
    override may hold an interpolation (``hydra.sweep.subdir=${hydra.job.num}``)."""
    from omegaconf import OmegaConf

    listed = [] if hydra_overrides is None else OmegaConf.to_container(hydra_overrides)
    return [o for o in listed if o.startswith(SEARCH_PATH)]


def job_command(overrides: Sequence[str], run_dir: Any, *, multirun: bool) -> str:
    """The shell command that continues one job in its folder ``run_dir`` (``resume_command.resume_override``).

    Parameters
    ----------
    overrides : sequence of str
        The job's own overrides (Hydra's ``overrides.task``); ``train.resume`` and ``hydra.*`` ones are dropped.
    run_dir : path-like
        The job's folder.
    multirun : bool
        Whether the job ran in a multirun: then ``hydra.mode=RUN`` is added, since a preset may set
        ``hydra.mode: MULTIRUN`` (``experiment=sbibm``), under which ``hydra.run.dir`` would be ignored.

    Returns
    -------
    str
        ``python launch.py <overrides> train.resume=auto [hydra.mode=RUN] hydra.run.dir=<run_dir>``, shell-quoted;
        ``train.resume=<run>`` as the job had it while ``run_dir`` holds no checkpoint of its own; led by
        ``env -u JAX_ENABLE_X64`` or ``JAX_ENABLE_X64=1`` where this process's setting is not the run's
        (``resume_settings.continue_prefix``).
    """
    from gensbi_sharding.harness.override_grammar import hydra_override
    from gensbi_sharding.harness.resume_command import resume_override

    kept = [o for o in with_search_path(overrides) if not o.startswith(("train.resume=", "hydra."))
            or o.startswith(SEARCH_PATH)]
    from gensbi_sharding.harness.resume_settings import continue_prefix  # the run's JAX_ENABLE_X64, or refused

    return " ".join([continue_prefix(run_dir) + command_for(), *map(shlex.quote, kept),
                     shlex.quote(resume_override(overrides, run_dir)),
                     *(["hydra.mode=RUN"] if multirun else []), hydra_override("hydra.run.dir", run_dir)])


def continue_command(run_dir: Any, resume: Any = None) -> str:
    """The command that continues this Hydra job in ``run_dir`` (``job_command`` of its own overrides).

    Not the command the user typed: in a sweep that would start a new sweep, from scratch.
    Outside a Hydra job (``run(cfg)`` called from Python): the config's settings that continue it there.

    Parameters
    ----------
    run_dir : path-like
        The job's folder.
    resume : str or None
        The job's ``train.resume``, read only outside Hydra: a run it names is kept while ``run_dir`` holds no
        checkpoint of its own (``'auto'`` there would train from step 0).

    Returns
    -------
    str
        The command, or the sentence for a job run outside Hydra.
    """
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    if os.environ.get(CONTINUE_ENV):  # made as the processes started: train.resume=auto once a checkpoint is here
        from gensbi_sharding.harness.resume_command import resumed_here
        return resumed_here(os.environ[CONTINUE_ENV], run_dir)
    if not HydraConfig.initialized():  # run(cfg) from Python: what it sets there (launch.py's overrides no call takes);
        # output_dir is no field of the composed config: set bare, "Key 'output_dir' not in 'Config'"
        from gensbi_sharding.harness.resume_command import holds_checkpoint

        kept = str(resume) if resume not in (None, "", "auto") and not holds_checkpoint(run_dir) else "auto"
        return (f"run(cfg) with cfg.train.resume={kept!r} and cfg.output_dir={str(run_dir)!r} set in "
                "omegaconf.open_dict(cfg)")
    hydra = HydraConfig.get()
    return job_command(list(hydra.overrides.task), run_dir, multirun=hydra.mode == RunMode.MULTIRUN)


def hydra_job_overrides() -> tuple[list[str] | None, bool]:
    """The running Hydra job's overrides (``overrides.task``) and whether it is a multirun's; (None, False) outside
    one."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    if not HydraConfig.initialized():
        return None, False
    hydra = HydraConfig.get()
    return list(hydra.overrides.task), hydra.mode == RunMode.MULTIRUN


def unfinished_jobs_hint(jobs: Sequence[Any], resumable: Sequence[str], all_jobs: Sequence[Sequence[str]] = (),
                         sweep_dir: Any = None, search_path: Sequence[str] = (), stopped: Any = None,
                         stopped_told: bool = False, folders: Sequence[str] | None = None, reason: str = "") -> str:
    """How to continue a sweep's unfinished jobs when its folder, holding completed ones, is refused.

    A sweep folder with a completed job is never rerun as a whole (its files are never overwritten), so ``-m ...
    train.resume=auto`` cannot finish it; each unfinished job (status in ``resumable``) continues in its own folder,
    with the overrides it ran with (``<job>/.hydra/overrides.yaml``), or this sweep's values where it failed naming
    the swept keys that changed (``sweep_retyped.retyped_job``; a folder that ran other values otherwise is named, never
    offered), and each job of ``all_jobs`` (``sweep_jobs``) that never started (no folder with its overrides) runs in
    a new folder of ``sweep_dir``. "" when no job is unfinished or none completed. ``search_path``: the sweep's
    ``hydra.searchpath=`` override, led in each.
    ``stopped``: a job of ``jobs`` stopped just now (its record not written yet): unfinished, listed first;
    ``stopped_told``: its own command was printed just before this hint, so when it is the one job left the
    hint points there instead of printing it again. ``folders``: each job's folder name (``sweep_plan.job_folders``).
    ``reason``: why no whole-sweep command serves, where one would even with no job completed (then always hinted).
    """
    from gensbi_sharding.harness.resume_command import BY_JOB, named_resume

    reason = reason or (BY_JOB if any(named_resume(job) for job in all_jobs) else "")  # a refused sweep's too
    status = {Path(j): "interrupted" if j == stopped else _status(Path(j) / "metrics.json") for j in jobs}
    lists = {j.name: _yaml_list(j / ".hydra" / "overrides.yaml") for j in status}
    recorded = all(v is not None for v in lists.values())  # else which ran is unknown
    ran = {name: job_configuration(v) for name, v in lists.items()} if recorded else {}
    never = never_started(all_jobs, ran, folders) if recorded and sweep_dir is not None else []
    if recorded and sweep_dir is not None and (other := another_sweep(sweep_dir, all_jobs, folders, bool(never))):
        return f"; {other}"  # this one's jobs would join it, numbered as its jobs
    mine = {folder_of(n, folders): n for n in range(len(all_jobs))} if all_jobs else None  # not another sweep's job
    offered, told = {}, ""  # each folder as this sweep's job, not as it ran (1e+30 where it is 0.002)
    for job in (j for j, s in status.items() if s in resumable and (mine is None or j.name in mine)):
        ran_with = lists[job.name] if lists[job.name] is not None else ["<its overrides>"]
        got, words = retyped_job(job, None if mine is None or lists[job.name] is None else mine[job.name], all_jobs,
                                 ran_with)
        offered.update({job: (got, words)} if got is not None else {})
        told += "" if got is not None else f"; {words}"
    unfinished = sorted(offered, key=lambda j: j != stopped)
    if not (unfinished or never) or (not reason and all(s in resumable for s in status.values())):
        return told
    whole = reason or "a sweep folder holding completed jobs is never rerun as a whole"
    if stopped_told and unfinished == [stopped] and not never:  # its command is on the line above: not twice
        return f"{told}; the command above is enough: this job is the sweep's one unfinished job ({whole})"
    whole = f"{told}; {whole}"  # a folder not offered named first
    commands = [job_command([*search_path, *offered[job][0]], job, multirun=True) + offered[job][1]
                for job in unfinished]
    for number, job in never:  # in the folder Hydra would have given it
        commands.append(job_command([*search_path, *job], Path(sweep_dir) / folder_of(number, folders), multirun=True))
    started = f" ({unstarted_words(never, sweep_dir, folders)})" if never else ""  # (not "never started" if killed)
    if len(commands) == 1:  # one job left: one command, not a list to run "one by one"
        return f"{whole}: continue its one unfinished job{started.replace('(1 ', '(')} with: {commands[0]}"
    listed = " ; ".join(commands)
    if len(commands) > INLINE_COMMANDS and sweep_dir is not None:  # one line of 20 commands helps no one
        from gensbi_sharding.harness.outputs import write_atomic

        # `bash <sweep>/continue_unfinished.sh` from another folder ran each `python launch.py` and relative
        # folder there (can't open file); a job stopped by Ctrl-C exits 130, so bash started the next; and its bare
        # `python`, without the venv activated, is the system's (No module named 'jax'): so the sweep's own, after
        # the JAX_ENABLE_X64 that leads a command (not in place of its first six characters: 'env -u' among them)
        try:
            script = write_atomic(Path(sweep_dir) / CONTINUE_SCRIPT, _SCRIPT_HEAD.format(PYTHON, shlex.quote(str(
                user_folder()))) + "\n".join(_with_python(c) for c in commands) + "\n")
        except OSError:  # a full or read-only sweep folder: the commands inline, so the refusal is not lost
            return f"{whole}: continue its unfinished jobs{started} one by one: {listed}"
        listed = f"bash {shlex.quote(str(script))} ({len(commands)} commands, one per line; the first: {commands[0]})"
    return f"{whole}: continue its unfinished jobs{started} one by one: {listed}"


def _with_python(command: str) -> str:
    """``command`` (``job_command``'s) with its ``python`` made the sweep's own, ``PYTHON``, any prefix kept."""
    lead, _, rest = command.partition("python ")  # a prefix: "env -u JAX_ENABLE_X64 " or "JAX_ENABLE_X64=1 "
    return f"{lead}{PYTHON} {rest}"


def shared_folder_problem(subdir: Any, jobs: int, sweep_dir: Any) -> str | None:
    """The refusal of a ``hydra.sweep.subdir`` that names one folder for every job of a sweep; None if it may differ.

    Each job after the first would be refused the folder of the one before, and Hydra, which writes a job's
    ``.hydra/`` record before the job runs, would relabel the first job's results with its overrides.
    A subdir with an interpolation (the default ``${hydra.job.num}``) is taken to differ per job.
    """
    if jobs < 2 or not isinstance(subdir, str) or "${" in subdir:
        return None
    return (f"hydra.sweep.subdir={subdir} gives all {jobs} jobs of this sweep one folder ({Path(sweep_dir) / subdir}); "
            "leave hydra.sweep.subdir out (a folder per job number) or make it differ per job, e.g. "
            f"hydra.sweep.subdir='${{hydra.job.num}}_{subdir}'")


def _status(metrics: Any) -> str | None:
    """A job's status; "damaged" when its metrics.json cannot be read (``read_metrics`` names it)."""
    from gensbi_sharding.harness.outputs import read_metrics

    try:
        return read_metrics(metrics).get("status")
    except FileExistsError:
        return "damaged"


def _yaml_list(path: Any) -> list[str] | None:
    """A job's recorded overrides; None where the record is missing or damaged (not its YAML error)."""
    from omegaconf import OmegaConf

    from gensbi_sharding.harness.outputs import read_record

    recorded = read_record(path)
    return [str(o) for o in recorded] if OmegaConf.is_list(recorded) else None

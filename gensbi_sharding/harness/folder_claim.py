"""Hydra's callback that claims the run's (or sweep's) folder before Hydra writes into it: a folder holding a completed
run, another sweep's jobs, or a run in progress is refused with one line, and nothing is written there.

Hydra saves ``.hydra/*.yaml`` and opens the job's log before the task runs, so ``run_folder.RunFolder``'s claim inside
``run()`` alone comes too late to leave such a folder intact. Several processes per job: process 0 alone claims it and
tells the others (``folder_verdict``).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from gensbi_sharding.harness.config import ConfigError
from gensbi_sharding.harness.config_checks import dry_run_resume_problem
from gensbi_sharding.harness.config_values import interpolation_problem
from gensbi_sharding.harness.console import tagged
from gensbi_sharding.harness.console_lines import completed_jobs_lead
from gensbi_sharding.harness.earlier_attempts import drop_cut_writes
from gensbi_sharding.harness.fresh_folder import RESUMABLE, ensure_fresh
from gensbi_sharding.harness.folder_lock import FolderInUseError, FolderLock, folder_problem, physical
from gensbi_sharding.harness.folder_verdict import (check_crashed_together, hear_verdict, record_nothing,
                                                     tell_accepted, tell_refused)
from gensbi_sharding.harness.processes import folder_owner, hears_process_0
from gensbi_sharding.harness.launch_record import keep_record
from gensbi_sharding.harness.outputs import read_metrics, read_record
from gensbi_sharding.harness.resume_command import auto_problem
from gensbi_sharding.harness.stopped_jobs import fresh_settings, stopped_jobs_problem
from gensbi_sharding.harness.sweep_hints import (config_flags, search_path_of, shared_folder_problem,
                                                 unfinished_jobs_hint)
from gensbi_sharding.harness.sweep_plan import another_sweep, command_overrides, every_job, job_folders, moved_folders
from gensbi_sharding.harness.sweep_rerun import moved_jobs_problem
from gensbi_sharding.harness.sweep_subdirs import (colliding_subdirs_problem, foreign_runs_problem,
                                                   misread_folder_problem, nested_sweep_problem, unused_folder_problem)

__all__ = ["RefuseCompletedRun"]


def _summary_hint(sweep: Path, lead: str, hint: str) -> str:
    """"; its summary was never written ...: write it with: python -c '...'" for a sweep whose every job completed
    (``lead`` counts them, ``hint`` names none left to continue) but whose ``sweep_summary.csv`` is missing: killed
    outright (SIGKILL) after its last job, before or while the summary was written. Its rerun, refused here, said only
    how to train a job further; a job left to continue writes the summary itself as it ends ("" then)."""
    from gensbi_sharding.harness.summary_stop import rewrite_command

    if not lead or hint or (sweep / "sweep_summary.csv").exists() or not (sweep / "multirun.yaml").is_file():
        return ""  # (without Hydra's multirun.yaml, no sweep's summary can be written there)
    # every job the folder holds (its .hydra/ record), not only this command's: one failed or killed is left to run
    jobs = [job for job in sweep.iterdir() if (job / ".hydra").is_dir() or (job / "metrics.json").exists()]
    if not jobs or not all(_completed(job) for job in jobs):
        return ""
    return ("; every job completed, but the sweep's summary (sweep_summary.csv) was never written (the sweep was "
            f"stopped as its last job ended): {rewrite_command(sweep)}")


def _completed(job: Path) -> bool:
    """Whether ``job``'s ``metrics.json`` records a completed run (a missing or damaged one: not)."""
    try:
        return read_metrics(job / "metrics.json").get("status") == "ok"
    except (OSError, FileExistsError):
        return False


class RefuseCompletedRun(Callback):
    """Hydra callback: lock the folder and refuse one that holds a completed run, before Hydra writes.

    Hydra saves ``.hydra/*.yaml`` and opens the job's log before the task runs, so ``ensure_fresh`` and the lock
    inside ``run()`` alone come too late to leave such a folder intact.
    """

    def __init__(self) -> None:
        self._locks: list[FolderLock] = []

    def __getstate__(self) -> dict:
        # A launcher that ships the callbacks to its jobs (submitit pickles them for SLURM) copies
        # this one while the sweep's lock is held: the lock belongs to the launching process only.
        return {**self.__dict__, "_locks": []}

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        if hears_process_0(config):  # explicit mode's process > 0: process 0's verdict, before this Hydra writes
            hear_verdict(config)
            record_nothing(config)
        elif folder_owner(config):
            self._claim(physical(config.hydra.run.dir), [physical(config.hydra.run.dir)], config)

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        if hears_process_0(config):  # not each: the first to lock it would refuse the others, process 0 perhaps
            hear_verdict(config)
            return record_nothing(config)  # process 0's Hydra writes each job's record and the summary
        sweep = physical(config.hydra.sweep.dir)
        self._claim(sweep, [m.parent for m in sorted(sweep.glob("*/metrics.json"))], config, sweep=True)

    def _claim(self, folder: Path, runs: list[Path], config: DictConfig, sweep: bool = False) -> None:
        try:  # a dry run saves no checkpoint, so TensorStore never reads its folder: [x] or \ in it is no fault
            dry = bool(OmegaConf.select(config, "dry_run", default=False))
            # hydra.run (hydra.sweep) unresolved, as the config or the command gives it: its dir and subdir
            node = OmegaConf.select(config, f"hydra.{'sweep' if sweep else 'run'}", default=None)
            raw = OmegaConf.to_container(node, resolve=False) if OmegaConf.is_dict(node) else {}
            problem = (interpolation_problem(config) or dry_run_resume_problem(config) or auto_problem(folder, config)
                       or unused_folder_problem(config, multirun=sweep)
                       or folder_problem(folder, sweep=sweep, before_hydra=True, saves=not dry,
                                         as_typed=raw.get("dir") if isinstance(raw.get("dir"), str) else None))
            if sweep and not problem:  # Hydra writes a job's .hydra/ record before any check of ours could run
                folders = job_folders(config, jobs := every_job(config))
                resumed = OmegaConf.select(config, "train.resume", default=None) == "auto"
                problem = (nested_sweep_problem(folder) or shared_folder_problem(raw.get("subdir"), len(jobs), folder)
                           or foreign_runs_problem(folder, folders)
                           or colliding_subdirs_problem(config, raw.get("subdir"), jobs, folder)
                           or not dry and misread_folder_problem(raw.get("subdir"), jobs, folders, folder)
                           or resumed and moved_jobs_problem(folder, jobs, folders))
            if problem:
                raise ConfigError(problem)
            (lock := FolderLock(folder)).acquire()
            self._locks.append(lock)
            if sweep:  # a sweep killed as it wrote its summary left the temporary file (a run's: RunFolder's claim)
                drop_cut_writes(folder)
            earlier, searched = {}, [*config_flags(OmegaConf.select(config, "hydra", default=None)),
                                     *search_path_of(OmegaConf.select(config, "hydra.overrides.hydra", default=None))]
            command, fresh = command_overrides(config)[0], fresh_settings(config, sweep)
            for run_dir in runs:  # a sweep's job: its own values (its record), not the comma lists
                job = read_record(run_dir / ".hydra" / "overrides.yaml")
                task = job if sweep and OmegaConf.is_list(job) else command
                earlier[run_dir] = ensure_fresh(run_dir, **fresh,
                                                overrides=None if task is None else [*searched, *task])
            killed = [folder / job for job in folders or []] if sweep else []  # no metrics.json
            if sweep and (problem := stopped_jobs_problem(folder, killed, jobs, [*searched, *(command or [])], fresh)):
                raise FileExistsError(problem)  # every job refused before the first starts, not one by one in run()
            for run_dir in dict.fromkeys([*runs, *killed]):  # once no folder is refused; before Hydra rewrites them
                keep_record(run_dir, earlier.get(run_dir))
            tell_accepted(config, self._release, sweep)  # several processes: the others wait for it in their callback
        except (FileExistsError, FolderInUseError, ConfigError) as err:
            self._release()
            hint = lead = other = ""  # another sweep's folder: that alone, its jobs never counted as ours
            if sweep and isinstance(err, FileExistsError) and not (other := another_sweep(
                    folder, jobs := every_job(config), folders := job_folders(config, jobs))):  # its completed counted
                moved = moved_folders(folder, jobs, folders)  # no job of this sweep: said, never counted complete
                err = next((w for n, w in moved.items() if str(err).startswith(f"{folder / n}/")), err)
                lead = completed_jobs_lead(folder, [r for r in runs if r.name not in moved], str(err), len(jobs),
                                           folders)
                hint = unfinished_jobs_hint(runs, RESUMABLE, jobs, folder, searched, folders=folders)
                hint = "".join(f"; {w}" for w in moved.values() if w is not err and w not in hint) + hint  # all named
                hint += _summary_hint(folder, lead, hint)
            said = other or f"{lead}{err}{hint}"
            print(tagged("ERROR", said), file=sys.stderr, flush=True)  # as its jobs' errors
            # the other processes wait for process 0: told these words (not ``err``, at times a str, which would be
            # told as 'str: ...'), not left waiting
            tell_refused(config, (type(err) if isinstance(err, Exception) else FileExistsError)(said))
            raise SystemExit(1) from None  # Hydra turns a callback's Exception into a warning; this stops the run
        except Exception as err:  # the check's own fault, not the folder's (Hydra would only warn, then write into it)
            self._release()
            check_crashed_together(folder, err, config, self._release)

    def _release(self, *args: Any, **kwargs: Any) -> None:
        while self._locks:
            self._locks.pop().release()

    on_run_end = on_multirun_end = _release  # Hydra's end of the run or sweep (config=...): the lock goes

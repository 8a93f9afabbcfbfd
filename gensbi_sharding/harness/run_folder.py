"""A job's output folder: who owns it, refusing one that holds another run's results, recording the outcome.

A folder holding a completed run is never written again; one run at a time writes into a folder (``folder_lock``)."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig
from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from gensbi_sharding.harness.config import ConfigError
from gensbi_sharding.harness.config_checks import dry_run_resume_problem
from gensbi_sharding.harness.config_values import interpolation_problem
from gensbi_sharding.harness.console import tagged
from gensbi_sharding.harness.console_lines import completed_jobs_lead
from gensbi_sharding.harness.earlier_attempts import set_aside
from gensbi_sharding.harness.fresh_folder import RESUMABLE, ensure_fresh
from gensbi_sharding.harness.folder_lock import FolderInUseError, FolderLock, folder_problem, physical
from gensbi_sharding.harness.folder_verdict import (LOCAL_CHILD_ENV, check_crashed_together, hear_verdict,
                                                     hears_process_0, process_rank, record_nothing, tell_accepted,
                                                     tell_refused, told_by_process_0)
from gensbi_sharding.harness.launch_record import keep_record, record_python_run, record_x64, settle_record
from gensbi_sharding.harness.outputs import read_record, write_record
from gensbi_sharding.harness.python_words import in_python_words
from gensbi_sharding.harness.resume_command import auto_problem
from gensbi_sharding.harness.stop_record import stopped_at_step  # noqa: F401 (its name here before it moved)
from gensbi_sharding.harness.stopped_jobs import fresh_settings, stopped_jobs_problem
from gensbi_sharding.harness.sweep_hints import (config_flags, hydra_job_overrides, moved_jobs_problem, search_path_of,
                                                 shared_folder_problem, unfinished_jobs_hint)
from gensbi_sharding.harness.sweep_plan import another_sweep, command_overrides, every_job, job_folders, moved_folders
from gensbi_sharding.harness.sweep_subdirs import colliding_subdirs_problem, foreign_runs_problem, unused_folder_problem
from gensbi_sharding.harness.told_refusal import told_refusal
from gensbi_sharding.harness.x64_words import x64_on

__all__ = ["output_dir", "RunFolder", "claim_together", "folder_owner", "RefuseCompletedRun", "LOCAL_CHILD_ENV",
           "is_writer", "stopped_at_step"]

log = logging.getLogger("gensbi_sharding")

#: What an attempt's training steps measured: kept per attempt in ``previous_attempts`` of a continued run.
TRAINING_FIGURES = ("compile_s", "median_step_s", "samples_per_s", "final_train_loss")
#: Where an attempt ran and how far it got: a run continued under another rule or mesh says which steps ran where.
ATTEMPT_PLACEMENT = ("rule", "mesh_shape", "device_count", "process_count", "final_step", "jax_enable_x64")


def output_dir(cfg: DictConfig) -> Path:
    """The job's output folder: Hydra's, made absolute whatever ``hydra.job.chdir`` says."""
    if HydraConfig.initialized():
        return Path(HydraConfig.get().runtime.output_dir).absolute()
    return Path(cfg.get("output_dir") or "outputs/run").absolute()


class RunFolder:
    """What this process may do in the job's folder: claim it, and record the job's outcome.

    The owner (``folder_owner``) claims the folder (``FolderLock`` plus ``ensure_fresh``) before writing anything;
    process 0 of a ``distributed=local`` child writes the run's files and its parent records the final outcome over
    them. A run refused a folder writes nothing into it.
    """

    def __init__(self, out: Path, cfg: DictConfig):
        self.out, self.owner = Path(out), folder_owner(cfg)
        self.resume = cfg.train.resume  # auto, or a run to continue
        self.dry_run, self.dry_run_problem = bool(cfg.get("dry_run")), dry_run_resume_problem(cfg)
        self.claimed, self.previous, self._lock, self.steps = False, None, None, cfg.train.steps
        self.told = False  # whether its claim's outcome was told to every process JAX joins (``claim_together``)
        self.config = None if HydraConfig.initialized() else cfg  # run(cfg) from Python: recorded here

    def claim(self) -> None:
        """Lock the folder and check it is fresh (or resumable); raises as those do (``ConfigError`` first), from
        Python in the settings a Python caller sets (``python_words``)."""
        with in_python_words():
            if self.dry_run_problem:  # before the folder is touched: it may hold the run to resume
                raise ConfigError(self.dry_run_problem)
            if problem := folder_problem(self.out, sweep=False):
                raise ConfigError(problem)
            (lock := FolderLock(self.out)).acquire()
            try:
                overrides, multirun = hydra_job_overrides()
                self.previous = ensure_fresh(self.out, resume=self.resume, dry_run=self.dry_run, steps=self.steps,
                                             overrides=overrides, multirun=multirun)
            except BaseException:
                settle_record(self.out, continued=False)  # refused: a sweep job's record as its start found it
                lock.release()
                raise
        self._lock, self.claimed = lock, True
        if self.config is not None:  # from Python: Hydra recorded nothing of this run (else another launch's)
            record_python_run(self.out, self.config, self.previous)
        # As it starts: a run killed before its metrics.json still says it (its commands and resumes need it); from
        # Python too, where the folder had no record (else a resume under the other setting would go on)
        record_x64(self.out, x64_on(), make=self.config is not None)
        if moved := set_aside(self.out, self.previous):  # this attempt's files are its own, not error.txt only
            log.info("the earlier attempt's files, kept under new names: %s", ", ".join(moved))

    def release(self) -> None:
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def records(self) -> bool:
        """Whether this process writes the job's metrics.json and error.txt."""
        import jax

        if self.claimed:
            return True
        if jax.distributed.is_initialized():  # a local child's process 0 writes the run's files
            return bool(os.environ.get(LOCAL_CHILD_ENV)) and jax.process_index() == 0
        if self.owner is False and not os.environ.get(LOCAL_CHILD_ENV):
            # A process that failed before joining (coordinator unreachable) is the only one that knows: it records,
            # unless the folder is another's.
            try:
                self.claim()
            except (FolderInUseError, FileExistsError, ConfigError):  # a folder it may not write into
                return False
            return True
        return False

    def record(self, metrics: dict[str, Any], traceback_text: str | None = None) -> None:
        """Write ``metrics.json`` (and ``error.txt``), listing earlier attempts of a resumed run.

        Each earlier attempt keeps its status, error, wall time, training figures and where it ran (rule,
        mesh, device and process counts, the step it reached: ``ATTEMPT_PLACEMENT``); an attempt that
        trained nothing (``steps`` 0: resumed to evaluate) takes its top-level training figures from the
        last attempt that trained (``training_figures_from_attempt``, 1-based), as the sweep summary shows.
        """
        if not self.records():
            return
        if self.previous:
            earlier = {k: self.previous.get(k) for k in ("status", "error", "wall_s", "resumed_from_step", "steps",
                                                         *TRAINING_FIGURES, *ATTEMPT_PLACEMENT)}
            earlier["stopped_at_step"] = stopped_at_step(self.previous)
            older = [{**{k: v for k, v in a.items() if k != "preempted_at_step"}, "stopped_at_step": stopped_at_step(a)}
                     for a in self.previous.get("previous_attempts", [])]  # an earlier version's name, renamed
            attempts = metrics["previous_attempts"] = [*older, earlier]
            trained = [n for n, a in enumerate(attempts, 1) if a.get("steps") or a.get("samples_per_s") is not None]
            if metrics.get("steps") == 0 and trained:  # resumed only to evaluate: the figures of the last that trained
                metrics.update({k: attempts[trained[-1] - 1].get(k) for k in TRAINING_FIGURES},
                               training_figures_from_attempt=trained[-1])
        if (problem := write_record(self.out, metrics, traceback_text)) is not None:  # the run's own error stays
            log.error("%s", problem)
            metrics.update({"status": "error", "error": problem} if metrics.get("status") == "ok" else {})
        settle_record(self.out, continued=metrics.get("resumed_from_step") is not None or bool(metrics.get("steps")))


def claim_together(folder: RunFolder, watch: Any, refused: Exception | None = None) -> None:
    """``folder.claim()`` on its owner (process 0), told to every process JAX joins: a refusal raises the same words
    on each, at once (not left waiting in the job's collectives until their timeout, as the other processes of a
    multirun's later job would be, explicit mode, whose claim process 0 was refused); and every process's stop checks
    count on from process 0's (``watch.last_check_id``), the step ids of JAX's preemption sync point alike. A
    collective: every process calls it, at the same point. ``refused``: the refusal of the claim process 0 made before
    JAX joined the processes (``run_steps.claim_first``), told as its own would be."""
    import jax

    folder.told = True  # once a job: run_steps tells the first job's claim only where run did not
    if refused is None and (folder.owner or folder.owner is None and jax.process_index() == 0) and not folder.claimed:
        try:
            folder.claim()
        except Exception as err:  # noqa: BLE001 - whatever refused it is told to every process, then raised here
            refused = err
    said = f"{type(refused).__name__}\n{refused}" if refused is not None else ""
    (watch.last_check_id,), heard = told_by_process_0([watch.last_check_id], said)  # process 0's count of checks
    if refused is not None:
        raise refused
    if heard:
        kind, _, text = heard.partition("\n")
        raise told_refusal(kind, text)


def folder_owner(cfg: DictConfig) -> bool | None:
    """Whether this process owns the job's folder (locks it, records its outcome).

    False for a ``distributed=local`` child (its parent owns the folder) and for a process other than 0 (explicit
    mode's, or ``distributed=auto``'s where SLURM's or Open MPI's variables give the rank: ``process_rank``); None
    where only JAX knows the rank (``distributed=auto`` elsewhere: process 0 owns it).
    """
    if os.environ.get(LOCAL_CHILD_ENV):
        return False
    if cfg.distributed.mode == "auto":
        rank, count = process_rank(cfg)
        return None if count < 2 else rank == 0
    return cfg.distributed.process_id in (None, 0)


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
        try:
            problem = (interpolation_problem(config) or dry_run_resume_problem(config) or auto_problem(folder, config)
                       or unused_folder_problem(config, multirun=sweep)
                       or folder_problem(folder, sweep=sweep, before_hydra=True))
            if sweep and not problem:  # Hydra writes a job's .hydra/ record before any check of ours could run
                raw = OmegaConf.to_container(config.hydra.sweep, resolve=False) if "sweep" in config.hydra else {}
                folders = job_folders(config, jobs := every_job(config))
                resumed = OmegaConf.select(config, "train.resume", default=None) == "auto"
                problem = (shared_folder_problem(raw.get("subdir"), len(jobs), folder)
                           or foreign_runs_problem(folder, folders)
                           or colliding_subdirs_problem(config, raw.get("subdir"), jobs, folder)
                           or resumed and moved_jobs_problem(folder, jobs, folders))
            if problem:
                raise ConfigError(problem)
            (lock := FolderLock(folder)).acquire()
            self._locks.append(lock)
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


def is_writer() -> bool:
    """Whether this process writes the run's files: process 0 (without jax.distributed, the only one).

    Returns
    -------
    bool
    """
    import jax

    return not jax.distributed.is_initialized() or jax.process_index() == 0

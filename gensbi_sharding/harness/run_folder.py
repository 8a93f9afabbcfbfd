"""A job's output folder inside ``run()``: claiming it (told to every process where several run the job), recording
the job's outcome there.

A folder holding a completed run is never written again; one run at a time writes into a folder (``folder_lock``).
Before Hydra writes anything, its callback claims the folder first (``folder_claim.RefuseCompletedRun``)."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from gensbi_sharding.harness.config import ConfigError
from gensbi_sharding.harness.config_checks import dry_run_resume_problem
from gensbi_sharding.harness.continue_field import CONTINUE_FIELD
from gensbi_sharding.harness.earlier_attempts import set_aside
from gensbi_sharding.harness.fresh_folder import ensure_fresh
from gensbi_sharding.harness.folder_lock import FolderInUseError, FolderLock, folder_problem
from gensbi_sharding.harness.processes import LOCAL_CHILD_ENV, folder_owner, told_by_process_0
from gensbi_sharding.harness.launch_record import record_python_run, record_x64, settle_record
from gensbi_sharding.harness.run_record import kept_checkpoints_command, write_record
from gensbi_sharding.harness.python_words import in_python_words
from gensbi_sharding.harness.stopped_step import stopped_at_step
from gensbi_sharding.harness.sweep_hints import hydra_job_overrides
from gensbi_sharding.harness.told_refusal import told_refusal
from gensbi_sharding.harness.x64_words import x64_on

__all__ = ["output_dir", "RunFolder", "claim_together", "is_writer"]

log = logging.getLogger("gensbi_sharding")

#: What an attempt's training steps measured: kept per attempt in ``previous_attempts`` of a continued run. The
#: speed's flag goes with it: an attempt that only evaluates shows an earlier one-step speed as one, warm-up included;
#: and the compiled step's memory and collectives, else its sweep row showed attempt 1's speed beside blank ones.
TRAINING_FIGURES = ("compile_s", "median_step_s", "samples_per_s", "final_train_loss", "speed_includes_warmup",
                    "step_memory_bytes_per_device", "collective_bytes_per_step", "collectives")
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
        self.dry_run, self._cfg = bool(cfg.get("dry_run")), cfg  # its dry-run refusal: said in claim's words
        self.claimed, self.previous, self._lock, self.steps = False, None, None, cfg.train.steps
        self.told = False  # whether its claim's outcome was told to every process JAX joins (``claim_together``)
        self.config = None if HydraConfig.initialized() else cfg  # run(cfg) from Python: recorded here

    def claim(self) -> None:
        """Lock the folder and check it is fresh (or resumable); raises as those do (``ConfigError`` first), from
        Python in the settings a Python caller sets (``python_words.in_python_words``)."""
        with in_python_words():
            if problem := dry_run_resume_problem(self._cfg):  # before the folder is touched: it may hold the run
                raise ConfigError(problem)  # to resume
            if problem := folder_problem(self.out, sweep=False, saves=not self.dry_run):
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
            if metrics.get("status") == "ok":  # the command the problem words, as a value (sample.py reads that)
                command = kept_checkpoints_command(self.out)
                metrics.update(status="error", error=problem, **({CONTINUE_FIELD: command} if command else {}))
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


def is_writer() -> bool:
    """Whether this process writes the run's files: process 0 (without jax.distributed, the only one).

    Returns
    -------
    bool
    """
    import jax

    return not jax.distributed.is_initialized() or jax.process_index() == 0

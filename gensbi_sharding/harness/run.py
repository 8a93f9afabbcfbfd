"""``run(cfg)``: one job, as a flat, logged list of steps.

devices -> mesh -> rule -> data -> model, optimizer (placed alike) -> train -> sample + C2ST -> outputs; nothing reaches
back up the chain. A failure at any step ends the job with a one-line error (its traceback in the job's ``error.txt``,
or on the console with ``debug=true``) and a ``metrics.json`` of status ``error``: a multirun's next job still runs.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import time
import traceback
import types
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from gensbi_sharding.harness import (console, folder_verdict, interrupt_hold, interrupt_lines, outputs, processes,
                                     run_folder, launch_record, signal_hold, stop_record, summary, sweep_continue,
                                     sweep_hints)
from gensbi_sharding.harness.checked_fix import validate_every
from gensbi_sharding.harness.child_errors import child_refusal
from gensbi_sharding.harness.config_values import interpolation_problem
from gensbi_sharding.harness.console import quiet_libraries  # run's, sample_posterior's: one place
from gensbi_sharding.harness.continue_field import CONTINUE_FIELD
from gensbi_sharding.harness.local_cluster import run_local_job, watch_parent
from gensbi_sharding.harness.parent_signal import stop_signal
from gensbi_sharding.harness.peer_stop import peer_stop_line, stopped_by_peer
from gensbi_sharding.harness.preemption import Preempted, PreemptionWatch
from gensbi_sharding.harness.python_words import in_python_words
from gensbi_sharding.harness.run_steps import claim_first, run_steps
from gensbi_sharding.harness.stop_watchdog import watch_setup

__all__ = ["run", "quiet_libraries"]

log = logging.getLogger("gensbi_sharding")


def jobs_share_jax() -> bool:
    """Whether JAX already joins several processes as a job starts (a multirun's later jobs, explicit or auto mode).

    There every process makes the same stop checks, in the same order: a check asks JAX's preemption sync point,
    which numbers them: were process 0 alone to check at the folder's claim, it would be a check ahead of the others
    and, on a stop, halt a check earlier than they do. Before JAX starts a check is the process's own.
    """
    import jax

    return jax.distributed.is_initialized() and jax.process_count() > 1


def run(cfg: DictConfig) -> dict[str, Any]:
    """Run one job described by ``cfg``; returns its metrics (``status`` "ok", "error" or "preempted").

    JAX's and Orbax's info lines are left out while it runs (``quiet_libraries``): noise in every process, a
    ``distributed=local`` parent's too (a dozen of them at a second Ctrl-C otherwise)."""
    with quiet_libraries():
        return quiet_run(cfg)


def quiet_run(cfg: DictConfig) -> dict[str, Any]:
    """``run``'s job, the noisy loggers quieted by the caller."""
    out = run_folder.output_dir(cfg)
    if (refused := hydra_section(cfg, out) or unreadable_config(cfg, out)) is not None:
        return refused
    start, saved_before = time.perf_counter(), launch_record.step_folder_names(out)
    metrics: dict[str, Any] = {"status": "error", "config": OmegaConf.to_container(cfg, resolve=True)}
    folder, failure = run_folder.RunFolder(out, cfg), None
    interrupt_hold.reset()  # a Ctrl-C an earlier run in this process deferred is not this run's
    with PreemptionWatch(ignore_after=bool(os.environ.get(processes.LOCAL_CHILD_ENV))) as watch:  # local_cluster
        try:
            watch_parent()
            claim(folder, cfg, watch)
            failure = run_job(cfg, out, metrics, folder, watch, start)
        except Preempted as stop:
            record_stop(stop, metrics, out, start, folder, by_peer=stopped_by_peer(watch))
        except KeyboardInterrupt as err:  # a second Ctrl-C: at once, wherever the run was (a save under way ended
            saved = stop_record.record_resume_point(metrics, out)  # first); the checkpoint committed, named for its
            stop_record.record_interrupt(metrics, stop_record.at_once_error(out, saved), start, folder)  # resume
            err.args = (metrics["error"],)  # its traceback kept (where it stopped); its words how to continue
            raise
        except Exception as err:  # every failure ends this job cleanly; the sweep goes on
            failure = record_failure(err, cfg, metrics, out, start, folder, watch, saved_before)
        finish(metrics, failure, out, start, folder, watch)
    if metrics["status"] == "interrupted":  # distributed=local's processes stopped for Ctrl-C: so does the sweep
        raise KeyboardInterrupt(metrics.get("error"))  # from Python, as a single process's: the words that continue
    if metrics["status"] == "ok" and watch.signum is not None and not os.environ.get(processes.LOCAL_CHILD_ENV):
        # Asked to stop as its last observation was scored: the run finished, every score written, so it is recorded
        # complete (not interrupted), and its sweep stops here
        try:
            signal_hold.stop_after_run(stop_signal(watch.signum))
        except KeyboardInterrupt:  # from Python: raised, so run(cfg)'s metrics never come back; said where they are
            raise KeyboardInterrupt(f"Ctrl-C came as the run ended: it finished, status ok (nothing to continue); "
                                    f"its metrics, which run(cfg) returns: {out / 'metrics.json'}") from None
    return metrics


def hydra_section(cfg: DictConfig, out: Path) -> dict[str, Any] | None:
    """The metrics of a job refused for a config holding Hydra's own section (``compose(...,
    return_hydra_config=True)`` from Python), nothing written; None for a job's config (a launch's never holds it).

    Its ``${hydra.job.num}`` (``hydra.sweep.subdir``) reads only inside a launch: ``run(cfg)`` ended in OmegaConf's
    traceback (``MissingMandatoryValue ... hydra.job.num``), and its ``hydra.run.dir`` is not the folder written."""
    if "hydra" not in cfg:
        return None
    error = (f"ConfigError: run(cfg) was given Hydra's own section (compose(..., return_hydra_config=True)), which a "
             f"launch keeps apart: its ${{hydra.job.num}} reads only inside a launch, and its hydra.run.dir is not the "
             f"folder written (cfg.output_dir is: {out}); compose without return_hydra_config, or drop the section: "
             f"with omegaconf.open_dict(cfg): del cfg['hydra']")
    log.error("%s", error)
    return {"status": "error", "error": error, "wall_s": None, "config": OmegaConf.to_container(cfg, resolve=False)}


def unreadable_config(cfg: DictConfig, out: Path) -> dict[str, Any] | None:
    """The metrics of a job whose config nothing can read (an interpolation that fails), written to its folder where
    it owns one and no record is there; None for a config that reads."""
    if (problem := interpolation_problem(cfg)) is None:
        return None
    metrics = {"status": "error", "error": f"ConfigError: {problem}", "wall_s": None,  # a single run's callback
               "config": OmegaConf.to_container(cfg, resolve=False)}  # refused it: a sweep's job, never started
    log.error("%s", metrics["error"])
    if out.is_dir() and not (out / "metrics.json").exists() and processes.folder_owner(cfg):
        outputs.write_json(out / "metrics.json", metrics)
    return metrics


def claim(folder: run_folder.RunFolder, cfg: DictConfig, watch: PreemptionWatch) -> None:
    """The job's folder claimed by its owner, told to every process where several run it; then a signal held since
    launch.py's start (``signal_hold``) is recorded."""
    if jobs_share_jax() and folder.owner is not None:  # an explicit multirun's later job: a refusal of the
        run_folder.claim_together(folder, watch)  # folder ends every process alike, at once (auto: run_steps)
        if folder.owner:  # each process's Hydra saved its multirun.yaml before this meeting: process 0's last
            folder_verdict.settle_sweep_record()
    elif folder.owner:  # process 0 of several explicit ones: a refusal told to the others too
        claim_first(folder, cfg, watch)
    if folder.owner or jobs_share_jax():
        watch.check()  # several processes: each asks JAX's sync point, whose count they must share


def run_job(cfg: DictConfig, out: Path, metrics: dict[str, Any], folder: run_folder.RunFolder,
            watch: PreemptionWatch, start: float) -> str | None:
    """The job's steps (``run_steps``), or ``distributed=local``'s processes started to run them; ``metrics`` filled
    in. Returns the processes' failure (a traceback's text) where they failed, else None."""
    if cfg.distributed.local_processes > 1 and cfg.distributed.process_id is None:
        with in_python_words(reword=False):  # run(cfg) from Python: its fixes as cfg's settings
            validate_every(cfg)
        return run_local_job(cfg, out, metrics, watch)
    watch_setup(cfg, watch, metrics=metrics, out=out, start=start, folder=folder)  # XLA is not waited for
    metrics.update(run_steps(cfg, out, metrics, folder, watch))
    metrics["status"] = "ok"
    return None


def record_stop(stop: Preempted, metrics: dict[str, Any], out: Path, start: float,
                folder: run_folder.RunFolder, by_peer: bool = False) -> None:
    """A stop asked for (a preemption signal, Ctrl-C) in ``metrics``, with the command that continues the job; a
    Ctrl-C ends the sweep too, as Python's ``KeyboardInterrupt`` would (raised here). ``by_peer``: another process's
    signal stopped this one (``peer_stop``), which says so on its console."""
    # Naming the folder: the same command alone would start in a new timestamped folder, from scratch.
    # A dry run continues nothing: it names the command that runs it again (with train.resume it is refused)
    dry_run = bool((metrics.get("config") or {}).get("dry_run"))
    resume = ((metrics.get("config") or {}).get("train") or {}).get("resume")  # from Python: named, not 'auto'
    error = f"{stop}; {interrupt_lines.stop_advice(out, dry_run, resume)}"
    if by_peer:  # its own stop line goes to its log only (console.stop_level), so its console would say nothing;
        # the line, on its console and in its log, says what happened, not the "preempted by SIGTERM" of the signal
        # JAX's preemption service names for any process's stop
        error = peer_stop_line(stop.step, interrupt_lines.again_command(out) if dry_run else
                               sweep_hints.continue_command(out))
        log.warning("%s", error)
    whole = sweep_continue.whole_sweep_hint(out, sys.argv)  # its own line: the error names one job's command
    # "stopped_at_step", whichever stopped it (the status says which), the name a Ctrl-C's stop reads right under.
    metrics.update(status="interrupted" if stop.interrupted else "preempted", stopped_at_step=stop.step, error=error)
    # The command the error words, as a value of its own (sample.py's warnings and the sweep table read it)
    metrics[CONTINUE_FIELD] = None if dry_run else sweep_hints.continue_command(out, resume)
    metrics.update({} if stop.step is None else {"final_step": stop.step})  # the step its checkpoint holds
    if stop.interrupted:
        stop_record.record_interrupt(metrics, error, start, folder)
        if whole:
            log.info("%s", whole)
        if folder.owner:  # Hydra's end-of-sweep summary never comes: the jobs so far, and those not run
            summary.refresh_job_sweep_summary(out)
        raise KeyboardInterrupt(error) from None  # from Python (a notebook's cell) the words that continue it too
    if not by_peer:  # said above
        log.log(min(console.stop_level(), logging.WARNING), "%s", error)
    if whole:
        log.info("%s", whole)


def record_failure(err: Exception, cfg: DictConfig, metrics: dict[str, Any], out: Path, start: float,
                   folder: run_folder.RunFolder, watch: PreemptionWatch, saved_before: Any) -> str:
    """A failure of the job in ``metrics`` (one line, logged): its traceback's text returned for ``error.txt``.
    Raised again under ``debug=true``; one that a Ctrl-C caused is recorded as the Ctrl-C, which is raised."""
    if cfg.get("debug"):
        folder.release()
        raise err
    if stop_signal(watch.signum) == signal.SIGINT:  # e.g. C2ST's worker processes, stopped by the same Ctrl-C
        saved = stop_record.record_resume_point(metrics, out)
        stop = stop_record.at_once_error(out, saved, stop_record.exception_text(err))
        stop_record.record_interrupt(metrics, stop, start, folder)
        raise KeyboardInterrupt(stop) from err  # from Python too, where it is saved and how to continue
    stop_record.record_failure_outcome(metrics, out, saved_before, err,  # a file the disk refused: named
                                       dry_run=bool(cfg.get("dry_run")))
    log.error("%s", metrics["error"], extra=child_refusal(err))  # the console tags it "[ERROR]"
    return traceback.format_exc()


def finish(metrics: dict[str, Any], failure: str | None, out: Path, start: float, folder: run_folder.RunFolder,
           watch: PreemptionWatch) -> None:
    """The job's outcome recorded in its folder, the folder released, a stopped sweep's summary written; a preempted
    job's signal passed on (under submitit: the job requeued)."""
    watch.settle()  # a stop the watchdog is writing wins: it ends the process
    metrics["wall_s"] = time.perf_counter() - start
    folder.record(metrics, failure)
    folder.release()
    # A job continued alone, or a stopped job (it ends its sweep: Hydra's summary never comes).
    if folder.owner and (metrics["status"] in ("preempted", "interrupted") or summary.continued_sweep_job()):
        summary.refresh_job_sweep_summary(out)
    if metrics["status"] == "preempted":
        watch.chain(metrics.get("stop_signal"))  # under submitit: requeue the job


class CallableModule(types.ModuleType):
    """This module, callable as its function ``run``: ``from gensbi_sharding.harness import run``, the import the docs'
    ``run(cfg)`` suggests, gives the module (a package's submodule replaces its attribute of the same name), whose
    call failed with "TypeError: 'module' object is not callable"."""

    def __call__(self, cfg: DictConfig) -> dict[str, Any]:
        return self.run(cfg)  # looked up at each call: a patched ``run`` (a test's) is the one called


sys.modules[__name__].__class__ = CallableModule  # Python's documented way to give a module behaviour of its own

"""``distributed=local``: run one job as N JAX processes on this machine.

The parent never starts JAX. It starts N copies of the entry script with the
job's own overrides plus the coordinates of a loopback coordinator, each child
simulating ``cpu_count // N`` CPU devices and talking over gloo, and waits for
them with a deadline: so the multi-host path (per-process data,
``host_to_global_array``, cross-process collectives) runs on a laptop and in CI.
When one child dies the others get ``distributed.heartbeat_s`` plus a few seconds
to notice, then are killed, and the job's metrics name the dead process. A
preemption signal to the parent is passed on to every child, which checkpoints
and stops; one still starting up (no handler before its run) is ended by it, and
the others, which could only wait for it, with it at once: a stop, not a death.
Nothing waits forever, and no child outlives the parent: each holds
the read end of a pipe only the parent can write to, and ends when it closes.
"""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from gensbi_sharding.harness.child_logging import logging_overrides
from gensbi_sharding.harness.config import ConfigError
from gensbi_sharding.harness.console import CONSOLE_TERMINAL_ENV, is_terminal
from gensbi_sharding.harness.continue_field import CONTINUE_FIELD, continue_of
from gensbi_sharding.harness.child_errors import common_refusal, refusals
from gensbi_sharding.harness.child_wait import DEATH_GRACE_S, STARTUP_DEATHS, STOPPED, failure_line, wait_children
from gensbi_sharding.harness.interrupt_lines import JOB_OVERRIDES_ENV, again_command, stop_advice
from gensbi_sharding.harness.local_children import (ChildOutput, continue_hint, file_stamp, free_port,
                                                    model_group_problem, watch_parent, without_device_count)
from gensbi_sharding.harness.override_grammar import hydra_value
from gensbi_sharding.harness.parent_signal import PARENT_SIGNAL_ENV, record_parent_signal
from gensbi_sharding.harness.preemption import EXIT_INTERRUPTED, PREEMPT_SIGNALS
from gensbi_sharding.harness.processes import LOCAL_CHILD_ENV
from gensbi_sharding.harness.sweep_continue import whole_sweep_hint
from gensbi_sharding.harness.sweep_hints import CONTINUE_ENV, continue_command, with_search_path

__all__ = ["run_local_processes", "run_local_job", "watch_parent"]

log = logging.getLogger("gensbi_sharding")

# Keys the parent sets for every child; the job's own overrides of them are dropped.
_CHILD_KEYS = ("distributed.mode", "distributed.coordinator_address", "distributed.num_processes",
               "distributed.process_id", "distributed.local_processes", "devices.cpu_count",
               "hydra.run.dir", "hydra.job.name", "hydra.output_subdir", "hydra.mode")


def run_local_processes(cfg: DictConfig, out: Path, watch: Any = None) -> dict[str, Any]:
    """Run the job of ``cfg`` as ``cfg.distributed.local_processes`` local JAX processes.

    Returns the metrics process 0 wrote, with ``status`` "error" naming each process
    that failed (its exit code or signal) if any did (``first_failed_process``: the rank that
    failed first, None when the run bound stopped them), or "preempted" if the children
    stopped for a preemption signal. Each child's stderr reaches the console until a peer of it
    dies, then its ``process_<i>.log`` (``local_children.ChildOutput``). A stop (``watch``: the run's
    ``PreemptionWatch``, which has one that came before this took the signals over) reaches every
    child started, and no child starts after it; one that ends a child still starting up ends the job at once.

    Raises
    ------
    ConfigError
        If the CPU devices do not split over the processes, their simulations do not fit in this host's memory
        (``local_processes_problem``), a ``mesh=dict`` model group spans processes, or no Hydra job runs.
    """
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    from gensbi_sharding.harness.devices import resolve_cpu_count
    from gensbi_sharding.harness.job_check import local_processes_problem

    n, cpu = cfg.distributed.local_processes, resolve_cpu_count(cfg.devices.cpu_count)[0]
    if problem := local_processes_problem(cfg) or model_group_problem(cfg, n, cpu // n):  # 1st: a sweep's preflight too
        raise ConfigError(problem)
    if not HydraConfig.initialized():
        raise ConfigError("distributed.local_processes > 1 needs a Hydra job: run it through launch.py")
    # The search path too (Hydra keeps it apart from the task's): else no process finds a preset of one's own.
    overrides = with_search_path([o for o in HydraConfig.get().overrides.task if _key(o) not in _CHILD_KEYS])
    # Read unresolved, as typed: the children's Hydra resolves them (hydra.sweep.subdir=${hydra.job.num} has no value
    # in a run); else the children's consoles ignore them
    overrides += logging_overrides(OmegaConf.to_container(HydraConfig.get().overrides.hydra))
    port = free_port()
    script = Path(sys.argv[0]).absolute()
    lifeline, keep_open = os.pipe()  # the children read; only this process holds the write end
    handle, received = tempfile.mkstemp(prefix="gensbi_sharding_signal_")  # the signal the children word
    os.close(handle)
    env = {k: v for k, v in os.environ.items() if k != "JAX_NUM_CPU_DEVICES"}
    env.update(PYTHONUNBUFFERED="1", XLA_FLAGS=without_device_count(env.get("XLA_FLAGS", "")),
               **{LOCAL_CHILD_ENV: str(lifeline), CONTINUE_ENV: continue_command(out), PARENT_SIGNAL_ENV: received,
                  JOB_OVERRIDES_ENV: json.dumps({"overrides": list(HydraConfig.get().overrides.task),
                                                 "multirun": HydraConfig.get().mode == RunMode.MULTIRUN}),
                  CONSOLE_TERMINAL_ENV: "1" if is_terminal(2) else "0"})  # their stderr is passed on to it: its bar
    children, output, signalled, timed_out = [], ChildOutput(out), [], []
    earlier = file_stamp(out / "metrics.json")  # a continued run's folder holds the earlier attempt's record

    def forward(signum, frame):  # preemption: every child checkpoints at its next step boundary
        if signum == signal.SIGINT and signal.SIGINT in signalled:
            raise KeyboardInterrupt  # Ctrl-C again: stop at once (the finally below ends the children)
        if not signalled and signum != signal.SIGINT and not timed_out:  # a terminal's Ctrl-C: each child says it
            # JAX's preemption service takes the children's SIGTERM unsaid: without this a step's wait went silent
            log.warning("received %s: passed on to the %d processes, which stop together where they agree "
                        "(in training: a step boundary a few steps on, after a checkpoint)",
                        signal.Signals(signum).name, n)
        signalled.append(signum)
        record_parent_signal(received, signum)  # before the children hear of it: they say Ctrl-C, not preemption
        for child in children:
            if child.poll() is None:
                # A terminal's Ctrl-C reached the children already (one process group); SIGTERM, not a
                # second SIGINT, so that none of them takes it for a second Ctrl-C.
                child.send_signal(signal.SIGTERM if signum == signal.SIGINT else signum)

    def time_up():  # the run bound as a cluster's time limit: a checkpoint at the next step, not SIGKILL's loss
        timed_out.append(True)
        log.warning("distributed.run_timeout_s=%s s reached: stopping the processes at their next step",
                    cfg.distributed.run_timeout_s)
        forward(signal.SIGTERM, None)

    # Before any child starts: from after the last one, one that came earlier would be the run's watch's alone (the
    # children training on, the preemption lost).
    with output.own_lines():  # the parent's lines (a stop's warning) never continue a child's
        previous = {s: signal.signal(s, forward) for s in (*PREEMPT_SIGNALS, signal.SIGINT)}
        try:
            if getattr(watch, "signum", None) is not None:  # came since the run's last check
                forward(watch.signum, None)
            try:
                for rank in range(n):
                    if signalled:  # stopped before this one started: it never does (nor trains on)
                        break
                    command = [sys.executable, str(script), *overrides,
                               "distributed.mode=explicit", f"distributed.coordinator_address=127.0.0.1:{port}",
                               f"distributed.num_processes={n}", f"distributed.process_id={rank}",
                               "distributed.local_processes=1", f"devices.cpu_count={cpu // n}",
                               f"hydra.run.dir={hydra_value(out)}",  # runs/a(1) quoted for Hydra, as the user had to
                               f"hydra.job.name=process_{rank}", "hydra.output_subdir=null",
                               "hydra.mode=RUN"]  # one run each, in out: a preset's MULTIRUN (sbibm) started sweeps
                    children.append(subprocess.Popen(command, env=env, pass_fds=(lifeline,), stderr=subprocess.PIPE))
                    output.follow(rank, children[-1].stderr)  # to the console; once a peer died, to its log
                    if signalled:  # it may have come before this child was in the list: again (twice changes nothing)
                        children[-1].send_signal(signal.SIGTERM if signalled[0] == signal.SIGINT else signalled[0])
            finally:
                os.close(lifeline)  # the children hold it; this process holds only the write end
            if len(children) == n:  # launch.log holds only this parent's lines: where the run's own account goes
                log.info("started %d local processes (coordinator 127.0.0.1:%d, %d CPU devices each); each logs to "
                         "process_<i>.log in %s", n, port, cpu // n, out)
            codes, first_dead, lag = wait_children(children, cfg.distributed.run_timeout_s,
                                                   cfg.distributed.heartbeat_s + DEATH_GRACE_S, signalled, time_up,
                                                   output.quiet)
        finally:  # Ctrl-C here: no child outlives the parent
            for s, handler in previous.items():
                signal.signal(s, handler)
            live = [rank for rank, child in enumerate(children) if child.poll() is None]
            output.quiet(live)  # what the others say as one dies (its coordinator gone) is noise here: to their logs
            for rank in live:  # all at once: each killed after the one before ended prints JAX's fatal error
                children[rank].kill()
            for rank in live:
                children[rank].wait()
            os.close(keep_open)
            os.unlink(received)
            output.join()
            output.end_line()  # the parent's own lines (the outcome, an error) never continue a child's progress bar
    metrics_path, dry_run = out / "metrics.json", bool(OmegaConf.select(cfg, "dry_run", default=False))
    # Only what process 0 wrote in this attempt: else an attempt whose processes died before writing took the
    # earlier attempt's steps, figures and error ("process 0 reported: preempted ... at step 231") as its own.
    written = metrics_path.exists() and file_stamp(metrics_path) != earlier
    metrics = json.loads(metrics_path.read_text()) if written else {}
    metrics["process_exit_codes"] = codes
    if codes and all(code == 0 for code in codes):  # none: stopped before the first started (below)
        metrics.setdefault("status", "error")
    elif codes and all(code in (0, *STOPPED) for code in codes):
        interrupted = signal.SIGINT in signalled or EXIT_INTERRUPTED in codes
        metrics["status"] = "interrupted" if interrupted else "preempted"
        metrics["stop_signal"] = signalled[0] if signalled and not timed_out else None  # none to hand on
        if timed_out:
            bound = cfg.distributed.run_timeout_s
            said = metrics.get("error")
            if command := metrics.get(CONTINUE_FIELD):  # process 0's repeats the bound: raised as the console says
                raised = re.sub(r"distributed\.run_timeout_s=\S+", f"distributed.run_timeout_s={2 * bound}", command)
                metrics[CONTINUE_FIELD], said = raised, str(said).replace(command, raised)
            metrics["error"] = (f"stopped at distributed.run_timeout_s={bound} s: {said}; raise "
                                "distributed.run_timeout_s for the rest")
            # On the console too: the processes' "continue with" repeats the bound that stopped them.
            log.warning("when you continue, raise distributed.run_timeout_s (e.g. distributed.run_timeout_s=%d): "
                        "with %s s every attempt stops there again", 2 * bound, bound)
    elif signalled and not written and (not codes or any(code in STARTUP_DEATHS for code in codes)) and all(
            code in (0, *STOPPED, *STARTUP_DEATHS, -signal.SIGKILL) for code in codes):
        # The stop ended processes still starting up (no handler yet), or came before any started; the others, waiting
        # at the coordinator for them, were killed at once (wait_children): none trained: said as the stop, not
        # "process 1 of 2 died (killed by SIGTERM)" 15 s later when one of them had started its run.
        interrupted, bound = signal.SIGINT in signalled and not timed_out, cfg.distributed.run_timeout_s
        stop = ("interrupted by Ctrl-C (SIGINT)" if interrupted else f"stopped at distributed.run_timeout_s={bound} s"
                if timed_out else f"preempted by {signal.Signals(signalled[0]).name}")  # the signal, by name
        hint = continue_hint(out) or f"; {stop_advice(out, dry_run)}"  # a dry run's: run it again
        command = None if dry_run else continue_command(out)  # the one the hint words, as a value (continue_field)
        if timed_out:  # the command with a bound they can start within (it repeated the one that stopped them)
            hint, command = (text and re.sub(r"distributed\.run_timeout_s=\S+",
                                             f"distributed.run_timeout_s={max(2 * bound, 120)}", text)
                             for text in (hint, command))
        metrics.update(status="interrupted" if interrupted else "preempted", stop_signal=None if timed_out else
                       signalled[0], error=f"{stop} while the processes were starting up, before training (nothing "
                       f"trained: no checkpoint to save){hint}", **{CONTINUE_FIELD: command})
        log.warning("%s", metrics["error"])  # as a one-process run says its stop
    elif written and metrics.get("status") == "ok" and not timed_out:
        # Process 0 recorded the job complete (its metrics.json is the last thing a run writes): a death after it, in
        # the processes' teardown, lost nothing: not status error and "continue with ...", every result written
        metrics["after_completion"] = failure_line(codes, first_dead, lag, cfg, out)
        log.warning("the job completed (process 0 recorded it, every output written); after that %s",
                    metrics["after_completion"])
    else:
        reported = metrics.get("error")  # process 0's own error, when it recorded one
        found = refusals(out, codes, reported)  # refusals: said by this parent only (child_errors.child_refusal)
        if (refusal := common_refusal(found, codes)) is not None:  # said once, as a one-process job says it
            metrics.update(status="error", error=refusal, **{CONTINUE_FIELD: None})  # a refusal continues nothing
            return metrics
        # One killed from outside: the command that reruns or continues it, unless process 0's error names it (one
        # too where process 0 reported "Gloo AllGather failed: ... Connection closed by peer" and nothing was saved)
        # (its continue_with; a dry run's, none: the command that runs it again, if its error holds it). Was: any
        # "with: " in its error, so XLA's "... failed with: Connection reset by peer" left the kill without a command.
        offered = continue_of(metrics) or dry_run and again_command(out) in (reported or "")
        killed = first_dead is not None and codes[first_dead] < 0 and not offered
        if added := killed or not reported:  # the hint's command (continue_hint's), as a value of its own
            metrics[CONTINUE_FIELD] = None if dry_run else continue_command(out)
        metrics.update(status="error", first_failed_process=first_dead,
                       error=failure_line(codes, first_dead, lag, cfg, out)
                       + (f"; process 0 reported: {reported}" if reported else "")
                       + (continue_hint(out, again=True, dry_run=dry_run) if added else "")
                       + "".join(f"; process {rank} refused: {text}" for rank, text in found.items() if rank))
    return metrics


def run_local_job(cfg: DictConfig, out: Path, metrics: dict[str, Any], watch: Any = None) -> str | None:
    """The job as ``run_local_processes`` runs it, recorded into ``metrics`` and said as a one-process job says it.

    ``metrics`` (the parent's record: its resolved config) is updated with the processes' outcome but keeps that
    config, the job's as asked for (process 0's, with ``local_processes=1`` and its share of ``devices.cpu_count``,
    goes under ``process_0_config``: as the job's record, a sweep's summary would show ``devices.cpu_count=4`` for a
    job on 8) (``watch``: the run's ``PreemptionWatch``). A failure is logged; a stop in a sweep names the command
    that continues the whole sweep.

    Returns
    -------
    str or None
        The text for ``error.txt`` when no process wrote one (e.g. a process killed: none could say so), or when
        a process other than 0 died first: its death, then process 0's traceback (which only echoes it).
    """
    asked, outcome = metrics.get("config"), run_local_processes(cfg, out, watch)  # the job's, not process 0's
    metrics.update(outcome, config=asked, **({"process_0_config": outcome["config"]} if "config" in outcome else {}))
    if metrics["status"] == "error":
        rank = metrics.get("first_failed_process")  # its log; XLA's teardown of the others went to theirs
        log.error("%s%s", metrics["error"], "" if rank is None else f"; its log: {out / f'process_{rank}.log'} (what "
                  "the others printed as they were stopped is at the end of their process_<i>.log)")
        said = f"{metrics['error']}\n(each process's own output: process_<rank>.log)\n"
        if not (written := out / "error.txt").exists():  # none could say so (a process killed)
            return said
        if rank not in (None, 0):  # process 0's traceback ("Gloo AllGather failed") is the death's echo, not its cause
            return f"{said}\nprocess 0's traceback (after process {rank} died):\n{written.read_text(errors='replace')}"
        # else process 0's own traceback says more
    elif metrics["status"] in ("preempted", "interrupted") and (whole := whole_sweep_hint(out, sys.argv)):
        log.info("%s", whole)
    return None


def _key(override: str) -> str:
    return override.split("=", 1)[0].lstrip("+~")

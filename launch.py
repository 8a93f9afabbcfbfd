"""Train a sharded flow-matching posterior: ``python launch.py mesh=auto rule=tensor``.

Compose the config (conf/), run the job (gensbi_sharding.harness.run), end with one line
(result, wall time, speed, output folder), exit non-zero if any job of the run or sweep
failed. ``python launch.py --help`` lists the groups, the headline commands and where
outputs go. Importing this file never starts JAX's backend, and imports JAX only in a
``distributed=local`` process (elsewhere the run imports it, as it starts the devices).
"""

import functools
import os
import signal
import time

#: When this process started (as near as Python lets it): a run's own clock starts after the imports and Hydra's
#: composing (~14 s on 2 busy cores), so a lone run's final line counts from here (``counted_from_start``).
#: None where launch.py is imported, not run: a caller's run(cfg) is counted from its own start.
STARTED = time.monotonic() if __name__ == "__main__" else None

#: Preemption signals received before ``harness.signal_hold`` can be imported (after Hydra and the harness): held
#: from the first line, so a SIGTERM while the run starts is answered by the run (status preempted, exit 75).
#: A distributed=local child's signals are its parent's to pass on: it keeps Python's default until its run, so that a
#: stop ends it at once (nothing to save), which its parent reads as a stop at start-up and ends the others with
#: (local_cluster); once its run ended, its run's watch leaves them ignored (PreemptionWatch's ignore_after).
EARLY_SIGNALS: list[int] = []
if __name__ == "__main__" and not os.environ.get("GENSBI_SHARDING_PARENT_FD"):  # CHILD_ENV below
    for held in (signal.SIGTERM, signal.SIGUSR1, signal.SIGUSR2):  # signal_hold.PREEMPT_SIGNALS
        signal.signal(held, lambda signum, frame: EARLY_SIGNALS.append(signum))
# Python's own Ctrl-C handler, but one landing in a garbage-collector callback (JAX's) is sent again, not dropped: it
# printed "Exception ignored in: <function _xla_gc_callback ...>", and the run trained on.
if __name__ == "__main__":
    from gensbi_sharding.harness.signal_hold import raise_interrupt

    signal.signal(signal.SIGINT, raise_interrupt)

import logging  # noqa: E402
import re  # noqa: E402
import sys  # noqa: E402


def device_environment_problem(environ) -> str | None:
    """A device-count environment variable JAX cannot read, as one line naming it and the fix; else None.

    Checked before JAX is imported: JAX reads ``JAX_NUM_CPU_DEVICES`` at import (a traceback), XLA its
    ``XLA_FLAGS`` count when the backend starts (its whole flag list). Conflicts between the counts are
    ``harness.devices.resolve_cpu_count``'s.
    """
    value = environ.get("JAX_NUM_CPU_DEVICES")
    if value is not None and not re.fullmatch(r"\s*-?\d+\s*", value):
        return (f"JAX_NUM_CPU_DEVICES={value!r} is not a whole number of simulated CPU devices; unset "
                "JAX_NUM_CPU_DEVICES (devices.cpu_count then gives the count), or set e.g. JAX_NUM_CPU_DEVICES=8")
    flag = re.search(r"--xla_force_host_platform_device_count=(\S*)", environ.get("XLA_FLAGS", ""))
    if flag and not flag.group(1).isdigit():
        return (f"XLA_FLAGS's --xla_force_host_platform_device_count={flag.group(1)} is not a whole number of "
                "simulated CPU devices; remove it from XLA_FLAGS (devices.cpu_count then gives the "
                "count), or give a count, e.g. --xla_force_host_platform_device_count=8")
    return None


if __name__ == "__main__" and (_DEVICE_PROBLEM := device_environment_problem(os.environ)):
    sys.exit(f"[ERROR] {_DEVICE_PROBLEM}")  # before JAX reads it


def interrupted_before_run() -> None:
    """Ctrl-C before a run started (the imports, checking the command, Hydra composing): one line, exit 130.

    Not a KeyboardInterrupt traceback from inside an import, nor "the job's metrics.json records it", which no job
    has written yet. A ``distributed=local`` process ends as Ctrl-C's default action ends one, which its parent
    reads as a stop before it joined (exit 130 reads to it as a stop at a step, and it would give the others, held
    at the coordinator by this one, a stop's grace of 120 s).
    """
    if os.environ.get(CHILD_ENV):  # distributed=local's parent says it once for its processes
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)  # ends it here
    else:
        print("interrupted by Ctrl-C before a run started: nothing was trained, and no folder holds this run's "
              "results", file=sys.stderr)
    sys.exit(130)  # EXIT_INTERRUPTED (preemption.py), as an interrupted run


#: processes.LOCAL_CHILD_ENV (set in distributed=local's processes), which may not be imported when Ctrl-C lands.
CHILD_ENV = "GENSBI_SHARDING_PARENT_FD"
try:
    import hydra
    from omegaconf import DictConfig

    from gensbi_sharding.harness.config import register_configs
    from gensbi_sharding.harness.console import quiet_console, tagged
    from gensbi_sharding.harness.command_checks import command_problem, shown_config_problem
    from gensbi_sharding.harness.config_loads import keep_parsed_config_files, share_the_config_store
    from gensbi_sharding.harness.hydra_room import next_job_room_lines
    from gensbi_sharding.harness.processes import folder_owner
    from gensbi_sharding.harness.interrupt_lines import ended_run_exit, interrupted_line, job_ended, record_stamp
    from gensbi_sharding.harness.preemption import EXIT_INTERRUPTED, EXIT_PREEMPTED
    from gensbi_sharding.harness import stop_watchdog
    from gensbi_sharding.harness.run import run
    from gensbi_sharding.harness.run_folder import output_dir
    from gensbi_sharding.harness.processes import LOCAL_CHILD_ENV
    from gensbi_sharding.harness.run_report import final_line
    from gensbi_sharding.harness.log_file import console_fits, drop_late_callbacks
    from gensbi_sharding.harness.console_lines import remember_stopped_sweep, stopped_sweep_line
    from gensbi_sharding.harness.signal_hold import (exit_as_decided, hold_preemption_signals,
                                                     ignore_preemption_signals, take_held)
    from gensbi_sharding.harness.summary import sweep_end_written
    from gensbi_sharding.harness.folder_gone import sweep_lost
    from gensbi_sharding.harness.summary_stop import summary_stop_lines
    from gensbi_sharding.harness.not_started import current_job_dir, mark_not_started
    from gensbi_sharding.harness.sweep_stop import stopped_between_jobs
    from gensbi_sharding.harness.sweep_hints import hydra_job_overrides
    from gensbi_sharding.harness.sweep_verdict import next_job_verdict
    if os.environ.get(CHILD_ENV):  # distributed=local's process: JAX's import stays its start-up, which a stop ends
        import gensbi_sharding.harness.devices  # noqa: F401  (elsewhere the run imports it, as it starts the devices)
except KeyboardInterrupt:  # the imports (Hydra, the harness): a Ctrl-C there is the most likely one before a run
    if __name__ != "__main__":
        raise
    interrupted_before_run()
except ModuleNotFoundError as missing:  # e.g. the system Python instead of the project's .venv
    if (missing.name or "").startswith("gensbi_sharding"):
        raise
    sys.exit(f"launch.py: {missing.name!r} is not installed for {sys.executable}. From the repository, run "
             f"`make run ARGS=\"...\"` (it creates .venv), or use .venv/bin/python launch.py (or activate .venv).")

# The command line's checks (command_checks.py), in order, over one parse of it: before Hydra's merge error,
# which names no fix, and before any folder is made.
try:
    if __name__ == "__main__":
        # This process's compositions parse each conf/ file once and share Hydra's ConfigStore (config_loads): set
        # here, by the program, not at an import, so a notebook importing the harness keeps OmegaConf and Hydra as
        # they are
        keep_parsed_config_files()
        share_the_config_store()
        drop_late_callbacks()  # a damaged checkpoint's reads still under way: no tracebacks around a refusal
        if problem := command_problem(sys.argv[1:]):
            sys.exit(tagged("ERROR", problem))  # the run's refusals read the same (no class name)
    register_configs()
    if __name__ == "__main__" and not os.environ.get(CHILD_ENV):  # a local child's signals are its parent's to pass on
        hold_preemption_signals(EARLY_SIGNALS)  # until a run's watch takes one over: answered, never a silent kill
except KeyboardInterrupt:
    if __name__ != "__main__":
        raise
    interrupted_before_run()
log = logging.getLogger("gensbi_sharding")
failed_jobs: list[str] = []
running: list[bool] = []  # [True] while a job's run() is under way: only then does a metrics.json record a Ctrl-C
ran: list = []  # the folder of each job whose run() started
in_sweep: list[bool] = []  # [True] once a multirun's job started (Hydra forgets a job's config as the job ends)
stop_note: list[str] = []  # the Ctrl-C line true for this process's job (interrupt_lines), made while Hydra knows it
decided: list[int] = []  # the exit code, once every job has ended and been counted (signal_hold.exit_as_decided)


def counted_from_start(metrics: dict, sweep: bool, now: float | None = None) -> dict:
    """The metrics the final line shows: a lone run's ``wall_s`` counted from this process's start (``STARTED``),
    the imports and Hydra's composing in it, as the command's user waited for them; metrics.json keeps the run's own.

    A sweep's job keeps its own (a later job's start-up is the sweep's), as does a run refused before it started
    (``wall_s`` None) and a run of a process that did not start as launch.py.
    """
    if sweep or STARTED is None or metrics.get("wall_s") is None:
        return metrics
    return {**metrics, "wall_s": (time.monotonic() if now is None else now) - STARTED}


@hydra.main(version_base="1.3", config_path="conf", config_name="config")
def main(cfg: DictConfig) -> float | None:
    if ran and (held := take_held()):  # a preemption after a sweep's job ended: the sweep's, this job never starts
        ignore_preemption_signals()  # answered: a second SIGTERM must not turn 75 into 143
        interrupted = held[0] == signal.SIGINT  # a Ctrl-C the last job finished before answering (stop_after_run)
        for line in stopped_between_jobs(output_dir(cfg), None if interrupted else held[0], len(ran), sys.argv):
            log.log(logging.WARNING if line.startswith(("preempted", "interrupted")) else logging.INFO, "%s", line)
        sys.exit(EXIT_INTERRUPTED if interrupted else EXIT_PREEMPTED)
    # A Ctrl-C before the job is marked started reads as one before it started (the outer handler: nothing marked)
    stamp, jobs = record_stamp(output_dir(cfg)), len(ran)
    try:  # from its first mark on, every Ctrl-C is this handler's: one between the marks and the run said "the
        # job's metrics.json records it" with none written, and one after the run returned said so of an ok record
        running.append(True)
        ran.append(output_dir(cfg))
        remember_stopped_sweep(None)  # the outcome this job's stop gives, not an earlier call's stopped sweep again
        in_sweep[:] = [hydra_job_overrides()[1]]
        # a stop inside a setup step ends the run in stop_watchdog: its final line counts on the same clock
        stop_watchdog.final_metrics[:] = [] if in_sweep[0] else [lambda m: counted_from_start(m, False)]
        with quiet_console(cfg):  # third-party noise goes to the job's launch.log, not the console
            metrics = run(cfg)
        running.clear()
    except KeyboardInterrupt:  # what is true for this process: its run may not have written metrics.json yet, and a
        # process other than 0 writes none
        ran[jobs:] = [output_dir(cfg)]  # one slice store: whichever mark the Ctrl-C came before
        # The run returned, its record written: a Ctrl-C after the job ended. Only the folder's owner writes that
        # record: another process of the job reads process 0's, written whenever process 0 ended, not its own end.
        if folder_owner(cfg) and job_ended(ran[-1], stamp):
            running.clear()
            raise
        running[:] = [True]
        try:
            stop_note[:] = [interrupted_line(ran[-1], owner=folder_owner(cfg), stamp=stamp, dry_run=bool(cfg.dry_run))]
        except Exception as err:  # a command it cannot make (an unreadable folder): Ctrl-C's exit all the same
            stop_note[:] = [f"interrupted by Ctrl-C; {ran[-1]}/launch.log says how far the job got ({err})"]
        raise
    if not os.environ.get(LOCAL_CHILD_ENV):  # not one of distributed=local's processes: their parent says it
        from gensbi_sharding.harness.folder_gone import gone_note  # the folder deleted or moved meanwhile: said

        log.info("%s", final_line(counted_from_start(metrics, bool(in_sweep[0])), output_dir(cfg))
                 + gone_note(output_dir(cfg), metrics))
        if (stopped := stopped_sweep_line()) is not None:  # a preempted job ends its sweep: the sweep's outcome, last
            log.info("%s", stopped)
    if metrics["status"] == "preempted":  # checkpointed; the rest of a sweep would be cut short too
        ignore_preemption_signals()  # recorded: a second SIGTERM (SLURM sends several) must not turn 75 into 143
        sys.exit(EXIT_PREEMPTED)
    if metrics["status"] != "ok":
        failed_jobs.append(metrics.get("error", "error"))
    # Hydra writes the next job's .hydra/*.yaml before any code of ours runs there: a disk too full for them ended
    # the sweep in Hydra's traceback, with no summary, stop line or continue command. Several processes per job:
    # process 0 checks, and every process stops with it (next_job_verdict), before any starts the next job
    if in_sweep == [True] and not os.environ.get(LOCAL_CHILD_ENV) and (full := next_job_verdict(
            lambda: next_job_room_lines(output_dir(cfg), len(ran), sys.argv))):
        print(tagged("ERROR", full[0]), *full[1:], sep="\n", file=sys.stderr, flush=True)
        sys.exit(1)
    return metrics.get("c2st")


if __name__ == "__main__":
    import atexit
    import gc

    # Python's finalisation sweeps JAX's and Flax's objects in full collections: ~1 s of CPU after the last line,
    # with nothing left to free at exit. Registered after JAX's own handlers, so it runs before them (LIFO).
    atexit.register(gc.freeze)
    # What the imports above built (Hydra, OmegaConf, the harness) is moved out of the cycle collector's reach: each
    # full collection of the run walked it again (~0.2 s of CPU in a tiny run). Garbage made later is collected.
    gc.freeze()
    console_fits()  # a console without UTF-8 gets +/- for a C2ST's ±, never an UnicodeEncodeError
    try:
        main()
        # A stop after a sweep's last job ended, as its summary was written: held until the summary was whole, then
        # forgotten (exit 0, no word). Answered as a preemption (75; 0 where nothing is left: every job and the
        # summary complete, so a requeue would be refused) or a Ctrl-C (130) is, the summary kept.
        if in_sweep == [True] and (held := take_held()):
            ignore_preemption_signals()  # answered: a second SIGTERM must not turn 75 into 143
            lines, finished = summary_stop_lines(ran[-1], held[0], sys.argv)
            print(*lines, sep="\n", file=sys.stderr, flush=True)
            sys.exit(EXIT_INTERRUPTED if held[0] == signal.SIGINT else 0 if finished else EXIT_PREEMPTED)
        # Hydra's --info left the root logger at DEBUG on stdout: composing the config again to check it printed
        # Hydra's own debug line ('Setting JobRuntime:name=app') after the info shown
        logging.disable(logging.INFO if not ran else logging.NOTSET)
        problem = None if ran else shown_config_problem(sys.argv[1:])  # --cfg, --info: shown, never checked
        logging.disable(logging.NOTSET)
        if problem:
            sys.stdout.flush()
            print(tagged("ERROR", f"a run of the config shown is refused: {problem}"), file=sys.stderr)
            failed_jobs.append(problem)
    except BrokenPipeError:  # the console's reader left (`--help | head`): the rest unread, no traceback
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # Python's flush at exit goes nowhere too
    except KeyboardInterrupt:
        if not running and not ran:  # Hydra composing: no run to record it
            mark_not_started(current_job_dir(), "interrupted by Ctrl-C before it started")  # a folder Hydra made
            interrupted_before_run()
        if not running and sweep_end_written():  # as the sweep's summary was written: written again, whole
            print(*summary_stop_lines(ran[-1], signal.SIGINT, sys.argv, rewrite=True)[0], sep="\n", file=sys.stderr)
            sys.exit(EXIT_INTERRUPTED)
        # A single run that had ended (its record written): nothing to stop, so it exits as its record says (as a
        # SIGTERM there does), where it said "interrupted by Ctrl-C after 1 job(s) ended" and 130 after an ok record
        if not running and in_sweep == [False] and (ended := ended_run_exit(ran[-1])) is not None:
            print(ended[1], file=sys.stderr, flush=True)
            sys.exit(ended[0])
        if not running:  # after a job ended (between a sweep's jobs): its metrics.json says how it ended
            # The next job's folder, if Hydra made it, says so (an empty launch.log reads like a run that failed)
            mark_not_started(job_dir := current_job_dir(), f"interrupted by Ctrl-C after {len(ran)} job(s) of the "
                             "sweep ended")
            # As a preemption there: the sweep's summary with its jobs not run, how to continue, the outcome last
            # (Hydra's summary never comes after a Ctrl-C: the sweep's files would hold an earlier run's rows or none)
            lines = [f"interrupted by Ctrl-C after {len(ran)} job(s) ended, each recorded in its folder's metrics.json"]
            try:  # a second Ctrl-C while the summary is written (a plot: a second or so) only cuts it short
                if in_sweep == [True] and job_dir:
                    lines = stopped_between_jobs(job_dir, None, len(ran), sys.argv, made=job_dir != ran[-1])
            except KeyboardInterrupt:
                lines.append("Ctrl-C again: the sweep's summary was not rewritten")
            print(*lines, sep="\n", file=sys.stderr, flush=True)
            sys.exit(EXIT_INTERRUPTED)
        if not os.environ.get(LOCAL_CHILD_ENV):  # distributed=local's parent says it once for its processes
            print(stop_note[0] if stop_note else "interrupted: the job's metrics.json records it (status interrupted)",
                  file=sys.stderr)
            if (stopped := stopped_sweep_line()) is not None:  # the sweep's outcome, last (Hydra's never comes)
                print(stopped, file=sys.stderr, flush=True)
        sys.exit(EXIT_INTERRUPTED)
    finally:  # every job has ended and recorded how; the exit code says it, whatever signal comes now
        if not os.environ.get(CHILD_ENV):  # a local child's signals stay its parent's
            # A SIGTERM while the interpreter shuts down (Python gives its handlers back to the default action then,
            # and JAX tears down for half a second) would kill a completed run's process: exit 143 after ok.
            ignore_preemption_signals()
            # A Ctrl-C now only cut JAX's teardown short (a KeyboardInterrupt traceback under the final line): it
            # ends the process at once with the exit code decided. Not ignored: a teardown that hung (a dead peer)
            # could not be stopped from the terminal.
            signal.signal(signal.SIGINT, functools.partial(exit_as_decided, sys.exc_info()[1], decided))
    decided.append(1 if failed_jobs or sweep_lost() else 0)  # a sweep whose folder moved: its jobs there not counted
    sys.exit(decided[0])

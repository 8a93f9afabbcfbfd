"""One job of ``benchmarks/sbibm.py run``: its process (``launch``, which passes a stop on to it) and what
its folder says (``job_status``, ``running_in``, ``other_settings``, ``scores_problem``, ``score_said``,
``failure``)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from gensbi_sharding.messages import clipped
from cli_args import not_a_script
from sbibm_files import read_scores
from sbibm_method import AMORTISED, cell_of
from sbibm_tables import mean_sd
not_a_script(__name__, __file__)  # run as a script: name the one to run

REPO = Path(__file__).resolve().parents[1]


class JobsStopped(Exception):
    """A signal stopped a job: ``args`` are the job ("task budget"), its status and the runner's exit code."""


#: Signals the runner passes on to its job (a cluster's preemption, ``timeout``, ``kill``): the job saves
#: a checkpoint and stops, instead of running on alone, its runner gone.
FORWARDED = (signal.SIGTERM, signal.SIGUSR1, signal.SIGUSR2)


def launch(command: list[str], log: Path, grace_s: float = 300.0, checkpoints: bool = True) -> tuple[int, int | None]:
    """Run one job, its output appended to ``log`` as it goes; its exit code, and the exit code the runner
    stops with (130 after Ctrl-C, 75 after a signal passed on to the job) or None.

    On Ctrl-C the job stops at its next step with a checkpoint: it runs in a process group of its own, so the
    runner passes it the one SIGINT, whether the terminal's Ctrl-C (sent to the runner's group) or a
    ``kill -INT`` of the runner alone (else the job trains to its end while the runner says "waiting for the job
    to save a checkpoint"); it is waited for (a second Ctrl-C kills it), not killed at once, which would lose that
    checkpoint and its status. After a stop the wait is bounded: a job still running ``grace_s`` seconds later (a
    compile or a C2ST fit that does not look at the stop) is killed, said on stderr, so that ``timeout``
    or a scheduler's stop ends the run; its last checkpoint stays, from which the same command continues.
    A job that keeps no checkpoint (``checkpoints=False``: a sequential one's rounds) is said to start again.
    A hangup (the terminal closed, its shell's SIGHUP to the runner's group) is passed on too, ending both as it did
    when they shared a group; under ``nohup`` both ignore it. Ctrl-Z (SIGTSTP) stops the job's group with the runner,
    and ``fg``/``bg`` (SIGCONT to the runner) continue it, as a terminal does with one group. A stop or Ctrl-C that
    comes while the job starts reaches it once it has (else the job would run on, never told).
    """
    # A sequential job saves no checkpoint: not "waiting for the job to save a checkpoint" of it.
    then = ("the same command continues it from its last checkpoint" if checkpoints else
            "the same command starts it again (its rounds keep no checkpoint)")
    log.parent.mkdir(parents=True, exist_ok=True)
    stop: list[int] = []
    proc: subprocess.Popen | None = None
    early: list[int] = []  # a Ctrl-C while the job starts: held, then passed on

    def forward(signum, frame):  # before Popen too: one that comes while it starts is passed on once it has
        stop.append(signum)
        if proc is not None:
            proc.send_signal(signum)

    def suspend(signum, frame):  # Ctrl-Z: the terminal stops its foreground group, which the job is not in
        _to_job(proc, signal.SIGTSTP)  # so it stops with the runner, not trains on
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)  # stopped here until fg/bg's SIGCONT, which its handler passes on
        signal.signal(signum, suspend)

    def hangup(signum, frame):  # the terminal closed: the shell hangs up the runner's group, which the job is not in
        if proc is not None:  # so it ends as in that group, not runs on alone
            proc.send_signal(signum)
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    def wait_after_stop() -> int:
        try:
            return proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            print(f"the job did not stop within {grace_s:g} s of the stop: killed; {then}", file=sys.stderr,
                  flush=True)
            proc.kill()
            return proc.wait()

    with open(log, "a") as out:  # on disk as it runs: a stopped runner leaves the job's own words
        previous = {s: signal.signal(s, forward) for s in FORWARDED}
        if signal.getsignal(signal.SIGHUP) == signal.SIG_DFL:  # not under nohup (the job inherits its SIG_IGN)
            previous[signal.SIGHUP] = signal.signal(signal.SIGHUP, hangup)
        if signal.getsignal(signal.SIGTSTP) == signal.SIG_DFL:  # as a terminal would: the job stops and goes on too
            previous.update({signal.SIGTSTP: signal.signal(signal.SIGTSTP, suspend),
                             signal.SIGCONT: signal.signal(signal.SIGCONT, lambda s, f: _to_job(proc, s))})
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            previous[signal.SIGINT] = signal.signal(signal.SIGINT, lambda s, f: early.append(s))
        try:
            try:
                proc = subprocess.Popen(command, cwd=REPO, stdout=out, stderr=subprocess.STDOUT, process_group=0)
                for signum in dict.fromkeys(stop):  # came while it started
                    proc.send_signal(signum)
                if signal.SIGINT in previous:
                    signal.signal(signal.SIGINT, previous[signal.SIGINT])
                if early:
                    raise KeyboardInterrupt
                while True:  # in slices: a signal's stop starts the bounded wait, not an endless one
                    try:
                        return (wait_after_stop() if stop else proc.wait(timeout=1.0)), (75 if stop else None)
                    except subprocess.TimeoutExpired:
                        continue
            except KeyboardInterrupt:
                proc.send_signal(signal.SIGINT)
                print("stopping: waiting for the job to save a checkpoint at its next step (Ctrl-C again kills it)"
                      if checkpoints else "stopping: waiting for the job to stop (it keeps no checkpoint: the same "
                      "command starts it again; Ctrl-C again kills it)", file=sys.stderr, flush=True)
                try:
                    return wait_after_stop(), 130
                except KeyboardInterrupt:
                    proc.kill()
                    return proc.wait(), 130
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)


def _to_job(proc: subprocess.Popen | None, signum: int) -> None:
    """``signum`` to the job's process group (its own processes too, as a terminal sends it), if it still runs."""
    if proc is not None and proc.poll() is None:
        try:
            os.killpg(proc.pid, signum)
        except ProcessLookupError:
            pass


def failure(metrics: Path, log: Path) -> str:
    """A failed job's reason on one line: its metrics.json's ``error``, else the last line of its log."""
    try:
        error = json.loads(metrics.read_text()).get("error")
    except (OSError, ValueError, AttributeError):
        error = None
    try:
        lines = [line.strip() for line in log.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        lines = []
    return " ".join(str(error or (lines[-1] if lines else "it printed nothing")).split())


def scores_problem(job: Path) -> str | None:
    """Why a finished ``job``'s ``c2st.csv`` cannot be counted ("its c2st.csv ..."), or None."""
    scores = job / "c2st.csv"
    if not scores.is_file():
        return f"it has no {scores.name}: it scored no observation (eval.enabled=false or dry_run=true)"
    problem = read_scores(scores, asked_observations(job))[1]
    return f"its {scores} {problem}" if problem else None


def score_said(job: Path) -> str:
    """A finished ``job``'s C2ST as its ``run`` line ends, ``", C2ST 0.964 +- 0.013 over 10 observations"``, or "".

    The mean and sd over its observations, as ``table``'s row for it reads (the job's only output on the runner's
    console: without it, a finished job said only its exit code, and its score needed ``table``).
    """
    rows = read_scores(job / "c2st.csv", None)[0] if (job / "c2st.csv").is_file() else []
    if not rows:  # none scored, or a damaged file (said on the next run, which reruns it): no number to give
        return ""
    values = [float(row["c2st"]) for row in rows]  # kept as the file spells them
    mean, sd = mean_sd(values)  # the table's own sums: its row reads the same digits
    spread = f" +- {sd:.3f}" if len(values) > 1 else ""
    return f", C2ST {mean:.3f}{spread} over {len(values)} observation{'s' if len(values) > 1 else ''}"


def asked_observations(job: Path) -> list[int] | None:
    """The observations ``job``'s recorded config asked to score; None when it does not say."""
    from omegaconf import OmegaConf

    from gensbi_sharding.harness.config_checks import scored_observations

    try:
        return [int(o) for o in scored_observations(OmegaConf.load(job / ".hydra" / "config.yaml"))[0]]
    except Exception:  # noqa: BLE001 (a config without eval/data sections, or unreadable): not checked
        return None


def other_settings(job: Path, settings: list[str]) -> str:
    """How the finished ``job``'s recorded overrides differ from ``settings``; "" if they do not.

    E.g. ``"train.steps=20, asked 40"``.

    A job of an earlier ``run`` with other extra arguments (more steps, other observations) would
    otherwise be skipped as done, and the table would show its results for the settings asked now.
    """
    from gensbi_sharding.harness.sweep_plan import job_configuration

    recorded = job / ".hydra" / "overrides.yaml"
    if not recorded.is_file():  # which settings it ran with is unknown: as before, taken as done
        return ""
    from omegaconf import OmegaConf

    try:
        ran = job_configuration([str(o) for o in OmegaConf.load(recorded)])
    except Exception as err:  # noqa: BLE001 (YAML's or Hydra's error): which settings it ran with is unknown
        # Neither reused nor rerun on a guess: named, as a job of other settings is.
        return f"its {recorded} cannot be read: {type(err).__name__}: {clipped(' '.join(str(err).split()), 160)}"
    asked = job_configuration(settings)
    return ", ".join(f"{k}={ran.get(k, 'unset')}, asked {asked.get(k, 'unset')}" for k in sorted({*ran, *asked})
                     if ran.get(k) != asked.get(k))


def job_status(metrics: Path) -> str:
    """A job's status from its metrics.json; a missing or damaged one is said so (that job is left out or rerun)."""
    if not metrics.is_file():
        return "unknown (no metrics.json)"
    try:
        status = json.loads(metrics.read_text()).get("status")
    except (OSError, ValueError, AttributeError):  # one damaged record costs its job, never the whole table or run
        return f"damaged ({metrics} cannot be read)"
    # A record without a status word (``{}``, ``{"status": 5}``) is as damaged: the callers compare and print it.
    return status if isinstance(status, str) else f"damaged ({metrics} holds no status)"


def running_in(job_dir: Path) -> str | None:
    """Why ``job_dir`` is in use by a live run (its folder lock is held), or None."""
    from gensbi_sharding.harness.folder_lock import FolderInUseError, FolderLock

    if not job_dir.is_dir():
        return None
    try:
        with FolderLock(job_dir):
            return None
    except FolderInUseError as busy:
        return str(busy)
    except OSError:  # a folder this user cannot lock (read-only results): no run of ours writes there
        return None


#: What ``run`` was asked under a --root, kept there: ``table`` gives each (task, budget) asked but never
#: started (Ctrl-C or a signal before its turn) a row saying so, rather than none.
ASKED = "sbibm_asked.json"


def record_asked(root: Path, tasks: list[str], budgets: list[int], method: str = AMORTISED) -> None:
    """Add the cells of this ``run`` to ``root``'s record (written whole, then renamed): ``[task, budget]``
    when amortised (as before), ``[task, budget, method label]`` when sequential (``sbibm_method.cell_of``)."""
    from gensbi_sharding.harness.outputs import write_atomic

    cells = set(read_asked(root / ASKED)) | {cell_of(t, b, method) for t in tasks for b in budgets}
    write_atomic(root / ASKED, json.dumps({"cells": sorted(map(list, cells), key=lambda c: (c[:2], c[2:]))},
                                          indent=1) + "\n")


def read_asked(record: Path) -> list[tuple]:
    """The cells in one record of ``record_asked``; none when it is missing or damaged (then said on stderr:
    the table loses only its "not run" rows)."""
    if not record.is_file():
        return []
    try:
        return [cell_of(str(c[0]), int(c[1]), str(c[2]) if len(c) == 3 else AMORTISED)
                for c in json.loads(record.read_text())["cells"]]
    except (OSError, ValueError, TypeError, KeyError) as err:
        print(f"{record} cannot be read ({type(err).__name__}: {err}): the (task, budget) pairs asked but never "
              "started there get no row; the next run under that --root writes it again", file=sys.stderr)
        return []


def sweep_never_started(folder: Path) -> list[tuple[str, int, Path]]:
    """``(task, budget, multirun folder)`` of each job a ``launch.py -m`` multirun under ``folder`` declared
    (its ``multirun.yaml``) but never started (no job folder: the sweep was stopped before its turn)."""
    from omegaconf import OmegaConf

    from gensbi_sharding.harness.sweep_plan import every_job, job_configuration

    found = []
    for record in sorted(folder.rglob("multirun.yaml")):
        try:
            cfg = OmegaConf.load(record)
            if OmegaConf.to_container(cfg.hydra.sweep)["subdir"] != "${hydra.job.num}":
                continue  # job folders named otherwise (run's "job"): which are missing is not known here
            for number, job in enumerate(every_job(cfg)):
                ran = job_configuration(job)
                if not (record.parent / str(number)).exists() and {"data", "data.num_simulations"} <= ran.keys():
                    found.append((ran["data"], int(ran["data.num_simulations"]), record.parent))
        except Exception as err:  # noqa: BLE001 (YAML's, OmegaConf's, Hydra's or int's error): that sweep unread
            print(f"{record} cannot be read ({type(err).__name__}: {clipped(' '.join(str(err).split()), 200)}): the "
                  "jobs it never started get no row", file=sys.stderr)
    return found

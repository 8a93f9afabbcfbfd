"""The lines a stopped job prints are true for it, and their advice works pasted (round 67's stop messages).

1. An interrupted dry run said "continue with: ... dry_run=true ... train.resume=auto", refused when pasted: it now
   names the command that runs it again, in a new folder (a dry run writes only into a fresh one).
2. A Ctrl-C after launch.py started the job but before its run set up its Ctrl-C handling said "the job's
   metrics.json records it", with no metrics.json there: it now says what the folder kept and how to start again.
3. Process 1 of several, Ctrl-C to it only, said "the job's metrics.json records it": only process 0 writes that.
4. Process 1, stopped during setup for another process's signal, said "preempted by SIGTERM" in its log.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import time

import pytest

from faults_helpers import LAUNCH, TINY, free_port, under_command
from fork_server import ForkServer, launch_together
from gensbi_sharding.harness.command_checks import command_problem
from gensbi_sharding.harness.preemption import Preempted
from gensbi_sharding.harness.run_folder import ensure_fresh

# Ctrl-C (SIGINT to itself) at the run's first stop check: the folder's claim, before anything is built
AT_FIRST_CHECK = """
import signal
from gensbi_sharding.harness import preemption
check = preemption.PreemptionWatch.check
def check_after_ctrl_c(self):
    if self.signum is None:
        signal.raise_signal(signal.SIGINT)
    return check(self)
preemption.PreemptionWatch.check = check_after_ctrl_c
"""
# Ctrl-C between the folder's claim and the run's Ctrl-C handling (its watch): as Python raises it there
BEFORE_THE_WATCH = """
from gensbi_sharding.harness import interrupt_hold
def ctrl_c():
    raise KeyboardInterrupt
interrupt_hold.reset = ctrl_c
"""


class _Folder:
    """A run folder of a process that records nothing (``RunFolder``'s calls ``record_stop`` makes)."""
    owner = True

    def record(self, metrics, failure=None):
        pass

    def release(self):
        pass


@pytest.fixture(scope="module")
def forks(tmp_path_factory):
    """The module's launch.py processes, forked from one process that imported launch.py's modules once
    (tests/fork_server.py: ~1.5 s of CPU less per launch); each still runs launch.py from its first line, its
    prelude (the test's patch) first, as ``python -c <prelude> launch.py`` would."""
    server = ForkServer(tmp_path_factory.mktemp("forks"), dict(os.environ))
    yield server
    server.close()


def _request(args, prelude=None) -> dict:
    """``forks.launch``'s arguments for ``launch.py <args>`` from the repository (as typed there), ``prelude`` (one
    of the patches above) run first."""
    return {"args": [*args], "cwd": LAUNCH.parent, "prelude": prelude}


def _launch(forks, *args, prelude=None, bound=240):
    """``launch.py`` with ``args`` from the repository (as typed there), ``prelude`` run first: (output, exit code)."""
    return launch_together(forks, [_request(args, prelude)], bound)[0]


def _pasted(forks, command):
    """A printed ``python launch.py ...`` command run as pasted in the repository (python: this interpreter)."""
    words = shlex.split(command)
    assert words[:2] == ["python", "launch.py"], command
    return _launch(forks, *words[2:])


def test_a_stopped_dry_runs_advice_runs_it_again_in_a_new_folder_and_passes_the_commands_checks(tmp_path):
    from gensbi_sharding.harness.run import record_stop

    out = tmp_path / "run"
    out.mkdir()
    overrides = [*TINY, "dry_run=true", f"hydra.run.dir={out}"]

    def stopped(cfg):
        metrics = {"status": "error", "config": {"dry_run": True}}
        record_stop(Preempted(signal.SIGTERM), metrics, out, time.perf_counter(), _Folder())
        return metrics

    metrics = under_command(overrides, stopped)
    stop, advice = metrics["error"].split("; ", 1)
    assert stop == "preempted by SIGTERM before training (nothing trained: no checkpoint to save)"
    assert advice.startswith("a dry run has nothing to continue: run it again with: python launch.py "), advice
    words = shlex.split(advice.split("run it again with: ", 1)[1])[2:]
    assert command_problem(words) is None  # was: "dry_run=true with train.resume=auto: ..."
    assert words == [*TINY, "dry_run=true", f"hydra.run.dir={tmp_path / 'run-again'}"]
    assert ensure_fresh(tmp_path / "run-again", dry_run=True) is None  # a folder the dry run takes


def test_a_process_other_than_0_names_the_record_process_0_writes_and_its_own_command(tmp_path):
    from gensbi_sharding.harness.interrupt_lines import interrupted_line

    out = tmp_path / "run"
    line = under_command([*TINY, "distributed.process_id=1", f"hydra.run.dir={out}"],
                         lambda cfg: interrupted_line(out, owner=False, stamp=None))
    assert line.startswith(f"interrupted by Ctrl-C: this process writes no record (process 0 writes the job's, "
                           f"{out / 'metrics.json'}); continue this process with: python launch.py "), line
    assert line.endswith(f"distributed.process_id=1 train.resume=auto hydra.run.dir={out}"), line
    assert "records it" not in line


def test_a_stop_before_the_watch_names_no_metrics_json_and_keeps_an_earlier_attempts(tmp_path):
    from gensbi_sharding.harness.interrupt_lines import interrupted_line, record_stamp

    out = tmp_path / "run"
    (out / ".hydra").mkdir(parents=True)
    line = under_command([*TINY, f"hydra.run.dir={out}"],
                         lambda cfg: interrupted_line(out, owner=True, stamp=record_stamp(out)))
    assert line == (f"interrupted by Ctrl-C as the run started, before it could record the stop: nothing was trained "
                    f"and no metrics.json was written; {out} keeps Hydra's record of the config (.hydra/) and "
                    f"launch.log; start it again with: python launch.py {' '.join(TINY)} hydra.run.dir={out}")
    assert "did not start (interrupted by Ctrl-C as it started)" in (out / "launch.log").read_text()
    (out / "metrics.json").write_text('{"status": "interrupted"}')  # an earlier attempt's, continued
    line = under_command([*TINY, "train.resume=auto", f"hydra.run.dir={out}"],
                         lambda cfg: interrupted_line(out, owner=True, stamp=record_stamp(out)))
    assert "no metrics.json was written (its metrics.json is an earlier attempt's)" in line
    assert line.endswith(f"train.resume=auto hydra.run.dir={out}"), line


@pytest.mark.slow  # two dry runs of launch.py: stopped at its first check, then its printed command (~15 s on 2 cores)
def test_an_interrupted_dry_runs_printed_command_runs_it_again(tmp_path, forks):
    said, code = _launch(forks, *TINY, "dry_run=true", f"hydra.run.dir={tmp_path / 'run'}", prelude=AT_FIRST_CHECK)
    assert code == 130, said[-3000:]
    advice = [line for line in said.splitlines() if "run it again with: " in line]
    assert len(advice) == 1 and "a dry run has nothing to continue" in advice[0], said[-3000:]
    assert "train.resume" not in advice[0] and "continue with" not in said, said[-3000:]
    said, code = _pasted(forks, advice[0].split("run it again with: ", 1)[1])
    assert code == 0 and "dry run done" in said, said[-3000:]
    assert json.loads((tmp_path / "run-again" / "metrics.json").read_text())["status"] == "ok"


@pytest.mark.slow  # launch.py stopped as its run starts, then its printed command, which trains 8 steps (~15 s)
def test_ctrl_c_before_the_runs_handling_says_no_metrics_json_and_its_command_starts_it(tmp_path, forks):
    out = tmp_path / "run"
    said, code = _launch(forks, *TINY, f"hydra.run.dir={out}", prelude=BEFORE_THE_WATCH)
    assert code == 130, said[-3000:]
    assert "metrics.json records it" not in said and not (out / "metrics.json").exists(), said[-3000:]
    lines = [line for line in said.splitlines() if line.startswith("interrupted")]
    assert len(lines) == 1 and "no metrics.json was written" in lines[0], said[-3000:]
    said, code = _pasted(forks, lines[0].split("start it again with: ", 1)[1])
    assert code == 0, said[-3000:]
    assert json.loads((out / "metrics.json").read_text())["status"] == "ok"


def _two(forks, run_dir, prelude0=None, prelude1=None):
    """Processes 0 and 1 of one tiny run, explicit mode, started by hand: (output, exit code) of each."""
    args = [*TINY, "devices.cpu_count=2", "distributed.mode=explicit", "distributed.num_processes=2",
            f"distributed.coordinator_address=127.0.0.1:{free_port()}", "distributed.timeout_s=60",
            f"hydra.run.dir={run_dir}"]
    preludes = (prelude0, prelude1)
    return launch_together(forks, [_request([*args, f"distributed.process_id={rank}"], preludes[rank])
                                   for rank in (0, 1)], 240)


# Once JAX joined the processes: the first check both make then (the folder's claim is process 0's alone)
JOINED = AT_FIRST_CHECK.replace("    if self.signum is None:", "    import jax\n"
                                "    if jax.distributed.is_initialized() and self.signum is None:")


@pytest.mark.slow  # two launch.py processes, Ctrl-C to process 1 at their first check once joined, then their
def test_process_1_interrupted_alone_names_no_record_of_its_own(tmp_path, forks):  # commands pasted (~20 s)
    run_dir = tmp_path / "run"
    (zero, code0), (one, code1) = _two(forks, run_dir, prelude1=JOINED)
    assert code1 == 130, (zero[-3000:], one[-3000:])
    assert "metrics.json records it" not in one, one[-3000:]
    said = [line for line in one.splitlines() if line.startswith("interrupted")]
    assert len(said) == 1 and said[0].startswith(
        f"interrupted by Ctrl-C: this process writes no record (process 0 writes the job's, {run_dir / 'metrics.json'})"
        "; continue this process with: "), one[-3000:]
    assert json.loads((run_dir / "metrics.json").read_text())["status"] in ("interrupted", "preempted")
    commands = [line.split("continue with: ", 1)[1] for line in zero.splitlines() if "continue with: " in line]
    pasted = [commands[-1], said[0].split("continue this process with: ", 1)[1]]
    # pasted as printed, each on its host (python: this interpreter), in the repository, where they were typed: they
    # name launch.py relative to it
    words = [shlex.split(c) for c in pasted]
    (zero, code0), (one, code1) = launch_together(forks, [{"args": w[2:], "cwd": LAUNCH.parent, "argv0": w[1]}
                                                          for w in words], 240)
    assert (code0, code1) == (0, 0), (zero[-3000:], one[-3000:])
    assert json.loads((run_dir / "metrics.json").read_text())["status"] == "ok"


@pytest.mark.slow  # two launch.py processes, Ctrl-C to process 0 at their first check once joined (<= 240 s)
def test_process_1_stopped_in_setup_by_process_0s_signal_logs_what_happened(tmp_path, forks):
    run_dir = tmp_path / "run"
    (zero, code0), (one, code1) = _two(forks, run_dir, prelude0=JOINED)
    assert (code0, code1) == (130, 75), (zero[-3000:], one[-3000:])
    logged = [line for line in (run_dir / "launch.log").read_text().splitlines() if "[process 1/2]" in line]
    assert not [line for line in logged if "preempted by" in line], logged
    assert len([line for line in logged if "stopped before training (nothing trained: no checkpoint to save) with "
                "the job's other processes" in line]) == 1, logged
    assert json.loads((run_dir / "metrics.json").read_text())["status"] == "interrupted"  # process 0's record


@pytest.mark.slow  # launch.py stopped as its run starts, its line unmakeable (~5 s)
def test_ctrl_c_whose_line_cannot_be_made_still_exits_130_in_one_line(tmp_path, forks):
    out = tmp_path / "run"
    unmakeable = BEFORE_THE_WATCH.replace("interrupt_hold.reset = ctrl_c", "interrupt_hold.reset = ctrl_c\n"
                                          "from gensbi_sharding.harness import interrupt_lines\n"
                                          "def unreadable(*args, **kwargs):\n"
                                          "    raise PermissionError('folder unreadable')\n"
                                          "interrupt_lines.interrupted_line = unreadable")
    said, code = _launch(forks, *TINY, f"hydra.run.dir={out}", prelude=unmakeable)
    assert code == 130 and "Traceback" not in said, said[-3000:]
    assert said.strip().splitlines()[-1] == (f"interrupted by Ctrl-C; {out}/launch.log says how far the job got "
                                             "(folder unreadable)"), said[-3000:]

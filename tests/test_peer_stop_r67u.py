"""Explicit mode, two processes started by hand, Ctrl-C to process 0 only: process 1 says why it stopped.

Was: process 0 stopped cleanly (exit 130, the continue command); process 1, stopped at the same step by JAX's
preemption service, exited 75 with nothing on its console (its stop line went to its log only). Now one warning line
says another process was stopped, and names the command that continues this process, which works pasted.
"""

from __future__ import annotations

import json
import os
import re
import shlex

import pytest

from faults_helpers import LAUNCH, TINY, free_port
from fork_server import ForkServer, launch_together
from gensbi_sharding.harness.peer_stop import peer_stop_line

# Process 0 gets Ctrl-C (SIGINT, to itself only) at a point both processes pass: a check once JAX joined them
# (setup), or training step 3
AT_CHECK = """
import signal
from gensbi_sharding.harness import preemption
check = preemption.PreemptionWatch.check
def check_after_ctrl_c(self):
    import jax
    if jax.distributed.is_initialized() and self.signum is None:
        signal.raise_signal(signal.SIGINT)
    return check(self)
preemption.PreemptionWatch.check = check_after_ctrl_c
"""
AT_STEP_3 = AT_CHECK.replace("check = preemption.PreemptionWatch.check", "should_stop = "
                             "preemption.PreemptionWatch.should_stop").replace(
    "def check_after_ctrl_c(self):\n    import jax\n    if jax.distributed.is_initialized() and self.signum is None:",
    "def check_after_ctrl_c(self, step):\n    if step == 3 and self.signum is None:").replace(
    "return check(self)", "return should_stop(self, step)").replace(
    "PreemptionWatch.check = check_after_ctrl_c", "PreemptionWatch.should_stop = check_after_ctrl_c")


@pytest.fixture(scope="module")
def forks(tmp_path_factory):
    """The module's launch.py processes, forked from one process that imported launch.py's modules once
    (tests/fork_server.py: ~1.5 s of CPU less per launch); each still runs launch.py from its first line, process 0's
    patch (``AT_CHECK``, ``AT_STEP_3``) first, as ``python -c <patch> launch.py`` would."""
    server = ForkServer(tmp_path_factory.mktemp("forks"), dict(os.environ))
    yield server
    server.close()


def _two(forks, run_dir, *overrides, bound=240):
    """Processes 0 and 1 of one run, explicit mode, Ctrl-C to process 0 (``AT_CHECK`` unless overrides say
    ``step``): their console output and exit codes."""
    prelude = AT_STEP_3 if "step" in overrides else AT_CHECK
    args = [*TINY, "train.checkpoint_every=1", "devices.cpu_count=2", "distributed.mode=explicit",
            "distributed.num_processes=2", f"distributed.coordinator_address=127.0.0.1:{free_port()}",
            "distributed.timeout_s=60", f"hydra.run.dir={run_dir}", *[o for o in overrides if o != "step"]]
    return launch_together(forks, [{"args": [*args, f"distributed.process_id={rank}"], "cwd": LAUNCH.parent,
                                    "prelude": prelude if rank == 0 else None} for rank in (0, 1)], bound)


def _peer_line(one: str) -> str:
    """Process 1's console lines: only its one warning, which the test returns (without its tags)."""
    lines = [line for line in one.splitlines() if line.startswith("[")]
    assert len(lines) == 1 and lines[0].startswith("[WARNING] [process 1/2] stopped "), one[-3000:]
    return lines[0].split("] ", 2)[2]


def test_the_line_names_the_step_and_the_command():
    assert peer_stop_line(None, "python launch.py x=1") == (
        "stopped before training (nothing trained: no checkpoint to save) with the job's other processes: another "
        "process of this job got Ctrl-C or a preemption signal (this one got none; process 0 says how the job "
        "stopped); continue this process with: python launch.py x=1")
    assert peer_stop_line(4, "c").startswith("stopped at step 4 with the job's other processes: ")


@pytest.mark.slow  # two launch.py processes stopped at their first check once joined, before simulating; <= 240 s
def test_process_1_says_why_it_stopped_before_training(tmp_path, forks):
    run_dir = tmp_path / "run"
    (zero, code0), (one, code1) = _two(forks, run_dir)
    assert (code0, code1) == (130, 75), (zero[-3000:], one[-3000:])
    assert "[ERROR] [process 0/2] interrupted by Ctrl-C (SIGINT) before training" in zero, zero[-3000:]
    said = _peer_line(one)
    assert said.startswith("stopped before training (nothing trained: no checkpoint to save) with the job's other "
                           "processes: another process of this job got Ctrl-C or a preemption signal"), said
    assert said.endswith(f" distributed.process_id=1 train.resume=auto hydra.run.dir={run_dir}"), said


@pytest.mark.slow  # two launch.py processes trained to a stop, then their printed commands pasted (~60 s on 2 cores)
def test_process_1_says_why_it_stopped_in_training_and_its_command_continues_it(tmp_path, forks):
    run_dir = tmp_path / "run"  # launched from the repository, where the commands were typed
    (zero, code0), (one, code1) = _two(forks, run_dir, "step")
    assert (code0, code1) == (130, 75), (zero[-3000:], one[-3000:])
    said = _peer_line(one)
    step = int(re.match(r"stopped at step (\d+) with the job's other processes", said).group(1))
    assert step >= 3 and json.loads((run_dir / "metrics.json").read_text())["stopped_at_step"] == step
    commands = [line.split("continue with: ", 1)[1] for line in zero.splitlines() if "continue with: " in line]
    assert len(commands) == 1, zero[-3000:]
    pasted = [commands[0], said.split("continue this process with: ", 1)[1]]
    assert [c.replace("distributed.process_id=1", "distributed.process_id=0") for c in pasted[1:]] == pasted[:1]
    # pasted as printed, each on its host (python: this interpreter), in the repository: they name launch.py relative
    # to it; the coordinator's port is free again
    words = [shlex.split(c) for c in pasted]
    (zero, code0), (one, code1) = launch_together(forks, [{"args": w[2:], "cwd": LAUNCH.parent, "argv0": w[1]}
                                                          for w in words], 240)
    assert (code0, code1) == (0, 0), (zero[-3000:], one[-3000:])
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert (metrics["status"], metrics["resumed_from_step"], metrics["final_step"]) == ("ok", step, 8), metrics

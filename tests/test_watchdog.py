"""The training-step watchdog: SIGTERM while a step hangs ends the run within its bound; only an unanswered step is
stopped, never a save.
"""

import os
import re
from pathlib import Path

import pytest


_HUNG_RUN = """
import os, signal, sys, threading
from pathlib import Path
sys.path.insert(0, {tests!r})
from faults_helpers import run_tiny
from gensbi_sharding.harness import stop_watchdog, train as train_module

stop_watchdog.GRACE_S, stop_watchdog.STEP_GRACE_S = 0.2, 1.0
real = train_module.train

def train(*args, on_step, **kwargs):
    def hook(at, state):
        if at == 3:  # step 3 never ends: SLURM's SIGTERM comes, the step boundary does not
            os.kill(os.getpid(), signal.SIGTERM)
            threading.Event().wait(60)
        return on_step(at, state)
    return real(*args, on_step=hook, **kwargs)

train_module.train = train
print("RETURNED", run_tiny(Path(sys.argv[1]), "mesh=none", "train.checkpoint_every=2"), flush=True)
"""


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_sigterm_while_a_training_step_hangs_ends_the_run_within_its_bound_naming_the_saved_checkpoint(tmp_path):
    # Was: the run waited for a step boundary that never came (until SLURM's SIGKILL: no record, exit 137).
    import json
    import subprocess
    import sys

    from gensbi_sharding.checkpoint import committed_steps
    from gensbi_sharding.harness.preemption import EXIT_PREEMPTED

    repo = Path(__file__).resolve().parents[1]
    script, out = tmp_path / "hung.py", tmp_path / "run"
    script.write_text(_HUNG_RUN.format(tests=str(repo / "tests")))
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(repo)}
    proc = subprocess.run([sys.executable, str(script), str(out)], capture_output=True, text=True, env=env,
                          timeout=180)
    assert proc.returncode == EXIT_PREEMPTED and "RETURNED" not in proc.stdout, proc.stderr[-3000:]
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["status"] == "preempted" and metrics["stopped_at_step"] == 2, metrics
    assert re.fullmatch(
        r"preempted by SIGTERM during training step 3, which did not end within [\d.]+ s of the signal \(a hung "
        r"step; the bound is 1 s or 3 times the longest step so far\): stopped without saving it \(a checkpoint "
        rf"needs the step to end\); saved up to step 2 \({re.escape(str(out / 'checkpoints' / '2'))}\); continue "
        r"with: run\(cfg\) with cfg\.train\.resume='auto' .*", metrics["error"]), metrics["error"]  # run(cfg): Python's
    assert committed_steps(out / "checkpoints") == [2]  # no step 3, half written or whole
    assert not list((out / "checkpoints").glob("3*"))


@pytest.mark.parametrize("case", ["hung"] + [pytest.param(c, marks=pytest.mark.slow)  # "hung": make test-fast's
                                             for c in ("answered", "trained", "saving")])
def test_the_watchdog_stops_only_an_unanswered_training_step_and_never_during_a_save(monkeypatch, case):
    import signal
    import threading
    import time

    from gensbi_sharding.harness import stop_watchdog
    from gensbi_sharding.harness.preemption import PreemptionWatch

    monkeypatch.setattr(stop_watchdog, "GRACE_S", 0.01)
    monkeypatch.setattr(stop_watchdog, "STEP_GRACE_S", 0.2)
    monkeypatch.setattr(stop_watchdog, "SAVE_GRACE_S", 3.0)  # bounds the wait for a save that never ends
    fired, released = [], []
    with PreemptionWatch() as watch:
        watch.settle(1)
        watch.settle(2)  # the longest step so far: well under the bound's 0.2 s / 3
        watch.signum = signal.SIGTERM  # received while step 3 runs
        if case == "answered":
            assert watch.stop_requested()  # the run reached its step boundary
        elif case == "trained":
            watch.training_done(2, None)
        elif case == "saving":  # a save under way past the bound: the stop waits for it
            watch.stop_lock.acquire()
            threading.Timer(0.6, lambda: (released.append(time.monotonic()), watch.stop_lock.release())).start()
        stop_watchdog.StopWatchdog(watch, lambda s: fired.append(("setup", s)),
                                   lambda s, bound: fired.append((s, bound, time.monotonic())))
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and not fired and not (case in ("answered", "trained")
                                                                 and time.monotonic() > deadline - 4):
            time.sleep(0.05)
    if case in ("hung", "saving"):
        assert [f[:2] for f in fired] == [(signal.SIGTERM, 0.2)]
        assert case == "hung" or fired[0][2] >= released[0]
    else:
        assert fired == []

"""Several processes: a preemption notice that comes while a checkpoint save runs is still answered at the next step.

Orbax's save asks JAX's preemption sync point with the step number it saves; JAX sets the sync point one above the
last id asked as the notice came, and answers True to that id only."""

from __future__ import annotations

import json

import jax
import pytest
from jax.experimental import multihost_utils

from gensbi_sharding.harness.preemption import PreemptionWatch
from test_stop_check_counts import _run_on_two_processes, worker_forks  # noqa: F401 (a fixture)


class _SyncPoint:
    """JAX's rule (its preemption sync manager): the sync point is the last id asked as the notice came, plus one."""

    def __init__(self) -> None:
        self.last, self.point = None, None

    def __call__(self, step_id: int) -> bool:
        self.last = step_id
        return step_id == self.point

    def notice(self) -> None:
        self.point = self.last + 1


@pytest.mark.parametrize("start", [0, 100])  # a fresh run (checks ahead of the steps), one resumed at step 100
def test_a_notice_during_a_save_stops_the_run_at_that_step(monkeypatch, start):
    # Was: the notice came after the save of step start+10 asked with its step number: the sync point start+11, which
    # the watch's own count (5 setup checks ahead) had passed, or a resumed run's reached 90 checks later; never asked
    sync = _SyncPoint()
    monkeypatch.setattr(jax.distributed, "is_initialized", lambda: True)
    monkeypatch.setattr(jax, "process_count", lambda: 2)
    monkeypatch.setattr(multihost_utils, "reached_preemption_sync_point", sync)
    watch = PreemptionWatch()
    watch.save_every = 10
    assert not any(watch.stop_requested() for _ in range(5))  # the run's setup checks
    stopped = None
    for step in range(start + 1, start + 41):
        if step % 10 == 0:
            sync(step)  # Orbax's save of this step asks with its number
            if step == start + 10:
                sync.notice()  # while the save runs
        if watch.should_stop(step):
            stopped = step
            break
    assert stopped == start + 10


# Two processes, explicit mode, one job of 40 steps saved every 10: each process gets SIGTERM (a preemption notice)
# right after the save of step 10 asked the sync point, and the service agrees on the sync point meanwhile.
_SAVE_WORKER = """
import json, os, signal, sys, time
sys.path.insert(0, {tests!r})
from jax.experimental import multihost_utils
from faults_helpers import compose_tiny
from gensbi_sharding.harness.run import run

ask, sent = multihost_utils.reached_preemption_sync_point, []
def asked(step_id):
    got = ask(step_id)
    if "orbax" in sys._getframe(1).f_code.co_filename and step_id == 10 and not sent:
        sent.append(True)
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(2)  # the service agrees on the sync point while the save goes on
    return got
multihost_utils.reached_preemption_sync_point = asked
process = int(sys.argv[1])
metrics = run(compose_tiny("distributed.mode=explicit", "distributed.num_processes=2",
                           f"distributed.process_id={{process}}", "distributed.coordinator_address={address}",
                           "distributed.timeout_s=60", "train.steps=40", "train.checkpoint_every=10",
                           "eval.enabled=false", output_dir={out!r}))
print("DONE", json.dumps([metrics["status"], metrics.get("stopped_at_step"), bool(sent)]), flush=True)
"""


@pytest.mark.slow  # two processes of one tiny job; each bounded by 300 s
def test_a_notice_during_a_save_stops_both_processes_at_that_step(tmp_path, worker_forks):
    done = _run_on_two_processes(_SAVE_WORKER, tmp_path, "DONE", worker_forks)
    assert done == [["preempted", 10, True]] * 2, done  # was: ["ok", None, True]: trained to step 40
    assert json.loads((tmp_path / "metrics.json").read_text())["stopped_at_step"] == 10

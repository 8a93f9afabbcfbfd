"""An explicit-mode multirun's later jobs, several processes: stop checks count across the jobs, and a folder refused
to process 0 ends every process at once, with the same words."""

from __future__ import annotations

import json

import jax
import pytest
from jax.experimental import multihost_utils

from faults_helpers import compose_tiny
from gensbi_sharding.harness import run as run_module
from test_stop_check_counts import _run_on_two_processes, worker_forks  # noqa: F401 (a fixture)


def test_a_later_jobs_stop_checks_count_on_from_the_job_before(tmp_path, monkeypatch):
    # Was: each job's watch counted from 1, so a notice between two jobs set a sync point (the last id + 1) that the
    # next job reached only after as many checks as the one before: late in its training, not at its start
    from gensbi_sharding.harness.preemption import PreemptionWatch

    monkeypatch.setattr(jax.distributed, "is_initialized", lambda: True)
    monkeypatch.setattr(jax, "process_count", lambda: 2)
    monkeypatch.setattr(run_module, "run_steps", lambda *args: {})
    monkeypatch.setattr(multihost_utils, "broadcast_one_to_all", lambda words: words)
    monkeypatch.setattr(PreemptionWatch, "prior_checks", 0)
    asked = []
    monkeypatch.setattr(multihost_utils, "reached_preemption_sync_point", lambda n: asked.append(n) or False)
    for job in (0, 1, 2):
        run_module.run(compose_tiny("distributed.mode=explicit", "distributed.process_id=1",
                                    output_dir=tmp_path / str(job)))
    assert asked == [1, 2, 3, 4, 5, 6]  # each job's check and its closing question (was: [1, 1, 1])


# Two jobs of two processes, explicit mode: each process gets SIGTERM (a preemption notice) as the first job ended,
# before the second started; that job trains 400 steps unless stopped. The first trains 12: its last checkpoint's
# save asks the sync point with id 12 (Orbax's), a later id than the second job's setup checks count to from 1 (the
# claim's and four stages': ids counted from 1 again, as before the fix, reach 13 at the second job's step 8, not its
# first; was 30 steps, ~0.15 s of CPU a step on each Gloo process).
_BETWEEN_WORKER = """
import json, os, signal, sys
sys.path.insert(0, {tests!r})
from faults_helpers import compose_tiny
from gensbi_sharding.harness.run import run

process, done = int(sys.argv[1]), []
for job in (0, 1):
    if job == 1:
        os.kill(os.getpid(), signal.SIGTERM)
    metrics = run(compose_tiny("distributed.mode=explicit", "distributed.num_processes=2",
                               f"distributed.process_id={{process}}", "distributed.coordinator_address={address}",
                               "distributed.timeout_s=60", f"train.steps={{12 if job == 0 else 400}}",
                               "eval.enabled=false", output_dir={out!r} + f"/{{job}}"))
    done.append([metrics["status"], metrics.get("stopped_at_step"), metrics.get("steps")])
print("DONE", json.dumps(done), flush=True)
"""


@pytest.mark.slow  # two processes of two tiny jobs each; each bounded by 300 s
def test_a_notice_between_two_jobs_stops_the_next_job_before_it_trains(tmp_path, worker_forks):
    done = _run_on_two_processes(_BETWEEN_WORKER, tmp_path, "DONE", worker_forks)
    assert [[job[0] for job in process] for process in done] == [["ok", "preempted"]] * 2, done
    # Before training, or at the first step's check where JAX's preemption service agreed on the sync point after the
    # job's first check (the agreement travels through the coordinator: a loaded machine gave step 1 in 2 of ~6
    # runs); was: mid-training (step 26 of 400 after a first job of 30 steps; step 8 after one of 12)
    assert all(process[1][1] in (None, 1) for process in done), done


# Two dry-run jobs of two processes, explicit mode; the second job's folder already holds a completed run, which
# process 0's claim refuses.
_REFUSED_WORKER = """
import json, sys
sys.path.insert(0, {tests!r})
from faults_helpers import compose_tiny
from gensbi_sharding.harness.run import run

process, done = int(sys.argv[1]), []
for job in (0, 1):
    metrics = run(compose_tiny("dry_run=true", "distributed.mode=explicit", "distributed.num_processes=2",
                               f"distributed.process_id={{process}}", "distributed.coordinator_address={address}",
                               "distributed.timeout_s=60", output_dir={out!r} + f"/{{job}}"))
    done.append([metrics["status"], metrics.get("error")])
print("DONE", json.dumps(done), flush=True)
"""


@pytest.mark.slow  # two processes of two dry runs each; each bounded by 300 s
def test_a_later_jobs_folder_refused_to_process_0_ends_every_process_with_its_words(tmp_path, worker_forks):
    # Was: process 0 recorded the refusal and went on; process 1 went into the job without it (its collectives
    # waiting on process 0 until their timeout)
    (tmp_path / "1").mkdir()
    (tmp_path / "1" / "metrics.json").write_text(json.dumps({"status": "ok", "final_step": 4}))
    done = _run_on_two_processes(_REFUSED_WORKER, tmp_path, "DONE", worker_forks)
    assert [[job[0] for job in process] for process in done] == [["ok", "error"]] * 2, done
    assert "already" in done[0][1][1] and done[0][1][1] == done[1][1][1], done

"""Explicit mode, several processes: a first job's folder refused to process 0 ends every process at once."""

from __future__ import annotations

import json

import pytest

from test_stop_check_counts import _run_on_two_processes

# Two dry-run jobs of two processes, explicit mode; the FIRST job's folder already holds a completed run, which process
# 0's claim (made before JAX starts) refuses; the second job's folder is fresh.
_FIRST_REFUSED_WORKER = """
import json, sys
sys.path.insert(0, {tests!r})
from faults_helpers import compose_tiny
from gensbi_sharding.harness.run import run

process, done = int(sys.argv[1]), []
for job in (0, 1):
    metrics = run(compose_tiny("dry_run=true", "distributed.mode=explicit", "distributed.num_processes=2",
                               f"distributed.process_id={{process}}", "distributed.coordinator_address={address}",
                               "distributed.timeout_s=30", output_dir={out!r} + f"/{{job}}"))
    done.append([metrics["status"], metrics.get("error")])
print("DONE", json.dumps(done), flush=True)
"""


@pytest.mark.slow  # two processes of two dry runs each; each bounded by 300 s
def test_a_first_jobs_folder_refused_to_process_0_ends_every_process_with_its_words(tmp_path):
    # Was: process 0 refused its claim before joining JAX and left; process 1 waited for it in
    # jax.distributed.initialize until distributed.timeout_s, then failed with a timeout of its own words
    (tmp_path / "0").mkdir()
    (tmp_path / "0" / "metrics.json").write_text(json.dumps({"status": "ok", "final_step": 4}))
    done = _run_on_two_processes(_FIRST_REFUSED_WORKER, tmp_path, "DONE")
    assert [[job[0] for job in process] for process in done] == [["error", "ok"]] * 2, done
    assert "already" in done[0][0][1] and done[0][0][1] == done[1][0][1], done
    assert json.loads((tmp_path / "0" / "metrics.json").read_text()) == {"status": "ok", "final_step": 4}


def _launch_two(tmp_path, *overrides, bound=300):
    """Processes 0 and 1 of one launch.py run, explicit mode (a free local coordinator port): their outputs."""
    import sys
    from pathlib import Path

    from faults_helpers import TINY, free_port, run_together

    port = free_port()
    launch = Path(__file__).parent.parent / "launch.py"
    return run_together([[sys.executable, str(launch), *TINY, "distributed.mode=explicit", "distributed.num_processes=2",
                          f"distributed.process_id={rank}", f"distributed.coordinator_address=127.0.0.1:{port}",
                          *overrides] for rank in (0, 1)], bound)


@pytest.mark.slow  # two launch.py processes refused before training; each bounded by 300 s
def test_a_launch_whose_folder_is_refused_to_process_0_ends_process_1_with_the_refusal(tmp_path):
    # Was: launch.py's own claim (Hydra's callback) refused process 0, which left; process 1 waited for it in
    # jax.distributed.initialize until distributed.timeout_s and failed with a timeout of its own words
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.json").write_text(json.dumps({"status": "ok", "final_step": 4}))
    (zero, code0), (one, code1) = _launch_two(tmp_path, "distributed.timeout_s=60", f"hydra.run.dir={run}")
    assert code0 == 1 and "already" in zero, zero[-2000:]
    refusal = next(line for line in zero.splitlines() if "already" in line)
    said = refusal.split("[ERROR] ", 1)[-1]
    assert said[:60] in one and "timeout" not in one.lower(), one[-3000:]

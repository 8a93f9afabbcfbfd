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

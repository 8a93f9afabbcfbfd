"""A ``distributed=local`` process killed after process 0 recorded the job complete loses nothing: the job stays
``ok`` (was: status error and "continue with ...", every output already written)."""

from __future__ import annotations

import json
import logging
import signal
import subprocess
import sys

import pytest
from omegaconf import OmegaConf

from faults_helpers import as_hydra_job


@pytest.mark.slow  # two stand-in processes (about 2 s: the parent's bound after a death)
def test_a_process_killed_after_the_job_was_recorded_complete_leaves_it_ok(tmp_path, monkeypatch, caplog):
    # As 'kill -9 <process 1>' during the processes' teardown, after [7/7] outputs: written (process 0 then aborts,
    # its coordinator gone, as JAX's heartbeat check does)
    from gensbi_sharding.harness import local_cluster

    out = tmp_path / "run"
    out.mkdir()
    as_hydra_job(monkeypatch, out, ["distributed=local"])
    real_popen = subprocess.Popen
    done = json.dumps({"status": "ok", "c2st": 0.8, "final_step": 8})

    def child(command, env, pass_fds, stderr):
        rank = int(next(c for c in command if c.startswith("distributed.process_id=")).split("=")[1])
        write = "" if rank else f"open({str(out / 'metrics.json')!r}, 'w').write({done!r}); "
        return real_popen([sys.executable, "-c", f"import os, signal, time; {write}time.sleep({0.1 if rank else 0.6}); "
                           f"os.kill(os.getpid(), signal.{'SIGKILL' if rank else 'SIGABRT'})"], stderr=stderr)

    monkeypatch.setattr(local_cluster.subprocess, "Popen", child)
    cfg = OmegaConf.create({"distributed": {"local_processes": 2, "run_timeout_s": 60, "heartbeat_s": 1},
                            "devices": {"cpu_count": 8}, "mesh": {"spec": "auto", "devices": None}})
    with caplog.at_level(logging.WARNING):
        metrics = local_cluster.run_local_processes(cfg, out)
    assert metrics["status"] == "ok" and metrics["c2st"] == 0.8, metrics
    assert metrics["process_exit_codes"] == [-signal.SIGABRT, -signal.SIGKILL]
    assert metrics["after_completion"].startswith("process 1 of 2 died (killed by SIGKILL)"), metrics
    assert "error" not in metrics and any(m.startswith("the job completed (process 0 recorded it") for m in
                                          caplog.messages), caplog.messages

"""A lone run stopped inside a setup step (stop_watchdog.end_preempted_run) says its wall time on the clock every
other lone-run final line uses, the process's (session 72, REVIEW72C): it counted from the run's start."""

import logging
from types import SimpleNamespace

import pytest

from gensbi_sharding.harness import stop_watchdog


def test_a_setup_step_stop_says_the_time_from_the_process_start(tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(stop_watchdog, "final_metrics", [lambda m: {**m, "wall_s": 108.6}])  # what launch.py sets
    monkeypatch.setattr(stop_watchdog, "remove_owner_notes", lambda: None)
    monkeypatch.setattr(stop_watchdog.logging, "shutdown", lambda: None)
    monkeypatch.setattr(stop_watchdog.time, "sleep", lambda s: None)

    def exit_(code):
        raise SystemExit(code)

    monkeypatch.setattr(stop_watchdog.os, "_exit", exit_)
    folder = SimpleNamespace(record=lambda m: recorded.update(m), release=lambda: None, owner=False, claimed=True)
    recorded = {}
    with caplog.at_level(logging.INFO, logger="gensbi_sharding"), pytest.raises(SystemExit):
        stop_watchdog.end_preempted_run(15, metrics={"config": {}}, out=tmp_path, start=0.0, folder=folder,
                                        watch=SimpleNamespace(chain=lambda signum: None))
    lines = [r.getMessage() for r in caplog.records if r.name == "gensbi_sharding"]
    assert lines[-1].startswith("preempted after 108.6 s"), lines
    assert recorded["wall_s"] != 108.6  # metrics.json keeps the run's own time


def test_launch_sets_the_process_clock_for_a_lone_run(tmp_path, monkeypatch):
    import launch
    from faults_helpers import compose_tiny

    for state in ("failed_jobs", "running", "ran", "in_sweep"):
        monkeypatch.setattr(launch, state, [])
    monkeypatch.setattr(stop_watchdog, "final_metrics", [])
    monkeypatch.setattr(launch, "STARTED", 1000.0)
    monkeypatch.setattr(launch, "time", SimpleNamespace(monotonic=lambda: 1108.6))
    monkeypatch.setattr(launch, "run", lambda cfg: dict(status="ok", wall_s=94.3))
    launch.main.__wrapped__(compose_tiny(output_dir=tmp_path / "run"))
    assert stop_watchdog.final_metrics[0](dict(status="preempted", wall_s=2.77))["wall_s"] == pytest.approx(108.6)

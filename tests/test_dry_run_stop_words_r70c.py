"""A dry run stopped by a preemption signal says what it was doing, not "before training" (round 70).

Was: "preempted by SIGTERM before training (nothing trained: no checkpoint to save)", the words of a training run
stopped before its first step, though a dry run never trains. Now: "preempted by SIGTERM during the dry run's compile
(a dry run trains nothing: no checkpoint, no report)", and the stage of a stop heard earlier (its setup, the trace).
"""

from __future__ import annotations

import json
import os
import signal

import pytest

from faults_helpers import run_tiny


@pytest.mark.slow
def test_a_sigterm_during_the_compile_names_the_dry_runs_compile(tmp_path, monkeypatch):
    import gensbi_sharding

    report = gensbi_sharding.compiled_report

    def sigterm_in_compile(compiled):
        os.kill(os.getpid(), signal.SIGTERM)
        return report(compiled)

    monkeypatch.setattr(gensbi_sharding, "compiled_report", sigterm_in_compile)
    stopped = run_tiny(tmp_path, "dry_run=true")
    assert stopped["status"] == "preempted" and stopped["stopped_at_step"] is None, stopped
    stop, advice = stopped["error"].split("; ", 1)
    assert stop == "preempted by SIGTERM during the dry run's compile (a dry run trains nothing: no checkpoint, " \
                   "no report)", stopped["error"]
    assert "before training" not in stopped["error"] and advice.startswith("a dry run has nothing to continue: ")
    assert json.loads((tmp_path / "metrics.json").read_text())["error"] == stopped["error"]


@pytest.mark.parametrize("signum,said", [(signal.SIGTERM, "preempted by SIGTERM"),
                                         (signal.SIGUSR1, "preempted by SIGUSR1")])
def test_a_stop_during_the_setup_names_the_dry_runs_setup(tmp_path, monkeypatch, signum, said):
    from gensbi_sharding.harness import run_steps

    real = run_steps.platform_problem

    def signal_in_setup(*args):
        os.kill(os.getpid(), signum)
        return real(*args)

    monkeypatch.setattr(run_steps, "platform_problem", signal_in_setup)
    stopped = run_tiny(tmp_path, "dry_run=true")
    assert stopped["error"].startswith(f"{said} during the dry run's setup (a dry run trains nothing"), stopped


def test_a_training_run_stopped_in_its_setup_still_says_before_training(tmp_path, monkeypatch):
    from gensbi_sharding.harness import run_steps

    real = run_steps.platform_problem

    def sigterm_in_setup(*args):
        os.kill(os.getpid(), signal.SIGTERM)
        return real(*args)

    monkeypatch.setattr(run_steps, "platform_problem", sigterm_in_setup)
    stopped = run_tiny(tmp_path)
    assert stopped["error"].startswith("preempted by SIGTERM before training (nothing trained: no checkpoint to save)")


def test_a_stop_during_the_report_says_its_figures_were_printed_not_that_there_is_no_report():
    """The report stage comes after the figures are logged: "no report" was untrue there (second review of r70)."""
    from types import SimpleNamespace

    from gensbi_sharding.harness.dry_run_stop import dry_run_stop_text

    stop = SimpleNamespace(interrupted=False, signum=signal.SIGTERM)
    assert dry_run_stop_text(stop, "report") == ("preempted by SIGTERM during the dry run's report (a dry run trains "
                                                 "nothing: no checkpoint, its figures printed above, not written to "
                                                 "metrics.json)")
    assert dry_run_stop_text(stop, "compile").endswith("(a dry run trains nothing: no checkpoint, no report)")

"""REVIEW76A: the cases around NOTEBOOK76's changes, as a notebook meets them.

A Ctrl-C raises ``KeyboardInterrupt`` out of ``run(cfg)`` carrying the words that continue the run (NOTEBOOK76); two
more of its paths raised it bare: a Ctrl-C that a worker ended with (C2ST's classifier processes: ``record_failure``)
and a ``distributed=local`` job whose processes Ctrl-C stopped. And ``console.warnings_to_log`` turned off a capture
of Python's warnings the caller had on (``%run launch.py`` in a notebook that captures them).
"""
import logging
import signal
import types
import warnings

import pytest
from omegaconf import OmegaConf

from faults_helpers import compose_tiny


class _Folder:
    """A run folder that records nothing: ``record_interrupt`` writes and releases through it."""

    def __init__(self):
        self.recorded = []

    def record(self, metrics, traceback_text=None):
        self.recorded.append(dict(metrics))

    def release(self):
        pass


def test_a_ctrl_c_a_worker_ended_with_raises_the_words_that_continue(tmp_path):
    """C2ST's worker processes stopped by the same Ctrl-C: the run's error says it stopped at once and where it is
    saved; the KeyboardInterrupt a notebook's cell shows said nothing (``KeyboardInterrupt:``)."""
    from gensbi_sharding.harness import run as run_module

    folder, metrics = _Folder(), {"status": "error"}
    worker = RuntimeError("KeyboardInterrupt in a joblib worker")
    with pytest.raises(KeyboardInterrupt) as raised:
        run_module.record_failure(worker, OmegaConf.create({"debug": False}), metrics, tmp_path, 0.0, folder,
                                  types.SimpleNamespace(signum=signal.SIGINT), [])
    assert metrics["status"] == "interrupted"
    assert str(raised.value) == metrics["error"]
    assert "stopped at once, with no checkpoint to continue from" in str(raised.value)
    assert raised.value.__cause__ is worker  # the worker's own exception kept as its cause


@pytest.mark.slow  # composes the tiny config and runs run(cfg)'s frame
def test_a_local_jobs_ctrl_c_raises_the_words_that_continue(tmp_path, monkeypatch, devices):
    """``distributed=local``: the parent records its processes' stop (``run_local_job``) and raises for the sweep to
    stop; from Python that KeyboardInterrupt was bare while metrics.json held the call that continues."""
    from gensbi_sharding.harness import run as run_module

    error = "interrupted by Ctrl-C (SIGINT) at step 4; continue with: run(cfg) with cfg.train.resume='auto'"

    def stopped_processes(cfg, out, metrics, folder, watch, start):
        metrics.update(status="interrupted", error=error, stopped_at_step=4)

    monkeypatch.setattr(run_module, "run_job", stopped_processes)
    with pytest.raises(KeyboardInterrupt) as raised:
        run_module.run(compose_tiny(output_dir=tmp_path / "local"))
    assert str(raised.value) == error


def test_warnings_to_log_leaves_a_callers_capture_on():
    """A caller that captures Python's warnings into logging (``logging.captureWarnings(True)``) had it turned off
    by a launch run in its process (``%run launch.py``): warnings then went to stderr, not its log."""
    from gensbi_sharding.harness.console import warnings_to_log

    original = warnings.showwarning
    logging.captureWarnings(True)
    try:
        captured = warnings.showwarning
        with warnings_to_log():
            pass
        assert warnings.showwarning is captured
    finally:
        logging.captureWarnings(False)
    assert warnings.showwarning is original


def test_warnings_to_log_puts_back_a_callers_showwarning():
    """Without a capture before, it ends as it did: Python's (or the caller's own) showwarning back."""
    from gensbi_sharding.harness.console import warnings_to_log

    original = warnings.showwarning
    with warnings_to_log():
        assert warnings.showwarning is not original  # captured inside: the job's warnings go to launch.log
    assert warnings.showwarning is original

"""A researcher's notebook session: ``run(cfg)`` and ``sample_posterior`` called again and again in one process,
with the caller's own logging configured (``logging.basicConfig(level=logging.INFO)``, as the docs suggest for
seeing the run's account). What one call leaves behind must not reach the next, nor flood the caller's console."""

import logging

import numpy as np
import pytest

from faults_helpers import run_tiny

NOISY = ("jax", "absl")  # JAX's backend notes, Orbax's (through absl) on every checkpoint it reads


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory, devices):
    """A tiny run's folder (no evaluation): only read."""
    out = tmp_path_factory.mktemp("nb") / "run"
    assert run_tiny(out)["status"] == "ok"
    return out


@pytest.mark.slow  # trains a run
def test_sample_posterior_keeps_orbax_info_lines_off_a_notebooks_info_logging(tiny_run, caplog):
    """Under the caller's INFO logging, ``run(cfg)`` kept JAX's and Orbax's info lines out while ``sample_posterior``
    printed ~20 of Orbax's per call ("Created BasePyTreeCheckpointHandler ...", "Restoring checkpoint from ...")
    around its own one line. Its own line stays; the libraries' levels are put back after."""
    from gensbi_sharding.harness.own_observation import sample_posterior

    before = [logging.getLogger(name).level for name in NOISY]
    caplog.set_level(logging.INFO)  # the root at INFO, as logging.basicConfig(level=logging.INFO) sets it
    samples = sample_posterior(tiny_run, np.array([0.1, -0.2]), num_samples=16, seed=0)
    assert samples.shape == (16, 2)
    noisy = [r.getMessage()[:80] for r in caplog.records if r.name.split(".")[0] in NOISY and r.levelno < logging.WARNING]
    assert noisy == []
    assert any(r.name == "gensbi_sharding" and r.getMessage().startswith("sampling checkpoint") for r in caplog.records)
    assert [logging.getLogger(name).level for name in NOISY] == before


def test_run_quiet_libraries_is_the_consoles_one():
    """One helper for both entry points (``run.quiet_libraries`` stays importable where it was)."""
    from gensbi_sharding.harness import console
    from gensbi_sharding.harness.run import quiet_libraries

    assert quiet_libraries is console.quiet_libraries


@pytest.mark.slow  # a run's claim and record (0.6 s on 2 cores)
def test_a_ctrl_c_as_a_run_ends_names_its_finished_metrics(tmp_path, monkeypatch):
    """Ctrl-C while ``run(cfg)``'s last observation was scored (a notebook's interrupt button): the run finishes (status
    ok) and, called from Python, raises ``KeyboardInterrupt`` as Python would; it was bare, so the notebook showed an
    interrupted cell with no word that the run had finished, nor where the metrics it did not return are."""
    import json
    import signal

    from faults_helpers import compose_tiny
    from gensbi_sharding.harness import run as run_module

    def job(cfg, out, metrics, folder, watch, start):  # the whole job, Ctrl-C coming as its last step ends
        signal.raise_signal(signal.SIGINT)
        metrics["status"] = "ok"

    monkeypatch.setattr(run_module, "run_job", job)
    out = tmp_path / "run"
    own = signal.getsignal(signal.SIGINT)  # a notebook's: Python's default; an xdist worker's: ignored
    with pytest.raises(KeyboardInterrupt) as stopped:
        run_module.run(compose_tiny(output_dir=out))
    assert json.loads((out / "metrics.json").read_text())["status"] == "ok"
    assert str(stopped.value) == (f"Ctrl-C came as the run ended: it finished, status ok (nothing to continue); its "
                                  f"metrics, which run(cfg) returns: {out / 'metrics.json'}")
    assert signal.getsignal(signal.SIGINT) is own  # the caller's own handler back


@pytest.mark.slow  # a run's claim and record (0.6 s on 2 cores)
@pytest.mark.parametrize("again", [False, True], ids=["at a step", "Ctrl-C again: at once"])
def test_a_ctrl_c_mid_run_raises_keyboardinterrupt_with_the_call_that_continues(tmp_path, monkeypatch, again):
    """A notebook's interrupt mid-training: ``run(cfg)`` raised a bare ``KeyboardInterrupt`` (the cell's traceback
    said only ``KeyboardInterrupt:``); the call that continues the run was in a log line only, which a notebook
    without logging to its console (a file handler of its own) never showed. It now says it too."""
    import json
    import signal

    from faults_helpers import compose_tiny
    from gensbi_sharding.harness import run as run_module
    from gensbi_sharding.harness.preemption import Preempted

    def job(cfg, out, metrics, folder, watch, start):
        if again:
            raise KeyboardInterrupt  # Python's own, at the second Ctrl-C
        raise Preempted(signal.SIGINT, step=3)

    monkeypatch.setattr(run_module, "run_job", job)
    out = tmp_path / "run"
    own = signal.getsignal(signal.SIGINT)  # a notebook's: Python's default; an xdist worker's: ignored
    with pytest.raises(KeyboardInterrupt) as stopped:
        run_module.run(compose_tiny(output_dir=out))
    saved = json.loads((out / "metrics.json").read_text())
    assert saved["status"] == "interrupted"
    assert str(stopped.value) == saved["error"]
    said = ("interrupted (Ctrl-C); stopped at once, with no checkpoint to continue from" if again else
            f"interrupted by Ctrl-C (SIGINT) at step 3; continue with: run(cfg) with cfg.train.resume='auto' and "
            f"cfg.output_dir='{out}' set in omegaconf.open_dict(cfg)")
    assert str(stopped.value) == said


def test_absl_leaves_a_root_logger_without_handlers_as_it_was(monkeypatch):
    """A notebook with no logging configured: absl's first note inside ``run(cfg)`` (Orbax's, as it is imported or
    reads a checkpoint) ran ``logging.basicConfig()``, leaving a stderr handler on the root, so the notebook's
    ``logging.basicConfig(level=logging.INFO)`` afterwards (the docs' way to see the run's account) did nothing."""
    from absl import logging as absl_logging

    from gensbi_sharding.harness.run import quiet_libraries

    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", [])  # pytest's capture handler aside: a fresh notebook's root
    with quiet_libraries():
        absl_logging.warning("a note of Orbax's")
    assert root.handlers == []


@pytest.mark.slow  # reads the trained run's checkpoint
def test_sample_posterior_leaves_a_root_logger_without_handlers_as_it_was(tiny_run, monkeypatch):
    from gensbi_sharding.harness.own_observation import sample_posterior

    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", [])
    sample_posterior(tiny_run, np.array([0.1, -0.2]), num_samples=16, seed=0)
    assert root.handlers == []


@pytest.mark.slow  # composes and imports the run (0.5 s on 2 cores)
def test_a_config_holding_hydras_own_section_is_refused_in_one_line(tmp_path, caplog):
    """``compose("config", ..., return_hydra_config=True)`` (Hydra's compose API, to see what a launch sees) handed to
    ``run(cfg)`` ended in OmegaConf's traceback, ``MissingMandatoryValue ... hydra.job.num``, naming no fix; its
    ``hydra.run.dir`` would not be the folder written. Refused as the docs say a refusal comes back, nothing made."""
    from hydra import compose, initialize_config_dir
    from omegaconf import open_dict

    from gensbi_sharding.harness.config import register_configs
    from gensbi_sharding.harness.groups import CONF
    from gensbi_sharding.harness.run import run

    register_configs()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose("config", overrides=["experiment=quick"], return_hydra_config=True)
    out = tmp_path / "run"
    with open_dict(cfg):
        cfg.output_dir = str(out)
    metrics = run(cfg)
    assert metrics["status"] == "error"
    assert metrics["error"] == (
        "ConfigError: run(cfg) was given Hydra's own section (compose(..., return_hydra_config=True)), which a launch "
        "keeps apart: its ${hydra.job.num} reads only inside a launch, and its hydra.run.dir is not the folder "
        f"written (cfg.output_dir is: {out}); compose without return_hydra_config, or drop the section: with "
        "omegaconf.open_dict(cfg): del cfg['hydra']")
    assert not out.exists()
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == [metrics["error"]]

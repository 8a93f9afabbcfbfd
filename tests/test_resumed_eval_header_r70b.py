"""A job resumed after a stop during its evaluation names, in step 6's header, only the observations it draws.

Was: "[6/7] sample + C2ST: 128 posterior draws per observation [1, 2, 3, 4] ..." on a job SIGTERM'd after
observation 2 and resumed, which drew observations 3 and 4 alone (1 and 2 kept from the earlier attempt's files).
"""

import logging
import signal

import jax.numpy as jnp
import pytest

from gensbi_sharding.harness.console_lines import evaluation_header

BEST = {"weights": "EMA at the best validation step", "step": 8}


def test_the_header_names_the_observations_drawn_and_those_kept():
    assert evaluation_header(128, [1, 2, 3, 4], [], BEST) == (
        "[6/7] sample + C2ST: 128 posterior samples per observation [1, 2, 3, 4] (weights: EMA at the best validation "
        "step 8), scored against the reference")
    assert evaluation_header(128, [1, 2, 3, 4], [1, 2], BEST) == (
        "[6/7] sample + C2ST: 128 posterior samples per observation [3, 4] (weights: EMA at the best validation step "
        "8), scored against the reference; [1, 2] kept: an earlier attempt scored them from the same weights")
    assert evaluation_header(128, [2, 1], [2, 1], BEST) == (
        "[6/7] sample + C2ST: nothing to draw (weights: EMA at the best validation step 8): [2, 1] kept: an earlier "
        "attempt scored them from the same weights")


@pytest.mark.slow
def test_the_evaluation_announces_the_observations_it_keeps_before_drawing(tmp_path, monkeypatch):
    # (a few seconds: two C2ST classifier fits, as test_evaluate's resumed-evaluation tests)
    from gensbi_sharding.harness import posterior
    from gensbi_sharding.harness.data import load_task

    sims = load_task("two_moons", num_simulations=64, seed=0, theta_transform="none")
    run = dict(sims=sims, velocity=lambda params, theta, x, t: theta * params, params=jnp.float32(1.0),
               num_samples=100, ode_steps=2, n_folds=2, seed=0, mesh=None, out=tmp_path, write=True, plot=False,
               title=lambda *a: "", step=5)
    said, drawn = [], []
    posterior.evaluate_observations(**run, observations=[1], announce=said.append)
    real = posterior.posterior_draws
    monkeypatch.setattr(posterior, "posterior_draws", lambda *a, **k: drawn.append(k["seed"]) or real(*a, **k))
    posterior.evaluate_observations(**run, observations=[1, 2], announce=said.append)
    assert said == [[], [1]]
    assert drawn == [posterior.noise_seed(0, 2)]  # what it said: observation 2 alone drawn


@pytest.mark.slow  # two tiny runs: one stopped during its evaluation, its resume
def test_a_job_resumed_after_a_stop_in_its_evaluation_names_what_it_draws(tmp_path, monkeypatch, caplog):
    from faults_helpers import run_tiny
    from gensbi_sharding.harness import posterior
    from gensbi_sharding.harness.preemption import Preempted

    real, drawn, stopped = posterior.posterior_draws, [], []

    def draws(*args, seed, **kwargs):
        if seed == posterior.noise_seed(0, 2) and not stopped:  # the first attempt is stopped at observation 2
            stopped.append(seed)
            raise Preempted(signal.SIGTERM, 8, after_training=True)
        drawn.append(seed)
        return real(*args, seed=seed, **kwargs)

    monkeypatch.setattr(posterior, "posterior_draws", draws)
    overrides = ("eval.enabled=true", "eval.observations=[1,2]", "train.checkpoint_every=4", "train.resume=auto")
    first = run_tiny(tmp_path, *overrides)
    assert first["status"] == "preempted", (drawn, first.get("c2st_observations"), first.get("error"))
    drawn.clear()
    caplog.clear()  # only the second attempt's lines (an earlier test may leave INFO on)
    with caplog.at_level(logging.INFO, logger="gensbi_sharding"):
        assert run_tiny(tmp_path, *overrides)["status"] == "ok"
    header = [m for m in caplog.messages if m.startswith("[6/7]")]
    assert header == ["[6/7] sample + C2ST: 128 posterior samples per observation [2] (weights: EMA at the best "
                      "validation step 8), scored against the reference; [1] kept: an earlier attempt scored it from "
                      "the same weights"], caplog.messages
    assert drawn == [posterior.noise_seed(0, 2)]


@pytest.mark.slow
def test_a_kept_score_names_the_file_it_was_read_from_when_it_takes_another_name(tmp_path, caplog):
    """Was: "the earlier attempt's files, kept under new names: posterior_samples.attempt1.npz, ...", then
    "observation 1: ... kept: posterior_samples.npz", the .attempt1 file gone: moved back, said nowhere."""
    from gensbi_sharding.harness import posterior
    from gensbi_sharding.harness.data import load_task
    from gensbi_sharding.harness.earlier_attempts import set_aside

    sims = load_task("two_moons", num_simulations=64, seed=0, theta_transform="none")
    run = dict(sims=sims, velocity=lambda params, theta, x, t: theta * params, params=jnp.float32(1.0),
               num_samples=100, ode_steps=2, n_folds=2, seed=0, mesh=None, out=tmp_path, write=True, plot=False,
               title=lambda *a: "", step=5, observations=[1])
    posterior.evaluate_observations(**run)
    assert set_aside(tmp_path, None) == ["c2st.attempt1.csv", "posterior_samples.attempt1.npz"]
    with caplog.at_level(logging.INFO, logger="gensbi_sharding"):
        posterior.evaluate_observations(**run)
    assert caplog.messages[-1].endswith("; scored by an earlier attempt at step 5, kept: posterior_samples.npz (was "
                                        "posterior_samples.attempt1.npz)"), caplog.messages
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c2st.attempt1.csv", "c2st.csv", "posterior_samples.npz"]


@pytest.mark.slow  # two evaluations of two observations each
def test_a_kept_score_read_from_another_observations_name_says_read_from_not_was(tmp_path, caplog):
    """Observations reordered ([1, 2], then [2, 1]): observation 1's score is read from posterior_samples.npz, which
    stays (it becomes observation 2's): 'was posterior_samples.npz' said a move that never happened (review of r70)."""
    from gensbi_sharding.harness import posterior
    from gensbi_sharding.harness.data import load_task

    sims = load_task("two_moons", num_simulations=64, seed=0, theta_transform="none")
    run = dict(sims=sims, velocity=lambda params, theta, x, t: theta * params, params=jnp.float32(1.0),
               num_samples=100, ode_steps=2, n_folds=2, seed=0, mesh=None, out=tmp_path, write=True, plot=False,
               title=lambda *a: "", step=5)
    posterior.evaluate_observations(**run, observations=[1, 2])
    caplog.clear()  # only the second attempt's lines (an earlier test may leave INFO on)
    with caplog.at_level(logging.INFO, logger="gensbi_sharding"):
        posterior.evaluate_observations(**run, observations=[2, 1])
    said = [m for m in caplog.messages if m.startswith("observation 1: C2ST")]
    assert len(said) == 1 and said[0].endswith("kept: posterior_samples_1.npz (read from posterior_samples.npz)"), said

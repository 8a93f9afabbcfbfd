"""One posterior sampler, one name: ``posterior.posterior_draws`` (with a ``FlowSampler``) draws the run's evaluation,
``own_observation.sample_posterior``'s and the sequential benchmark's rounds; evaluate.sample_posterior, another
function under the name own_observation's has, repeated it."""

import ast
from pathlib import Path

import pytest
from gensbi_sharding.harness import evaluate

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_sample_posterior_is_own_observations_alone():
    assert not hasattr(evaluate, "sample_posterior")
    defined = sorted(str(path.relative_to(ROOT)) for folder in ("gensbi_sharding", "benchmarks")
                     for path in (ROOT / folder).rglob("*.py")
                     if any(isinstance(node, ast.FunctionDef) and node.name == "sample_posterior"
                            for node in ast.walk(ast.parse(path.read_text()))))
    assert defined == ["gensbi_sharding/harness/own_observation.py"]


@pytest.mark.slow
def test_the_sequential_rounds_draw_through_posterior_draws(monkeypatch):
    import numpy as np
    from test_sequential import load

    from gensbi_sharding.harness import posterior
    from gensbi_sharding.harness.data import load_task
    from omegaconf import OmegaConf

    seen = []
    real = posterior.posterior_draws
    monkeypatch.setattr(posterior, "posterior_draws", lambda *a, **k: seen.append(k["seed"]) or real(*a, **k))
    sims = load_task("two_moons", num_simulations=64, seed=0)
    cfg = OmegaConf.create({"eval": {"ode_steps": 2}})
    samples = load().draws(cfg, sims, lambda theta, x, t: theta * 0, None, sims.observation, 10, 3)
    assert seen == [3] and samples.shape == (10, 2) and np.isfinite(samples).all()

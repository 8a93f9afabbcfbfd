"""Sampling a trained run (``sample.py``, ``own_observation``): what it says it samples, folders it cannot write,
observation files' paths, a run still training.
"""

import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
from flax import nnx

from faults_helpers import REPO
from gensbi_sharding import make_mesh


def test_sample_posterior_on_a_mesh_says_a_fallback_once(monkeypatch, caplog, tmp_path):
    # Was: the full list of fallback paths (logger gensbi_sharding.details, meant for a harness job's launch.log)
    # shown by Python beside the one-line fallback warning: the same fallback said twice.
    import logging

    import jax.numpy as jnp

    import optax

    from faults_helpers import saved_checkpoint
    from gensbi_sharding import axes, resolve_rule
    from gensbi_sharding.harness import own_observation, state
    from gensbi_sharding.harness.model_plan import model_plan
    from gensbi_sharding.harness.simulation_data import NORMALIZATION

    saved = {"seed": 0, "rule": "replicated", "model": {"name": "mlp"},
             "data": {"name": "two_moons", "x_transform": "none", "theta_transform": "none"},
             "eval": {"num_samples": 4, "ode_steps": 2}}
    statistics = {"theta_mean": [0.0, 0.0], "theta_std": [1.0, 1.0], "x_mean": [0.0, 0.0], "x_std": [1.0, 1.0]}
    saved_checkpoint(tmp_path, saved, {NORMALIZATION: statistics})

    class Velocity(nnx.Module):
        def __init__(self):
            self.w = nnx.Param(jnp.ones((2, 8)), **axes("embed", "mlp"))  # 2 rows: not split over data=8

        def __call__(self, theta, x, t):
            return jnp.zeros_like(theta) * self.w[0, 0]

    def build_state(cfg, *, mesh, **_):  # the run's model, planned on the mesh
        model = Velocity()
        model_plan(model, mesh, resolve_rule("fsdp"), strict=False)
        return state.TrainState(model=model, optimizer=nnx.Optimizer(model, optax.sgd(0.1), wrt=nnx.Param),
                                plan=None, key=jax.random.key(0))

    monkeypatch.setattr(state, "build_state", build_state)
    with caplog.at_level(logging.INFO):
        samples = own_observation.sample_posterior(tmp_path, np.zeros(2, np.float32), mesh=make_mesh())
    assert samples.shape == (4, 2)
    said = [r.getMessage() for r in caplog.records if "w" in r.getMessage() and "split" in r.getMessage()]
    assert len(said) == 1 and said[0].startswith("1 variable(s) replicated instead of split under rule 'fsdp'"), said
    # Outside sample_posterior the full list still reaches a job's log.
    with caplog.at_level(logging.INFO):
        caplog.clear()
        model = nnx.Module()
        model.w = nnx.Param(jnp.ones((2, 8)), **axes("embed", "mlp"))
        model_plan(model, make_mesh(), resolve_rule("fsdp"), strict=False)
    assert [r.name for r in caplog.records].count("gensbi_sharding.details") == 1


def test_a_printed_python_command_runs_whatever_the_observation_files_path_holds(tmp_path):
    # Was: "convert it once: python -c \"... np.loadtxt('<path>')\"": a path with a quote or a $ broke the command.
    import shlex

    import numpy as np
    import pytest

    from gensbi_sharding.harness.observation_input import load_observation

    text = tmp_path / "it's $HOME.csv"
    text.write_text("1,2\n")
    with pytest.raises(ValueError) as refused:
        load_observation(text)
    command = str(refused.value).split("convert it once: ")[1].removesuffix(" and pass x_o.npy")
    words = shlex.split(command)
    assert words[:2] == ["python", "-c"]
    subprocess.run([sys.executable, "-c", words[2]], cwd=tmp_path, check=True, timeout=60)
    np.testing.assert_array_equal(np.load(tmp_path / "x_o.npy"), [1.0, 2.0])
    plain = tmp_path / "x.csv"  # the command as it was where the shell leaves the path alone
    plain.write_text("1,2\n")
    with pytest.raises(ValueError, match=(r"convert it once: python -c \"import numpy as np; np.save\('x_o.npy', "
                                          rf"np.loadtxt\('{plain}', delimiter=','\)\)\" and pass x_o.npy")):
        load_observation(plain)


def test_the_own_observation_example_writes_under_outputs_not_the_checkouts_root(tmp_path):
    # Was: README's and docs/harness.md's example saved x_o.npy, and sample.py then x_o_posterior.npz, in the folder it
    # ran from: the checkout's root, beside launch.py (and the second run of the example was refused: it exists).
    import re
    import shlex

    from gensbi_sharding.harness.sample_output import out_path

    for page in ("README.md", "docs/harness.md"):
        block = next(b for b in re.findall(r"```bash\n(.*?)```", (REPO / page).read_text(), re.S) if "sample.py" in b)
        save, sample = [shlex.split(line.split("  #")[0]) for line in block.splitlines()]
        cwd = tmp_path / page.replace("/", "_")
        (cwd / "outputs").mkdir(parents=True)  # a run's folder is there: the example samples it
        subprocess.run([sys.executable, *save[1:]], cwd=cwd, check=True, timeout=60)
        assert sorted(p.relative_to(cwd).as_posix() for p in cwd.rglob("*")) == ["outputs", "outputs/x_o.npy"], page
        observation = Path(sample[3])
        assert (cwd / observation).is_file() and out_path(None, observation).as_posix() == "outputs/x_o_posterior.npz"

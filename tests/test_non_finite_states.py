"""A non-finite training state never displaces a finite checkpoint; divergence names the last finite one."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gensbi_sharding as contract
from faults_helpers import compose_tiny, run_tiny
from gensbi_sharding.checkpoint import CheckpointWriter, abstract_state_for, committed_steps, restore
from gensbi_sharding.harness.state import build_state
from gensbi_sharding.harness.train import make_step_functions


@pytest.mark.slow
def test_a_non_finite_state_never_displaces_a_finite_checkpoint(tmp_path, devices):
    mesh = contract.make_mesh(model_axis=2)
    cfg = compose_tiny("model.init=eager")
    ts = build_state(cfg, dim_theta=2, dim_x=2, mesh=mesh, rule_name="replicated",
                     table=dict(contract.RULES["replicated"]), resume_dir=None)
    _, state = make_step_functions(ts.model, ts.optimizer, mesh)
    poisoned = jax.tree.map(lambda a: a * jnp.nan if jnp.issubdtype(a.dtype, jnp.inexact) else a, state)
    with CheckpointWriter(tmp_path / "checkpoints", every=5, keep=2) as writer:
        for step in range(1, 15):  # NaN from step 12 on: the save at 15 must refuse
            writer.maybe_save(step, state if step < 12 else poisoned, ts.key)
        with pytest.raises(FloatingPointError) as err:
            writer.maybe_save(15, poisoned, ts.key)
        assert writer.steps() == [5, 10]  # keep=2 kept the finite ones
    assert "the train state at step 15 is not finite (36 array(s) hold NaN or inf" in str(err.value)
    assert f"Last finite checkpoint: {tmp_path / 'checkpoints' / '10'}" in str(err.value)
    target = abstract_state_for((ts.model, ts.optimizer), mesh, dict(contract.RULES["replicated"]))
    restored = restore(tmp_path / "checkpoints", target)
    assert restored.step == 10
    assert all(np.isfinite(np.asarray(leaf)).all() for leaf in jax.tree.leaves(restored.state)
               if jnp.issubdtype(leaf.dtype, jnp.inexact))


@pytest.mark.slow  # an end-to-end run (a training or dry run, or processes)
def test_divergence_names_the_last_finite_checkpoint(tmp_path, devices):
    from gensbi_sharding.harness.override_grammar import hydra_override

    out = tmp_path / "my run (1)"  # named as the shell and Hydra read it back (was: as it is, split by the shell)
    metrics = run_tiny(out, "train.learning_rate=1e25", "train.checkpoint_every=1", "train.keep=2")
    assert metrics["status"] == "error"
    assert committed_steps(out / "checkpoints") == [1]  # step 2 on is NaN/inf: never saved
    assert "FloatingPointError: the train state at step 2 is not finite" in metrics["error"]
    assert f"{hydra_override('train.resume', out / 'checkpoints' / '1')} and a lower train.learning_rate" in \
        metrics["error"]
    assert hydra_override("train.resume", out) == f"'train.resume=\"{out}\"'"

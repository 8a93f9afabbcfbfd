"""The library broken as users break it, on less-trodden paths: checkpoint paths written with ``~``, checkpoints
restored into a model whose optimizer or attribute names changed.

In-process, 8 simulated CPU devices (conftest); tiny models, a save or two each."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

import gensbi_sharding as gs
from gensbi_sharding.checkpoint import (CheckpointWriter, abstract_state_for, committed_steps, find_checkpoint,
                                        restore)


class Small(nnx.Module):
    def __init__(self, rngs, first="up"):
        setattr(self, first, nnx.Linear(4, 8, rngs=rngs, kernel_init=gs.partitioned(
            nnx.initializers.lecun_normal(), ("embed", "mlp"))))
        self.down = nnx.Linear(8, 4, rngs=rngs)


def save(directory, state, step=1, **kwargs):
    with CheckpointWriter(directory, **kwargs) as writer:
        assert writer.save(step, state, jax.random.key(0))
        return writer.directory


def test_a_path_with_a_tilde_is_the_home_folder_for_every_checkpoint_function(tmp_path, monkeypatch, devices):
    """``CheckpointWriter("~/ck")`` wrote into a folder named ``~`` under the working directory, and
    ``committed_steps`` and ``base_dir`` read it there, while ``restore("~/ck")`` looked in the home folder."""
    home, cwd = tmp_path / "home", tmp_path / "cwd"
    home.mkdir()
    cwd.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(cwd)
    model = Small(nnx.Rngs(0))
    assert save("~/run/checkpoints", nnx.state(model)) == home / "run" / "checkpoints"
    assert not (cwd / "~").exists()
    assert committed_steps("~/run/checkpoints") == [1]
    mesh = gs.make_mesh(model_axis=2)
    restored = restore("~/run", abstract_state_for(Small(nnx.Rngs(1)), mesh, "fsdp"))
    assert restored.path == home / "run" / "checkpoints" / "1"
    np.testing.assert_array_equal(restored.state["up"]["kernel"].get_value(), model.up.kernel.get_value())
    assert find_checkpoint("run", base_dir="~") == restored.path


@pytest.fixture(scope="module")
def adam_run(tmp_path_factory, devices):
    """A (model, adam optimizer) checkpoint saved under tensor on (4, 2)."""
    mesh = gs.make_mesh(model_axis=2)
    model = gs.init_sharded(lambda: Small(nnx.Rngs(0)), mesh, "tensor", warn=False)
    optimizer = gs.init_optimizer_sharded(model, optax.adam(1e-3), "tensor")
    return save(tmp_path_factory.mktemp("adam") / "checkpoints", nnx.state((model, optimizer))), model


def test_a_checkpoint_of_another_optimizer_names_the_optimizer_and_how_to_switch(adam_run, devices):
    """adam saved, sgd restored: every difference is optimizer state, but the fix named the model's hyperparameters;
    following the fix given (the optimizer as saved, then the new one over the restored model) restores the weights."""
    directory, saved = adam_run
    mesh = gs.make_mesh(model_axis=1)
    model = Small(nnx.Rngs(1))
    for tx in (optax.sgd(1e-3), optax.sgd(1e-3, momentum=0.9), optax.lion(1e-3)):
        with pytest.raises(ValueError, match=r"opt_state.*Only the optimizer state differs: the checkpoint was saved "
                                             r"with another optimizer.*nnx.Optimizer\(model, new_tx") as error:
            restore(directory, abstract_state_for((model, nnx.Optimizer(model, tx, wrt=nnx.Param)), mesh, "fsdp"))
        assert "hyperparameters" not in str(error.value)
    restored = restore(directory, abstract_state_for((model, nnx.Optimizer(model, optax.adam(1e-3), wrt=nnx.Param)),
                                                     mesh, "fsdp"))
    nnx.update(model, restored.state[0])
    switched = nnx.Optimizer(model, optax.sgd(1e-3), wrt=nnx.Param)
    np.testing.assert_array_equal(model.up.kernel.get_value(), saved.up.kernel.get_value())
    assert switched.step.get_value() == 0 and jax.tree.leaves(switched.opt_state) == []  # plain sgd keeps no state


def test_a_renamed_attribute_is_named_with_both_names(adam_run, devices):
    """self.up renamed self.up_proj: every difference is that name (in the model and in the optimizer's moments), but
    the fix named the model's hyperparameters; a layer added still names them."""
    directory, saved = adam_run
    mesh = gs.make_mesh(model_axis=2)

    def target(model):
        return abstract_state_for((model, nnx.Optimizer(model, optax.adam(1e-3), wrt=nnx.Param)), mesh, "tensor")

    with pytest.raises(ValueError, match=r"up_proj/kernel: missing.*Every difference is one name: the checkpoint's "
                                         r"'up' is the target's 'up_proj'.*name it 'up' again"):
        restore(directory, target(Small(nnx.Rngs(1), first="up_proj")))
    bigger = Small(nnx.Rngs(1))
    bigger.extra = nnx.Linear(4, 4, rngs=nnx.Rngs(2))
    with pytest.raises(ValueError, match="extra/kernel: missing.*Build the model with the hyperparameters"):
        restore(directory, target(bigger))
    restored = restore(directory, target(Small(nnx.Rngs(1))))
    np.testing.assert_array_equal(restored.state[0]["up"]["kernel"].get_value(), saved.up.kernel.get_value())

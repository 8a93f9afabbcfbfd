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

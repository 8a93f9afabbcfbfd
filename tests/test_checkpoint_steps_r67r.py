"""CheckpointWriter.save checks a step against the step folders on disk, as ``steps`` and ``latest`` list them."""

import shutil

import jax
import jax.numpy as jnp
import pytest

from gensbi_sharding.checkpoint import CheckpointWriter


def test_a_step_moved_aside_while_the_writer_is_open_can_be_saved_again(tmp_path):
    # Was: save used Orbax's step list as read when the writer opened, which kept step 2 after its folder was moved
    # aside: writer.steps() said [1] while save(2) was refused as "step 2 is already saved ... (steps [1, 2])".
    state, key = {"w": jnp.arange(3.0)}, jax.random.key(0)
    with CheckpointWriter(tmp_path / "checkpoints", async_save=False) as writer:
        writer.save(1, state, key)
        writer.save(2, state, key)
    with CheckpointWriter(tmp_path / "checkpoints", async_save=False) as writer:
        shutil.move(tmp_path / "checkpoints" / "2", tmp_path / "aside")
        assert writer.steps() == [1]
        assert writer.save(2, state, key) is True
        assert writer.steps() == [1, 2]
        with pytest.raises(ValueError, match=r"step 1 is already saved in .* \(steps \[1, 2\]\)"):
            writer.save(1, state, key)

"""A script run again from its start into the folder of its first run's checkpoints (round 68, a user's script)."""

import shutil
import warnings

import jax
import jax.numpy as jnp
import pytest

from gensbi_sharding.checkpoint import CheckpointWriter, restore


def _saved(folder, steps):
    with CheckpointWriter(folder, keep=3) as writer:
        for step in steps:
            writer.save(step, {"w": jnp.full(2, float(step))}, jax.random.key(step))


def _first_save(folder, step, keep=2):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with CheckpointWriter(folder, every=10, keep=keep) as writer:
            writer.maybe_save(step, {"w": jnp.zeros(2)}, jax.random.key(0))  # the line a warning names
    return [w for w in caught if "CheckpointWriter" in str(w.message)], writer.steps()


@pytest.mark.slow
def test_a_new_run_saving_beside_an_earlier_runs_steps_is_warned_naming_the_steps_keep_deletes(tmp_path):
    # Was: the second run's saves went beside the first run's steps without a word, and keep deleted those
    # (folder [6, 9] -> [9, 10] -> [10, 20]: run 1's checkpoints gone, runs mixed); now its first save warns, naming
    # the steps there, those keep deletes now, and the fix. The copy stands for another process's (or an earlier
    # script's) folder: steps saved in this process continue silently (below)
    _saved(tmp_path / "run1", [6, 9])
    shutil.copytree(tmp_path / "run1", tmp_path / "ckpt")
    said, steps = _first_save(tmp_path / "ckpt", 10)
    assert steps == [9, 10] and len(said) == 1 and said[0].category is RuntimeWarning
    assert str(said[0].message) == (
        f"CheckpointWriter: {tmp_path / 'ckpt'} holds steps [6, 9], which this process did not restore from: step 10 "
        "is saved beside them and keep=2 deletes step 6 now and the others as newer steps come. A run continuing "
        f"them restores from {tmp_path / 'ckpt'} first; a new run gets a directory of its own")
    assert said[0].filename == __file__  # the user's maybe_save, not the library's line
    shutil.copytree(tmp_path / "run1", tmp_path / "wide")
    said, _ = _first_save(tmp_path / "wide", 10, keep=3)
    assert "keep=3 deletes them as newer steps come" in str(said[0].message)
    shutil.copytree(tmp_path / "run1", tmp_path / "one")
    said, _ = _first_save(tmp_path / "one", 10, keep=1)
    assert "step 10 is saved beside them and keep=1 deletes steps 6, 9 now. A run" in str(said[0].message)


@pytest.mark.parametrize("how", ["restored", "saved here"])
def test_a_run_continuing_the_folders_steps_is_not_warned(tmp_path, how):
    _saved(tmp_path / "run1", [6, 9])
    if how == "restored":
        shutil.copytree(tmp_path / "run1", tmp_path / "ckpt")
        assert restore(tmp_path / "ckpt", {"w": jax.ShapeDtypeStruct((2,), jnp.float32,
                                           sharding=jax.sharding.SingleDeviceSharding(jax.devices()[0]))}).step == 9
    said, steps = _first_save(tmp_path / ("ckpt" if how == "restored" else "run1"), 10)
    assert said == [] and steps == [9, 10]


def test_a_script_run_again_is_refused_naming_restore_first_or_another_directory(tmp_path):
    # Was: "step 3 is older than step 9, the newest in ... (steps [6, 9]); save under a step after 9, or write to
    # another directory": a script run again from its start, told to number its steps after 9, mixed its run into
    # the first's (whose steps keep then deleted); now the refusal names the two cases and what each does
    _saved(tmp_path / "ckpt", [6, 9])
    with CheckpointWriter(tmp_path / "ckpt", every=3) as writer:
        with pytest.raises(ValueError) as refused:
            writer.maybe_save(3, {"w": jnp.zeros(2)}, jax.random.key(0))
    assert str(refused.value) == (
        f"step 3 is older than step 9, the newest in {tmp_path / 'ckpt'} (steps [6, 9]); save under a step after 9 "
        "(a run continuing them restores from that folder first), or write to another directory (a new run: this "
        "script run again from its start)")
    assert writer.steps() == [6, 9]

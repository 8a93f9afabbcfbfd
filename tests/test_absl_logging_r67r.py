"""Saving, restoring and the damage check leave the ``absl`` logger (Orbax's) as the user set it."""

import logging

import jax
import jax.numpy as jnp
import orbax.checkpoint as ocp

from gensbi_sharding.checkpoint import CheckpointWriter, restore, step_damage


def _absl_state() -> tuple:
    absl = logging.getLogger("absl")
    return absl.level, list(absl.filters)


def test_save_restore_and_damage_check_leave_the_absl_logger_as_found(tmp_path):
    absl = logging.getLogger("absl")
    own = logging.Filter("mine")
    absl.addFilter(own)
    try:
        before = _absl_state()
        state, key = {"w": jnp.arange(3.0)}, jax.random.key(0)
        with CheckpointWriter(tmp_path / "checkpoints", async_save=False) as writer:
            writer.save(1, state, key)
        assert _absl_state() == before
        assert step_damage(tmp_path / "checkpoints" / "1") is None
        assert _absl_state() == before
        one_device = jax.sharding.SingleDeviceSharding(jax.devices()[0])
        target = {"w": jax.ShapeDtypeStruct((3,), jnp.float32, sharding=one_device)}
        restored = restore(tmp_path, target)
        assert restored.state["w"].tolist() == [0.0, 1.0, 2.0]
        assert _absl_state() == before
        assert own in before[1]  # beside any filter an import added (numpyro adds one to absl when imported)
    finally:
        absl.removeFilter(own)


def test_a_level_set_during_the_damage_check_is_kept(tmp_path, monkeypatch):
    # Was: step_damage set the absl level to WARNING and put back the level it read, undoing a level another thread
    # set meanwhile (and, two checks at once, one put back the other's WARNING for good).
    with CheckpointWriter(tmp_path / "checkpoints", async_save=False) as writer:
        writer.save(1, {"w": jnp.arange(3.0)}, jax.random.key(0))
    absl, metadata = logging.getLogger("absl"), ocp.PyTreeCheckpointHandler.metadata
    level = absl.level

    def read_while_another_thread_sets_the_level(self, *args, **kwargs):
        absl.setLevel(logging.ERROR)
        return metadata(self, *args, **kwargs)

    monkeypatch.setattr(ocp.PyTreeCheckpointHandler, "metadata", read_while_another_thread_sets_the_level)
    try:
        assert step_damage(tmp_path / "checkpoints" / "1") is None
        assert absl.level == logging.ERROR
    finally:
        absl.setLevel(level)

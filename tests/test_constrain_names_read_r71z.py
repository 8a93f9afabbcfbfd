"""``constrain`` traced with no mesh active warns only where a dimension it names would have been split (review of
r71-lib: the warning counted the mesh axes of every PartitionAxis field, so ``("hidden",)`` with
``hidden_state_axis=None`` warned though nothing would be split)."""

import warnings

import jax
import jax.numpy as jnp

from gensbi_sharding import PartitionAxis, ShardingFallbackWarning, constrain


def _traced_warnings(names, partition_axis, shape):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        jax.jit(lambda x: constrain(x, names, partition_axis)).trace(jnp.zeros(shape))
    return [str(w.message) for w in caught if issubclass(w.category, ShardingFallbackWarning)]


def test_a_name_whose_field_splits_nothing_is_silent_without_a_mesh():
    # the default PartitionAxis splits batch over "data" and heads over "model", not the hidden dimension
    assert _traced_warnings(("hidden",), PartitionAxis(), (4,)) == []
    assert _traced_warnings((None, "hidden"), PartitionAxis(), (4, 4)) == []


def test_a_name_whose_field_splits_warns_naming_only_its_axes():
    (message,) = _traced_warnings((None, "heads"), PartitionAxis(), (4, 4))
    assert "splits over ('model',) but no mesh is active" in message and "mesh_context(mesh)" in message

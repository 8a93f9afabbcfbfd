"""A bad argument whose repr spans lines (an array, a module) is named on one short line, not printed whole.

Found by round 67's fuzzer of the public API: ``shard_model(model, mesh, rule=model)`` printed the model's whole
repr (dozens of lines) after "unknown sharding rule"; so did every mesh check, ``make_mesh``, ``resolve_mesh``,
``constrain``'s names, ``nearest_batch_sizes``, ``pad_for_mesh`` and ``mesh_init_simulate``.
"""

import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from jax.sharding import PartitionSpec as P

import gensbi_sharding as gs
from library_helpers import Annotated


def _array():
    return np.ones((8, 4))  # repr: 8 lines


CALLS = {
    "shard_model rule": lambda m, v: gs.shard_model(Annotated(), m, v),
    "shard_model mesh": lambda m, v: gs.shard_model(Annotated(), v, "fsdp"),
    "plan_shardings mesh": lambda m, v: gs.plan_shardings(Annotated(), v, "fsdp"),
    "shard_batch mesh": lambda m, v: gs.shard_batch({"x": np.ones((8, 2))}, v),
    "batch_axes mesh": lambda m, v: gs.batch_axes(v),
    "init_sharded mesh": lambda m, v: gs.init_sharded(Annotated, v, "fsdp"),
    "make_mesh devices": lambda m, v: gs.make_mesh(v),
    "make_mesh model_axis": lambda m, v: gs.make_mesh(None, v),
    "resolve_mesh": lambda m, v: gs.resolve_mesh(v),
    "constrain names": lambda m, v: gs.constrain(jnp.ones((8, 4)), v, gs.PartitionAxis(), m),
    "constrain one name": lambda m, v: gs.constrain(jnp.ones((8, 4)), [v, None], gs.PartitionAxis(), m),
    "nearest_batch_sizes": lambda m, v: gs.nearest_batch_sizes(v, 8),
    "pad_for_mesh": lambda m, v: gs.pad_for_mesh(v, m),
    "mesh_init_simulate": lambda m, v: gs.mesh_init_simulate(v, np.ones((5, 4)), 3, 4),
}


@pytest.mark.parametrize("value", [_array, Annotated, lambda: [Annotated()]], ids=["array", "module", "modules"])
@pytest.mark.parametrize("call", CALLS.values(), ids=CALLS.keys())
def test_a_refused_value_spanning_lines_is_named_on_one_short_line(devices, call, value):
    mesh = gs.make_mesh(model_axis=2)
    if call is CALLS["pad_for_mesh"] and value is _array:
        value = lambda: nnx.Param(3.0)  # noqa: E731 (an array is named by its shape there already)
    with pytest.raises((ValueError, TypeError)) as err:
        call(mesh, value())
    message = str(err.value)
    assert "\n" not in message, message
    assert len(message) < 600, message


def test_an_annotation_entry_spanning_lines_is_named_on_one_line_in_the_fallback_reason(devices):
    mesh = gs.make_mesh(model_axis=2)
    spec, reason = gs.partition_spec_for((np.ones((8, 4)), "mlp"), (8, 4), "tensor", mesh)
    assert spec == P() and "\n" not in reason and reason.startswith("annotation entry array([[1., 1.,")


def test_a_short_value_is_still_named_whole(devices):
    with pytest.raises(ValueError, match=r"^unknown sharding rule 'tensr'; .*did you mean 'tensor'"):
        gs.shard_model(Annotated(), None, "tensr")
    with pytest.raises(TypeError, match=r"mesh must be a jax.sharding.Mesh or None, got 'auto'; build one"):
        gs.shard_model(Annotated(), "auto", "fsdp")



MORE = {
    "PartitionAxis field": lambda m, v: gs.constrain(jnp.ones((8, 4)), ("batch", None), gs.PartitionAxis(v), m),
    "describe top": lambda m, v: gs.describe(Annotated(), m, top=v),
    "host_to_global_array partition": lambda m, v: gs.host_to_global_array({"x": np.ones((8, 2))}, partition={
        "x": v}, mesh=m),
    "Rule name": lambda m, v: gs.Rule(v, {"embed": "data"}),
    "Plan.sharding": lambda m, v: gs.plan_shardings(Annotated(), m, "fsdp").sharding(v),
    "rule table value": lambda m, v: gs.resolve_rule({"embed": v}),
    "Plan.fallback_message max_paths": lambda m, v: gs.plan_shardings(Annotated(), m, "fsdp").fallback_message(
        max_paths=v),
    "mesh spec devices": lambda m, v: gs.resolve_mesh({"devices": v}),
}


@pytest.mark.parametrize("value", [_array, Annotated], ids=["array", "module"])
@pytest.mark.parametrize("call", MORE.values(), ids=MORE.keys())
def test_a_refused_field_or_option_spanning_lines_is_named_on_one_short_line(devices, call, value):
    # Plan.sharding's is a KeyError (a lookup by path, as a dict's): its text is what str() of a KeyError shows.
    mesh = gs.make_mesh(model_axis=2)
    with pytest.raises((ValueError, TypeError, KeyError)) as err:
        call(mesh, value())
    message = err.value.args[0]
    assert "\n" not in message and len(message) < 600, message

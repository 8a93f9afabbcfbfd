"""The contract, function by function, on 8 simulated CPU devices."""

import re
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx
from jax.sharding import AxisType, Mesh, NamedSharding, PartitionSpec as P
from omegaconf import OmegaConf

import gensbi_sharding as gs
from gensbi_sharding import (ExperimentalRuleWarning, ShardingFallbackWarning, axes, make_mesh,
                             shard_model)


class Tiny(nnx.Module):
    """Every case the placement has to handle, on dims divisible by 8."""

    def __init__(self, *, rngs):
        init = nnx.initializers.lecun_normal()
        self.up = nnx.Linear(8, 16, kernel_init=gs.partitioned(init, ("embed", "mlp")),
                             bias_init=gs.partitioned(nnx.initializers.zeros_init(), ("mlp",)),
                             rngs=rngs)
        self.down = nnx.Linear(16, 8, kernel_init=gs.partitioned(init, ("mlp", "embed")), rngs=rngs)
        self.heads = nnx.Param(jnp.arange(8 * 4 * 2, dtype=jnp.float32).reshape(8, 4, 2),
                               **axes("embed", "heads", None))
        self.count = nnx.Variable(jnp.zeros((), jnp.int32))

    def __call__(self, x):
        h = jax.nn.gelu(self.up(x))
        return self.down(h) + jnp.einsum("be,ehd->b", x, self.heads[...])[:, None]


def caught(fn, *args):
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        fn(*args)
    return record


def of_type(record, cls):
    return [str(w.message) for w in record if issubclass(w.category, cls)]


def placed(node, path):
    return gs.sharding_of(node)[path]


def same_placement(sharding, mesh, spec, ndim):
    return sharding.is_equivalent_to(NamedSharding(mesh, spec), ndim)


# ---------------------------------------------------------------------------- vocabulary

def test_vocabulary_values():
    assert gs.LOGICAL_AXES == ("embed", "mlp", "heads", "vocab", "in", "out")
    assert gs.MODEL_AXIS == "model"
    assert [k for k, _ in gs.RULES["tensor"]] == list(gs.LOGICAL_AXES)
    assert dict(gs.RULES["replicated"]) == dict.fromkeys(gs.LOGICAL_AXES)
    assert dict(gs.RULES["fsdp"]) == {**dict.fromkeys(gs.LOGICAL_AXES), "embed": "data"}
    assert dict(gs.RULES["tensor"]) == {**dict.fromkeys(gs.LOGICAL_AXES),
                                         "mlp": "model", "heads": "model", "vocab": "model"}


def test_axes_and_partitioned_carry_names_without_a_mesh():
    assert axes("embed", None) == {"out_sharding": ("embed", None), "eager_sharding": False}
    var = nnx.Param(jnp.ones((2, 3)), **axes("in", "out"))
    assert gs.logical_axes_of(var) == ("in", "out")
    layer = nnx.Linear(2, 3, kernel_init=gs.partitioned(nnx.initializers.ones, ("in", "out")),
                       rngs=nnx.Rngs(0))
    assert gs.logical_axes_of(layer.kernel) == ("in", "out")
    assert len(layer.kernel[...].sharding.device_set) == 1  # built without any mesh


def test_is_array():
    assert gs.nodes.is_array(np.ones(2)) and gs.nodes.is_array(jnp.ones(2))
    assert not any(gs.nodes.is_array(x) for x in (1.0, 3, np.float32(1), [1.0], None))


# ---------------------------------------------------------------------------- mesh

def test_make_mesh_shape_order_and_axis_types(devices):
    mesh = make_mesh(model_axis=2)
    assert mesh.axis_names == ("data", "model") and dict(mesh.shape) == {"data": 4, "model": 2}
    assert mesh.axis_types == (AxisType.Auto, AxisType.Auto)
    assert [d.id for d in mesh.devices.flat] == [d.id for d in devices]
    reversed_mesh = make_mesh(devices[::-1], model_axis=4)
    assert reversed_mesh.devices[0, 0] == devices[-1] and dict(reversed_mesh.shape) == {"data": 2, "model": 4}


@pytest.mark.parametrize("model_axis, message", [
    (0, "model_axis=0 must be an integer >= 1 that divides the 8 devices"),
    (-2, "model_axis=-2 must be an integer >= 1 that divides the 8 devices"),
    (3, "8 devices are not divisible by model_axis=3"),
    (16, "8 devices are not divisible by model_axis=16"),
])
def test_make_mesh_rejects_bad_model_axis(model_axis, message):
    with pytest.raises(ValueError, match=message + r".*choose .*\[1, 2, 4, 8\]"):
        make_mesh(model_axis=model_axis)


def test_make_mesh_rejects_bad_device_lists(devices):
    with pytest.raises(ValueError, match="device 0 appears twice"):
        make_mesh([devices[0], devices[0], devices[1], devices[2]], model_axis=2)
    with pytest.raises(ValueError, match="empty device list"):
        make_mesh([], model_axis=1)
    with pytest.raises(ValueError, match="must be jax.Device objects"):
        make_mesh(["0", "1"])
    with pytest.raises(ValueError, match="device 0 appears twice"):
        gs.resolve_mesh({"devices": [0, 0, 1, 2], "model_axis": 2})
    with pytest.raises(ValueError, match="must be a list of device ids"):
        gs.resolve_mesh({"devices": "0123"})


def test_wrong_kinds_of_mesh_and_node_are_type_errors():
    mesh = make_mesh()
    with pytest.raises(TypeError, match="mesh must be a jax.sharding.Mesh or None, got 'auto'"):
        shard_model(Tiny(rngs=nnx.Rngs(0)), "auto", "fsdp")
    with pytest.raises(TypeError, match="mesh must be a jax.sharding.Mesh or None"):
        gs.shard_batch({"x": np.ones((8, 2))}, "auto")
    with pytest.raises(TypeError, match="shard_model takes an NNX graph node .* got dict"):
        shard_model({"a": jnp.ones(8)}, mesh, "fsdp")
    with pytest.raises(ValueError, match=r"n >= 0 \(an integer\), got -1"):
        gs.pad_for_mesh(-1, mesh)


def test_resolve_mesh_forms(devices):
    mesh = make_mesh(model_axis=2)
    assert gs.resolve_mesh(None) is None
    assert gs.resolve_mesh(mesh) is mesh
    assert dict(gs.resolve_mesh("auto").shape) == {"data": 8, "model": 1}
    assert dict(gs.resolve_mesh({"model_axis": 4}).shape) == {"data": 2, "model": 4}
    from_config = gs.resolve_mesh(OmegaConf.create({"model_axis": 2, "devices": [0, 1, 2, 3]}))
    assert dict(from_config.shape) == {"data": 2, "model": 2}
    assert [d.id for d in from_config.devices.flat] == [0, 1, 2, 3]


@pytest.mark.parametrize("spec, message", [
    ("automatic", "invalid mesh spec 'automatic'; accepted forms: None"),
    (4, "invalid mesh spec 4"),
    ({"modle_axis": 2}, "unknown mesh spec key 'modle_axis'; did you mean 'model_axis'? if not, accepted keys: "
                        "('devices', 'model_axis')"),
    (OmegaConf.create({"model_axis": 2, "shape": [4, 2]}), "unknown mesh spec key 'shape'"),
    ({"model_axis": 3}, "8 devices are not divisible by model_axis=3"),
    ({"devices": [0, 99]}, "device id 99"),
])
def test_resolve_mesh_errors(spec, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        gs.resolve_mesh(spec)


def test_mesh_context_activates_on_enter_only():
    mesh = make_mesh(model_axis=2)
    before = jax.sharding.get_abstract_mesh()
    ctx = gs.mesh_context(mesh)
    assert jax.sharding.get_abstract_mesh() == before  # calling does not activate
    with ctx:
        assert dict(jax.sharding.get_abstract_mesh().shape) == {"data": 4, "model": 2}
    assert jax.sharding.get_abstract_mesh() == before
    with gs.mesh_context(None) as none:
        assert none is None and jax.sharding.get_abstract_mesh() == before


# ---------------------------------------------------------------------------- batches

def test_batch_axes_and_divisor_with_extra_and_missing_axes(devices):
    assert gs.batch_axes(make_mesh(model_axis=2)) == ("data",)
    three = Mesh(np.array(devices).reshape(2, 2, 2), ("pipe", "data", "model"))
    assert gs.batch_axes(three) == ("pipe", "data") and gs.batch_size_divisor(three) == 4
    model_only = Mesh(np.array(devices), ("model",))
    assert gs.batch_axes(model_only) == () and gs.batch_size_divisor(model_only) == 1
    assert gs.batch_size_divisor(None) == 1


def test_check_batch_divisible_messages():
    mesh = make_mesh(model_axis=2)  # data-parallel size 4
    gs.check_batch_divisible({"x": np.ones((8, 2)), "s": np.float32(1), "z": np.ones(())}, mesh, "train")
    gs.check_batch_divisible({"n": 3, "z": np.ones(())}, mesh, "train")  # no ndim > 0 leaves
    gs.check_batch_divisible({"x": np.ones((7, 2))}, None, "train")
    with pytest.raises(ValueError, match=r"train batch leaves have differing leading sizes \[8, 4\]"):
        gs.check_batch_divisible({"a": np.ones((8, 2)), "b": np.ones((4,))}, mesh, "train")
    with pytest.raises(ValueError) as err:
        gs.check_batch_divisible({"x": jnp.ones((10, 2))}, mesh, "validation")
    text = str(err.value)
    for part in ("validation", "batch size 10", "data-parallel size 4", "('data',)", "8 or 12"):
        assert part in text, (part, text)
    with pytest.raises(ValueError, match=r"; use 4 rows \(pad_for_mesh\(3, mesh\) returns .*, \(4, 3\): mask the "
                                         r"padding out of a mean\)$"):
        gs.check_batch_divisible({"x": np.ones((3, 2))}, mesh, "train")


def test_pad_for_mesh():
    mesh = make_mesh(model_axis=2)
    assert gs.pad_for_mesh(10, mesh) == (12, 10)
    assert gs.pad_for_mesh(8, mesh) == (8, 8)
    assert gs.pad_for_mesh(10, None) == (10, 10)
    with pytest.raises(ValueError, match=r"got an array of shape \(30, 4\); pass n.shape\[0\]$"):
        gs.pad_for_mesh(np.ones((30, 4)), mesh)  # named by shape, not printed whole
    # Was "got {'x': array([[1., 1., ...", the batch printed whole, after shard_batch's "pad it (pad_for_mesh)"
    # sent the batch there: pad_for_mesh counts rows, it pads nothing.
    with pytest.raises(ValueError) as error:
        gs.pad_for_mesh({"x": np.ones((30, 4)), "n": 3}, mesh)
    assert str(error.value) == ("pad_for_mesh needs a row count n >= 0 (an integer), got a dict of arrays; "
                                "pad_for_mesh counts rows, it pads nothing: pass their leading size, 30")


@pytest.mark.parametrize("fn", [gs.shard_batch, gs.shard_sample_init])
def test_leading_axis_split_and_other_leaves(fn):
    mesh = make_mesh(model_axis=2)
    batch = {"x": np.arange(16.0).reshape(8, 2), "y": jnp.ones((8,)), "step": jnp.int32(3),
             "scalar": np.array(2.0), "name": "two_moons", "n": 5}
    out = fn(batch, mesh)
    assert same_placement(out["x"].sharding, mesh, P("data"), 2)
    assert same_placement(out["y"].sharding, mesh, P("data"), 1)
    assert out["x"].addressable_shards[0].data.shape == (2, 2)
    for key in ("step", "scalar"):  # 0-d: replicated, not an error
        assert same_placement(out[key].sharding, mesh, P(), 0)
    assert out["name"] == "two_moons" and out["n"] == 5
    np.testing.assert_array_equal(out["x"], batch["x"])
    assert fn(batch, None) is batch


def test_shard_sample_init_on_a_bare_array_and_bad_size():
    mesh = make_mesh(model_axis=1)
    out = gs.shard_sample_init(jnp.zeros((16, 3)), mesh)
    assert same_placement(out.sharding, mesh, P("data"), 2)
    with pytest.raises(ValueError, match=r"leading size 10, not divisible by the data-parallel size 8"):
        gs.shard_sample_init(np.zeros((10, 3)), mesh)
    with pytest.raises(ValueError) as error:  # the sizes every batch message names
        gs.shard_batch({"x": np.ones((30, 4))}, make_mesh(model_axis=2))
    assert str(error.value).endswith(  # was "pad it (pad_for_mesh)", which counts rows and pads nothing
        "not divisible by the data-parallel size 4; use 28 or 32 rows (pad_for_mesh(30, mesh) returns the rows to "
        "pad to and the real ones, (32, 30): mask the padding out of a mean)")


def test_replicate_moves_committed_arrays_and_keeps_the_rest():
    mesh = make_mesh(model_axis=2)
    committed = jax.device_put(jnp.arange(3.0), jax.devices()[5])
    tree = {"a": committed, "b": np.ones((2, 2)), "c": 1.5, "d": None}
    out = gs.replicate(tree, mesh)
    for key in ("a", "b"):
        assert same_placement(out[key].sharding, mesh, P(), out[key].ndim)
        assert len(out[key].sharding.device_set) == 8
    assert out["c"] == 1.5 and out["d"] is None
    assert gs.replicate(tree, None) is tree


# ---------------------------------------------------------------------------- model placement

@pytest.mark.parametrize("rule, up_kernel, heads", [
    ("replicated", P(), P()),
    ("fsdp", P("data", None), P("data", None, None)),
    ("tensor", P(None, "model"), P(None, "model", None)),
])
def test_shard_model_placements_per_rule(rule, up_kernel, heads):
    mesh = make_mesh(model_axis=2)
    model = Tiny(rngs=nnx.Rngs(0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        shard_model(model, mesh, rule)
    shardings = gs.sharding_of(model)
    assert same_placement(shardings["up/kernel"], mesh, up_kernel, 2)
    assert same_placement(shardings["heads"], mesh, heads, 3)
    assert same_placement(shardings["count"], mesh, P(), 0)
    if rule == "fsdp":
        assert model.up.kernel[...].addressable_shards[0].data.shape == (2, 16)


def test_replicated_ignores_annotations_and_never_warns():
    model = Tiny(rngs=nnx.Rngs(0))
    model.bad = nnx.Param(jnp.ones((3,)), **axes("nonsense", "embed"))
    record = caught(shard_model, model, make_mesh(model_axis=2), "replicated")
    assert record == []
    assert all(len(s.device_set) == 8 and s.is_fully_replicated for s in gs.sharding_of(model).values())


def test_one_fallback_warning_lists_every_problem(devices):
    model = Tiny(rngs=nnx.Rngs(0))
    model.unknown = nnx.Param(jnp.ones((8,)), **axes("sequence"))
    model.rank = nnx.Param(jnp.ones((8, 8)), **axes("embed"))
    model.odd = nnx.Param(jnp.ones((6, 8)), **axes("embed", "mlp"))
    model.square = nnx.Param(jnp.ones((8, 8)), **axes("embed", "embed"))
    model.plain = nnx.Param(jnp.ones((8,)))
    model.buffer = nnx.Variable(jnp.ones((8,)))  # unannotated non-Param: replicated silently
    record = caught(shard_model, model, make_mesh(model_axis=2), "fsdp")
    fallback = of_type(record, ShardingFallbackWarning)
    assert len(fallback) == 1
    assert len(of_type(record, ExperimentalRuleWarning)) == 1
    assert len(record) == 2
    text = fallback[0]
    for part in ("unknown (unknown logical axis 'sequence'",
                 "rank (annotation rank 1 != array rank 2: one leading dimension more",
                 "odd (size 6 of logical axis 'embed' is not divisible by mesh axis 'data' of size 4; map 'embed' "
                 "to None or to mesh axes of total size 2, or annotate this dimension None)",
                 "square (logical axes 'embed' and 'embed' both map to mesh axis 'data'; annotate one of those "
                 "dimensions with another logical axis or None (unsplit), e.g. ('embed', None))",
                 "down/bias, plain (no annotation)"):  # one reason, its paths together
        assert part in text, (part, text)
    assert "buffer" not in text and "up/kernel" not in text
    for path in ("unknown", "rank", "odd", "square", "plain"):
        assert placed(model, path).is_fully_replicated


def test_the_fallback_warning_is_bounded_and_groups_one_reason_over_many_variables(devices):
    # Was: one "path (reason)" per variable, the reason repeated each time: 187 of them made a ~24 KB
    # warning; and "dim 6 of logical axis 'embed'" read like a dimension index, not a size.
    model = nnx.Module()
    model.blocks = nnx.List([nnx.Param(jnp.ones((6, 8)), **axes("embed", "mlp")) for _ in range(40)])
    for name in "abcdefgh":
        setattr(model, name, nnx.Param(jnp.ones((8, 8)), **axes(name, "embed")))  # 8 unknown logical axes
    plan = gs.plan_shardings(model, make_mesh(model_axis=2), "fsdp")
    assert len(plan.fallbacks) == 48  # the data, whole
    message = plan.fallback_message()
    known = "(known: embed, mlp, heads, vocab, in, out)"
    assert message == (
        "48 variable(s) replicated instead of split under rule 'fsdp' on mesh {'data': 4, 'model': 2}: blocks/0, "
        "blocks/1, blocks/2 and 37 more (size 6 of logical axis 'embed' is not divisible by mesh axis 'data' of "
        "size 4; map 'embed' to None or to mesh axes of total size 2, or annotate this dimension None); "
        + "; ".join(f"{a} (unknown logical axis '{a}' {known}; to split the other dimensions, leave it "
                    f"unsplit: a rule table with {{'{a}': None}})" for a in "abcde")
        + "; 3 more for 3 other reason(s) (every one: Plan.fallbacks)")
    assert of_type(caught(plan.warn), ShardingFallbackWarning) == [message]
    every = plan.fallback_message(max_reasons=None, max_paths=None, every="x")
    assert all(path in every for path in plan.fallbacks) and "every one" not in every


@pytest.mark.parametrize("place, rule, call", [(gs.shard_model, "fsdp", "rule"),
                                                 (gs.shard_model_by_table, {"embed": "data"}, "table")])
def test_a_cut_fallback_warning_from_shard_model_names_what_its_caller_can_call(devices, place, rule, call):
    # Was: "(every one: Plan.fallbacks)", but a shard_model(_by_table) caller holds no Plan; plan.warn() keeps it
    # (test_the_fallback_warning_is_bounded_and_groups_one_reason_over_many_variables).
    model = nnx.Module()
    model.blocks = nnx.List([nnx.Param(jnp.ones((6, 8)), **axes("embed", "mlp")) for _ in range(4)])
    mesh = make_mesh(model_axis=2)
    [message] = of_type(caught(place, model, mesh, rule), ShardingFallbackWarning)
    assert message == (
        "4 variable(s) replicated instead of split under " + gs.plan_shardings(model, mesh, rule).rule.label
        + " on mesh {'data': 4, 'model': 2}: blocks/0, blocks/1, blocks/2 and 1 more (size 6 of logical axis "
        "'embed' is not divisible by mesh axis 'data' of size 4; map 'embed' to None or to mesh axes of total "
        f"size 2, or annotate this dimension None) (every one: gs.plan_shardings(node, mesh, {call}).fallbacks)")
    assert set(gs.plan_shardings(model, mesh, rule).fallbacks) == {f"blocks/{i}" for i in range(4)}


@pytest.mark.parametrize("names, fix", [
    (("embed", "embed"), ('embed', None)),
    (("embed", "mlp", "embed"), ('embed', 'mlp', None)),
    ((None, "embed", "embed"), (None, 'embed', None)),
])
def test_one_logical_axis_named_twice_falls_back_naming_the_annotation_that_splits(names, fix):
    # Was: "logical axes 'embed' and 'embed' both map to mesh axis 'data'", with no word of what to write instead.
    mesh = make_mesh(model_axis=2)
    spec, reason = gs.partition_spec_for(names, (8,) * len(names), "fsdp", mesh)
    assert spec == P() and reason == ("logical axes 'embed' and 'embed' both map to mesh axis 'data'; annotate one of "
                                      f"those dimensions with another logical axis or None (unsplit), e.g. {fix}")
    assert gs.partition_spec_for(fix, (8,) * len(names), "fsdp", mesh) == (P(*("data" if n == "embed" else None for n in fix)),
                                                                           None)  # the fix followed splits


def test_two_logical_axes_on_the_model_axis_fall_back_under_tensor():
    model = nnx.Module()
    model.w = nnx.Param(jnp.ones((8, 8)), **axes("mlp", "heads"))
    record = caught(shard_model, model, make_mesh(model_axis=2), "tensor")
    (text,) = of_type(record, ShardingFallbackWarning)
    # Was: "w (logical axes 'mlp' and 'heads' both map to mesh axis 'model')", with no word of what to write instead.
    assert ("w (logical axes 'mlp' and 'heads' both map to mesh axis 'model'; annotate one of those dimensions with "
            "another logical axis or None (unsplit), e.g. ('mlp', None), or a rule table with {'heads': None})") in text
    assert placed(model, "w").is_fully_replicated
    mesh, tensor = make_mesh(model_axis=2), dict(gs.RULES["tensor"])
    for names, table in ((("mlp", None), tensor), (("mlp", "heads"), {**tensor, "heads": None})):  # either fix splits
        assert gs.partition_spec_for(names, (8, 8), table, mesh) == (P("model", None), None)
    assert gs.partition_spec_for(("embed",), (8,), {"embed": ("data", "data")}, mesh)[0] == P()  # one axis twice in one


@pytest.mark.parametrize("names, fix, table_fix", [
    (("mlp", "heads", "vocab"), ("mlp", None, None), {"heads": None, "vocab": None}),
    (("mlp", "heads", "mlp"), ("mlp", None, None), None),  # 'mlp' itself twice: no table leaves it split once
])
def test_three_dimensions_on_one_mesh_axis_fall_back_with_a_fix_that_splits(names, fix, table_fix):
    # Was: "e.g. ('mlp', None, 'vocab'), or a rule table with {'heads': None}" ('mlp', None, 'mlp' the second): each
    # fix followed fell back again, a third dimension still on 'model'.
    mesh, tensor = make_mesh(model_axis=2), dict(gs.RULES["tensor"])
    spec, reason = gs.partition_spec_for(names, (8, 8, 8), tensor, mesh)
    assert spec == P() and reason == (
        "logical axes 'mlp' and 'heads' both map to mesh axis 'model'; annotate one of those dimensions with another "
        f"logical axis or None (unsplit), e.g. {fix}" + (f", or a rule table with {table_fix}" if table_fix else ""))
    assert gs.partition_spec_for(fix, (8, 8, 8), tensor, mesh) == (P("model", None, None), None)  # the fix splits
    if table_fix:
        assert gs.partition_spec_for(names, (8, 8, 8), {**tensor, **table_fix}, mesh) == (P("model", None, None), None)


def test_a_table_mapping_one_logical_axis_onto_a_mesh_axis_twice_names_the_table_as_the_fix():
    # Was: "logical axes 'embed' and 'embed' both map to mesh axis 'data'; annotate one of those dimensions with
    # another logical axis or None (unsplit), e.g. (None,)": one dimension, and unsplit it splits nothing.
    mesh = make_mesh(model_axis=2)
    spec, reason = gs.partition_spec_for(("embed",), (8,), {"embed": ("data", "data")}, mesh)
    assert spec == P() and reason == ("logical axis 'embed' maps to mesh axis 'data' twice (('data', 'data')); map "
                                      "it onto 'data' once in the rule table")
    assert gs.partition_spec_for(("embed",), (8,), {"embed": "data"}, mesh) == (P("data"), None)  # the fix followed


def test_mapped_axis_absent_from_the_mesh_falls_back(devices):
    model = Tiny(rngs=nnx.Rngs(0))
    model_only = Mesh(np.array(devices), ("model",))
    record = caught(shard_model, model, model_only, "fsdp")
    (text,) = of_type(record, ShardingFallbackWarning)
    # The fix named too: a mesh of other axis names left the whole model replicated with no way out named.
    assert ("up/kernel (logical axis 'embed' maps to mesh axis 'data', absent from the mesh ('model',); build the "
            "mesh with make_mesh (axes 'data', 'model') or map 'embed' to one of its axes in a rule table)") in text
    record = caught(shard_model, model, model_only, "tensor")  # "model" exists: splits over 8
    assert same_placement(placed(model, "up/kernel"), model_only, P(None, "model"), 2)


def test_unknown_rule_is_rejected_even_without_a_mesh():
    model = Tiny(rngs=nnx.Rngs(0))
    for rule in ("fdsp", None):
        with pytest.raises(ValueError, match=r"unknown sharding rule .*choose one of \('replicated', 'fsdp', 'tensor'\)"):
            shard_model(model, None, rule)


def test_no_mesh_changes_nothing():
    model = Tiny(rngs=nnx.Rngs(0))
    before = [v.get_value() for _, v in nnx.to_flat_state(nnx.state(model))]
    assert caught(shard_model, model, None, "tensor") == []
    after = [v.get_value() for _, v in nnx.to_flat_state(nnx.state(model))]
    assert all(a is b for a, b in zip(before, after))


def test_explicit_axes_warn():
    mesh = jax.make_mesh((4, 2), ("data", "model"), axis_types=(AxisType.Explicit, AxisType.Auto))
    record = caught(shard_model, Tiny(rngs=nnx.Rngs(0)), mesh, "replicated")
    assert len(record) == 1 and "only Auto axes are supported" in str(record[0].message)


def test_idempotent_keeps_buffers_and_re_places_on_change():
    model = Tiny(rngs=nnx.Rngs(0))
    values = np.asarray(model.up.kernel[...])
    mesh = make_mesh(model_axis=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        shard_model(model, mesh, "fsdp")
        first = model.up.kernel[...]
        shard_model(model, mesh, "fsdp")
        assert model.up.kernel[...] is first
        shard_model(model, mesh, "tensor")
        assert same_placement(placed(model, "up/kernel"), mesh, P(None, "model"), 2)
        other = make_mesh(jax.devices()[:4], model_axis=4)
        shard_model(model, other, "tensor")
    assert placed(model, "up/kernel").device_set == set(jax.devices()[:4])
    np.testing.assert_array_equal(model.up.kernel[...], values)  # values never change


def test_a_plan_made_for_another_node_is_refused_naming_the_paths(devices):
    # Was silent: place skipped every variable whose path the plan lacked (a plan of (model, optimizer) used on the
    # model: "0/up/kernel" against "up/kernel"), moving nothing; Plan.abstract_state left them concrete.
    mesh = make_mesh(model_axis=2)
    model = Tiny(rngs=nnx.Rngs(0))
    optimizer = nnx.Optimizer(model, optax.adam(1e-3), wrt=nnx.Param)
    pair_plan = gs.plan_shardings((model, optimizer), mesh, "tensor")
    assert pair_plan.shapes["0/up/kernel"] == (8, 16) and pair_plan.shapes["0/count"] == ()
    for call, caller in ((lambda: gs.place(model, pair_plan), "place"),
                         (lambda: pair_plan.abstract_state(model), "Plan.abstract_state")):
        with pytest.raises(ValueError) as error:
            call()
        assert str(error.value).startswith(f"{caller}: the plan was made for another node: 6 of the node's 6 array "
                                           "variable(s) are not in the plan (count, down/bias, down/kernel and 3 more;"
                                           " the plan's paths: 0/count, 0/down/bias, 0/down/kernel and ")
        assert str(error.value).endswith("plan this node instead: plan_shardings(node, plan.mesh, plan.rule)")
    assert gs.sharding_of(model)["up/kernel"].device_set == {jax.devices()[0]}  # nothing moved
    wider = Tiny(rngs=nnx.Rngs(0))  # the same paths, another width: the plan's splits need not fit it
    wider.up = nnx.Linear(8, 24, kernel_init=gs.partitioned(nnx.initializers.lecun_normal(), ("embed", "mlp")),
                          rngs=nnx.Rngs(1))
    with pytest.raises(ValueError, match=r"2 of another shape \(up/bias is \(24,\), planned \(16,\), up/kernel is "
                                         r"\(8, 24\), planned \(8, 16\)\)"):
        gs.place(wider, gs.plan_shardings(Tiny(rngs=nnx.Rngs(0)), mesh, "tensor"))
    gs.place((model, optimizer), pair_plan)  # its own plan places it
    assert same_placement(placed(model, "up/kernel"), mesh, P(None, "model"), 2)
    assert same_placement(placed(optimizer, "opt_state/0/mu/up/kernel"), mesh, P(None, "model"), 2)


def test_place_refuses_a_pytree_of_arrays_and_what_is_not_a_plan_naming_what_to_call(devices):
    # Was: place(tree_of_arrays, plan) returned having moved nothing (no variable, so none outside the plan), and
    # place(model, "tensor") or place(model, None) raised AttributeError: 'str' object has no attribute 'specs'.
    mesh = make_mesh(model_axis=2)
    model = Tiny(rngs=nnx.Rngs(0))
    plan = gs.plan_shardings(model, mesh, "tensor")
    with pytest.raises(TypeError, match=r"^place takes an NNX graph node \(a Module, nnx.Optimizer, nnx.State, or a "
                                        r"tuple or dict of them\), got dict \{'up': "):
        gs.place({"up": jnp.ones((8, 16))}, plan)
    with pytest.raises(TypeError, match=r"^Plan.abstract_state takes an NNX graph node .* got list \[1, 2\]"):
        plan.abstract_state([1, 2])
    for bad, shown in (("tensor", "str 'tensor'"), (None, "NoneType None")):
        with pytest.raises(TypeError) as error:
            gs.place(model, bad)
        assert str(error.value) == (f"place takes a Plan (plan_shardings(node, mesh, rule)), got {shown}; to place "
                                    "by a rule at once: shard_model(node, mesh, rule)")
    assert gs.sharding_of(model)["up/kernel"].device_set == {jax.devices()[0]}  # nothing moved
    gs.place(model, gs.Plan(mesh, plan.rule, dict(plan.specs), {}))  # built by hand, no shapes: placed by its specs
    assert same_placement(placed(model, "up/kernel"), mesh, P(None, "model"), 2)
    # A plan of (model, optimizer) used on the model says where the model is in it (it named only the paths).
    pair_plan = gs.plan_shardings((model, nnx.Optimizer(model, optax.sgd(0.1), wrt=nnx.Param)), mesh, "tensor")
    with pytest.raises(ValueError) as error:
        gs.place(model, pair_plan)
    assert str(error.value).endswith(
        "; the plan holds each under '0/': it was made for a tuple, list or dict holding this node (e.g. (model, "
        "optimizer)); place that, or plan this node instead: plan_shardings(node, plan.mesh, plan.rule)")
    model.extra = nnx.Param(jnp.ones(3))  # a variable added since: no such hint
    with pytest.raises(ValueError, match=r"\(extra; the plan's paths: none other\); plan this node instead"):
        gs.place(model, plan)


def test_a_plan_of_an_optimizer_used_on_its_model_names_no_node_holding_it(devices):
    # Was: "the plan holds each under 'opt_state/0/mu/': it was made for a tuple, list or dict holding this node (e.g.
    # (model, optimizer)); place that": Adam's moments mirror the model's paths, yet no node is there to place.
    mesh = make_mesh(model_axis=2)
    model = nnx.Linear(8, 16, rngs=nnx.Rngs(0), kernel_metadata=axes("embed", "mlp"))
    optimizer_plan = gs.plan_shardings(nnx.Optimizer(model, optax.adam(1e-3), wrt=nnx.Param), mesh, "tensor")
    with pytest.raises(ValueError) as error:
        gs.place(model, optimizer_plan)
    assert "opt_state/0/mu/'" not in str(error.value) and "holding this node" not in str(error.value)
    assert str(error.value).endswith(" more); plan this node instead: plan_shardings(node, plan.mesh, plan.rule)")


def test_adafactors_factored_moments_are_planned_whole_without_a_warning(devices):
    # Was the fallback warning "annotation rank 2 != array rank 1" for Adafactor's row and column vectors (and
    # its (1,) placeholders): they carry their parameter's annotation but not its shape, and nothing fixes that.
    mesh = make_mesh(model_axis=2)
    model = Tiny(rngs=nnx.Rngs(0))
    model.down.bias = nnx.Param(model.down.bias[...], **axes("embed"))  # every parameter annotated
    optimizer = nnx.Optimizer(model, optax.adafactor(1e-3, min_dim_size_to_factor=8), wrt=nnx.Param)
    plan = gs.plan_shardings((model, optimizer), mesh, "tensor")
    unlike = gs.sharding.UNLIKE_PARAMETER
    assert plan.fallbacks["1/opt_state/0/v_row/up/kernel"] == f"{unlike}; annotation rank 2 != array rank 1"
    assert plan.fallbacks["1/opt_state/0/v_col/up/bias"] == (  # a (1,) placeholder for the unfactored bias
        f"{unlike}; size 1 of logical axis 'mlp' is not divisible by mesh axis 'model' of size 2; annotate this "
        "dimension None: size 1 splits over no mesh axis (mapping 'mlp' to None would leave every 'mlp' dimension "
        "unsplit)")
    assert all(reason.startswith(unlike) for reason in plan.fallbacks.values()) and len(plan.fallbacks) == 10
    assert plan.specs["1/opt_state/0/v/up/bias"] == P("model")  # the unfactored moment follows its parameter
    record = caught(shard_model, (model, optimizer), mesh, "tensor")
    assert of_type(record, ShardingFallbackWarning) == [] and len(of_type(record, ExperimentalRuleWarning)) == 1
    assert same_placement(placed(optimizer, "opt_state/0/v_row/up/kernel"), mesh, P(), 1)
    model.extra = nnx.Param(jnp.ones(3))  # a fallback to fix: warned, the optimizer's named as nothing to fix
    record = caught(shard_model, model, mesh, "tensor")
    assert of_type(record, ShardingFallbackWarning) == [
        "1 variable(s) replicated instead of split under rule 'tensor' on mesh {'data': 4, 'model': 2}: extra "
        "(no annotation)"]


def test_the_fallback_to_fix_comes_before_adafactors_moments_in_the_warning(devices):
    # Was: reasons ordered by count alone, so a model's one unannotated parameter came after the 12 factored
    # moments (nothing to fix), and with max_reasons=1 (or 6 kinds of moments) it was cut: "1 more for 1 other
    # reason(s)", the one fallback to fix named nowhere in the warning.
    mesh = make_mesh(model_axis=2)
    model = Tiny(rngs=nnx.Rngs(0))
    model.extra = nnx.Param(jnp.ones(3))
    optimizer = nnx.Optimizer(model, optax.adafactor(1e-3, min_dim_size_to_factor=8), wrt=nnx.Param)
    plan = gs.plan_shardings((model, optimizer), mesh, "tensor")
    assert plan.fallback_message(max_reasons=1, max_paths=1) == (
        f"{len(plan.fallbacks)} variable(s) replicated instead of split under rule 'tensor' on mesh "
        "{'data': 4, 'model': 2}: 0/down/bias and 1 more (no annotation); "
        f"{len(plan.fallbacks) - 2} more for 3 other reason(s) (every one: Plan.fallbacks)")
    assert plan.fallback_message().split("}: ", 1)[1].startswith("0/down/bias, 0/extra (no annotation); 1/opt_state")


def test_optimizer_state_follows_its_params():
    model = Tiny(rngs=nnx.Rngs(0))
    optimizer = nnx.Optimizer(model, optax.adamw(1e-3), wrt=nnx.Param)
    mesh = make_mesh(model_axis=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        shard_model(model, mesh, "tensor")
        shard_model(optimizer, mesh, "tensor")
    shardings = gs.sharding_of(optimizer)
    for moment in ("mu", "nu"):
        assert same_placement(shardings[f"opt_state/0/{moment}/up/kernel"], mesh, P(None, "model"), 2)
    assert same_placement(shardings["step"], mesh, P(), 0)


@pytest.mark.slow
def test_jitted_forward_on_sharded_model_matches_unsharded():
    x = jax.random.normal(jax.random.key(1), (16, 8))
    reference = Tiny(rngs=nnx.Rngs(0))(x)
    for rule, model_axis in (("fsdp", 1), ("tensor", 2), ("tensor", 8)):
        model = Tiny(rngs=nnx.Rngs(0))
        mesh = make_mesh(model_axis=model_axis)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            shard_model(model, mesh, rule)
        with gs.mesh_context(mesh):
            out = nnx.jit(lambda m, x: m(x))(model, gs.shard_batch(x, mesh) if model_axis < 8 else x)
        np.testing.assert_allclose(out, reference, rtol=1e-5, atol=1e-6)


def test_numpy_leaves_are_placed():
    model = nnx.Module()
    model.w = nnx.Param(np.ones((8, 4), np.float32), **axes("embed", None))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        shard_model(model, make_mesh(), "fsdp")
    assert isinstance(model.w[...], jax.Array)
    assert model.w[...].addressable_shards[0].data.shape == (1, 4)


def test_shard_model_by_table_partial_table_and_tuple_axes():
    model = Tiny(rngs=nnx.Rngs(0))
    mesh = make_mesh(model_axis=2)
    record = caught(gs.shard_model_by_table, model, mesh, {"embed": ("data", "model")})
    assert of_type(record, ExperimentalRuleWarning) == []
    assert same_placement(placed(model, "up/kernel"), mesh, P(("data", "model"), None), 2)
    assert model.up.kernel[...].addressable_shards[0].data.shape == (1, 16)


def test_sharding_of_paths():
    model = Tiny(rngs=nnx.Rngs(0))
    assert set(gs.sharding_of(model)) == {"up/kernel", "up/bias", "down/kernel", "down/bias",
                                          "heads", "count"}


def test_a_plan_without_fallbacks_has_no_fallback_message(devices):
    # A branch no test ran: nothing replicated against its annotation, so there is nothing to say (None, not "").
    plan = gs.plan_shardings(nnx.Linear(8, 8, rngs=nnx.Rngs(0), kernel_metadata=axes("embed", "mlp"),
                                        bias_metadata=axes("mlp")), make_mesh(model_axis=2), "fsdp")
    assert plan.fallbacks == {} and plan.fallback_message() is None

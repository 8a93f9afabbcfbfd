"""Activation partition axes: the strategy, its resolution, and constrain() inside jit."""

from pathlib import Path

import jax
import jax.numpy as jnp
import pytest
from flax import nnx
from jax.sharding import NamedSharding, PartitionSpec as P
from omegaconf import OmegaConf

from gensbi_sharding.activations import ACTIVATION_NAMES, PartitionAxis, activation_spec, constrain
from gensbi_sharding.harness.models.mlp import make_mlp
from gensbi_sharding.harness.models.transformer import make_transformer
from gensbi_sharding.harness.rule_config import partition_axis_from_config
import gensbi_sharding as gs
from gensbi_sharding import ShardingFallbackWarning, make_mesh, mesh_context, resolve_rule

EASYDEL_FIELDS = (
    "batch_axis", "sequence_axis", "query_sequence_axis", "head_axis", "key_sequence_axis",
    "hidden_state_axis", "attention_dim_axis", "bias_head_sequence_axis", "bias_key_sequence_axis",
    "generation_query_sequence_axis", "generation_head_axis", "generation_key_sequence_axis",
    "generation_attention_dim_axis")
HEADS = ("batch", "sequence", "heads", "head_dim")


@pytest.fixture(scope="module")
def mesh(devices):
    return make_mesh(model_axis=2)  # {"data": 4, "model": 2}


def test_fields_and_defaults():
    pa = PartitionAxis()
    assert PartitionAxis._fields == EASYDEL_FIELDS
    assert {k: v for k, v in pa._asdict().items() if v is not None} == {
        "batch_axis": "data", "head_axis": "model", "generation_head_axis": "model"}
    assert set(ACTIVATION_NAMES.values()) <= set(EASYDEL_FIELDS)


@pytest.mark.parametrize("rule,model_axis,expected", [
    ("replicated", 1, ("data", None, None)),
    ("replicated", 2, ("data", None, None)),  # heads unsplit: the weights are not split either
    ("fsdp", 4, ("data", None, None)),  # "embed" over "data" is the batch's axis already
    ("tensor", 1, ("data", None, None)),  # a model axis of size 1 splits nothing
    ("tensor", 2, ("data", "model", None)),
    ("tensor", 8, (None, "model", None)),  # data axis of size 1
    ({"embed": "model", "heads": None}, 2, ("data", None, "model")),
    ({"heads": ["data", "model"]}, 4, ("data", "model", None)),  # "data" stays the batch's (docstring, docs/rules.md)
])
def test_for_rule(devices, rule, model_axis, expected):
    pa = PartitionAxis.for_rule(rule, make_mesh(model_axis=model_axis))
    assert (pa.batch_axis, pa.head_axis, pa.hidden_state_axis) == expected
    assert pa.generation_head_axis == pa.head_axis
    assert pa.sequence_axis is None and pa.attention_dim_axis is None


@pytest.mark.parametrize("rule,expected", [
    ({"heads": "tp"}, ("dp", "tp", None)),
    ({"embed": "dp", "mlp": "tp", "heads": "tp"}, ("dp", "tp", None)),  # fsdp_tensor's layout, named otherwise
    ({"mlp": "tp"}, ("dp", None, None)),  # an MLP's tensor-parallel axis: off the batch as well
    ({"embed": "tp"}, (("dp", "tp"), None, None)),  # "embed" is FSDP's axis, the batch's too (as "data" in "fsdp")
    ({"embed": "tp", "heads": "tp"}, ("dp", "tp", "tp")),  # as {"embed": "model", "heads": "model"} on make_mesh
])
def test_for_rule_keeps_a_tensor_parallel_axis_named_otherwise_off_the_batch(devices, rule, expected):
    # Was: batch_axis=('dp', 'tp'), head_axis=None for {"heads": "tp"}: every axis but "model" went to the batch, so
    # the activations' heads were never split while shard_model split the weights' heads over "tp".
    mesh = jax.make_mesh((4, 2), ("dp", "tp"), axis_types=(jax.sharding.AxisType.Auto,) * 2)
    pa = PartitionAxis.for_rule(rule, mesh)
    assert (pa.batch_axis, pa.head_axis, pa.hidden_state_axis) == expected
    assert gs.partition_spec_for(("heads",), (4,), rule, mesh) == (P(pa.head_axis), None)  # where the weights are
    assert activation_spec(("batch", "heads"), (8, 4), pa, mesh) == (P(*expected[:2]), {})


@pytest.mark.parametrize("rule,match", [
    ("tensr", r"unknown sharding rule 'tensr'; choose one of \('replicated', 'fsdp', 'tensor'\)"),
])
def test_for_rule_errors(mesh, rule, match):
    with pytest.raises(ValueError, match=match):
        PartitionAxis.for_rule(rule, mesh)


@pytest.mark.parametrize("rule,axes,label,axis", [
    ("tensor", ("dp", "tp"), "rule 'tensor'", "model"),
    ({"heads": "tensor", "embed": "data"}, ("data", "model"), "custom rule table", "tensor"),
])
def test_for_rule_warns_and_leaves_unsplit_a_mesh_axis_absent_as_shard_model_does(devices, rule, axes, label, axis):
    # Was: ValueError "rule table maps 'heads' to mesh axis 'model'" (for rule "tensor", no table written), where
    # shard_model, given the same rule and mesh, warned and replicated those weights.
    mesh = jax.make_mesh((4, 2), axes, axis_types=(jax.sharding.AxisType.Auto,) * 2)
    with pytest.warns(ShardingFallbackWarning) as record:
        pa = PartitionAxis.for_rule(rule, mesh)
    assert [str(w.message) for w in record] == [
        f"PartitionAxis.for_rule: {label} leaves activations' heads unsplit on mesh {{'{axes[0]}': 4, '{axes[1]}': 2}}, "
        f"as shard_model replicates those weights: logical axis 'heads' maps to mesh axis '{axis}', absent from the "
        f"mesh {axes}; build the mesh with make_mesh (axes 'data', 'model') or map 'heads' to one of its axes in a rule "
        "table"]
    assert (pa.head_axis, pa.generation_head_axis, pa.hidden_state_axis) == (None, None, None)
    model = nnx.Module()
    model.w = nnx.Param(jnp.ones((8, 4)), **gs.axes("embed", "heads"))
    with pytest.warns(ShardingFallbackWarning, match=f"logical axis 'heads' maps to mesh axis '{axis}', absent"):
        gs.shard_model_by_table(model, mesh, resolve_rule(rule).table)
    assert model.w[...].sharding.is_fully_replicated  # the weights, as the activations: unsplit


@pytest.mark.parametrize("pa,match", [
    (PartitionAxis(head_axis="tensor"),
     r"head_axis='tensor' names mesh axis 'tensor', but the mesh has axes \('data', 'model'\)"),
    (PartitionAxis(batch_axis=("data", "pipe")), r"batch_axis=\('data', 'pipe'\) names mesh axis 'pipe'"),
    (PartitionAxis(sequence_axis=3), r"sequence_axis=3 must be None, a mesh axis name"),
    (PartitionAxis(sequence_axis=()), r"sequence_axis=\(\) must be None, a mesh axis name"),
])
def test_resolve_errors(mesh, pa, match):
    with pytest.raises(ValueError, match=match):
        pa.resolve(mesh)


def test_resolve_normalises_lists(mesh):
    pa = PartitionAxis(batch_axis=["data", "model"], head_axis=None).resolve(mesh)
    assert pa.batch_axis == ("data", "model") and hash(pa)  # hashable: a static model attribute


@pytest.mark.parametrize("names,shape,pa,spec,unsplit", [
    (("batch", "hidden"), (16, 8), PartitionAxis(), P("data", None), set()),
    (HEADS, (16, 5, 4, 3), PartitionAxis(), P("data", None, "model", None), set()),
    (HEADS, (16, 5, 3, 3), PartitionAxis(), P("data", None, None, None), {"heads"}),
    (("batch", None), (6, 8), PartitionAxis(), P(None, None), {"batch"}),
    (("batch", "hidden"), (16, 8), PartitionAxis(hidden_state_axis="data"), P("data", None), {"hidden"}),
    (("batch", "hidden"), (16, 8), PartitionAxis(batch_axis=("data", "model")),
     P(("data", "model"), None), set()),
])
def test_activation_spec(mesh, names, shape, pa, spec, unsplit):
    got, reasons = activation_spec(names, shape, pa, mesh)
    assert got == spec and set(reasons) == unsplit


@pytest.mark.parametrize("names,match", [
    (("batch",), r"activation names \('batch',\) have 1 entries for an array of shape \(16, 8\)"),
    (("batch", "embed"), r"unknown activation name 'embed'; known names: batch, sequence"),
])
def test_activation_spec_errors(mesh, names, match):
    with pytest.raises(ValueError, match=match):
        activation_spec(names, (16, 8), PartitionAxis(), mesh)


def test_constrain_places_inside_jit(mesh):
    f = jax.jit(lambda x: constrain(2 * x, HEADS, PartitionAxis()))
    x = jnp.ones((16, 5, 4, 3))
    with mesh_context(mesh):
        y = f(x)
        text = f.lower(x).as_text()
    assert y.sharding.is_equivalent_to(NamedSharding(mesh, P("data", None, "model", None)), 4)
    assert '<@mesh, [{"data"}, {}, {"model"}, {}]>' in text


def test_constrain_with_explicit_mesh(mesh):
    y = jax.jit(lambda x: constrain(x, ("batch", "hidden"), PartitionAxis(), mesh))(jnp.ones((16, 8)))
    assert y.sharding.is_equivalent_to(NamedSharding(mesh, P("data", None)), 2)


def test_constrain_is_a_noop_without_mesh_or_strategy(mesh):
    x = jnp.ones((16, 8))
    no_mesh = jax.jit(lambda x: constrain(x, ("batch", "hidden"), PartitionAxis()))
    assert "sharding_constraint" not in no_mesh.lower(x).as_text()
    assert constrain(x, ("batch", "hidden"), PartitionAxis()) is x
    no_strategy = jax.jit(lambda x: constrain(x, ("batch", "hidden"), None))
    with mesh_context(mesh):
        assert "sharding_constraint" not in no_strategy.lower(x).as_text()


def test_constrain_leaves_non_dividing_dimension_unsplit(mesh):
    f = jax.jit(lambda x: constrain(x, HEADS, PartitionAxis()))
    x = jnp.ones((16, 5, 3, 3))  # 3 heads on a model axis of 2
    with mesh_context(mesh), pytest.warns(ShardingFallbackWarning,
                                          match=r"heads \(size 3 is not divisible by mesh axes \('model',\)"):
        y = f(x)
    assert y.sharding.is_equivalent_to(NamedSharding(mesh, P("data")), 4)


@pytest.mark.slow
@pytest.mark.parametrize("factory,hparams,count,pattern", [
    (make_mlp, dict(width=16, depth=2, mlp_ratio=2, time_embed_dim=8), 3, '[{"data"}, {}]'),
    (make_transformer, dict(embed=16, depth=1, heads=4, mlp_ratio=2, time_embed_dim=8), 6,
     '[{"data"}, {}, {"model"}, {}]'),
])
def test_models_constrain_their_blocks(mesh, factory, hparams, count, pattern):
    args = (jnp.ones((8, 2)), jnp.ones((8, 3)), jnp.ones((8,)))

    def lowered(pa):
        graphdef, state = nnx.split(factory(dim_theta=2, dim_x=3, rngs=nnx.Rngs(0),
                                            partition_axis=pa, **hparams))
        with mesh_context(mesh):
            return jax.jit(lambda s, *a: nnx.merge(graphdef, s)(*a)).lower(state, *args).as_text()

    text = lowered(PartitionAxis.for_rule("tensor", mesh))
    assert text.count("sdy.sharding_constraint") == count and pattern in text
    assert "sdy.sharding_constraint" not in lowered(None)


def test_models_reject_a_bad_partition_axis():
    with pytest.raises(ValueError, match=r"partition_axis must be a PartitionAxis or None, got 'tensor'"):
        make_mlp(dim_theta=2, dim_x=3, rngs=nnx.Rngs(0), partition_axis="tensor")


def test_from_config(mesh):
    assert partition_axis_from_config({"strategy": "rule", "head_axis": "auto"}, "tensor", mesh) == \
        PartitionAxis.for_rule("tensor", mesh)
    assert partition_axis_from_config({"strategy": "rule", "head_axis": None}, "tensor", mesh).head_axis is None
    assert partition_axis_from_config({"strategy": "fixed", "sequence_axis": ["model"]}, "tensor",
                                      mesh) == PartitionAxis(sequence_axis=("model",))
    assert partition_axis_from_config(OmegaConf.create({"strategy": "rule", "batch_axis": ["data", "model"]}),
                                      "tensor", mesh).batch_axis == ("data", "model")
    assert partition_axis_from_config({"strategy": "none"}, "tensor", mesh) is None
    assert partition_axis_from_config({"strategy": "rule"}, "tensor", None) is None


@pytest.mark.parametrize("cfg,match", [
    ({"strategy": "tensor"}, r"activation strategy 'tensor' is not one of rule, fixed, none"),
    ({"strategy": "rule", "heads_axis": "model"}, r"activation key 'heads_axis' is not a PartitionAxis field"),
    ({"strategy": "rule", "head_axis": "tensor"}, r"head_axis=tensor names mesh axis tensor"),
])
def test_from_config_errors(mesh, cfg, match):
    with pytest.raises(ValueError, match=match):
        partition_axis_from_config(cfg, "tensor", mesh)


@pytest.mark.parametrize("preset,expected", [
    ("rule", lambda mesh: PartitionAxis.for_rule("tensor", mesh)),
    ("fixed", lambda mesh: PartitionAxis()),
    ("none", lambda mesh: None),
])
def test_activation_presets(mesh, preset, expected):
    path = Path(__file__).resolve().parents[1] / "conf" / "activation" / f"{preset}.yaml"
    assert path.read_text().startswith("# Use this when")
    assert partition_axis_from_config(OmegaConf.load(path), "tensor", mesh) == expected(mesh)


@pytest.mark.parametrize("rule,axes,expected", [
    ({"mlp": "data"}, ("data",), ("data", None, None)),
    ({"heads": "data", "embed": "data"}, ("data",), ("data", None, None)),
    ({"mlp": "data", "heads": "tp"}, ("data", "tp"), ("data", "tp", None)),
])
def test_for_rule_keeps_the_data_axis_on_the_batch_on_a_mesh_without_model(devices, rule, axes, expected):
    # Was: batch_axis=None for {"mlp": "data"} on a ("data",) mesh (its mlp weights split over "data" taken for tensor
    # parallelism: every activation's batch whole on each device), where make_mesh()'s ("data", "model") gave "data".
    shape = (8,) if len(axes) == 1 else (4, 2)
    pa = PartitionAxis.for_rule(rule, jax.make_mesh(shape, axes, axis_types=(jax.sharding.AxisType.Auto,) * len(axes)))
    assert (pa.batch_axis, pa.head_axis, pa.hidden_state_axis) == expected
    if len(axes) == 1:  # as on make_mesh's ("data", "model") mesh of as many devices
        same = PartitionAxis.for_rule(rule, gs.make_mesh())
        assert (same.batch_axis, same.head_axis, same.hidden_state_axis) == expected


def test_a_misspelt_partition_axis_field_is_answered_with_the_field_meant():
    # Was Python's plain "PartitionAxis.__new__() got an unexpected keyword argument 'hiden_state_axis'", no guess.
    with pytest.raises(TypeError) as err:
        PartitionAxis(hiden_state_axis="model")
    assert str(err.value).startswith("PartitionAxis got an unexpected field 'hiden_state_axis'; did you mean "
                                     "'hidden_state_axis'? if not, its fields: batch_axis, sequence_axis, "), err.value
    with pytest.raises(TypeError, match=r"unexpected field 'colour'; its fields: batch_axis, "):
        PartitionAxis(colour="red")
    axes = PartitionAxis("data", hidden_state_axis="model")  # fields by position and name, as before
    assert (axes.batch_axis, axes.hidden_state_axis, type(axes._replace(head_axis=None))) == (
        "data", "model", PartitionAxis)


def test_a_misspelt_field_given_to_replace_is_answered_with_the_field_meant():
    # Was NamedTuple's "Got unexpected field names: ['hiden_state_axis']", no guess; a ValueError still, as it was.
    with pytest.raises(ValueError) as err:
        PartitionAxis()._replace(hiden_state_axis="model")
    assert str(err.value).startswith("PartitionAxis._replace got an unexpected field 'hiden_state_axis'; did you mean "
                                     "'hidden_state_axis'? if not, its fields: batch_axis, sequence_axis, "), err.value
    replaced = PartitionAxis("data")._replace(hidden_state_axis="model", head_axis=None)
    assert (type(replaced), replaced.batch_axis, replaced.hidden_state_axis, replaced.head_axis) == (
        PartitionAxis, "data", "model", None)

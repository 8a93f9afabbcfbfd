"""The public API under wrong argument types: a ``TypeError``/``ValueError`` naming the value and the fix.

Found by calling each entry point of the README's table with what users plausibly pass by
mistake (a mesh spec where a Mesh goes, a string where a module goes, a number in a rule
table); each used to end in an obscure traceback from inside JAX, NNX or Python, or in
silently doing nothing.
"""

import warnings

import jax
import numpy as np
import optax
import pytest
from flax import nnx
from jax.sharding import PartitionSpec as P

import gensbi_sharding as gs
from gensbi_sharding import checkpoint


class Block(nnx.Module):
    def __init__(self, rngs):
        self.up = nnx.Linear(8, 16, rngs=rngs,
                             kernel_init=gs.partitioned(nnx.initializers.lecun_normal(), ("embed", "mlp")))


@pytest.fixture(scope="module")
def mesh(devices):
    return gs.make_mesh(model_axis=2)


@pytest.fixture
def model():
    return Block(nnx.Rngs(0))


@pytest.mark.parametrize("call, error, needles", [
    # A string or number where a module goes: an empty plan / IndexError / "'int' object is not callable".
    (lambda m, mesh: gs.plan_shardings("model", mesh), TypeError, ["got str", "Module"]),
    (lambda m, mesh: gs.describe(3, mesh), TypeError, ["got int", "Module"]),
    (lambda m, mesh: checkpoint.abstract_state_for(3, mesh), TypeError, ["got int", "Module", "factory"]),
    # A factory that builds no module: AttributeError "'int' object has no attribute '_mapping'".
    (lambda m, mesh: gs.init_sharded(lambda: 3, mesh, "fsdp"), TypeError,
     ["init_sharded (what the factory returned)", "got int", "Module"]),
    (lambda m, mesh: gs.abstract_sharded(lambda: "model", mesh, "fsdp"), TypeError, ["got str", "Module"]),
    # A mesh spec where a Mesh goes: AttributeError 'str' object has no attribute 'devices', JAX's ValueError.
    (lambda m, mesh: gs.describe(m, "auto"), TypeError, ["got 'auto'", "resolve_mesh(spec)"]),
    (lambda m, mesh: gs.mesh_context("auto").__enter__(), TypeError, ["got 'auto'", "resolve_mesh(spec)"]),
    # A count where a device list goes: "'int' object is not iterable".
    (lambda m, mesh: gs.make_mesh(devices=4), TypeError, ["devices=4", "jax.devices()[:4]"]),
    # A rule table holding a number, or a mistyped logical axis (which silently split nothing).
    (lambda m, mesh: gs.shard_model_by_table(m, mesh, {"embed": 3}), ValueError,
     ["'embed': 3", "mesh axis name"]),
    (lambda m, mesh: gs.plan_shardings(m, mesh, {"embd": "data"}), ValueError,
     ["'embd'", "embed, mlp, heads, vocab, in, out"]),
    (lambda m, mesh: gs.resolve_rule({("embed",): "data"}), ValueError, ["('embed',)"]),
    # A table given to shard_model, which takes names: the message names the function that takes tables.
    (lambda m, mesh: gs.shard_model(m, mesh, {"embed": "data"}), ValueError, ["shard_model_by_table"]),
    # A mesh spec where a Mesh goes, in the functions that did not check it: AttributeError 'str' object has no ...
    (lambda m, mesh: gs.check_model_groups_local("auto"), TypeError, ["got 'auto'", "make_mesh"]),
    (lambda m, mesh: gs.input_partition_spec("auto"), TypeError, ["got 'auto'", "make_mesh"]),
    (lambda m, mesh: gs.PartitionAxis.for_rule("tensor", "auto"), TypeError, ["got 'auto'", "make_mesh"]),
    (lambda m, mesh: gs.partition_spec_for(("mlp",), (8,), {"mlp": "model"}, "auto"), TypeError, ["got 'auto'"]),
    (lambda m, mesh: gs.constrain(np.ones((8, 4)), ("batch", None), gs.PartitionAxis(), "auto"), TypeError,
     ["got 'auto'"]),
    # A rule name where a PartitionAxis goes (AttributeError 'str' object has no attribute 'resolve'), and one
    # name where a sequence goes (read as ('b', 'a', 't', 'c', 'h')).
    (lambda m, mesh: gs.constrain(np.ones((8, 4)), ("batch", None), "tensor", mesh), TypeError,
     ["partition_axis='tensor'", "PartitionAxis.for_rule(rule, mesh)"]),
    (lambda m, mesh: gs.constrain(np.ones(8), "batch", gs.PartitionAxis(), mesh), ValueError, ["('batch',)"]),
    # A pytree or a class where a node goes: AttributeError 'ArrayImpl' ... 'get_value', IndexError in flax.
    (lambda m, mesh: gs.sharding_of({"w": np.ones(3)}), TypeError, ["sharding_of", "got dict"]),
    (lambda m, mesh: gs.partition_specs(Block), TypeError, ["partition_specs", "got ModuleMeta"]),
    (lambda m, mesh: gs.init_optimizer_sharded(Block, None), TypeError, ["init_optimizer_sharded", "got ModuleMeta"]),
    # No optimizer (AttributeError 'NoneType' object has no attribute 'init', inside nnx.Optimizer).
    (lambda m, mesh: gs.init_optimizer_sharded(m, "adam"), TypeError, ["tx='adam'", "optax.adam(1e-3)"]),
    # A class needing arguments as the factory: Flax's "missing 1 required positional argument" on tracing.
    (lambda m, mesh: gs.init_sharded(Block, mesh), ValueError, ["factory 'Block'", "'rngs'", "lambda:"]),
    # Without a mesh the factory's result went unchecked: None was returned as the model.
    (lambda m, mesh: gs.init_sharded(lambda: None, None), TypeError, ["what the factory returned", "got NoneType"]),
    # (It named the abstracted value, "got ShapeDtypeStruct", until mesh=None traced as with a mesh.)
    (lambda m, mesh: gs.abstract_sharded(lambda: 3, None), TypeError,
     ["abstract_sharded (what the factory returned)", "got int 3"]),
    # A Lowered (not compiled) program: AttributeError 'Lowered' object has no attribute 'memory_analysis'.
    (lambda m, mesh: gs.compiled_report(jax.jit(lambda x: x).lower(np.ones(2))), ValueError, [".compile()"]),
])
def test_wrong_arguments_get_a_clear_error(model, mesh, call, error, needles):
    with pytest.raises(error) as err:
        call(model, mesh)
    for needle in needles:
        assert needle in str(err.value), (needle, str(err.value))


def test_rule_tables_that_are_right_still_resolve():
    rule = gs.resolve_rule({"embed": "data", "mlp": ["data", "model"], "heads": None})
    assert rule.table == {"embed": "data", "mlp": ["data", "model"], "heads": None}


@pytest.mark.parametrize("step, state, key, error, needle", [
    ("a", "state", "key", ValueError, "step='a'"),  # was int()'s "invalid literal for int() with base 10"
    (-1, "state", "key", ValueError, "step=-1"),  # was saved as step -1
    (1, "model", "key", TypeError, "state='model'"),  # was saved: a checkpoint holding a string
    (1, "state", None, TypeError, "key=None"),  # was saved without a key, then restore failed on it
])
def test_checkpoint_save_checks_its_arguments(tmp_path, model, step, state, key, error, needle):
    real = {"state": nnx.state(model), "key": jax.random.key(0)}
    writer = checkpoint.CheckpointWriter(tmp_path / "ck", every=1)
    with pytest.raises(error, match=needle.replace("(", r"\(")):
        writer.save(step, real.get(state, state) if isinstance(state, str) else state,
                    real.get(key, key) if isinstance(key, str) else key)
    writer.close()
    assert not any((tmp_path / "ck").glob("*")) if (tmp_path / "ck").exists() else True


@pytest.mark.parametrize("call, needle", [
    # Each was pathlib's "argument should be a str or an os.PathLike object ..., not 'int'" from deep
    # inside (or dict()'s "'int' object is not iterable"), raised after nothing was checked.
    (lambda ck: checkpoint.CheckpointWriter(5), "directory=5: pass a str or os.PathLike, e.g. directory='checkpoints'"),
    (lambda ck: checkpoint.CheckpointWriter(ck, config=5), "config=5 must be a mapping"),
    (lambda ck: checkpoint.CheckpointWriter(ck, async_save="no"), "async_save='no' must be True or False"),
    (lambda ck: checkpoint.restore(5, {"w": 1}), "path=5: pass a str or os.PathLike"),
    (lambda ck: checkpoint.saved_config(None), "path=None: pass a str or os.PathLike"),
    (lambda ck: checkpoint.find_checkpoint("ck", base_dir=5), "base_dir=5: pass a str or os.PathLike"),
    (lambda ck: checkpoint.committed_steps(5), "directory=5: pass a str or os.PathLike"),
])
def test_checkpoint_paths_and_options_get_a_clear_type_error(tmp_path, call, needle):
    with pytest.raises(TypeError) as err:
        call(tmp_path / "ck")
    assert needle in str(err.value), str(err.value)
    assert not (tmp_path / "ck").exists()  # refused before Orbax made the folder


def test_restore_without_a_target_names_abstract_state_for(tmp_path, model):
    # Was "does not fit the current model, 51 variable(s) differ: ... in the checkpoint, not in the model".
    with checkpoint.CheckpointWriter(tmp_path / "ck", every=1) as writer:
        writer.save(1, nnx.state(model), jax.random.key(0))
    with pytest.raises(TypeError, match=r"abstract_state=None .*abstract_state_for\(model, mesh, rule\)"):
        checkpoint.restore(tmp_path / "ck", None)


@pytest.mark.parametrize("spec, twice, fixed", [
    (P("data", "data"), "data", "P('data', None)"),
    (P(("data", "model"), "data"), "data", "P(('data', 'model'), None)"),
    (P(("model", "model")), "model", "P('model',)"),
])
def test_host_to_global_array_names_a_mesh_axis_used_twice(mesh, spec, twice, fixed):
    # Was JAX's DuplicateSpecError from inside NamedSharding, raised while the arrays were built.
    with pytest.raises(ValueError) as err:
        gs.host_to_global_array(np.ones((8, 8)), partition=spec, mesh=mesh)
    assert f"PartitionSpec {spec} for leaf <root> names mesh axis {twice!r} twice" in str(err.value)
    assert f"use e.g. {fixed}" in str(err.value)


@pytest.mark.parametrize("call", [
    lambda batch, mesh: gs.shard_batch(batch, mesh),
    lambda batch, mesh: gs.shard_sample_init(batch, mesh),
    lambda batch, mesh: gs.host_to_global_array(batch, mesh=mesh),
    lambda batch, mesh: gs.host_to_global_array(batch, partition="data", mesh=mesh),
    lambda batch, mesh: gs.check_batch_divisible(batch, mesh, "train"),
])
def test_batch_leaves_with_differing_rows_are_refused_alike(mesh, call):
    # shard_batch placed both (rows of x and y no longer lined up); host_to_global_array did too.
    with pytest.raises(ValueError, match=r"leaves have differing leading sizes \[8, 16\] \(\['x'\] 8, \['y'\] 16\)"):
        call({"x": np.ones((8, 3)), "y": np.ones((16,)), "s": np.ones(())}, mesh)


def test_leaves_not_split_along_rows_may_differ(mesh):
    got = gs.host_to_global_array({"x": np.ones((8, 3)), "table": np.ones((3,))},
                                  partition={"x": P("data"), "table": P()}, mesh=mesh)
    assert got["x"].shape == (8, 3) and got["table"].shape == (3,) and got["table"].sharding.spec == P()
    assert gs.host_to_global_array({"x": np.ones((8, 3)), "y": np.ones((5,))}, partition="replicated",
                                   mesh=mesh)["y"].shape == (5,)


@pytest.mark.parametrize("table, needle", [
    ({"MLP": "x"}, "rule table key 'MLP' is not a logical axis"),
    ({"embed": 3}, "'embed': 3"),
    ({"mlp": ("model", "model")}, "{'mlp': ('model', 'model')} names mesh axis 'model' twice; list each once: "
                                  "{'mlp': 'model'}"),
])
@pytest.mark.parametrize("with_mesh", [False, True])
def test_shard_model_by_table_checks_the_table_with_or_without_a_mesh(model, mesh, table, needle, with_mesh):
    # Without a mesh the table was not checked at all (shard_model and init_sharded check theirs); a mesh axis
    # twice was planned as a fallback, replicating the variable, on every mesh.
    with pytest.raises(ValueError) as err:
        gs.shard_model_by_table(model, mesh if with_mesh else None, table)
    assert needle in str(err.value), str(err.value)


def test_a_mesh_axis_twice_in_a_table_entry_is_refused_everywhere():
    with pytest.raises(ValueError, match=r"names mesh axis 'data' twice; list each once: \{'embed': \('data', "):
        gs.resolve_rule({"embed": ["data", "model", "data"]})
    with pytest.raises(ValueError, match="names mesh axis 'model' twice"):
        gs.init_sharded(lambda: Block(nnx.Rngs(0)), None, {"mlp": ["model", "model"]})


def placed(rule, mesh):
    """A Block placed under ``rule`` (a name or a table); the plan's warnings are not what these tests check."""
    model = Block(nnx.Rngs(0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        (gs.shard_model if isinstance(rule, str) else gs.shard_model_by_table)(model, mesh, rule)
    return model


@pytest.mark.parametrize("placed_under, given, needles", [
    ("tensor", "fsdp", ["rule 'fsdp' places up/kernel at P('data', None), but the model holds it at "
                        "P(None, 'model')", "pass rule='tensor'"]),
    ("tensor", "replicated", ["rule 'replicated' places up/kernel at P(), but the model holds it at "
                              "P(None, 'model')", "pass rule='tensor'"]),
    ({"embed": "model", "mlp": "data"}, "tensor", ["rule 'tensor' places up/kernel at P(None, 'model'), but the "
                                                   "model holds it at P('model', 'data')", "pass the rule table"]),
])
def test_init_optimizer_sharded_refuses_a_rule_other_than_the_models(mesh, placed_under, given, needles):
    # Was silent: the optimizer state laid out under `given` while its parameters sat under `placed_under`.
    model = placed(placed_under, mesh)
    with pytest.raises(ValueError) as err:
        gs.init_optimizer_sharded(model, optax.adam(1e-3), given)
    for needle in needles:
        assert needle in str(err.value), str(err.value)


def test_init_optimizer_sharded_refuses_an_abstract_model_planned_otherwise(mesh):
    abstract = gs.abstract_sharded(lambda: Block(nnx.Rngs(0)), mesh, "tensor", warn=False)
    with pytest.raises(ValueError, match=r"rule 'fsdp' places up/kernel .* pass rule='tensor'"):
        gs.init_optimizer_sharded(abstract, optax.adam(1e-3), "fsdp")


def test_init_optimizer_sharded_under_the_models_rule_still_works(mesh):
    model = placed("tensor", mesh)
    optimizer = gs.init_optimizer_sharded(model, optax.adam(1e-3), "tensor")
    assert optimizer.opt_state[0].mu["up"]["kernel"][...].sharding.spec == P(None, "model")


@pytest.mark.parametrize("move, needle", [
    (lambda v: jax.device_put(v, jax.devices()[0]), "up/bias on SingleDeviceSharding on "),
    (lambda v: np.asarray(v), "up/bias on no device"),
])
def test_a_model_partly_off_the_mesh_names_a_variable_of_each_placement(mesh, move, needle):
    model = placed("tensor", mesh)
    model.up.bias.set_value(move(model.up.bias.get_value()))
    with pytest.raises(ValueError) as err:
        gs.init_optimizer_sharded(model, optax.adam(1e-3), "tensor")
    message = str(err.value)
    assert "on 1 mesh(es) and 1 other placement(s)" in message and needle in message, message
    assert "up/kernel on mesh {'data': 4, 'model': 2}" in message, message

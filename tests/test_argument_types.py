"""The public API under wrong argument types: a ``TypeError``/``ValueError`` naming the value and the fix.

In-process, 8 simulated CPU devices (conftest); tiny modules.
"""

import jax
import numpy as np
import optax
import pytest
from flax import nnx

import gensbi_sharding as gs
from gensbi_sharding import checkpoint
from library_helpers import Block, mesh, model


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


@pytest.mark.parametrize("call, flag", [
    (lambda mesh: gs.init_sharded(lambda: nnx.Linear(2, 2, rngs=nnx.Rngs(0)), mesh, warn="no"), "warn"),
    (lambda mesh: gs.abstract_sharded(lambda: nnx.Linear(2, 2, rngs=nnx.Rngs(0)), mesh, warn="no"), "warn"),
    (lambda mesh: gs.host_to_global_array({"x": np.ones((8, 2))}, mesh=mesh, check_processes="no"), "check_processes")])
def test_a_flag_that_is_no_bool_is_refused(mesh, call, flag):
    # Was taken as truthy: warn="no" warned, check_processes="no" ran the collective.
    with pytest.raises(TypeError, match=rf"^{flag}='no' must be True or False$"):
        call(mesh)


@pytest.mark.parametrize("flag", ["warn", "async_save"])
def test_every_flag_names_a_long_value_whole(devices, tmp_path, flag):
    # Was "warn='no, do not warn about the fallbacks, n must be True or False" (its repr cut at 40 characters
    # inside its quote; async_save= at 60): check_processes= alone was fixed, three hand-written checks of one rule.
    value = "no, do not warn about the fallbacks, nor save in the background, this time"
    with pytest.raises(TypeError) as error:
        if flag == "warn":
            gs.init_sharded(lambda: nnx.Linear(2, 2, rngs=nnx.Rngs(0)), None, warn=value)
        else:
            checkpoint.CheckpointWriter(tmp_path / "ck", async_save=value)
    assert str(error.value) == f"{flag}={value!r} must be True or False"


def test_a_long_value_in_a_refusal_is_named_whole_not_cut_inside_its_quotes(devices):
    # Was "check_processes='no, do not compare the processes t must be True or False": the value's repr cut at 40
    # characters (format spec !r:.40), its quote left open; alike for a Plan's fields, a Rule's table, a spec entry.
    value = "no, do not compare the processes this time"
    with pytest.raises(TypeError) as error:
        gs.host_to_global_array({"x": np.ones((8, 1))}, mesh=gs.make_mesh(model_axis=2), check_processes=value)
    assert str(error.value) == f"check_processes={value!r} must be True or False"
    long = [f"a rule entry number {i}" for i in range(20)]  # many words: cut between two of them, said so
    with pytest.raises(ValueError) as error:
        gs.resolve_rule(long)
    said = str(error.value)
    assert said.startswith("rule must be a name in ") and " ...; e.g. {'embed': 'data'}" in said, said
    assert said.count("'") % 2 == 0, said


LONG = "no, do not take this one, it is a sentence about a value and not the value that was asked for"  # 90


@pytest.mark.parametrize("name, call", [
    ("tx", lambda m, mesh, ck, w: gs.init_optimizer_sharded(m, LONG)),
    ("wrt", lambda m, mesh, ck, w: gs.init_optimizer_sharded(m, optax.sgd(0.1), wrt=[LONG, 3.5])),
    ("directory", lambda m, mesh, ck, w: checkpoint.CheckpointWriter((LONG,))),
    ("init", lambda m, mesh, ck, w: gs.partitioned(LONG, ("embed",))),
    ("partition_axis", lambda m, mesh, ck, w: gs.constrain(np.ones(2), (None,), LONG)),
    ("got str", lambda m, mesh, ck, w: gs.constrain(LONG, (None,), gs.PartitionAxis.for_rule("fsdp", mesh), mesh)),
    ("key_sharding", lambda m, mesh, ck, w: checkpoint.restore(ck, {"a": np.ones(2)}, key_sharding=LONG)),
    ("abstract_state", lambda m, mesh, ck, w: checkpoint.restore(ck, LONG)),
    ("info", lambda m, mesh, ck, w: w.save(2, {"a": np.ones(2)}, jax.random.key(0), info=LONG)),
    ("info", lambda m, mesh, ck, w: w.save(2, {"a": np.ones(2)}, jax.random.key(0), info={LONG: object()})),
    ("state", lambda m, mesh, ck, w: w.save(2, LONG, jax.random.key(0))),
    ("key", lambda m, mesh, ck, w: w.save(2, {"a": np.ones(2)}, LONG)),
])
def test_every_refusal_names_a_long_value_whole(tmp_path, model, mesh, name, call):
    # Was "tx='no, do not take this one, it is a sentence about must be ..." (a repr cut at 40, 60 or 80 characters
    # by the format spec !r:.60, its quote left open; a dict cut mid-key): 13 places, now one helper (messages.shown).
    with checkpoint.CheckpointWriter(tmp_path / "ck") as writer:
        writer.save(1, {"a": np.ones(2)}, jax.random.key(0))
    with checkpoint.CheckpointWriter(tmp_path / "w") as writer, pytest.raises((TypeError, ValueError)) as error:
        call(model, mesh, tmp_path / "ck", writer)
    said = str(error.value)
    assert f"{name}" in said and repr(LONG) in said and said.count("'") % 2 == 0, said

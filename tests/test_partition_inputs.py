"""Rules and partition specs (``partition_spec_for``, ``PartitionAxis``, ``partitioned``, rule tables,
``logical_axes``) given odd shapes, tables and axes.

In-process, 8 simulated CPU devices (conftest).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from jax.sharding import PartitionSpec as P

import gensbi_sharding as gs
from library_helpers import Block, OddAnnotation, Small, _refusal, mesh, model


def test_a_partition_axis_given_lists_is_a_static_module_attribute_as_one_given_tuples():
    # PartitionAxis(batch_axis=["data"]) held by a Module: nnx.split (its graphdef hashes static attributes) raised
    # "unhashable type: 'list'", naming neither the field nor the fix.
    from flax import nnx

    mesh = gs.make_mesh(model_axis=2)

    class Block(nnx.Module):
        def __init__(self, pa):
            self.pa = pa
            self.w = nnx.Param(jnp.ones((4, 4)))

        def __call__(self, x):
            return gs.constrain(x @ self.w[...], ("batch", "heads"), self.pa)

    pa = gs.PartitionAxis(batch_axis=["data"], head_axis=["model"])
    assert hash(pa) == hash(gs.PartitionAxis(batch_axis=("data",), head_axis=("model",)))
    block = Block(pa)
    graphdef, _ = nnx.split(block)
    hash(graphdef)
    with gs.mesh_context(mesh):
        out = nnx.jit(lambda b, x: b(x))(block, jnp.ones((8, 4)))
    assert out.sharding.spec == P("data", "model")
    np.testing.assert_array_equal(np.asarray(out), np.full((8, 4), 4.0))


def test_logical_axes_of_something_no_variable_names_the_variable_to_pass(devices):
    # Was: AttributeError "'ArrayImpl' object has no attribute 'get_metadata'" for the value (model.up.kernel[...]).
    layer = nnx.Linear(2, 4, rngs=nnx.Rngs(0), kernel_init=gs.partitioned(nnx.initializers.lecun_normal(),
                                                                          ("embed", "mlp")))
    for wrong in (layer.kernel[...], np.ones(3), layer, ("embed", "mlp")):
        with pytest.raises(TypeError, match=rf"logical_axes_of takes an nnx.Variable, e.g. model.up.kernel, got a "
                                            rf"{type(wrong).__name__}: the annotation is the variable's metadata"):
            gs.logical_axes_of(wrong)
    assert gs.logical_axes_of(layer.kernel) == ("embed", "mlp") and gs.logical_axes_of(layer.bias) is None


@pytest.mark.parametrize("name, table, builtin", [
    ("replicated", {"embed": "data"}, True),  # was: every variable replicated, the table ignored without a word
    ("mine", {"embed": "data"}, True),  # was: warned as a contract rule ("sharding rule 'mine' is experimental")
    ("fsdp", dict(gs.RULES["fsdp"]), "no"),  # was: "no" taken as True
    (3, {"embed": "data"}, False)])  # was: labelled "rule 3"
def test_a_rule_built_directly_claiming_to_be_the_contracts_or_named_no_str_is_refused(devices, name, table, builtin):
    with pytest.raises(ValueError, match=r"Rule\(name=.*, builtin=.*\): name is a str, and builtin=True marks a "
                                         r"contract rule with RULES' own table: build those with resolve_rule\(name\)"):
        gs.Rule(name, table, builtin=builtin)
    # What resolve_rule and the harness build still is: the contract's own, and a table of one's own.
    assert gs.resolve_rule("fsdp") == gs.Rule("fsdp", dict(gs.RULES["fsdp"]), builtin=True)
    mesh, layer = gs.make_mesh(model_axis=2), nnx.Linear(8, 4, rngs=nnx.Rngs(0), kernel_init=gs.partitioned(
        nnx.initializers.lecun_normal(), ("embed", None)))
    assert gs.plan_shardings(layer, mesh, gs.Rule("replicated", {"embed": "data"})).specs["kernel"] == P("data", None)


def test_a_rule_built_directly_with_a_named_rules_own_table_is_that_rule(devices):
    # Was: gs.Rule("fsdp", dict(gs.RULES["fsdp"])) labelled "rule 'fsdp' with an edited table" in every warning, its
    # table unedited, and not warned as experimental, as resolve_rule("fsdp") is.
    rule = gs.Rule("fsdp", dict(gs.RULES["fsdp"]))
    assert rule == gs.resolve_rule("fsdp") and rule.builtin and rule.label == "rule 'fsdp'"
    layer = nnx.Linear(8, 4, rngs=nnx.Rngs(0), kernel_init=gs.partitioned(nnx.initializers.lecun_normal(),
                                                                           ("embed", None)),
                       bias_init=gs.partitioned(nnx.initializers.zeros_init(), (None,)))
    with pytest.warns(gs.ExperimentalRuleWarning, match=r"^sharding rule 'fsdp' is experimental"):
        gs.plan_shardings(layer, gs.make_mesh(model_axis=2), rule).warn()
    edited = gs.Rule("fsdp", {**dict(gs.RULES["fsdp"]), "mlp": "model"})  # an edited table stays named so
    assert not edited.builtin and edited.label == "rule 'fsdp' with an edited table"
    assert not gs.Rule("replicated", {"embed": "data"}).builtin


@pytest.mark.parametrize("shape", [8, None, "8", (8.0,), (-8,), (True,)])
def test_partition_spec_for_names_a_shape_that_is_no_sequence_of_sizes(devices, shape):
    # Was: TypeError "object of type 'int' has no len()" (8, None), "not all arguments converted during string
    # formatting" ('8'), and (8.0,) or (-8,) planned as P('data') as if a size.
    mesh = gs.make_mesh(model_axis=2)
    with pytest.raises(TypeError, match=r"^shape=.* must be a sequence of sizes \(int >= 0\), e\.g\. \(8,\) or "
                                        r"value\.shape$"):
        gs.partition_spec_for(("embed",), shape, "fsdp", mesh)
    # The forms it takes: a tuple, a list, NumPy integers, a zero size.
    for good in [(8,), [8], (np.int64(8),)]:
        assert gs.partition_spec_for(("embed",), good, "fsdp", mesh) == (P("data"), None)
    assert gs.partition_spec_for(("embed",), (0,), "fsdp", mesh) == (P("data"), None)


@pytest.mark.parametrize("init", [3, ("embed", "mlp")])
def test_partitioned_names_an_initializer_that_is_not_callable_before_any_layer_is_built(init):
    """``partitioned(3, names)`` (or the names passed first) was accepted, and building the layer raised Flax's
    "'int' object is not callable", naming neither the argument nor the fix."""
    with pytest.raises(TypeError, match=r"partitioned: init=.* must be an initializer, e\.g\. "
                                        r"nnx\.initializers\.lecun_normal\(\)"):
        gs.partitioned(init, ("embed", "mlp"))
    assert callable(gs.partitioned(nnx.initializers.lecun_normal(), ("embed", "mlp")))


@pytest.mark.parametrize("shape", [np.array((8, 16)), np.array((8, 16), dtype=np.int32), jnp.array((8, 16)),
                                   (np.int64(8), np.uint8(16))], ids=["int64", "int32", "jax", "numpy-ints"])
def test_partition_spec_for_takes_the_sizes_of_an_integer_array(devices, shape):
    # Was: TypeError "shape=array([ 8, 16]) must be a sequence of sizes", though np.array(x.shape) holds sizes.
    mesh = gs.make_mesh(model_axis=2)
    assert gs.partition_spec_for(("embed", "mlp"), shape, "fsdp", mesh) == (P("data", None), None)
    assert gs.partition_spec_for(("embed", "mlp"), shape, "tensor", mesh) == (P(None, "model"), None)
    # The sizes are read, not the array: one the mesh cannot split falls back, naming the size.
    assert gs.partition_spec_for(("embed",), np.array([6]), "fsdp", mesh) == (
        P(), "size 6 of logical axis 'embed' is not divisible by mesh axis 'data' of size 4; map 'embed' to None or "
        "to mesh axes of total size 2, or annotate this dimension None")


@pytest.mark.parametrize("size,fit", [
    # ['data'] of 8 and ['model'] of 1 make no size that divides 12: the sizes a mesh of 8 devices could give it
    (12, "; map 'embed' to None, or annotate this dimension None, or use a mesh with an axis of size 2 or 4 (here: "
         "data=8, model=1)"),
    (7, "; map 'embed' to None, or annotate this dimension None"),  # no split of 8 devices divides 7: None is the one fix
])
def test_a_size_the_mesh_axes_do_not_divide_names_the_splits_that_do(devices, size, fit):
    # Was: "size 12 of logical axis 'embed' is not divisible by mesh axis ('data', 'model') of size 8", naming no fix.
    assert gs.partition_spec_for(("embed",), (size,), {"embed": ["data", "model"]}, gs.make_mesh(model_axis=1)) == (
        P(), f"size {size} of logical axis 'embed' is not divisible by mesh axis ['data', 'model'] of size 8{fit}")


@pytest.mark.parametrize("shape", [np.array((8.0, 16.0)), np.array((True, True)), np.array((-8, 16)),
                                   np.ones((2, 2), dtype=int), np.array(8)])
def test_partition_spec_for_still_refuses_an_array_of_no_sizes(devices, shape):
    with pytest.raises(TypeError, match=r"(?s)^shape=.* must be a sequence of sizes \(int >= 0\), e\.g\. \(8,\) or "
                                        r"value\.shape$"):
        gs.partition_spec_for(("embed", "mlp"), shape, "fsdp", gs.make_mesh(model_axis=2))


@pytest.mark.parametrize("partition_axis", [gs.PartitionAxis(batch_axis=3), gs.PartitionAxis(batch_axis=()),
                                            gs.PartitionAxis(batch_axis=("data", "data")),
                                            gs.PartitionAxis(head_axis=["model", 1])])
def test_a_malformed_partition_axis_is_refused_without_a_mesh_as_on_one(devices, partition_axis):
    # Was: constrain(x, names, PartitionAxis(batch_axis=3)) returned x without a mesh, and raised on one: a model
    # built and tested on one device failed only once run on a mesh.
    x = jnp.ones((8, 4))
    with gs.mesh_context(gs.make_mesh(model_axis=2)):
        on_mesh = _refusal(lambda: gs.constrain(x, ("batch", None), partition_axis))
    assert on_mesh[0] is ValueError
    assert _refusal(lambda: gs.constrain(x, ("batch", None), partition_axis)) == on_mesh
    assert _refusal(lambda: jax.jit(lambda y: gs.constrain(y, ("batch", None), partition_axis))(x)) == on_mesh
    # A well-formed one naming axes no mesh has yet is still no constraint without a mesh.
    assert gs.constrain(x, ("batch", None), gs.PartitionAxis(batch_axis=("data", "model"))) is x


def test_none_in_a_partition_is_named_with_what_it_means_and_the_spec_to_give(devices):
    # Was: "partition tree PyTreeDef({'x': *, 'y': None}) does not match the host_arrays tree ...; give one
    # PartitionSpec per array": None, read by JAX as an empty subtree, was never named.
    mesh = gs.make_mesh(model_axis=1)
    batch = {"x": np.ones((8, 2), np.float32), "y": np.arange(8, dtype=np.float32)}
    with pytest.raises(ValueError) as err:
        gs.host_to_global_array(batch, partition={"x": P("data"), "y": None}, mesh=mesh)
    assert str(err.value) == (
        "partition tree PyTreeDef({'x': *, 'y': None}) does not match the host_arrays tree PyTreeDef({'x': *, 'y': *}); "
        "give one PartitionSpec per array (or per subtree); partition['y'] is None, which a pytree reads as no leaf, "
        "not as a spec: to replicate that array give PartitionSpec()")
    placed = gs.host_to_global_array(batch, partition={"x": P("data"), "y": P()}, mesh=mesh)  # the fix it names
    assert placed["y"].sharding.is_fully_replicated and placed["y"].tolist() == list(range(8))
    with pytest.raises(ValueError, match=r"; give one PartitionSpec per array \(or per subtree\); partition is None, "):
        gs.host_to_global_array(batch, partition=None, mesh=mesh)
    kept = gs.host_to_global_array({"x": batch["x"], "y": None}, partition={"x": P("data"), "y": None}, mesh=mesh)
    assert kept["y"] is None  # None where host_arrays has None too: the trees match, as before


def test_rule_tables_that_are_right_still_resolve():
    rule = gs.resolve_rule({"embed": "data", "mlp": ["data", "model"], "heads": None})
    assert rule.table == {"embed": "data", "mlp": ["data", "model"], "heads": None}


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


@pytest.mark.parametrize("table", [gs.RULES["fsdp"], "fsdp", gs.resolve_rule("fsdp"), dict(gs.RULES["fsdp"])])
def test_partition_spec_for_takes_every_rule_form_and_a_bare_name(mesh, table):
    # Was AttributeError "'tuple' object has no attribute 'get'" for RULES["fsdp"] itself (pairs), a name or a Rule.
    assert gs.partition_spec_for(("embed", None), (8, 3), table, mesh) == (P("data", None), None)
    # Was read one name per character: "annotation rank 5 != array rank 1".
    assert gs.partition_spec_for("embed", (8,), table, mesh) == (P("data"), None)


@pytest.mark.parametrize("value", ["", ["data", ""]])
def test_an_empty_mesh_axis_name_in_a_table_is_refused(mesh, value):
    # Was taken: every variable it covers fell back ("maps to mesh axis '', absent from the mesh"), warned per run.
    with pytest.raises(ValueError, match=r"rule table entry \{'embed': .*\}: a value must be a mesh axis name \(e\.g\. "
                                         r"'data' or 'model'\), a list of them, or None"):
        gs.shard_model_by_table(OddAnnotation("embed"), mesh, {"embed": value})


@pytest.mark.parametrize("empty", [(), []])
def test_for_rule_takes_an_empty_entry_as_plans_do(devices, empty):
    from gensbi_sharding import PartitionAxis, make_mesh, resolve_rule

    mesh = make_mesh(model_axis=2)
    table = {"heads": empty, "embed": "model"}
    assert resolve_rule(table).table == table  # plans accept it: the dimension stays unsplit
    # Was ValueError "rule table entry 'heads'=() must be None, a mesh axis name or a non-empty sequence".
    pa = PartitionAxis.for_rule(table, mesh)
    assert (pa.batch_axis, pa.head_axis, pa.hidden_state_axis, pa.generation_head_axis) == ("data", None, "model",
                                                                                               None)


def test_a_table_of_rules_passed_as_a_rule_names_one_rule_to_pass(devices):
    """gs.RULES itself (or {'fsdp': table}) as a rule: the message offered {'replicated': None}, which fixes nothing."""
    mesh = gs.make_mesh(model_axis=2)
    model = Small(nnx.Rngs(0))
    for wrong, name in ((gs.RULES, "replicated"), ({"fsdp": dict(gs.RULES["fsdp"])}, "fsdp")):
        for call in (lambda: gs.shard_model_by_table(model, mesh, wrong), lambda: gs.PartitionAxis.for_rule(wrong, mesh),
                     lambda: gs.plan_shardings(model, mesh, wrong)):
            with pytest.raises(ValueError, match=rf"key '{name}' is not a logical axis.*'{name}' names a rule: this is "
                                                 rf"a table of rules \(RULES itself\?\); pass one rule, e.g. '{name}' or "
                                                 rf"RULES\['{name}'\]") as error:
                call()
            assert f"{{'{name}': None}}" not in str(error.value)
    with pytest.warns(gs.ShardingFallbackWarning, match="no annotation"):  # down/kernel, and the biases
        gs.shard_model_by_table(model, mesh, gs.RULES["fsdp"])  # the fix given
    assert gs.sharding_of(model)["up/kernel"].spec == jax.sharding.PartitionSpec("data", None)


KNOWN = "embed, mlp, heads, vocab, in, out"


@pytest.mark.parametrize("typo, meant", [("mpl", "mlp"), ("embedd", "embed"), ("head", "heads")])
def test_a_misspelt_logical_axis_names_the_one_meant(mesh, typo, meant):
    # Was only "another name, e.g. a stacked-layer axis, can only be left unsplit: {'mpl': None}" (a table) and
    # "leave it unsplit: a rule table with {'embedd': None}" (an annotation): advice that, followed, leaves the
    # misspelt axis unsplit everywhere, where a letter fixes it.
    with pytest.raises(ValueError) as error:
        gs.shard_model_by_table(nnx.Linear(8, 8, rngs=nnx.Rngs(0)), mesh, {**dict(gs.RULES["tensor"]), typo: "model"})
    assert str(error.value) == (f"rule table key {typo!r} is not a logical axis; valid keys: {KNOWN} (did you mean "
                                f"{meant!r}? if not, another name, e.g. a stacked-layer axis, can only be left "
                                f"unsplit: {{{typo!r}: None}})")
    model = nnx.Linear(8, 8, rngs=nnx.Rngs(0), kernel_metadata=gs.axes(typo, "mlp"))
    assert gs.plan_shardings(model, mesh, "tensor").fallbacks["kernel"] == (
        f"unknown logical axis {typo!r} (known: {KNOWN}); did you mean {meant!r}? if not, to split the other "
        f"dimensions, leave it unsplit: a rule table with {{{typo!r}: None}}")


def test_a_name_near_no_logical_axis_gets_no_guess(mesh):
    with pytest.raises(ValueError, match=r"\(another name, e.g. a stacked-layer axis, can only be left unsplit: "
                                         r"\{'layers': None\}\)$"):
        gs.resolve_rule({"layers": "model"})
    model = nnx.Linear(8, 8, rngs=nnx.Rngs(0), kernel_metadata=gs.axes("batch", "mlp"))
    assert "did you mean" not in gs.plan_shardings(model, mesh, "tensor").fallbacks["kernel"]


def test_a_size_1_dimension_names_the_fix_for_that_variable_not_the_whole_table(mesh):
    # Was: "size 1 of logical axis 'mlp' is not divisible by mesh axis 'model' of size 2; map 'mlp' to None", whose
    # fix, followed, leaves every 'mlp' weight of the model unsplit to quiet one (1,) gain.
    reason = gs.partition_spec_for(("mlp",), (1,), dict(gs.RULES["tensor"]), mesh)
    assert reason == (P(), "size 1 of logical axis 'mlp' is not divisible by mesh axis 'model' of size 2; annotate "
                           "this dimension None: size 1 splits over no mesh axis (mapping 'mlp' to None would leave "
                           "every 'mlp' dimension unsplit)")
    assert gs.partition_spec_for(("mlp",), (3,), dict(gs.RULES["tensor"]), mesh)[1].endswith(  # size > 1: the table
        "is not divisible by mesh axis 'model' of size 2; map 'mlp' to None, or annotate this dimension None")


def test_a_size_the_mesh_does_not_divide_also_names_the_fix_for_that_variable(mesh):
    # Was: "size 6 of logical axis 'embed' is not divisible by mesh axis 'data' of size 4; map 'embed' to None or to
    # mesh axes of total size 2": only the table's fixes, which leave or re-split every 'embed' weight for one (6,)
    # vector; now it also names the local fix, as a size-1 dimension's reason does.
    model = nnx.Module()
    model.kernel = nnx.Param(jnp.ones((8, 16)), **gs.axes("embed", "mlp"))
    model.odd = nnx.Param(jnp.ones(6), **gs.axes("embed"))
    plan = gs.plan_shardings(model, mesh, "fsdp")
    assert plan.fallbacks == {"odd": "size 6 of logical axis 'embed' is not divisible by mesh axis 'data' of size 4; map "
                                     "'embed' to None or to mesh axes of total size 2, or annotate this dimension None"}
    model.odd = nnx.Param(jnp.ones(6), **gs.axes(None))  # the local fix, followed: no fallback, kernel still split
    plan = gs.plan_shardings(model, mesh, "fsdp")
    assert plan.fallbacks == {} and plan.specs["kernel"] == P("data", None)

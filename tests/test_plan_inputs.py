"""Plans (``plan_shardings``, ``Plan`` built by hand, ``Plan.warn``, ``fallback_message``) and the annotations
they read: bad fields and arguments named, odd annotations a fallback saying so.

In-process, 8 simulated CPU devices (conftest); tiny modules.
"""

import re
import warnings

import jax
import numpy as np
import pytest
from flax import nnx
from jax.sharding import PartitionSpec as P

import gensbi_sharding as gs
from library_helpers import OddAnnotation, Small, mesh


@pytest.mark.parametrize("field, value", [("specs", [("w", P())]), ("specs", None), ("fallbacks", None),
                                          ("shapes", None), ("shapes", [(8, 4)])])
def test_a_plan_built_by_hand_with_a_field_no_dict_is_named(devices, field, value):
    # Was: AttributeError ('list' object has no attribute 'items') at Plan(...), or later in place / warn ('NoneType'
    # object has no attribute 'get' / 'values'), the model half-checked.
    mesh = gs.make_mesh(model_axis=2)
    fields = {"specs": {"w": P("data")}, "fallbacks": {}, "shapes": {"w": (8, 4)}, field: value}
    with pytest.raises(TypeError, match=rf"Plan {field}=.* must be a dict keyed by variable path.*plan_shardings"):
        gs.Plan(mesh, "fsdp", **fields)


@pytest.mark.parametrize("key", ["sharding_names", "out_sharding"])
def test_a_flax_annotation_no_sequence_is_a_fallback_naming_it_not_a_crash(devices, key):
    # Was: shard_model / plan_shardings raised TypeError "'int' object is not iterable" from logical_axes_of for
    # nnx.Linear(..., kernel_metadata={"sharding_names": 5}); an entry of the wrong type in a tuple was already a
    # fallback naming it, as is a bare int now.
    mesh = gs.make_mesh(model_axis=2)
    model = nnx.Linear(8, 16, kernel_metadata={key: 5, "eager_sharding": False}, rngs=nnx.Rngs(0))
    assert gs.logical_axes_of(model.kernel) == (5,)
    with pytest.warns(gs.ShardingFallbackWarning, match=r"kernel \(annotation entry 5 \(int\) is no logical axis "
                                                        r"name: give one str \(e\.g\. 'embed'\) or None per dimension"):
        gs.shard_model(model, mesh, "fsdp")
    assert gs.sharding_of(model)["kernel"].spec == P()
    assert gs.partition_spec_for(5, (8,), "fsdp", mesh)[0] == P()


@pytest.mark.parametrize("stacklevel", ["2", 2.0, None])
def test_plan_warn_names_a_stacklevel_no_int_before_any_warning(devices, stacklevel):
    # Was: TypeError "can only concatenate str (not "int") to str" (or "'float' object cannot be interpreted as an
    # integer" from warnings.warn, after the ExperimentalRuleWarning was already given).
    mesh = gs.make_mesh(model_axis=2)
    model = nnx.Linear(8, 16, rngs=nnx.Rngs(0))  # unannotated: fallbacks to warn
    plan = gs.plan_shardings(model, mesh, "fsdp")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(TypeError, match=r"^stacklevel=.* must be an int, as for warnings\.warn: e\.g\. "
                                            r"stacklevel=2$"):
            plan.warn(stacklevel=stacklevel)
    assert caught == []
    with pytest.warns(gs.ShardingFallbackWarning):
        plan.warn(stacklevel=np.int64(2))


@pytest.mark.parametrize("field, value, message", [
    ("fallbacks", {"kernel": 3}, "Plan fallbacks['kernel']=3 must be a str, e.g. 'no annotation'"),
    ("shapes", {"kernel": 8}, "Plan shapes['kernel']=8 must be a tuple of sizes, e.g. (8, 16)"),
    ("shapes", {"kernel": None}, "Plan shapes['kernel']=None must be a tuple of sizes, e.g. (8, 16)")])
def test_a_plan_built_by_hand_with_a_value_of_another_type_is_named(devices, field, value, message):
    # Was: accepted; a reason 3 raised AttributeError ('int' object has no attribute 'startswith') in warn, a shape 8
    # TypeError ("'int' object is not iterable") in place.
    mesh = gs.make_mesh(model_axis=2)
    model = nnx.Linear(8, 16, rngs=nnx.Rngs(0))
    fields = {"specs": {"kernel": P(), "bias": P()}, "fallbacks": {}, "shapes": {}, field: value}
    with pytest.raises(TypeError) as err:
        gs.Plan(mesh, "fsdp", **fields)
    assert str(err.value) == message
    placed = gs.Plan(mesh, "fsdp", {"kernel": P("data"), "bias": P()}, {"bias": "no annotation"},
                     {"kernel": [8, 16], "bias": (16,)})  # a list, as a plan read back from JSON holds
    gs.place(model, placed)
    assert gs.sharding_of(model)["kernel"].spec == P("data")


@pytest.mark.parametrize("entry, shown", [
    (["embed"], "['embed'] (list)"), (("embed", "mlp"), "('embed', 'mlp') (tuple)"), (1, "1 (int)")])
def test_an_annotation_entry_that_is_no_name_falls_back_saying_so(mesh, entry, shown):
    # Was TypeError "unhashable type: 'list'" from shard_model; a tuple or int was "unknown logical axis" with the
    # fix "a rule table with {1: None}", which check_table refuses.
    model = OddAnnotation(entry)
    plan = gs.plan_shardings(model, mesh, "tensor")
    assert plan.specs["w"] == P()
    assert plan.fallbacks["w"] == (f"annotation entry {shown} is no logical axis name: give one str (e.g. 'embed') "
                                   f"or None per dimension, got {(entry, 'mlp')!r}")
    with pytest.warns(gs.ShardingFallbackWarning, match=r"w \(annotation entry"):
        gs.shard_model_by_table(model, mesh, dict(gs.RULES["tensor"]))


def linear():
    kernel_init = gs.partitioned(nnx.initializers.lecun_normal(), ("embed", "mlp"))
    return nnx.Linear(8, 8, rngs=nnx.Rngs(0), kernel_init=kernel_init)


@pytest.mark.parametrize("specs, error, message", [
    # Was JAX's "Resource axis: mdl of P(None, 'mdl') is not found in mesh" / "only valid for values of rank at least
    # 2" from device_put, naming no variable; AttributeError "'tuple' object has no attribute 'partitions'".
    ({"kernel": P(None, "mdl"), "bias": P()}, ValueError,
     "place: the plan splits kernel as P(None, 'mdl'), but mesh axis 'mdl' is not in the mesh ('data', 'model')"),
    ({"kernel": P(), "bias": P("data", "model")}, ValueError,
     "place: the plan splits bias as P('data', 'model'), but it has 2 entries for an array of shape (8,)"),
    ({"kernel": P(None, "model"), "bias": P("model")}, None, None),  # fits: placed
    ({"kernel": (None, "model"), "bias": P()}, TypeError,
     "Plan specs['kernel']=(None, 'model') must be a PartitionSpec, e.g. P(None, 'model')"),
])
def test_a_plan_built_by_hand_is_checked_naming_the_variable(mesh, specs, error, message):
    model = linear()
    if error is None:
        gs.place(model, gs.Plan(mesh, "tensor", specs, {}))
        assert model.kernel.get_value().sharding.spec == P(None, "model")
        return
    with pytest.raises(error) as caught:
        gs.place(model, gs.Plan(mesh, "tensor", specs, {}))
    assert str(caught.value).startswith(message)
    if error is ValueError:  # an abstract state too: an unfit spec was taken as it was, refused only by the compiler
        with pytest.raises(ValueError) as caught:
            gs.Plan(mesh, "tensor", specs, {}).abstract_state(nnx.eval_shape(linear))
        assert str(caught.value).startswith(message.replace("place:", "Plan.abstract_state:"))


def test_a_plan_built_by_hand_takes_a_rule_name(mesh):
    # Was AttributeError "'str' object has no attribute 'builtin'" from Plan.warn.
    plan = gs.Plan(mesh, "tensor", {"kernel": P(None, "model"), "bias": P()}, {"bias": "no annotation"})
    assert plan.rule == gs.resolve_rule("tensor")
    with pytest.warns(gs.ShardingFallbackWarning, match=r"bias \(no annotation\)"):
        with pytest.warns(gs.ExperimentalRuleWarning):  # a built-in splitting rule, as plan_shardings' plan warns
            plan.warn()
    with pytest.raises(TypeError, match=r"mesh must be a jax\.sharding\.Mesh or AbstractMesh, got None"):
        gs.Plan(None, "tensor", {}, {})


def _plan_with_two_fallbacks():
    from flax import nnx

    from gensbi_sharding import make_mesh, partitioned, plan_shardings

    layer = nnx.Linear(3, 6, rngs=nnx.Rngs(0),
                       kernel_init=partitioned(nnx.initializers.lecun_normal(), ("embed", "mlp")))
    return plan_shardings(nnx.state(layer), make_mesh(model_axis=2), {"embed": "model", "mlp": "model"})


@pytest.mark.parametrize("kwargs, bad", [({"max_paths": -1}, "max_paths must be a non-negative integer or None "
                                           r"\(all\), got -1"), ({"max_reasons": -2}, "max_reasons .* got -2"),
                                          ({"max_paths": 1.5}, "got 1.5"), ({"max_reasons": True}, "got True")])
def test_fallback_message_rejects_negative_or_non_integer_limits(devices, kwargs, bad):
    # Was: max_paths=-1 printed "and 2 more (no annotation)" with no path; max_reasons=-2 hid every reason.
    with pytest.raises(ValueError, match=bad):
        _plan_with_two_fallbacks().fallback_message(**kwargs)


def test_fallback_message_with_zero_paths_counts_each_reason(devices):
    message = _plan_with_two_fallbacks().fallback_message(max_paths=0)
    # Was ":  and 1 more (no annotation);  and 1 more (...)".
    assert ": 1 variable(s) (no annotation); 1 variable(s) (size 3 of logical axis 'embed'" in message
    assert " and " not in message.split(": ", 1)[1]


def _annotated_by_a_partition_spec() -> nnx.Linear:
    init = nnx.with_partitioning(nnx.initializers.lecun_normal(), P(None, "mlp"), eager_sharding=False)
    return nnx.Linear(4, 8, kernel_init=init, rngs=nnx.Rngs(0))


def test_a_partition_spec_annotation_is_planned_by_its_entries(devices):
    # Was (round 45's 'a bare 5 is one odd entry'): a PartitionSpec, no Sequence in this JAX, read as one entry,
    # the kernel replicated with "annotation entry P(None, 'mlp') (P) is no logical axis name".
    mesh = gs.make_mesh(model_axis=2)
    model = _annotated_by_a_partition_spec()
    assert gs.logical_axes_of(model.kernel) == (None, "mlp")
    assert gs.partition_spec_for(P(None, "mlp"), (4, 8), "tensor", mesh) == (P(None, "model"), None)
    plan = gs.plan_shardings(model, mesh, "tensor")
    assert plan.specs["kernel"] == P(None, "model") and "kernel" not in plan.fallbacks
    gs.shard_model(model, mesh, "tensor")  # in place
    assert model.kernel.get_value().sharding.spec == P(None, "model")
    # A bare int stays one odd entry, a fallback naming it (round 45's fix kept).
    assert gs.partition_spec_for(5, (8,), "tensor", mesh)[0] == P()


def test_a_hand_built_spec_naming_a_mesh_axis_twice_or_unconstrained_is_named_with_its_variable(devices):
    """A Plan built by hand: P('data', 'data') raised JAX's DuplicateSpecError naming no variable, P(('data', 'data'))
    was 'not divisible by ... of size 16', P(UNCONSTRAINED) a TypeError ('UnconstrainedSingleton' object is not
    iterable), in host_to_global_array's partition too; now each names the variable (leaf) and the fix."""
    P = jax.sharding.PartitionSpec
    mesh = gs.make_mesh(model_axis=2)
    model = Small(nnx.Rngs(0))
    plan = gs.plan_shardings(model, mesh, "fsdp")
    before = gs.sharding_of(model)
    for spec, why in ((P("data", "data"), "names mesh axis 'data' twice"), (P(("data", "data")), "'data' twice"),
                      (P(P.UNCONSTRAINED), "UNCONSTRAINED leaves a layout to jit's compiler.*give None")):
        bad = gs.Plan(mesh, "fsdp", {**plan.specs, "up/kernel": spec}, {})
        for call, name in ((lambda: gs.place(model, bad), "place"), (lambda: bad.abstract_state(model),
                                                                     "Plan.abstract_state")):
            with pytest.raises(ValueError, match=rf"{name}: the plan splits up/kernel as .*{why}.*fix that spec"):
                call()
        assert gs.sharding_of(model) == before  # nothing moved
    for spec in (P(P.UNCONSTRAINED), P("data", P.UNCONSTRAINED)):
        with pytest.raises(ValueError, match=r"for leaf \['x'\] holds PartitionSpec.UNCONSTRAINED.*give None"):
            gs.host_to_global_array({"x": np.ones((8, 8))}, mesh=mesh, partition={"x": spec})


@pytest.mark.parametrize("entry", [3, 2.5, b"data", ("data", 3), ("data", None)])
def test_a_spec_entry_naming_no_mesh_axis_is_named_with_its_variable(devices, entry):
    """A hand-built Plan or host_to_global_array partition holding P(3) raised "'int' object is not iterable" (P(2.5)
    too), P(b"data") was 'names mesh axis 97 twice ... use e.g. P((100, 97, 116),)' (its bytes read as axes); now each
    names the entry, its variable (leaf) and the fix, and nothing moves."""
    mesh = gs.make_mesh(model_axis=2)
    model = Small(nnx.Rngs(0))
    plan = gs.plan_shardings(model, mesh, "fsdp")
    before = gs.sharding_of(model)
    bad = gs.Plan(mesh, "fsdp", {**plan.specs, "up/kernel": P(entry)}, {})
    # ("data", 3) and ("data", None) said "names no mesh axis", naming 'data': now the entry's odd one out
    why = re.escape(f"PartitionSpec entry {entry!r} " + {
        ("data", 3): "holds 3, not a mesh axis name: give a mesh axis name (e.g. 'data')",
        ("data", None): "holds None inside a tuple, read as a mesh axis name: leave it out (('data',)), or give None "
                        "to leave it unsplit"}.get(
        entry, "names no mesh axis: give a mesh axis name (e.g. 'data')"))
    with pytest.raises(ValueError, match=rf"place: the plan splits up/kernel as .*{why}.*fix that spec"):
        gs.place(model, bad)
    assert gs.sharding_of(model) == before
    with pytest.raises(ValueError, match=rf"for leaf \['x'\]: {why}"):
        gs.host_to_global_array({"x": np.ones((8, 8))}, mesh=mesh, partition={"x": P(entry)})


def test_a_plan_on_an_abstract_mesh_is_the_meshs_plan_and_places_nothing(devices):
    # Was: TypeError "mesh must be a jax.sharding.Mesh, got AbstractMesh(...)": a plan needed devices, so a check
    # before JAX's backend starts (the harness's strict=true and memory checks, before any run folder) could not plan.
    from jax.sharding import AbstractMesh, AxisType

    layer = nnx.Linear(6, 16, rngs=nnx.Rngs(0),
                       kernel_init=gs.partitioned(nnx.initializers.lecun_normal(), ("embed", "mlp")))
    real = gs.plan_shardings(layer, gs.make_mesh(model_axis=2), "fsdp")
    abstract = gs.plan_shardings(layer, AbstractMesh((4, 2), ("data", "model"), axis_types=(AxisType.Auto,) * 2),
                                 "fsdp")
    assert (abstract.specs, abstract.fallbacks) == (real.specs, real.fallbacks)
    assert abstract.fallbacks == {"kernel": "size 6 of logical axis 'embed' is not divisible by mesh axis 'data' of "
                                            "size 4; map 'embed' to None or to mesh axes of total size 2, or "
                                            "annotate this dimension None",
                                 "bias": "no annotation"}
    assert abstract.fallback_message() == real.fallback_message()
    with pytest.raises(ValueError, match=r"^place got a plan on an AbstractMesh \(axes, no devices\): "
                                         r"plan on a Mesh$"):
        gs.place(layer, abstract)
    assert layer.kernel[...].sharding == jax.sharding.SingleDeviceSharding(jax.devices()[0])  # nothing moved


def test_plan_sharding_takes_the_paths_flax_and_jax_give_and_names_near_keys_on_a_miss(devices):
    # Was: plan.sharding(("up", "kernel")) (nnx.to_flat_state's key) and plan.sharding("up/kernal") raised a bare
    # KeyError naming only the path given; only the "a/b" string was found.
    mesh = gs.make_mesh(model_axis=2)
    model = Small(nnx.Rngs(0))
    plan = gs.plan_shardings(model, mesh, "fsdp")
    want = plan.sharding("up/kernel")
    assert want.spec == P("data", None)
    flat = dict(nnx.to_flat_state(nnx.state(model)))
    assert ("up", "kernel") in flat and plan.sharding(("up", "kernel")) == want
    assert plan.sharding(["up", "kernel"]) == want
    tree_paths = [path for path, _ in jax.tree_util.tree_flatten_with_path(nnx.state(model))[0]]
    by_tree = {jax.tree_util.keystr(p[:-1], simple=True, separator="/"): plan.sharding(p) for p in tree_paths}
    assert by_tree == {key: plan.sharding(key) for key in plan.specs} and by_tree["up/kernel"] == want
    with pytest.raises(KeyError, match=r"no variable planned at 'up/kernal'; nearest: up/kernel"):
        plan.sharding("up/kernal")
    with pytest.raises(KeyError, match=r"no variable planned at 'up/weight'; nearest: up/"):
        plan.sharding(("up", "weight"))


@pytest.mark.parametrize("odd", [3, None])
def test_plan_sharding_given_no_path_names_it_and_the_planned_paths(devices, odd):
    # Was: TypeError "'int' object is not subscriptable" (None: "'NoneType' object ..."), from Plan.sharding itself.
    plan = gs.plan_shardings(Small(nnx.Rngs(0)), gs.make_mesh(model_axis=2), "fsdp")
    with pytest.raises(KeyError, match=rf"no variable planned at {odd}; nearest: down/bias, down/kernel, up/bias"):
        plan.sharding(odd)


@pytest.mark.parametrize("odd, near", [({"up": "kernel"}, "up/kernel"), ({"up"}, "down/bias, down/kernel, up/bias")])
def test_plan_sharding_given_an_unhashable_non_path_names_it_and_the_planned_paths(devices, odd, near):
    # Was: TypeError "unhashable type: 'dict'" (a set: 'set') from Plan.sharding itself, as 3 was before c06832a.
    plan = gs.plan_shardings(Small(nnx.Rngs(0)), gs.make_mesh(model_axis=2), "fsdp")
    with pytest.raises(KeyError) as err:
        plan.sharding(odd)
    assert err.value.args == (f"Plan.sharding: no variable planned at {odd!r}; nearest: {near}",)


def test_a_0d_parameter_without_annotation_is_no_fallback(mesh):
    # Was: "1 variable(s) replicated instead of split ...: temperature (no annotation)", for a scalar nothing splits
    # (describe's "largest replicated" already left it out); a 1-element vector unannotated still falls back.
    class Scaled(nnx.Module):
        def __init__(self):
            self.temperature = nnx.Param(np.array(0.5, np.float32))
            self.gain = nnx.Param(np.ones((1,), np.float32))

    model = Scaled()
    plan = gs.plan_shardings(model, mesh, "fsdp")
    assert plan.fallbacks == {"gain": "no annotation"}
    assert plan.specs == {"temperature": P(), "gain": P()}
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        gs.shard_model(model, mesh, "fsdp")
    messages = [str(w.message) for w in record if w.category is gs.ShardingFallbackWarning]
    assert messages == ["1 variable(s) replicated instead of split under rule 'fsdp' on mesh {'data': 4, 'model': 2}: "
                        "gain (no annotation)"]
    assert model.temperature.get_value().sharding.is_fully_replicated and float(model.temperature.get_value()) == 0.5


def _advice(message: str) -> list:
    """The specs a spec-entry refusal tells its reader to give instead, as PartitionSpecs."""
    if left := re.search(r"leave it out \((.*)\), or give None", message):
        return [P(eval(left[1])), P(None)]  # noqa: S307 (the message's own repr of an entry)
    if use := re.search(r"use e\.g\. (P\(.*\))$", message):
        return [eval(use[1], {"P": P})]  # noqa: S307
    assert "give a mesh axis name (e.g. 'data'), a tuple of them, or None" in message, message
    return [P("data"), P(("data",)), P(None)]


@pytest.mark.parametrize("entry", [(None, 3), ("data", None, 3), (None, "data", "data"), ("data", None, "data"),
                                   (None, "data"), ("data", "data"), 3, ("data", 3)])
def test_a_refused_spec_entry_gives_advice_that_passes_when_followed(devices, entry):
    """host_to_global_array(x, partition=P((None, 3))) said 'leave it out ((3,))', and P((3,)) was refused in turn
    (names no mesh axis); P((None, "data", "data")) said 'leave it out (("data", "data"))', refused as "data" twice.
    Now the advice is a spec that places."""
    mesh, x = gs.make_mesh(model_axis=2), np.ones((8, 4), np.float32)
    with pytest.raises(ValueError, match="PartitionSpec") as refused:
        gs.host_to_global_array(x, mesh=mesh, partition=P(entry))
    for spec in _advice(str(refused.value)):
        assert gs.host_to_global_array(x, mesh=mesh, partition=spec).sharding.spec == spec


@pytest.mark.parametrize("entry", [(None, 3), (None, "data"), ("data", "data"), (), 3, [None, "data"]])
def test_a_refused_partition_axis_or_rule_value_gives_advice_that_passes(devices, entry):
    """PartitionAxis fields and rule table values refuse the entries host_to_global_array does; their examples place."""
    mesh = gs.make_mesh(model_axis=2)
    with pytest.raises(ValueError, match=r"e\.g\. 'data' or \('data', 'model'\)|list each mesh axis once"):
        gs.PartitionAxis(hidden_state_axis=entry).resolve(mesh)
    for fix in ("data", ("data", "model"), None):
        assert gs.PartitionAxis(hidden_state_axis=fix).resolve(mesh).hidden_state_axis == fix
    if entry != ():  # () is a rule table's unsplit, as P(())
        with pytest.raises(ValueError, match=r"rule table entry .*(a mesh axis name \(e\.g\. 'data' or 'model'\), a "
                                             r"list of them, or None|list each once: \{'embed': 'data'\})"):
            gs.resolve_rule({"embed": entry})
        for fix in ("data", "model", ["data", "model"], None):
            assert gs.resolve_rule({"embed": fix}).table["embed"] == fix

"""``constrain`` (activations) given odd meshes and bad names: inside ``shard_map``, outside ``jit``, on explicit
and mixed axis types.

In-process, 8 simulated CPU devices (conftest).
"""

import re
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P

import gensbi_sharding as gs
from library_helpers import mesh


@pytest.mark.parametrize("manual", [None, {"data"}])
def test_constrain_inside_shard_map_leaves_its_manual_axes_and_pins_the_rest(manual):
    # Inside shard_map x is one device's block, already split over the Manual axes: constraining it over them
    # raised "can only refer to Auto axes", and a block too small for them warned of a fallback that was none.
    mesh = gs.make_mesh(model_axis=2)
    pa = gs.PartitionAxis(hidden_state_axis="model") if manual else gs.PartitionAxis.for_rule("tensor", mesh)
    x = jnp.arange(32 * 4 * 6, dtype=jnp.float32).reshape(32, 4, 6)

    def body(block, mesh_arg=None):
        return gs.constrain(block, ("batch", None, "hidden"), pa, mesh_arg) * 2

    kwargs = {} if manual is None else {"axis_names": manual}
    for fn in (body, lambda b: body(b, mesh), lambda b: body(b[:1], mesh)):
        mapped = jax.jit(jax.shard_map(fn, mesh=mesh, in_specs=P("data"), out_specs=P("data"), **kwargs))
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no fallback: nothing was left unsplit that could be split
            with gs.mesh_context(mesh):
                out = mapped(x)
        rows = out.shape[0]  # 32, or 4 where each block kept one row
        expected = 2 * np.asarray(x).reshape(4, -1, 4, 6)[:, :rows // 4].reshape(rows, 4, 6)
        np.testing.assert_array_equal(np.asarray(out), expected)
        if manual:  # the Auto axis "model" still pins the hidden dimension
            assert out.sharding.spec == P("data", None, "model")


@pytest.mark.parametrize("types", [("Explicit", "Auto"), ("Auto", "Explicit"), ("Explicit", "Explicit")])
@pytest.mark.parametrize("rule, expected", [("fsdp", P("data", None)), ("tensor", P("data", "model"))])
def test_constrain_outside_jit_on_a_mesh_of_both_axis_types_places_every_axis(devices, types, rule, expected):
    # Was, outside jit on a mesh of Explicit and Auto axes: the reshard of the Explicit axes, then a sharding constraint
    # of the Auto ones that undid it: ("batch", "heads") under fsdp came back P(None, None), under tensor P(None,
    # 'model') (or P('data', None)), with XLA's "Involuntary full rematerialization".
    mesh = jax.make_mesh((4, 2), ("data", "model"), axis_types=tuple(getattr(AxisType, t) for t in types))
    pa = gs.PartitionAxis.for_rule(rule, mesh)
    x = jnp.arange(32.0).reshape(8, 4)
    outside = gs.constrain(x, ("batch", "heads"), pa, mesh)
    with gs.mesh_context(mesh):
        active = gs.constrain(x, ("batch", "heads"), pa)
        inside = jax.jit(lambda v: gs.constrain(v, ("batch", "heads"), pa))(x)
    for y in (outside, active, inside):
        assert y.sharding.is_equivalent_to(NamedSharding(mesh, expected), 2)
        np.testing.assert_array_equal(np.asarray(y), np.asarray(x))


def test_constrain_outside_jit_moves_an_array_committed_to_one_device_under_the_active_mesh(devices):
    # Was, with the mesh active (mesh_context) and no mesh argument: with_sharding_constraint's TypeError "The sharding
    # on the input must be a `NamedSharding` since the target sharding has an `AbstractMesh` in it" for an array
    # committed to one device (jax.device_put(x, device)); a NumPy x was placed.
    mesh = gs.make_mesh(model_axis=2)
    pa, x = gs.PartitionAxis.for_rule("tensor", mesh), jnp.arange(32.0).reshape(8, 4)
    with gs.mesh_context(mesh):
        for given in (jax.device_put(x, jax.devices()[5]), np.asarray(x)):
            y = gs.constrain(given, ("batch", "heads"), pa)
            assert y.sharding.is_equivalent_to(NamedSharding(mesh, P("data", "model")), 2)
            np.testing.assert_array_equal(np.asarray(y), np.asarray(x))


@pytest.mark.parametrize("names, message", [
    ("batch", r"activation names 'batch' must be a sequence, one per dimension: e\.g\. \('batch',\)"),
    (("batch",), r"activation names \('batch',\) have 1 entries for an array of shape \(8, 4\)"),
    (("batch", "embed"), r"unknown activation name 'embed'; known names: batch, sequence"),
    ((1, None), r"unknown activation name 1; known names")])
def test_constrain_without_a_mesh_names_bad_activation_names(devices, names, message):
    # Was: without a mesh (one device, a dry test of the model) constrain returned x for any names: the model's typo
    # surfaced only once it ran on a mesh.
    x = jnp.ones((8, 4))
    with pytest.raises(ValueError, match=message):
        gs.constrain(x, names, gs.PartitionAxis())
    with pytest.raises(ValueError, match=message):
        jax.jit(lambda v: gs.constrain(v, names, gs.PartitionAxis()))(x)
    assert gs.constrain(x, ("batch", None), gs.PartitionAxis()) is x  # good names: x itself, as before
    with pytest.raises(ValueError, match=message):  # no PartitionAxis: no constraint, the names checked all the same
        gs.constrain(x, names, None)
    assert gs.constrain(x, ("batch", None), None) is x


def test_constrain_names_bad_names_where_for_rule_gives_none(devices):
    # Was: PartitionAxis.for_rule(rule, None), a model's partition_axis in a run without a mesh (one device, mesh=none),
    # is None, and constrain returned x for any names: a typo passed there and failed once the model ran on a mesh.
    partition_axis = gs.PartitionAxis.for_rule("tensor", None)
    assert partition_axis is None
    with pytest.raises(ValueError, match=r"unknown activation name 'hiden'; did you mean 'hidden'\? if not, known names"):
        jax.jit(lambda v: gs.constrain(v, ("batch", "hiden"), partition_axis))(jnp.ones((8, 4)))
    with pytest.raises(ValueError, match=r"activation names \('batch',\) have 1 entries for an array of shape \(\)"):
        gs.constrain(3.0, ("batch",), partition_axis)  # a Python scalar: shape ()
    assert gs.constrain(3.0, (), partition_axis) == 3.0  # returned as given, as before


def test_a_numpy_scalar_constrain_cannot_place_unchanged_is_refused_as_its_0d_array(devices):
    # Was: constrain(np.int64(2**40), (), pa, mesh) returned Array(0, int32) without a word (x64 off), while
    # np.asarray(np.int64(2**40)) was refused: a NumPy scalar is checked as the 0-d array it is a value of.
    mesh = gs.make_mesh(model_axis=2)
    for x in (np.int64(2**40), np.asarray(np.int64(2**40))):
        with pytest.raises(ValueError, match=r"constrain: x \(shape \(\)\) holds 1099511627776 \(int64\), beyond int32.*"
                                             r"silently \(to 0\)"):
            gs.constrain(x, (), gs.PartitionAxis(), mesh)
    assert int(gs.constrain(np.int64(2**31 - 1), (), gs.PartitionAxis(), mesh)) == 2**31 - 1


def test_a_name_about_as_close_to_several_activation_names_names_them_all(devices):
    # Was: "did you mean 'sequence'?" for 'q_sequence', though 'query_sequence' (meant) is about as close: one guess
    # chosen of several alike. A name close to one alone still gets that one.
    with pytest.raises(ValueError, match=r"unknown activation name 'q_sequence'; did you mean 'sequence', "
                                         r"'query_sequence' or 'key_sequence'\? if not, known names"):
        gs.constrain(jnp.ones((8, 4, 2)), ("batch", "q_sequence", "hidden"), gs.PartitionAxis())
    with pytest.raises(ValueError, match=r"unknown activation name 'hiden'; did you mean 'hidden'\? if not, known"):
        gs.constrain(jnp.ones((8, 4)), ("batch", "hiden"), gs.PartitionAxis())


def test_a_mesh_axis_typo_is_named_on_a_mesh_with_an_axis_name_that_is_no_str(devices):
    # Was: TypeError "object of type 'int' has no len()" from difflib, for the mesh's axis named 1.
    mesh = jax.sharding.Mesh(np.array(devices[:4]).reshape(2, 2), ("data", 1))
    with pytest.raises(ValueError, match=r"head_axis='dat' names mesh axis 'dat', but the mesh has axes \('data', 1\); "
                                         r"did you mean 'data'\? if not, use one of them"):
        gs.PartitionAxis(head_axis="dat").resolve(mesh)
    assert gs.rules.typo_of(1, ("data", 1)) == "" and gs.rules.typo_of("dat", (1, 2)) == ""


@pytest.mark.parametrize("entry", [["batch"], ("batch", "heads"), {"batch"}, 0])
def test_constrain_names_an_activation_name_entry_that_is_no_str(devices, entry):
    # Was: TypeError "unhashable type: 'list'" (or 'set') from the names' lookup, naming neither the entry nor the fix,
    # on a mesh and without one; an int was already "unknown activation name 0".
    mesh, x = gs.make_mesh(model_axis=2), jnp.ones((8, 4))
    partition_axis = gs.PartitionAxis.for_rule("tensor", mesh)
    message = rf"^unknown activation name {re.escape(repr(entry))}; known names: batch, .* \(or None for an unsplit"
    for where in (mesh, None):
        with pytest.raises(ValueError, match=message):
            gs.constrain(x, (entry, None), partition_axis, where)
    with pytest.raises(ValueError, match=message):
        jax.jit(lambda y: gs.constrain(y, (entry, None), partition_axis, mesh))(x)
    assert gs.constrain(x, ("batch", None), partition_axis, mesh).sharding.spec == P("data", None)


def test_constrain_names_an_activation_that_is_no_array(mesh):
    # Was AttributeError "'list' object has no attribute 'shape'".
    with pytest.raises(TypeError, match=r"^constrain takes an array, got list \[\[1\.0, 2\.0\]\]; pass "
                                        r"jnp\.asarray\(x\)$"):
        gs.constrain([[1.0, 2.0]], ("batch", None), gs.PartitionAxis(), mesh)
    assert gs.constrain(np.ones((8, 2)), ("batch", None), gs.PartitionAxis(), mesh).sharding.spec == P("data", None)


@pytest.mark.parametrize("where", ["mesh=", "mesh_context + jit"])
def test_constrain_moves_explicit_mesh_axes(devices, where):
    import jax
    import jax.numpy as jnp
    from jax.sharding import AxisType, NamedSharding, PartitionSpec as P

    from gensbi_sharding import PartitionAxis, constrain, mesh_context

    mesh = jax.make_mesh((4, 2), ("data", "model"), axis_types=(AxisType.Explicit,) * 2)
    x = jax.device_put(jnp.arange(64.0).reshape(8, 2, 4), NamedSharding(mesh, P("data")))
    pa = PartitionAxis.for_rule("tensor", mesh)
    # Was: ValueError "can only refer to Auto axes" (mesh=) or AssertionError "acts as an assert" (under jit).
    if where == "mesh=":
        y = constrain(x, ("batch", None, "heads"), pa, mesh)
    else:
        with mesh_context(mesh):
            y = jax.jit(lambda v: constrain(v, ("batch", None, "heads"), pa))(x)
    assert y.sharding.spec == P("data", None, "model")
    assert (jax.device_get(y) == jax.device_get(x)).all()


def test_constrain_on_a_mesh_mixing_explicit_and_auto_axes_under_jit(devices):
    import jax
    import jax.numpy as jnp
    from jax.sharding import AxisType, NamedSharding, PartitionSpec as P

    from gensbi_sharding import PartitionAxis, constrain, mesh_context

    mesh = jax.make_mesh((4, 2), ("data", "model"), axis_types=(AxisType.Explicit, AxisType.Auto))
    x = jax.device_put(jnp.ones((8, 4)), NamedSharding(mesh, P()))
    with mesh_context(mesh):
        step = jax.jit(lambda v: constrain(v, ("batch", "heads"), PartitionAxis()))
        assert step(x).sharding.spec == P("data", "model")


def test_constrain_inside_jit_given_the_active_layout_in_another_device_order_names_both_orders():
    # Was JAX's "Received incompatible devices for jitted computation ... sharding_constraint inside jit with device
    # ids [6, 7, 4, 5, 2, 3, 0, 1] ... (constrain)", naming no fix: a trace shows the meshes' layout, the same.
    active = gs.make_mesh(model_axis=2)
    given = jax.sharding.Mesh(np.asarray(active.devices)[::-1], active.axis_names, axis_types=active.axis_types)
    pa, x = gs.PartitionAxis.for_rule("tensor", given), jnp.ones((8, 4, 6))
    with gs.mesh_context(active):
        with pytest.raises(ValueError) as error:
            jax.jit(lambda y: gs.constrain(y, ("batch", None, "heads"), pa, given))(x)
        assert str(error.value) == (
            "constrain under a JAX transformation (jax.jit, jax.grad, ...) was given mesh {'data': 4, 'model': 2} on "
            "devices [6, 7, 4, 5, 2, 3, 0, 1] while that layout on devices [0, 1, 2, 3, 4, 5, 6, 7] is active "
            "(jax.set_mesh or mesh_context), the one the step is traced on: pass that one, or call the step under "
            "this one: `with mesh_context(mesh):`")
        traced = jax.jit(lambda y: gs.constrain(y, ("batch", None, "heads"), pa, active))(x)
        assert traced.sharding.spec == P("data", None, "model")


def test_constrain_inside_jit_given_a_mesh_other_than_the_active_one_names_both_meshes():
    # Was JAX's "Received incompatible devices for jitted computation ... sharding_constraint inside jit with device
    # ids [0, ..., 7] ... (constrain)", naming no fix; outside jit it moves x onto the mesh given, as before.
    given, active = gs.make_mesh(model_axis=2), gs.make_mesh(jax.devices()[:4], model_axis=2)
    pa, x = gs.PartitionAxis.for_rule("tensor", given), jnp.ones((8, 4, 6))
    with gs.mesh_context(active):
        with pytest.raises(ValueError) as error:
            jax.jit(lambda y: gs.constrain(y, ("batch", None, "heads"), pa, given))(x)
        assert str(error.value).startswith("constrain under a JAX transformation (jax.jit, jax.grad, ...) was given "
                                           "mesh {'data': 4, 'model': 2} while mesh {'data': 2, 'model': 2} is active "
                                           "(jax.set_mesh or mesh_context)")
        assert gs.constrain(x, ("batch", None, "heads"), pa, given).sharding.spec == P("data", None, "model")
        traced = jax.jit(lambda y: gs.constrain(y, ("batch", None, "heads"), pa))(x)  # mesh=None: the active one
        assert traced.sharding.mesh.shape == active.shape and traced.sharding.spec == P("data", None, "model")


def test_constrain_inside_jit_places_an_array_that_is_no_tracer():
    # Was: a NumPy array or a jax.Array closed over (a constant of the step, e.g. a table kept on the Module) came back
    # replicated, P(), on a mesh of Auto axes (make_mesh's), without a word: jax.device_put in a trace places nothing.
    mesh = gs.make_mesh(model_axis=2)
    pa, table = gs.PartitionAxis.for_rule("tensor", mesh), np.arange(192.0, dtype=np.float32).reshape(8, 6, 4)
    for given in (table, jnp.asarray(table)):
        for where in (None, mesh):
            with gs.mesh_context(mesh):
                y = jax.jit(lambda: gs.constrain(given, ("batch", "heads", None), pa, where))()
            assert y.sharding.is_equivalent_to(NamedSharding(mesh, P("data", "model")), 3)
            np.testing.assert_array_equal(np.asarray(y), table)


def test_a_mesh_entered_by_with_mesh_is_the_active_one_for_constrain_and_host_to_global_array():
    # Was, inside `with mesh:` (JAX's deprecated form, on which its own with_sharding_constraint(x, P('data')) splits):
    # constrain(x, names, pa) returned x unplaced, in jit and outside it, without a word; host_to_global_array(batch)
    # said "no mesh is active".
    mesh = gs.make_mesh(model_axis=2)
    pa, x = gs.PartitionAxis.for_rule("tensor", mesh), jnp.arange(192.0).reshape(8, 6, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # JAX's, for `with mesh:`
        with mesh:
            outside = gs.constrain(x, ("batch", "heads", None), pa)
            inside = jax.jit(lambda y: gs.constrain(y, ("batch", "heads", None), pa))(x)
            batch = gs.host_to_global_array({"x": np.ones((8, 2), np.float32)})
    for y in (outside, inside):
        assert y.sharding.is_equivalent_to(NamedSharding(mesh, P("data", "model")), 3)
        np.testing.assert_array_equal(np.asarray(y), np.asarray(x))
    assert batch["x"].sharding == NamedSharding(mesh, P(("data", "model")))
    assert gs.constrain(x, ("batch", "heads", None), pa) is x  # no mesh entered: x itself, as before


def test_for_rule_takes_the_abstract_mesh_a_jitted_call_reads():
    # Was TypeError "mesh must be a jax.sharding.Mesh or None, got AbstractMesh(...); build one with make_mesh(...)"
    # for PartitionAxis.for_rule(rule, jax.sharding.get_abstract_mesh()), the mesh a Module's __call__ reads in jit
    # (get_mesh() refuses there); it reads only the mesh's axes. Without a mesh that mesh is empty: None, as for None.
    mesh, x = gs.make_mesh(model_axis=2), jnp.arange(32.0).reshape(8, 4)
    assert gs.PartitionAxis.for_rule("tensor", mesh.abstract_mesh) == gs.PartitionAxis.for_rule("tensor", mesh)
    assert gs.batch_axes(mesh.abstract_mesh) == ("data",)

    def step(y):
        return gs.constrain(y, ("batch", "heads"), gs.PartitionAxis.for_rule("tensor", jax.sharding.get_abstract_mesh()))

    with gs.mesh_context(mesh):
        y = jax.jit(step)(x)
    assert y.sharding.is_equivalent_to(NamedSharding(mesh, P("data", "model")), 2)
    np.testing.assert_array_equal(np.asarray(y), np.asarray(x))
    assert gs.PartitionAxis.for_rule("tensor", jax.sharding.get_abstract_mesh()) is None  # no mesh active
    np.testing.assert_array_equal(np.asarray(jax.jit(step)(x)), np.asarray(x))


def test_for_rule_of_the_empty_abstract_mesh_under_with_mesh_is_that_meshs():
    # Was None (no constraint, without a word) for for_rule(rule, jax.sharding.get_abstract_mesh()) under JAX's
    # deprecated `with mesh:`, which JAX's abstract mesh does not show, while constrain places on that mesh there.
    mesh, x = gs.make_mesh(model_axis=2), jnp.arange(32.0).reshape(8, 4)

    def step(y):
        return gs.constrain(y, ("batch", "heads"), gs.PartitionAxis.for_rule("tensor", jax.sharding.get_abstract_mesh()))

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # JAX's, for `with mesh:`
        with mesh:
            outside = gs.PartitionAxis.for_rule("tensor", jax.sharding.get_abstract_mesh())
            y = jax.jit(step)(x)
    assert outside == gs.PartitionAxis.for_rule("tensor", mesh)
    assert y.sharding.is_equivalent_to(NamedSharding(mesh, P("data", "model")), 2)
    np.testing.assert_array_equal(np.asarray(y), np.asarray(x))


@pytest.mark.slow
@pytest.mark.parametrize("transform", ["grad", "vmap", "jvp"])
def test_constrain_under_an_eager_transformation_places_on_the_active_mesh(transform):
    # Was, under mesh_context with no jit around: jax.grad / vmap / jvp of a function calling constrain raised JAX's
    # "The sharding on the input must be a `NamedSharding` since the target sharding has an `AbstractMesh` in it":
    # the tracer's value sits on one device, the constraint named only the abstract mesh.
    mesh = gs.make_mesh(model_axis=2)
    pa = gs.PartitionAxis.for_rule("tensor", mesh)
    x = jnp.arange(8 * 4 * 6, dtype=jnp.float32).reshape(8, 4, 6)
    names = ("batch", None, "heads")
    with gs.mesh_context(mesh):
        if transform == "grad":
            out = jax.grad(lambda v: (gs.constrain(v, names, pa) ** 2).sum())(x)
            expected, spec = 2 * np.asarray(x), P("data", None, "model")
        elif transform == "vmap":  # per row: ("length", "heads")
            out = jax.vmap(lambda v: gs.constrain(v, names[1:], pa) * 3)(x)
            expected, spec = 3 * np.asarray(x), P(None, None, "model")
        else:
            out = jax.jvp(lambda v: gs.constrain(v, names, pa), (x,), (2 * x,))[1]
            expected, spec = 2 * np.asarray(x), P("data", None, "model")
    np.testing.assert_array_equal(np.asarray(out), expected)
    if transform != "grad":  # the gradient's layout is the transpose's: the value is what the constraint must keep
        assert out.sharding.is_equivalent_to(NamedSharding(mesh, spec), 3)


@pytest.mark.parametrize("call, said", [
    (lambda mesh: gs.constrain(jnp.ones((8, 4)), ("batch", "hiden"), gs.PartitionAxis(), mesh),
     "unknown activation name 'hiden'; did you mean 'hidden'? if not, known names: batch, sequence,"),
    (lambda mesh: gs.PartitionAxis(head_axis="modle").resolve(mesh),
     "head_axis='modle' names mesh axis 'modle', but the mesh has axes ('data', 'model'); did you mean 'model'? if "
     "not, use one of them, a tuple of them, or None"),
    (lambda mesh: gs.resolve_mesh({"devices": None, "modelaxis": 2}),
     "unknown mesh spec key 'modelaxis'; did you mean 'model_axis'? if not, accepted keys: ('devices', 'model_axis')"),
    (lambda mesh: gs.host_to_global_array({"x": np.zeros((8, 1))}, partition="ful", mesh=mesh),
     "unknown partition 'ful'; did you mean 'full'? if not, choose one of ['full', 'data', 'replicated'] or pass"),
    (lambda mesh: gs.constrain(jnp.ones((8, 4)), ("batch", "width"), gs.PartitionAxis(), mesh),  # far: no guess
     "unknown activation name 'width'; known names: batch,"),
])
def test_a_misspelt_name_in_a_closed_set_is_answered_with_the_one_meant(mesh, call, said):
    # Was "unknown activation name 'hiden'; known names: ..." (and alike for a PartitionAxis's mesh axis, a mesh spec's
    # key, host_to_global_array's partition): the known names listed, the one meant not guessed, as rules.typo_of
    # guesses a logical axis.
    with pytest.raises(ValueError) as error:
        call(mesh)
    assert said in str(error.value), str(error.value)


@pytest.mark.parametrize("heads, fix, spec", [(("data", "model"), "head_axis='model' splits it", P("data", None, "model")),
                                              (("data",), "head_axis=None leaves it unsplit without this warning",
                                               P("data"))])
def test_a_dimension_whose_axes_split_an_earlier_one_names_the_value_that_works(devices, heads, fix, spec):
    # Was, launch.py experiment=quick model=transformer 'activation.head_axis=[data,model]': "... left unsplit ...:
    # heads (mesh axes ('data', 'model') already split an earlier dimension)", no value named that works.
    on = gs.make_mesh(model_axis=2)
    axes = gs.PartitionAxis(batch_axis="data", head_axis=heads)
    with pytest.warns(gs.ShardingFallbackWarning) as warned:
        gs.constrain(jnp.zeros((8, 4, 4)), ("batch", None, "heads"), axes, on)
    assert str(warned[0].message).endswith(f": heads (mesh axes {heads} already split an earlier dimension; {fix})")
    fixed = axes._replace(head_axis="model" if "'model'" in fix else None)
    with warnings.catch_warnings():
        warnings.simplefilter("error", gs.ShardingFallbackWarning)  # the value named: no warning, split as said
        out = gs.constrain(jnp.zeros((8, 4, 4)), ("batch", None, "heads"), fixed, on)
    assert out.sharding.is_equivalent_to(NamedSharding(on, spec), 3)

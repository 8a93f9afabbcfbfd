"""The library broken with bad and odd-but-valid input, round 44: a step no integer given to ``maybe_save``,
a ``Plan`` built by hand with a field no dict, ``constrain`` outside jit on a mesh of both axis types.

In-process, 8 simulated CPU devices (conftest); tiny arrays and models."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P

import gensbi_sharding as gs
from gensbi_sharding.checkpoint import CheckpointWriter


@pytest.mark.parametrize("every", [0, 2])
@pytest.mark.parametrize("step", ["4", "3", None, 2.0, -2, jnp.array(4.0)])
def test_a_step_no_integer_is_named_by_due_and_maybe_save_whatever_every(tmp_path, devices, every, step):
    # Was: maybe_save("4", ...) raised TypeError "not all arguments converted during string formatting" ("4" % 2),
    # None a TypeError on %, and every=0 returned False for any of them without a word.
    state = nnx.state(nnx.Linear(2, 2, rngs=nnx.Rngs(0)))
    with CheckpointWriter(tmp_path / "ckpt", every=every, async_save=False) as writer:
        for call in (lambda: writer.due(step), lambda: writer.maybe_save(step, state, jax.random.key(0))):
            with pytest.raises(ValueError, match=r"step=.* must be an integer >= 0 .*int\(optimizer.step\[...\]\)"):
                call()
        assert writer.steps() == []
        # The forms it takes still save: a NumPy integer and a 0-d integer array (optimizer.step[...]).
        assert writer.due(np.int64(4)) is (every == 2) and writer.due(jnp.array(6)) is (every == 2)
        assert writer.maybe_save(np.int64(4), state, jax.random.key(0)) is (every == 2)
    assert (every == 2) is (tmp_path / "ckpt" / "4").is_dir()


@pytest.mark.parametrize("field, value", [("specs", [("w", P())]), ("specs", None), ("fallbacks", None),
                                          ("shapes", None), ("shapes", [(8, 4)])])
def test_a_plan_built_by_hand_with_a_field_no_dict_is_named(devices, field, value):
    # Was: AttributeError ('list' object has no attribute 'items') at Plan(...), or later in place / warn ('NoneType'
    # object has no attribute 'get' / 'values'), the model half-checked.
    mesh = gs.make_mesh(model_axis=2)
    fields = {"specs": {"w": P("data")}, "fallbacks": {}, "shapes": {"w": (8, 4)}, field: value}
    with pytest.raises(TypeError, match=rf"Plan {field}=.* must be a dict keyed by variable path.*plan_shardings"):
        gs.Plan(mesh, "fsdp", **fields)


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


def test_an_empty_checkpoint_path_is_refused_by_every_checkpoint_function(tmp_path, monkeypatch, devices):
    # Was: "" (an unset config field) read as the current folder: CheckpointWriter("") saved step folders among the
    # user's own files there, and restore("") / committed_steps("") read them back.
    from gensbi_sharding.checkpoint import abstract_state_for, committed_steps, find_checkpoint, restore, saved_config
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes.txt").write_text("mine")
    model = nnx.Linear(2, 2, rngs=nnx.Rngs(0))
    calls = {"directory": [lambda: CheckpointWriter(""), lambda: committed_steps("")],
             "path": [lambda: restore("", abstract_state_for(model, None)), lambda: find_checkpoint(""),
                      lambda: saved_config("")],
             "base_dir": [lambda: find_checkpoint("1", base_dir="")]}
    for name, refused in calls.items():
        for call in refused:
            with pytest.raises(ValueError, match=rf"{name}='' is empty, which Path reads as the current folder "
                                                 rf"\({tmp_path}\); pass a folder, e.g. {name}=.*or '.' to mean"):
                call()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]
    with CheckpointWriter(".", async_save=False) as writer:  # the current folder, said so, still works
        writer.save(1, nnx.state(model), jax.random.key(0))
    assert committed_steps(".") == [1] and find_checkpoint(".") == tmp_path / "1"


def test_a_checkpoint_directory_under_a_file_names_the_file(tmp_path, devices):
    # Was: mkdir's NotADirectoryError "[Errno 20] Not a directory: '<dir>/run/checkpoints'", naming no file.
    (tmp_path / "run").write_text("a file where the run folder should be")
    for directory in (tmp_path / "run" / "checkpoints", tmp_path / "run" / "a" / "b"):
        with pytest.raises(NotADirectoryError, match=rf"checkpoint directory {directory} is under {tmp_path / 'run'}, "
                                                     "a file; pass a folder path"):
            CheckpointWriter(directory)
    with pytest.raises(NotADirectoryError, match=rf"checkpoint directory {tmp_path / 'run'} is a file; pass"):
        CheckpointWriter(tmp_path / "run")
    assert [p.name for p in tmp_path.iterdir()] == ["run"] and (tmp_path / "run").is_file()


def test_logical_axes_of_something_no_variable_names_the_variable_to_pass(devices):
    # Was: AttributeError "'ArrayImpl' object has no attribute 'get_metadata'" for the value (model.up.kernel[...]).
    layer = nnx.Linear(2, 4, rngs=nnx.Rngs(0), kernel_init=gs.partitioned(nnx.initializers.lecun_normal(),
                                                                          ("embed", "mlp")))
    for wrong in (layer.kernel[...], np.ones(3), layer, ("embed", "mlp")):
        with pytest.raises(TypeError, match=rf"logical_axes_of takes an nnx.Variable, e.g. model.up.kernel, got a "
                                            rf"{type(wrong).__name__}: the annotation is the variable's metadata"):
            gs.logical_axes_of(wrong)
    assert gs.logical_axes_of(layer.kernel) == ("embed", "mlp") and gs.logical_axes_of(layer.bias) is None


def test_a_restore_target_without_shardings_names_the_rule_argument_and_the_one_device_form(tmp_path, devices):
    # Was: "build the target with abstract_state_for(node, mesh, table)", a parameter abstract_state_for does not
    # have, for the target abstract_sharded(factory, None) gives (shapes, no shardings).
    from gensbi_sharding.checkpoint import abstract_state_for, restore
    factory = lambda: nnx.Linear(2, 4, rngs=nnx.Rngs(0))  # noqa: E731
    with CheckpointWriter(tmp_path, async_save=False) as writer:
        writer.save(1, nnx.state(factory()), jax.random.key(0))
    with pytest.raises(ValueError, match=r"restore target state/(bias|kernel) is ShapeDtypeStruct without a sharding; "
                                         r"build the target with abstract_state_for\(node, mesh, rule\) \(mesh=None: "
                                         r"on one device\)$"):
        restore(tmp_path, gs.abstract_sharded(factory, None))
    restored = restore(tmp_path, abstract_state_for(factory, None))  # the fix, as named
    np.testing.assert_array_equal(np.asarray(restored.state["kernel"][...]), np.asarray(factory().kernel[...]))


@pytest.mark.parametrize("mesh", ["auto", {"model_axis": 2}, 8])
def test_host_to_global_array_given_a_mesh_of_another_type_names_how_to_build_one(devices, mesh):
    # Was: "mesh must be a concrete jax.sharding.Mesh, got str", naming no fix (each other function's names one).
    with pytest.raises(ValueError, match=r"mesh must be a concrete jax.sharding.Mesh, got \w+ .*; build one with "
                                         r"make_mesh\(...\) or resolve_mesh\(spec\), or pass mesh=None"):
        gs.host_to_global_array({"x": np.ones((8, 2))}, mesh=mesh)


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


@pytest.mark.parametrize("types", [("Explicit", "Explicit"), ("Explicit", "Auto"), ("Auto", "Explicit")])
def test_shard_batch_inside_jit_on_an_explicit_mesh_pins_by_the_batch_axes_type_or_names_mesh_context(devices, types):
    # Was, with an Explicit batch axis and the mesh not active: JAX's error at compilation, "Length of device assignment
    # 1 is not equal to the size of the mesh 8", or "cannot reshape array of size 1 into shape (4,2)" on a mesh of both
    # axis types; with an Auto batch axis beside an Explicit "model", even active: "PartitionSpec passed to reshard
    # cannot contain axis names that are of type Auto".
    mesh = jax.make_mesh((4, 2), ("data", "model"), axis_types=tuple(getattr(AxisType, t) for t in types))
    x = jnp.arange(16.0).reshape(8, 2)
    step = jax.jit(lambda v: gs.shard_batch(v, mesh) * 2)
    outputs = []
    if types[0] == "Explicit":  # reshard pins it, which reads the axis types from the active mesh
        with pytest.raises(ValueError, match=r"batch inside jax.jit on a mesh with AxisType.Explicit axes \(.*\) needs "
                                             r"it active while the step is traced: call the step inside `with "
                                             r"mesh_context\(mesh\):`, or build the mesh with make_mesh"):
            step(x)
    else:
        outputs.append(step(x))
    with gs.mesh_context(mesh):  # the fix, as named
        outputs.append(step(x))
    for y in outputs:
        assert y.sharding.is_equivalent_to(NamedSharding(mesh, P("data")), 2)
        np.testing.assert_array_equal(np.asarray(y), 2 * np.asarray(x))


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


def test_a_writer_given_a_checkpoints_step_folder_is_refused_and_that_checkpoint_kept(tmp_path, devices):
    # Was: CheckpointWriter(restored.path) opened in <ckpt>/1 and saved <ckpt>/1/2: restore(<ckpt>) still read step 1,
    # and a writer of <ckpt> keeping 1 step deleted <ckpt>/1 with the steps inside it.
    from gensbi_sharding.checkpoint import committed_steps, restore
    state = nnx.state(nnx.Linear(2, 2, rngs=nnx.Rngs(0)))
    with CheckpointWriter(tmp_path / "ckpt", async_save=False) as writer:
        writer.save(1, state, jax.random.key(0))
    step_dir = restore(tmp_path / "ckpt", state).path
    with pytest.raises(FileExistsError, match=rf"checkpoint directory {step_dir} is a checkpoint's step folder \(step 1 "
                                              rf"of {tmp_path / 'ckpt'}\): steps saved inside it are never restored "
                                              r"from .*; pass a folder of its own"):
        CheckpointWriter(step_dir)
    assert {"arrays", "config", "meta"} <= {p.name for p in step_dir.iterdir()} and not (step_dir / "2").exists()
    assert committed_steps(tmp_path / "ckpt") == [1]
    # A user's folder that holds arrays/, meta/ and config/ folders of its own is no step folder: saved into.
    mine = tmp_path / "project"
    for item in ("arrays", "meta", "config"):
        (mine / item).mkdir(parents=True)
    with CheckpointWriter(mine, async_save=False) as writer:
        writer.save(3, state, jax.random.key(0))
    assert committed_steps(mine) == [3] and (mine / "config").is_dir()

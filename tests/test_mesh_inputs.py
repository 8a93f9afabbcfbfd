"""Meshes from odd specs (``make_mesh``, ``resolve_mesh``, ``mesh_init_simulate``): each refusal names the spec or
call that builds the mesh meant.

In-process, 8 simulated CPU devices (conftest).
"""

import ast
import re

import jax
import numpy as np
import pytest

import gensbi_sharding as gs


@pytest.mark.parametrize("args, needle", [
    ((0, np.ones((5, 4)), float("inf"), 4), "features must be castable to int, got inf"),
    ((2**70, np.ones((5, 4)), 3, 4), f"seed={2**70} must fit in 64 bits")])
def test_mesh_init_simulate_names_a_number_out_of_range(args, needle):
    # Was OverflowError "cannot convert float infinity to integer" / "Python int too large to convert to C long".
    with pytest.raises(ValueError, match=needle):
        gs.mesh_init_simulate(*args)


def test_make_mesh_of_a_device_array_of_two_dimensions_names_both_fixes(devices):
    # Was "devices must be jax.Device objects (or ids, through resolve_mesh), got array([CpuDevice(id=0), ...])".
    grid = np.array(jax.devices()).reshape(4, 2)
    with pytest.raises(ValueError) as error:
        gs.make_mesh(grid, model_axis=2)
    assert str(error.value) == (
        "devices is an array of shape (4, 2); make_mesh takes them flat, in mesh order, and lays them out "
        "(len // model_axis, model_axis): pass list(devices.flat) with model_axis=2, or keep this layout: "
        "jax.sharding.Mesh(devices, ('data', 'model'))")
    mesh = gs.make_mesh(list(grid.flat), model_axis=2)  # the first fix: the very layout asked for
    assert mesh.devices.tolist() == grid.tolist() and mesh == jax.sharding.Mesh(grid, ("data", "model"))
    assert gs.make_mesh(np.array(jax.devices()[:4])).shape == {"data": 4, "model": 1}  # a flat array as before


@pytest.mark.parametrize("spec", [{"data": 2, "model_axis": "x"}, {"data": 2, "model_axis": 0},
                                  {"data": 2, "devices": []}, {"data": 2, "devices": [0, 0]},
                                  {"data": 2, "model": 2, "devices": "0123"}])
def test_resolve_mesh_given_axis_sizes_with_a_bad_model_axis_or_devices_suggests_no_spec_that_fails(devices, spec):
    # Was: TypeError "unsupported operand type(s) for %: 'int' and 'str'" in place of the unknown key's message;
    # "for data=2 x model=0 write {'devices': [], 'model_axis': 0}"; a fix naming device 0 twice; a string's
    # characters counted as its devices. Now the key's refusal stands, with the rule and no spec to copy.
    import gensbi_sharding as gs

    with pytest.raises(ValueError) as err:
        gs.resolve_mesh(spec)
    assert re.fullmatch(r"unknown mesh spec key '(data|model)'; accepted keys: \('devices', 'model_axis'\) \(the "
                        r"axes' sizes are not keys: a mesh spec gives model_axis, the data axis taking the rest of "
                        r"the( \d+)? devices\)", str(err.value)), str(err.value)


def test_resolve_mesh_given_axis_sizes_and_device_objects_suggests_the_ids_a_spec_takes(devices):
    # Was: "write {'devices': [CpuDevice(id=4), ...], ...}", no value a config can hold.
    import jax

    import gensbi_sharding as gs

    with pytest.raises(ValueError, match=r"for data=2 x model=1 write (\{.*\})$") as err:
        gs.resolve_mesh({"data": 2, "devices": jax.devices()[4:6]})
    fix = ast.literal_eval(re.search(r"write (\{.*\})$", str(err.value))[1])
    assert fix == {"devices": [4, 5], "model_axis": 1}
    assert [d.id for d in gs.resolve_mesh(fix).devices.flat] == [4, 5]


@pytest.mark.parametrize("listed", [[0, "a"], [0, None], [0.0, 1.0]])
def test_resolve_mesh_given_axis_sizes_and_a_list_of_no_devices_keeps_the_unknown_keys_refusal(devices, listed):
    # Was: AttributeError "'str' object has no attribute 'id'" (the suggested spec's ids were read before any mesh
    # was built of them). Now the key's refusal, with the rule and no spec to copy, as for the other bad lists.
    import gensbi_sharding as gs

    with pytest.raises(ValueError, match=r"^unknown mesh spec key 'data'; accepted keys: \('devices', 'model_axis'\) "
                                         r"\(the axes' sizes are not keys: a mesh spec gives model_axis, the data "
                                         r"axis taking the rest of the 2 devices\)$"):
        gs.resolve_mesh({"data": 2, "devices": listed})


def test_a_mesh_wider_than_the_cpu_devices_names_how_to_simulate_them(devices):
    # Typed: the README's training script without its jax_num_cpu_devices line ("real GPUs need nothing"), on a
    # laptop's CPU. Was: "1 devices are not divisible by model_axis=2: choose a model_axis among [1]", which names
    # no way to get the 2 devices the example needs.
    import gensbi_sharding as gs

    with pytest.raises(ValueError) as err:
        gs.make_mesh(jax.devices()[:1], model_axis=2)
    assert str(err.value) == ("1 device is not divisible by model_axis=2: choose a model_axis among [1], or "
                              "simulate 2 CPU devices: jax.config.update('jax_num_cpu_devices', 2) first thing, "
                              "before JAX starts")
    with pytest.raises(ValueError) as err:  # fewer than the devices there are: no simulation helps
        gs.make_mesh(model_axis=3)
    assert str(err.value) == "8 devices are not divisible by model_axis=3: choose a model_axis among [1, 2, 4, 8]"


def test_a_mesh_given_by_its_axes_sizes_is_refused_naming_the_spec_that_builds_it(devices):
    # Typed, a JAX user's mesh as Mesh.shape reads: gs.resolve_mesh({"data": 2, "model": 4}). Was only "unknown mesh
    # spec key 'data'; accepted keys: ('devices', 'model_axis')", leaving the user to work out model_axis (and which
    # devices give a (2, 2) mesh on 8).
    import ast

    import pytest

    import gensbi_sharding as gs

    for spec, shape in [({"data": 2, "model": 4}, (2, 4)), ({"data": 2, "model": 2}, (2, 2)), ({"data": 4}, (4, 2)),
                        ({"model": 8}, (1, 8)), ({"data": 2, "model": 2, "devices": [4, 5, 6, 7]}, (2, 2))]:
        with pytest.raises(ValueError, match="unknown mesh spec key") as err:
            gs.resolve_mesh(spec)
        assert " write " in str(err.value), str(err.value)
        fix = ast.literal_eval(str(err.value).partition(" write ")[2])
        mesh = gs.resolve_mesh(fix)
        assert (mesh.shape["data"], mesh.shape["model"]) == shape, (spec, fix)
        if "devices" in spec:
            assert [d.id for d in mesh.devices.flat] == spec["devices"]
    with pytest.raises(ValueError) as err:  # no mesh of these sizes on 8 devices: the rule, no spec to copy
        gs.resolve_mesh({"data": 4, "model": 4})
    assert str(err.value).endswith("(the axes' sizes are not keys: a mesh spec gives model_axis, the data axis "
                                   "taking the rest of the 8 devices)")


@pytest.mark.parametrize("spec, fix", [({"devices": [0, 1, 2, 8], "model_axis": 2}, "{'devices': [0, 1]}"),
                                       ({"devices": [0, 0, 9]}, "{'devices': [0]}")])
def test_resolve_mesh_of_an_unknown_device_id_names_a_list_that_builds(devices, spec, fix):
    # Was: "...; name only those, e.g. {'devices': [0, 1, 2]}" for model_axis=2 (3 devices, which it does not divide)
    # and "e.g. {'devices': [0, 0]}" (device 0 twice): each refused when followed. Now each id once, as many as
    # model_axis divides.
    with pytest.raises(ValueError) as err:
        gs.resolve_mesh(spec)
    assert str(err.value).endswith(f"; name only those, e.g. {fix}"), str(err.value)
    model = spec.get("model_axis", 1)
    built = gs.resolve_mesh({**ast.literal_eval(fix), **({"model_axis": model} if "model_axis" in spec else {})})
    assert dict(built.shape) == {"data": len(ast.literal_eval(fix)["devices"]) // model, "model": model}


def test_resolve_mesh_of_a_near_spec_names_the_one_meant(devices):
    # Was: "invalid mesh spec 'Auto'; accepted forms: ..." (no "did you mean 'auto'?"); "invalid mesh spec (8, 1); ..."
    # for a mesh's shape, naming no mapping; "mesh spec names device id 8, but the device ids are [0..7]", no fix.
    with pytest.raises(ValueError, match=r"^invalid mesh spec 'Auto'; did you mean 'auto'\? if not, accepted forms"):
        gs.resolve_mesh("Auto")
    for shape, spec in (((8, 1), {"model_axis": 1}), ([4, 2], {"model_axis": 2})):
        with pytest.raises(ValueError) as err:
            gs.resolve_mesh(shape)
        assert str(err.value).endswith(f"; a mesh's shape (data, model) is no spec: for data={shape[0]} x "
                                       f"model={shape[1]} write {spec}"), str(err.value)
        assert dict(gs.resolve_mesh(spec).shape) == {"data": shape[0], "model": shape[1]}  # the fix builds it
    with pytest.raises(ValueError) as err:
        gs.resolve_mesh({"devices": list(range(9)), "model_axis": 2})
    fix = "{'devices': [0, 1, 2, 3, 4, 5, 6, 7]}"
    assert str(err.value) == ("mesh spec names device id 8, but the device ids are [0, 1, 2, 3, 4, 5, 6, 7]; name only "
                              f"those, e.g. {fix}")
    assert dict(gs.resolve_mesh({**ast.literal_eval(fix), "model_axis": 2}).shape) == {"data": 4, "model": 2}

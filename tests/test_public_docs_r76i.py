"""REVIEW76C: LIBDOC76's Returns/Raises sections checked by calling the functions, as a library user reads them.

Each test calls the function, then holds its docstring to what the call did: a bad ``items`` of ``step_damage``
(read as damage: ``"arrays"`` as six missing items, a typo as a missing folder), ``due``'s RuntimeError under a jit,
``batch_size_divisor``'s count (not the mesh's devices), ``partition_specs``' word for one device (not
``describe``'s), the object ``partitioned``'s init returns, and ``pad_for_mesh`` taking an AbstractMesh.
"""

from __future__ import annotations

import inspect

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

import gensbi_sharding as gs
import gensbi_sharding.report
from gensbi_sharding import checkpoint


def _section(fn, title: str) -> str:
    doc = inspect.getdoc(fn)
    start = doc.index(f"{title}\n{'-' * len(title)}\n") + 2 * len(title) + 2
    rest = doc[start:]
    ends = [i for i in (rest.find("\n\n" + t + "\n") for t in ("Raises", "Returns", "Parameters", "Notes")) if i >= 0]
    return " ".join(rest[:min(ends, default=len(rest))].split())


@pytest.mark.parametrize("items, error", [("arrays", TypeError), (3, TypeError), (("arrrays",), ValueError),
                                          (("arrays", "conifg"), ValueError)])
def test_step_damage_refuses_items_it_would_read_as_damage(tmp_path, items, error):
    # "arrays" was six items 'a', 'r', ...: "its 'a' and 'r' and ... items cannot be read (their folders are
    # missing)"; a typo "its 'arrrays' item cannot be read (its folder is missing)": a sound step called damaged.
    with pytest.raises(error, match=r"items=.*pass a sequence of names among \('arrays', 'meta', 'config'\)"):
        checkpoint.step_damage(tmp_path, items)
    assert error.__name__ in _section(checkpoint.step_damage, "Raises")


def test_step_damage_still_takes_a_subset_of_the_items(tmp_path):
    assert checkpoint.step_damage(tmp_path, ("meta",)) == "its 'meta' item cannot be read (its folder is missing)"
    assert checkpoint.step_damage(tmp_path, []) is None


def test_due_under_a_jit_raises_what_its_raises_section_lists(tmp_path):
    writer = checkpoint.CheckpointWriter(tmp_path / "c", every=2, async_save=False)
    try:
        with pytest.raises(RuntimeError, match="CheckpointWriter.due called under a JAX transformation"):
            jax.jit(writer.due)(2)
    finally:
        writer.close()
    assert "RuntimeError" in _section(checkpoint.CheckpointWriter.due, "Raises")


def test_batch_size_divisor_counts_the_batch_axes_not_the_devices():
    mesh = gs.make_mesh(model_axis=2)  # 8 simulated devices: data=4 x model=2
    assert (gs.batch_size_divisor(mesh), mesh.size) == (4, 8)
    returns = _section(gs.batch_size_divisor, "Returns")
    assert "batch_axes(mesh)" in returns and "4 on a ``data=4 x model=2`` mesh of 8 devices" in returns


def test_partition_specs_names_where_it_differs_from_describe():
    model = nnx.Dict(kernel=nnx.Param(jnp.ones((2, 3))))  # on one device: a sharding without a spec
    assert gs.partition_specs(model)["kernel"] == "host"
    assert gs.describe(model, None).placements["kernel"] == "single device"
    assert '``describe``: ``"single device"``' in inspect.getdoc(gs.partition_specs)


def test_partitioned_returns_an_init_whose_value_is_variable_metadata():
    init = gs.partitioned(nnx.initializers.zeros_init(), ("embed",))
    value = init(jax.random.key(0), (4,), jnp.float32)
    assert isinstance(value, nnx.VariableMetadata) and value.metadata["out_sharding"] == ("embed",)
    assert "nnx.VariableMetadata" in _section(gs.partitioned, "Returns")


def test_pad_for_mesh_takes_an_abstract_mesh_as_documented():
    mesh = gs.make_mesh(model_axis=2)
    assert gs.pad_for_mesh(5, mesh.abstract_mesh) == gs.pad_for_mesh(5, mesh) == (8, 5)
    assert "AbstractMesh" in _section(gs.pad_for_mesh, "Parameters")
    with pytest.raises(TypeError):
        gs.pad_for_mesh(5, "mesh")


def test_host_to_global_array_replicated_keeps_the_rows_as_its_returns_says():
    mesh = gs.make_mesh(model_axis=2)
    out = gs.host_to_global_array({"x": np.ones((3, 2), np.float32)}, partition="replicated", mesh=mesh)
    assert out["x"].shape == (3, 2) and out["x"].sharding.is_fully_replicated
    assert "a replicated one: as each process holds it" in _section(gs.host_to_global_array, "Returns")


def test_describe_total_bytes_counts_each_array_once_as_its_report_says():
    mesh = gs.make_mesh(model_axis=2)
    model = nnx.Dict(w=nnx.Param(jnp.ones((8, 16))))  # 512 B, unannotated: replicated on the 8 devices
    gs.shard_model(model, mesh)
    report = gs.describe(model, mesh)
    assert (report.total_bytes, report.variables[0].nbytes, sum(report.bytes_per_device.values())) == (512, 512, 4096)
    doc = " ".join(inspect.getdoc(gs.report.PlacementReport).split())
    assert "``total_bytes``: each array once" in doc and "not its copies on the devices" in doc
    assert "``nbytes``: the whole array's, once" in " ".join(inspect.getdoc(gs.report.VariablePlacement).split())

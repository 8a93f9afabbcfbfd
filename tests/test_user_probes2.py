"""User probes, second pass: faults found by using the library as its users would."""

import pytest

from test_multihost import FAIL_BOUND_S, launch


# ---------------------------------------------------------------------------- host_to_global_array, 2 processes

@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("kind, theirs", [
    ("rows", "['x'] (8, 3) float32"), ("dtype", "['x'] (4, 3) int32"),
    ("tree", "PyTreeDef({'x': *, 'y': *})"), ("trailing", "['x'] (4, 5) float32")])
def test_processes_passing_other_inputs_all_raise_naming_both(kind, theirs):
    # Was: each process built its own global shape ((8, 3) on one, (16, 3) on the other) or dtype, and a
    # jitted sum gave wrong numbers (1094713344.0 for int32 bits read as float32); another tree aborted both.
    runs = launch(f"mismatch_{kind}")
    for p, run in enumerate(runs):
        assert run["rc"] == 0, run["stderr"][-3000:]
        error = run["result"]["error"]
        assert error is not None and f"process {p} passes tree" in error, error
        assert f"process {1 - p} passes tree" in error and theirs in error, error
        assert "['x'] (4, 3) float32" in error and "same tree, dtypes and shapes" in error
        assert run["seconds"] < FAIL_BOUND_S


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_process_failing_its_own_check_makes_the_other_raise_too():
    runs = launch("mismatch_local")
    assert "process 1 passes leading size 3" in runs[1]["result"]["error"]
    assert "process 1 failed: process 1 passes leading size 3" in runs[0]["result"]["error"]
    assert all(run["rc"] == 0 and run["seconds"] < FAIL_BOUND_S for run in runs)


# ---------------------------------------------------------------------------- describe / bytes_per_device

def test_sub_byte_dtypes_count_packed_as_the_device_holds_them(devices):
    import jax
    import jax.numpy as jnp
    from flax import nnx
    from jax.sharding import NamedSharding, PartitionSpec as P

    from gensbi_sharding import bytes_per_device, compiled_report, describe, make_mesh

    mesh = make_mesh(model_axis=2)
    x = jax.device_put(jnp.ones((16,), jnp.int4), NamedSharding(mesh, P("data")))
    # Was 4 per device (itemsize 1 for int4) while XLA, and compiled_report, count 2.
    assert bytes_per_device(x) == {d: 2 for d in range(8)}
    arg = compiled_report(jax.jit(lambda v: v).lower(x).compile())["memory"]["argument_bytes"]
    assert arg == 2
    holder = nnx.Module()
    holder.w, holder.key = nnx.Param(jnp.ones((5,), jnp.int4)), nnx.Variable(jax.random.split(jax.random.key(0), 4))
    report = describe(holder, None)
    assert {v.path: v.nbytes for v in report.variables} == {"key": 32, "w": 3}  # 5 int4: 20 bits -> 3 B
    assert report.total_bytes == 35


def test_table_columns_stay_aligned_with_long_dtypes_and_shapes(devices):
    import jax.numpy as jnp
    from flax import nnx

    from gensbi_sharding import describe

    holder = nnx.Module()
    holder.f8, holder.wide = nnx.Param(jnp.ones((2,), jnp.float8_e4m3fn)), nnx.Param(jnp.zeros((1, 2, 3, 4, 0)))
    lines = describe(holder, None).table().splitlines()[2:]
    # Was: "float8_e4m3fn" overflowed the 9-wide dtype column and shifted that row's placement and bytes.
    assert len({line.index("single device") for line in lines[1:]}) == 1
    assert len({len(line) for line in lines}) == 1, lines

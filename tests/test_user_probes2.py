"""User probes, second pass: faults found by using the library as its users would."""

import pytest

from test_multihost import FAIL_BOUND_S, LAUNCH_TIMEOUT_S, WORKER, free_port, launch

# The process-group cases of this file: two workers each (multihost_worker.py).
CASES = ("mismatch_rows", "mismatch_dtype", "mismatch_tree", "mismatch_trailing", "mismatch_local", "unchecked",
         "model_axis_first", "describe")


@pytest.fixture(scope="module")
def groups():
    """``{case: its runs}`` (per process: rc, seconds, result, stdout, stderr, as ``launch`` gives them) for
    ``CASES``: each case's two workers forked at once on a port of their own, the cases one after the other, all
    from one Python process that imported JAX and the library once (tests/fork_launch.py: ~1.5 s of CPU less per
    case than a process of its own each); ``seconds`` from the case's start. A case that hung is launched again
    by ``launch`` (a fresh port, and a second attempt: test_multihost.py's guard against a rare gloo hang)."""
    import json
    import os
    import tempfile
    from pathlib import Path

    from fork_launch import REPO, run_forked

    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
               JAX_PLATFORMS="cpu", PYTHONUNBUFFERED="1")
    ports = {case: free_port() for case in CASES}
    with tempfile.TemporaryDirectory() as work:
        procs = run_forked([{"args": [case, str(ports[case]), str(p), "2"], "cwd": os.getcwd(), "group": case}
                            for case in CASES for p in range(2)], env=env,
                           timeout=len(CASES) * (LAUNCH_TIMEOUT_S + 60), workdir=Path(work), script=WORKER,
                           imports=("jax", "gensbi_sharding"), deadline_s=LAUNCH_TIMEOUT_S, grouped=True)
    found = {}
    for i, case in enumerate(CASES):
        pair = procs[2 * i:2 * i + 2]
        if any(proc.hung for proc in pair):
            found[case] = launch(case)
            continue
        found[case] = []
        for proc in pair:
            at = proc.stdout.rfind("RESULT {")  # gloo's C++ logging may share the JSON's line
            found[case].append({"rc": proc.returncode, "seconds": proc.seconds,
                                "result": json.JSONDecoder().raw_decode(proc.stdout[at + 7:])[0] if at >= 0 else None,
                                "stdout": proc.stdout, "stderr": proc.stderr})
    return found


# ---------------------------------------------------------------------------- host_to_global_array, 2 processes

@pytest.mark.slow
@pytest.mark.timeout(900)  # the first test here waits for every case's group (groups)
@pytest.mark.parametrize("kind, theirs", [
    ("rows", "['x'] (8, 3) float32"), ("dtype", "['x'] (4, 3) int32"),
    ("tree", "PyTreeDef({'x': *, 'y': *})"), ("trailing", "['x'] (4, 5) float32")])
def test_processes_passing_other_inputs_all_raise_naming_both(groups, kind, theirs):
    # Was: each process built its own global shape ((8, 3) on one, (16, 3) on the other) or dtype, and a
    # jitted sum gave wrong numbers (1094713344.0 for int32 bits read as float32); another tree aborted both.
    runs = groups[f"mismatch_{kind}"]
    for p, run in enumerate(runs):
        assert run["rc"] == 0, run["stderr"][-3000:]
        error = run["result"]["error"]
        assert error is not None and f"process {p} passes tree" in error, error
        assert f"process {1 - p} passes tree" in error and theirs in error, error
        assert "['x'] (4, 3) float32" in error and "same tree, dtypes and shapes" in error
        assert run["seconds"] < FAIL_BOUND_S


@pytest.mark.slow
@pytest.mark.timeout(900)  # the first test here waits for every case's group (groups)
def test_a_process_failing_its_own_check_makes_the_other_raise_too(groups):
    runs = groups["mismatch_local"]
    assert "process 1 passes leading size 3" in runs[1]["result"]["error"]
    assert "process 1 failed: process 1 passes leading size 3" in runs[0]["result"]["error"]
    assert all(run["rc"] == 0 and run["seconds"] < FAIL_BOUND_S for run in runs)


@pytest.mark.slow
@pytest.mark.timeout(900)  # the first test here waits for every case's group (groups)
def test_unchecked_calls_run_no_collective(groups):
    # The check is a blocking collective: a training loop checks its first batch only (the harness does).
    # Unchecked, each process takes its own rows for every process's (the mismatch_rows case, checked, raises).
    runs = groups["unchecked"]
    assert [run["result"]["shape"] for run in runs] == [[8, 3], [16, 3]]
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
    # float0 (an integer parameter's gradient) and PRNG keys: whole bytes, no error.
    holder.i = nnx.Param(jnp.ones((3,), jnp.int32))
    grads = nnx.grad(lambda m: 0.0, argnums=nnx.DiffState(0, nnx.Param), allow_int=True)(holder)
    got = describe(grads, None)  # was ValueError "unexpected input: dtype=dtype([('float0', 'V')])" mid-fix
    assert {(v.path, v.dtype, v.nbytes) for v in got.variables} == {("i", "[('float0', 'V')]", 0),
                                                                   ("w", "[('float0', 'V')]", 0)}


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


# ---------------------------------------------------------------------------- constrain on an Explicit mesh

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


# ---------------------------------------------------------------------------- Plan.fallback_message arguments

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


@pytest.mark.slow
@pytest.mark.timeout(900)  # the first test here waits for every case's group (groups)
def test_model_group_spanning_processes_by_axis_order_names_the_axis_fix(groups):
    # Was "Choose a model_axis (now 2) that divides this process's 4 devices": 2 does divide 4.
    for run in groups["model_axis_first"]:
        error = run["result"]["error"]
        assert "model group of devices [0, 2048] spans processes [0, 1]" in error
        assert ("The size 2 divides this process's 4 devices: make \"model\" the last mesh axis "
                "('model', 'data', 'replica')") in error


def test_empty_arrays_are_not_listed_as_largest_replicated(devices):
    import jax.numpy as jnp
    from flax import nnx

    from gensbi_sharding import describe, init_sharded, make_mesh, partitioned

    class Model(nnx.Module):
        def __init__(self):
            self.lin = nnx.Linear(4, 8, rngs=nnx.Rngs(0),
                                  kernel_init=partitioned(nnx.initializers.lecun_normal(), ("embed", "mlp")))
            self.empty = nnx.Param(jnp.zeros((0, 5)))

    mesh = make_mesh(model_axis=2)
    with pytest.warns(Warning):
        report = describe(init_sharded(Model, mesh, "fsdp"), mesh)
    # Was (('lin/bias', 32), ('empty', 0)): "largest replicated ... empty (0 B)".
    assert report.largest_replicated == (("lin/bias", 32),)
    assert "empty (0 B)" not in report.table()


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


@pytest.mark.slow
@pytest.mark.timeout(900)  # the first test here waits for every case's group (groups)
def test_describe_counts_every_process_devices(groups):
    runs = groups["describe"]
    for p, run in enumerate(runs):
        result = run["result"]
        # kernel (4, 8) f32 split 4 ways (32 B) + bias 32 B whole: 64 B on each of the 8 devices.
        # Was 0 on the other process's 4 devices, and "min 0 B".
        assert result["per_device"] == {str(d): 64 for d in (0, 1, 2, 3, 2048, 2049, 2050, 2051)}
        assert result["totals"].endswith("per device max 64 B, min 64 B")
        assert result["local"] == {str(d + 2048 * p): 64 for d in range(4)}  # bytes_per_device: this process's


def test_describe_on_another_mesh_than_the_arrays_names_both(devices):
    import jax
    from flax import nnx

    from gensbi_sharding import describe, init_sharded, make_mesh

    on, other = make_mesh(jax.devices()[4:]), make_mesh(jax.devices()[:4])
    layer = init_sharded(lambda: nnx.Linear(4, 8, rngs=nnx.Rngs(0)), on, "replicated")
    # Was a report of "mesh data=4 ...: 4 devices" listing 8 devices, "min 0 B".
    with pytest.raises(ValueError, match=r"arrays are on devices \[4, 5, 6, 7\], outside the mesh given \(devices "
                                         r"\[0, 1, 2, 3\]\); pass the mesh they are on, or mesh=None"):
        describe(layer, other)
    assert describe(layer, on).bytes_per_device == {4: 160, 5: 160, 6: 160, 7: 160}

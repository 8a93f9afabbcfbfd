"""Misuse of the public API by a user writing their own training script (8 simulated CPU devices), each fault pinned.

Two ``CheckpointWriter``s on one folder (this process or another); ``shard_model`` onto a mesh whose placement an
array already has in effect (a 1-device mesh, an Explicit mesh of the same layout); ``shard_batch`` and
``host_to_global_array`` of abstract batches (dry runs); ``restore`` into a target of another structure (a model
where ``(model, optimizer)`` was saved, or the reverse); ``init_sharded`` of a constructor drawing from an unseeded
global RNG; ``make_mesh`` of a 2-D device array.
"""

import gc
import os
import subprocess
import sys
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx
from jax.sharding import NamedSharding, PartitionSpec as P

import gensbi_sharding as gs
import gensbi_sharding.init
from gensbi_sharding import checkpoint


class Block(nnx.Module):
    def __init__(self, rngs, hidden=16):
        self.up = nnx.Linear(8, hidden, rngs=rngs, kernel_metadata=gs.axes("embed", "mlp"),
                             bias_metadata=gs.axes("mlp"))


# ---------------------------------------------------------------------------------------- one folder, two writers

_HOLD = """import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDONLY); fcntl.flock(fd, fcntl.LOCK_EX)
print("held", flush=True); sys.stdin.read()"""


def test_a_second_writer_of_one_folder_is_refused_and_the_first_keeps_its_steps(tmp_path, devices):
    # Was: the second writer's Orbax manager deleted the first's save under way (its temporary folder) and the next
    # saves of both failed with Orbax tracebacks (NOT_FOUND, "Directory not empty"): steps 1 and 2 were lost.
    model, key = Block(nnx.Rngs(0)), jax.random.key(0)
    first = checkpoint.CheckpointWriter(tmp_path / "ck", keep=5)
    first.save(1, nnx.state(model), key)  # asynchronous: still being written
    with pytest.raises(RuntimeError) as error:
        checkpoint.CheckpointWriter(tmp_path / "ck")
    assert str(error.value) == (f"checkpoint directory {tmp_path / 'ck'} is in use by another CheckpointWriter (open "
                                "in this process): two writers of one folder delete each other's saves under way; "
                                "close that one first (writer.close(), or a with block), or pass another directory")
    first.save(2, nnx.state(model), key)
    first.close()
    assert checkpoint.committed_steps(tmp_path / "ck") == [1, 2]
    assert sorted(p.name for p in (tmp_path / "ck").iterdir()) == ["1", "2"]  # the folder itself is locked: no file
    with checkpoint.CheckpointWriter(tmp_path / "ck", keep=5) as again:  # closed: the folder is free
        again.save(3, nnx.state(model), key)
    assert checkpoint.committed_steps(tmp_path / "ck") == [1, 2, 3]
    checkpoint.CheckpointWriter(tmp_path / "dropped")  # never closed nor kept: once collected, the folder is free
    gc.collect()
    checkpoint.CheckpointWriter(tmp_path / "dropped").close()


def test_a_writer_of_another_process_holding_the_folder_is_named(tmp_path, devices):
    (tmp_path / "ck").mkdir()
    holder = subprocess.Popen([sys.executable, "-c", _HOLD, str(tmp_path / "ck")],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(RuntimeError, match=r"in use by another CheckpointWriter \(in another process\)"):
            checkpoint.CheckpointWriter(tmp_path / "ck")
    finally:
        holder.communicate("", timeout=30)
    with checkpoint.CheckpointWriter(tmp_path / "ck") as writer:  # its lock ended with it
        assert writer.save(1, nnx.state(Block(nnx.Rngs(0))), jax.random.key(0))


@pytest.mark.filterwarnings("ignore:os.fork:RuntimeWarning", "ignore:.*fork:DeprecationWarning")  # no JAX in the child
def test_the_folder_lock_of_a_writer_let_go_a_forked_child_and_symbolic_links(tmp_path, devices):
    # Was: a writer collected unclosed let go of the folder with its asynchronous save still being written; the next
    # writer's Orbax manager deleted that save as unfinished (absl NOT_FOUND tracebacks) and step 1 was lost.
    model, key = Block(nnx.Rngs(0)), jax.random.key(0)
    dropped = checkpoint.CheckpointWriter(tmp_path / "ck", keep=5)
    dropped.save(1, nnx.state(model), key)
    del dropped
    gc.collect()
    with checkpoint.CheckpointWriter(tmp_path / "ck", keep=5) as writer:
        assert writer.steps() == [1]
    # Was "[Errno 17] File exists: '.../dangling'" from mkdir, naming neither the link's target nor a fix.
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    with pytest.raises(FileNotFoundError, match=r"dangling is a symbolic link to .*nowhere, which does not exist"):
        checkpoint.CheckpointWriter(tmp_path / "dangling")
    (tmp_path / "link").symlink_to(tmp_path / "ck")  # a live link to an open folder is the same folder: refused
    with checkpoint.CheckpointWriter(tmp_path / "ck"), pytest.raises(RuntimeError, match="open in this process"):
        checkpoint.CheckpointWriter(tmp_path / "link")
    # Was: a process forked while a writer was open (a fork-started data loader) shared its lock, so after close the
    # folder stayed "in use by another CheckpointWriter (in another process)" for as long as that child lived.
    writer = checkpoint.CheckpointWriter(tmp_path / "forked")
    read_end, write_end = os.pipe()
    ready_read, ready_write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: says it runs (its fork hooks ran), waits until the parent is done, leaves at once
        os.close(write_end)
        os.write(ready_write, b"r")
        os.read(read_end, 1)
        os._exit(0)
    os.close(read_end)
    os.close(ready_write)
    try:
        assert os.read(ready_read, 1) == b"r"
        writer.close()
        checkpoint.CheckpointWriter(tmp_path / "forked").close()
    finally:
        os.close(write_end)
        os.close(ready_read)
        os.waitpid(pid, 0)


# ------------------------------------------------------------------- equivalent placements left off the plan's mesh

def _pointers(array):
    return [shard.data.unsafe_buffer_pointer() for shard in array.addressable_shards]


@pytest.mark.parametrize("case", ["one device", "same layout, explicit axes"])
def test_shard_model_puts_every_array_on_the_plans_mesh_even_where_its_layout_already_matches(devices, case):
    # Was: place skipped an array whose placement was equivalent to the plan's, so on a 1-device mesh every variable
    # stayed on its SingleDeviceSharding (sharding_of(model)["up/kernel"].spec raised AttributeError, describe read
    # "single device", partition_specs "host"), and a model moved to an Explicit mesh of the same layout kept the
    # Auto one (describe(model, that mesh) then raised "on another mesh").
    model = Block(nnx.Rngs(0))
    values = np.asarray(model.up.kernel[...])
    if case == "one device":
        mesh = gs.make_mesh(jax.devices()[:1])
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            gs.shard_model(model, gs.make_mesh(model_axis=2), "tensor")
        mesh = jax.make_mesh((4, 2), ("data", "model"), axis_types=(jax.sharding.AxisType.Explicit,) * 2)
    before = _pointers(model.up.kernel[...])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gs.shard_model(model, mesh, "tensor")
    placed = gs.sharding_of(model)
    assert {path: (s.mesh, s.spec) for path, s in placed.items()} == {
        "up/kernel": (mesh, P(None, "model")), "up/bias": (mesh, P("model"))}
    assert _pointers(model.up.kernel[...]) == before  # the same buffers: nothing copied
    np.testing.assert_array_equal(model.up.kernel[...], values)
    assert gs.describe(model, mesh).placements == {"up/kernel": "P(None, 'model')", "up/bias": "P('model')"}
    assert gs.partition_specs(model)["up/kernel"] == "P(None, 'model')"
    first = model.up.kernel[...]
    gs.shard_model(model, mesh, "tensor")  # again: exactly as planned, the very arrays kept
    assert model.up.kernel[...] is first


# ------------------------------------------------------------------------------------- abstract batches (dry runs)

def test_shard_batch_places_an_abstract_batch_as_it_places_the_concrete_one(devices):
    # Was: jax.ShapeDtypeStruct leaves came back unplaced, so jax.jit(step).lower(state, batch) of a dry run compiled
    # for a batch whole on one device: compiled_report gave the wrong per-device memory, and no size was checked.
    mesh = gs.make_mesh(model_axis=2)
    abstract = gs.shard_batch({"x": jax.ShapeDtypeStruct((32, 64), jnp.float32),
                               "t": jax.ShapeDtypeStruct((), jnp.float32), "n": 3}, mesh)
    concrete = gs.shard_batch({"x": jnp.ones((32, 64)), "t": jnp.float32(0), "n": 3}, mesh)
    assert abstract["x"].sharding == concrete["x"].sharding == NamedSharding(mesh, P("data"))
    assert abstract["t"].sharding == concrete["t"].sharding == NamedSharding(mesh, P()) and abstract["n"] == 3
    step = jax.jit(lambda batch: batch["x"].sum() * batch["t"])
    memory = [gs.compiled_report(step.lower(batch).compile())["memory"] for batch in (abstract, concrete)]
    assert memory[0] == memory[1] and memory[0]["argument_bytes"] < 32 * 64 * 4  # each device's rows only
    assert gs.replicate(jax.ShapeDtypeStruct((3,), jnp.float32), mesh).sharding == NamedSharding(mesh, P())
    with pytest.raises(ValueError, match=r"shape \(30, 3\)\) has leading size 30, not divisible by the data-parallel "
                                         r"size 4; use 28 or 32 rows \(pad_for_mesh\(30, mesh\) returns"):
        gs.shard_batch(jax.ShapeDtypeStruct((30, 3), jnp.float32), mesh)
    with pytest.raises(ValueError, match=r"differing leading sizes \[8, 12\]"):
        gs.shard_batch((jax.ShapeDtypeStruct((8, 3), jnp.float32), jnp.ones((12,))), mesh)
    with pytest.raises(ValueError) as error:  # each process's rows: no abstract global array to build (was returned)
        gs.host_to_global_array({"x": jax.ShapeDtypeStruct((8, 3), jnp.float32)}, mesh=mesh)
    assert str(error.value) == ("leaf ['x'] is abstract (ShapeDtypeStruct(shape=(8, 3), dtype=float32)); "
                                "host_to_global_array builds arrays from each process's rows: for a dry run's batch, "
                                "shard_batch(the global batch as jax.ShapeDtypeStruct, mesh)")


# ---------------------------------------------------------------------- restore into a target of another structure

def test_restore_into_one_node_of_a_saved_tuple_or_the_reverse_names_the_target_that_fits(tmp_path, devices):
    # Was: "14 variable(s) differ: state/up/kernel: missing from the checkpoint; ... Build the model with the
    # hyperparameters saved in .../config", though every shape fit: the pair (model, optimizer) was saved.
    mesh = gs.make_mesh(model_axis=2)
    model = Block(nnx.Rngs(0))
    optimizer = nnx.Optimizer(model, optax.adam(1e-3), wrt=nnx.Param)
    with checkpoint.CheckpointWriter(tmp_path, keep=5) as writer:
        writer.save(1, nnx.state((model, optimizer)), jax.random.key(0))
        writer.save(2, nnx.state(model), jax.random.key(0))
    for step, target, needle in (
            (1, model, "The checkpoint holds every variable of the target under '0/': it was saved from a tuple or "
                       "dict holding this node, e.g. nnx.state((model, optimizer)); build the target from the same: "
                       "abstract_state_for((model, optimizer), mesh, rule)"),
            (2, (model, optimizer), "The target holds every variable of the checkpoint under '0/': the checkpoint "
                                    "was saved from that one node; build the target from it alone, e.g. "
                                    "abstract_state_for(model, mesh, rule)")):
        with pytest.raises(ValueError) as error:
            checkpoint.restore(tmp_path / str(step), checkpoint.abstract_state_for(target, mesh, "fsdp"))
        assert str(error.value).endswith(needle), str(error.value)
        assert "hyperparameters" not in str(error.value)
    restored = checkpoint.restore(tmp_path / "1", checkpoint.abstract_state_for((model, optimizer), mesh, "fsdp"))
    np.testing.assert_array_equal(restored.state[0]["up"]["kernel"][...], model.up.kernel[...])
    with pytest.raises(ValueError, match=r"Build the model with the hyperparameters saved in"):  # shapes do differ
        checkpoint.restore(tmp_path / "2", checkpoint.abstract_state_for(Block(nnx.Rngs(0), hidden=32), mesh))


# ------------------------------------------------------------------- init_sharded of a constructor of other draws

class DrawsFrom(nnx.Module):
    """A kernel and a bias from ``draw(shape)``: NumPy's global random state, or a generator seeded inside."""

    def __init__(self, draw):
        self.kernel = nnx.Param(jnp.asarray(draw((64, 64)), jnp.float32), **gs.axes("embed", "mlp"))
        self.bias = nnx.Param(jnp.asarray(draw((64,)), jnp.float32), **gs.axes("mlp"))


def test_init_sharded_refuses_a_constructor_whose_groups_would_hold_other_draws(devices, monkeypatch):
    # Was silent: each group of variables is computed by its own trace of the constructor, so with np.random's global
    # state the kernel and the bias came from two other draws than any eager construction makes (a permutation and
    # its inverse kept in two variables would no longer match).
    monkeypatch.setattr(gensbi_sharding.init, "GROUP_BYTES", 1)  # every variable its own group, as a model of GBs has
    mesh = gs.make_mesh(model_axis=2)

    def unseeded():
        return DrawsFrom(lambda shape: np.random.standard_normal(shape))

    with pytest.raises(ValueError) as error:
        gs.init_sharded(unseeded, mesh, "fsdp", warn=False)
    assert str(error.value).startswith("init_sharded traces the factory 'unseeded' once per group of variables, and "
                                       "two traces built different values"), str(error.value)
    assert "np.random.default_rng(0)" in str(error.value) and "shard_model(factory(), mesh, rule)" in str(error.value)

    def seeded():
        rng = np.random.default_rng(0)
        return DrawsFrom(lambda shape: rng.standard_normal(shape))

    built, eager = gs.init_sharded(seeded, mesh, "fsdp", warn=False), seeded()
    for name in ("kernel", "bias"):
        np.testing.assert_array_equal(getattr(built, name)[...], getattr(eager, name)[...])
    assert built.kernel[...].sharding.spec == P("data", None)


class Buffers(nnx.Module):
    def __init__(self, rngs):
        self.lin = nnx.Linear(4, 8, rngs=rngs)
        self.table = nnx.Variable(np.arange(16, dtype=np.float32))  # a fixed NumPy buffer, in one group's trace only
        self.count = nnx.BatchStat(3)


def test_init_sharded_takes_a_constructor_holding_fixed_numpy_values(devices, monkeypatch):
    # Was refused as "two traces built different values": a NumPy-valued variable is a constant only its own group's
    # trace returns, so that trace's digest held one constant more than the others'.
    monkeypatch.setattr(gensbi_sharding.init, "GROUP_BYTES", 1)
    mesh = gs.make_mesh(model_axis=2)
    built = gs.init_sharded(lambda: Buffers(nnx.Rngs(0)), mesh, "fsdp", warn=False)
    eager = Buffers(nnx.Rngs(0))
    np.testing.assert_array_equal(built.table[...], np.arange(16, dtype=np.float32))
    np.testing.assert_array_equal(built.lin.kernel[...], eager.lin.kernel[...])
    assert built.count.get_value() == 3  # a Python scalar stays one, as factory() holds it

    def unseeded_buffer():  # a global draw kept as NumPy: still told apart, the buffer being in every trace's digest
        model = Buffers(nnx.Rngs(0))
        model.table = nnx.Variable(np.random.standard_normal(16).astype(np.float32))
        return model

    with pytest.raises(ValueError, match="two traces built different values"):
        gs.init_sharded(unseeded_buffer, mesh, "fsdp", warn=False)


def test_init_sharded_digests_its_traces_only_when_there_are_groups_to_compare(devices, monkeypatch):
    # Was: every call digested its one trace (str of every operation: ~0.5 s per 2,700), with nothing to compare.
    calls = []
    digest = gensbi_sharding.init.trace_digest
    monkeypatch.setattr(gensbi_sharding.init, "trace_digest", lambda *a: calls.append(1) or digest(*a))
    mesh = gs.make_mesh(model_axis=2)
    gs.init_sharded(lambda: Buffers(nnx.Rngs(0)), mesh, "fsdp", warn=False)
    assert calls == []
    monkeypatch.setattr(gensbi_sharding.init, "GROUP_BYTES", 1)  # 3 groups (kernel, bias, table): each digested
    gs.init_sharded(lambda: Buffers(nnx.Rngs(0)), mesh, "fsdp", warn=False)
    assert len(calls) == 3


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

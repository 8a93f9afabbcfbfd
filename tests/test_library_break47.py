"""The library broken with bad and odd-but-valid input, round 47: variables offloaded to host memory counted as
device bytes by ``describe``/``bytes_per_device``; an activation name entry that is no str (a list) failing
``constrain`` with "unhashable type"; a NumPy array or scalar of a dtype JAX lacks (datetime64, float128) failing
deep in JAX or Orbax; a writer leaving Orbax's cleanup of saves cut short running into the script's exit; an
optimizer holding inf as a sentinel never checkpointed; a committed step named unsaved when keep could not delete an
older one.

In-process, 8 simulated CPU devices (conftest); tiny arrays; one subprocess (slow)."""

import os
import re
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx
from jax.sharding import NamedSharding, PartitionSpec as P

import gensbi_sharding as gs
from gensbi_sharding.checkpoint import CheckpointWriter, abstract_state_for, committed_steps, restore
from gensbi_sharding.checkpoint_steps import non_finite


@pytest.mark.parametrize("kind", ["pinned_host", "unpinned_host"])
def test_describe_counts_no_device_bytes_for_a_variable_in_host_memory(devices, kind):
    # Was: a kernel offloaded to host memory (memory_kind "pinned_host", as MaxText offloads optimizer state) counted
    # on every device (64 B each: 96 B with the bias), its row "P('data', None)", as if it took device memory.
    mesh = gs.make_mesh(model_axis=2)
    model = nnx.Linear(8, 8, rngs=nnx.Rngs(0))  # kernel 256 B, bias 32 B
    gs.shard_model(model, mesh, "replicated")
    model.kernel.set_value(jax.device_put(model.kernel[...], NamedSharding(mesh, P("data", None), memory_kind=kind)))
    assert gs.bytes_per_device(model) == dict.fromkeys(range(8), 32)  # the bias only, on every device
    report = gs.describe(model, mesh)
    assert report.bytes_per_device == dict.fromkeys(range(8), 32)
    assert report.placements == {"bias": "P()", "kernel": f"P('data', None) in {kind}"}
    assert [(v.path, v.nbytes, v.max_device_bytes) for v in report.variables] == [("bias", 32, 32),
                                                                                 ("kernel", 256, 0)]
    assert f"P('data', None) in {kind}" in str(report)
    # A replicated variable in host memory costs no device its bytes: not among the largest replicated.
    model.bias.set_value(jax.device_put(model.bias[...], NamedSharding(mesh, P(), memory_kind=kind)))
    model.kernel.set_value(jax.device_put(model.kernel[...], NamedSharding(mesh, P("data", None))))
    report = gs.describe(model, mesh)
    assert report.largest_replicated == ()
    assert report.bytes_per_device == dict.fromkeys(range(8), 64)  # the kernel's quarter
    # An abstract state planned into host memory (a dry run of an offloaded state): no device bytes either.
    abstract = jax.ShapeDtypeStruct((8, 8), jnp.float32, sharding=NamedSharding(mesh, P(), memory_kind=kind))
    assert gs.bytes_per_device({"w": abstract}) == {}


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


@pytest.mark.parametrize("dtype", ["datetime64[D]", "timedelta64[s]", "U3"])
def test_a_numpy_array_of_a_dtype_jax_lacks_is_named_by_every_function_placing_or_saving_it(devices, tmp_path, dtype):
    # Was: JAX's "Dtype datetime64[D] is not a valid JAX array type" (shard_batch, replicate, host_to_global_array,
    # constrain, shard_model: its variables before this one already moved), "function build ... traced for jit returned
    # a value of type <class 'numpy.ndarray'>" (init_sharded, abstract_sharded) and Orbax's "Unsupported data type"
    # from its writing threads (CheckpointWriter.save), naming neither the leaf nor the fix. A str array was already
    # refused as a batch leaf (a dtype of kind "U"); datetime64, timedelta64 and float128 (kind "M", "m", "f") were not.
    mesh, odd = gs.make_mesh(model_axis=2), np.zeros(8, dtype=dtype)

    class Model(nnx.Module):
        def __init__(self):
            self.kernel = nnx.Param(jnp.ones((8, 4)))
            self.when = nnx.Variable(odd)  # after kernel: shard_model moved the kernel, then failed on this

    lacking = rf"has dtype {re.escape(str(odd.dtype))}, which no JAX array holds: pass numbers"
    for place in (lambda: gs.shard_batch({"x": np.ones(8), "when": odd}, mesh),
                  lambda: gs.replicate({"when": odd}, mesh),
                  lambda: gs.host_to_global_array({"when": odd}, mesh=mesh),
                  lambda: gs.constrain(odd, ("batch",), gs.PartitionAxis(), mesh)):
        with pytest.raises(TypeError, match=rf"(leaf \['when'\]|x) \(shape \(8,\)\) {lacking}"):
            place()
    model = Model()
    with pytest.raises(TypeError, match=rf"^place / shard_model: when \(shape \(8,\)\) {lacking}"):
        gs.shard_model(model, mesh)
    assert model.kernel[...].sharding == jax.sharding.SingleDeviceSharding(jax.devices()[0])  # nothing moved
    as_variable = rf": when holds ndarray of dtype {re.escape(str(odd.dtype))}; a variable's value"
    for build in (gs.init_sharded, gs.abstract_sharded):
        with pytest.raises(TypeError, match=rf"^{build.__name__}{as_variable}"):
            build(Model, mesh)
    with CheckpointWriter(tmp_path / "checkpoints", async_save=False) as writer:
        with pytest.raises(TypeError, match=rf"^CheckpointWriter\.save{as_variable}"):
            writer.save(1, model, jax.random.key(0))
        assert list((tmp_path / "checkpoints").iterdir()) == []  # nothing written
        model.when = nnx.Variable(np.arange(8))  # the fix the message names: numbers
        assert writer.save(1, model, jax.random.key(0)) and writer.steps() == [1]


@pytest.mark.skipif(np.dtype(np.longdouble).itemsize <= 8, reason="np.longdouble is float64 here: JAX holds it")
def test_a_numpy_scalar_of_a_dtype_jax_lacks_is_named(devices, tmp_path):
    # Was: np.longdouble(1.5) (float128), a NumPy number, kept as a scalar; Orbax's writing thread then failed,
    # "Unsupported data type: float128", naming no variable.
    class Model(nnx.Module):
        def __init__(self):
            self.kernel = nnx.Param(jnp.ones(4))
            self.scale = nnx.Variable(np.longdouble(1.5))

    message = r": scale holds longdouble of dtype float128; a variable's value"
    with pytest.raises(TypeError, match=rf"^init_sharded{message}"):
        gs.init_sharded(Model, gs.make_mesh(model_axis=2))
    with CheckpointWriter(tmp_path / "checkpoints", async_save=False) as writer:
        with pytest.raises(TypeError, match=rf"^CheckpointWriter\.save{message}"):
            writer.save(1, Model(), jax.random.key(0))
        assert writer.steps() == []


def test_a_writer_removes_saves_cut_short_before_its_constructor_returns(tmp_path):
    # Was: Orbax's CheckpointManager(cleanup_tmp_directories=True) removed them in a thread that close() never waited
    # for: often still there when the constructor returned (2 runs in 3), the thread running on into the exit.
    folder = tmp_path / "checkpoints"
    (folder / "3.orbax-checkpoint-tmp" / "arrays").mkdir(parents=True)  # a save cut short, as Orbax names it
    (folder / "3.orbax-checkpoint-tmp" / "arrays" / "shard").write_bytes(b"\0" * 1024)
    (folder / "4.orbax-checkpoint-tmp-1700000000").mkdir()  # an older Orbax's name for one
    (folder / "1.orbax-checkpoint-tmp").mkdir()
    writer = CheckpointWriter(folder)
    assert list(folder.iterdir()) == []
    writer.close()


_OPEN_AND_CLOSE = """
import sys
from gensbi_sharding.checkpoint import CheckpointWriter
CheckpointWriter(sys.argv[1]).close()  # nothing saved: the script ends at once
"""


@pytest.mark.slow  # a subprocess
def test_a_script_opening_and_closing_a_writer_ends_without_orbax_traceback(tmp_path):
    # Was (3 runs in 5): "ERROR:absl ... cannot schedule new futures after interpreter shutdown" and its traceback,
    # Orbax's cleanup thread cut by the exit, the save cut short left behind.
    folder = tmp_path / "checkpoints"
    (folder / "5.orbax-checkpoint-tmp").mkdir(parents=True)
    done = subprocess.run([sys.executable, "-c", _OPEN_AND_CLOSE, str(folder)], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])})
    assert (done.returncode, done.stderr, list(folder.iterdir())) == (0, "", [])


def test_an_optimizer_holding_inf_as_a_sentinel_is_checkpointed_and_nan_still_refused(tmp_path, devices, monkeypatch):
    # Was: FloatingPointError "the train state at step 1 is not finite (1 array(s) hold NaN or inf, e.g.
    # 1/opt_state/1/best_value)" at every save: optax.contrib.reduce_on_plateau starts best_value at inf (optax.lbfgs
    # its value), so such an optimizer could never be checkpointed.
    mesh = gs.make_mesh(model_axis=2)
    build = lambda: nnx.Linear(8, 4, rngs=nnx.Rngs(0))  # noqa: E731
    tx = lambda: optax.chain(optax.adam(1e-3), optax.contrib.reduce_on_plateau())  # noqa: E731
    model = gs.init_sharded(build, mesh)
    optimizer = gs.init_optimizer_sharded(model, tx())
    assert float(optimizer.opt_state[1].best_value[...]) == np.inf
    with CheckpointWriter(tmp_path / "checkpoints") as writer:
        assert writer.save(1, (model, optimizer), jax.random.key(0))
        # NaN in the optimizer's state, or inf in the model's, is still refused, naming it.
        optimizer.opt_state[1].best_value[...] = jnp.nan
        with pytest.raises(FloatingPointError, match=r"step 2 is not finite \(1 array\(s\) hold NaN or inf, e\.g\. "
                                                     r"1/opt_state/1/best_value\)"):
            writer.save(2, (model, optimizer), jax.random.key(0))
        optimizer.opt_state[1].best_value[...] = jnp.inf
        model.bias[...] = model.bias[...].at[0].set(jnp.inf)
        with pytest.raises(FloatingPointError, match=r"step 2 is not finite \(1 array\(s\) hold NaN or inf, e\.g\. "
                                                     r"0/bias\)"):
            writer.save(2, (model, optimizer), jax.random.key(0))
        assert writer.steps() == [1]
    target = abstract_state_for(lambda: (build(), nnx.Optimizer(build(), tx(), wrt=nnx.Param)), mesh)
    restored = restore(tmp_path / "checkpoints", target)
    assert float(restored.state[1]["opt_state"][1]["best_value"][...]) == np.inf
    # The same on the compiled check of several processes (or accelerators): inf allowed where named, NaN nowhere.
    monkeypatch.setattr(jax, "process_count", lambda: 2)
    flat = {"opt": jnp.array([np.inf, 1.0]), "param": jnp.array([np.inf, 1.0]), "nan": jnp.array([np.nan, 1.0])}
    assert non_finite(flat, {"opt", "nan"}) == ["param", "nan"]


def test_a_step_committed_whose_older_step_keep_cannot_delete_is_named_complete(tmp_path, devices):
    # Was: "checkpoint step 6 was not saved in ...: writing or committing it failed (OSError: Cannot call rmtree on a
    # symbolic link) ...; the latest complete checkpoint, .../6, is kept": step 6 named unsaved and kept at once. Here
    # keep=1 deletes step 5 after step 6's commit, and 5 is a link to another run's step (rmtree refuses links).
    model = nnx.Linear(2, 2, rngs=nnx.Rngs(0))
    with CheckpointWriter(tmp_path / "other", async_save=False) as writer:
        writer.save(5, model, jax.random.key(0))
    folder = tmp_path / "checkpoints"
    folder.mkdir()
    (folder / "5").symlink_to(tmp_path / "other" / "5", target_is_directory=True)
    with pytest.raises(RuntimeError) as err:
        with CheckpointWriter(folder, keep=1, async_save=False) as writer:
            writer.save(6, model, jax.random.key(0))
    assert str(err.value).startswith(f"checkpoint step 6 in {folder} is complete and kept ({folder / '6'}: resume "
                                     "from it), yet what follows its commit failed, e.g. deleting older steps (keep): "
                                     "OSError: Cannot call rmtree on a symbolic link; check")
    assert committed_steps(folder) == [5, 6] and committed_steps(tmp_path / "other") == [5]  # nothing lost

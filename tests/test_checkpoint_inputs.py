"""Checkpoint saving and restoring (``CheckpointWriter``, ``save``, ``maybe_save``, ``restore``,
``abstract_state_for``) given bad paths, states, keys, steps and restore targets: each named with its fix,
nothing written or overwritten.

In-process, 8 simulated CPU devices (conftest); tiny states.
"""

import re
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx
from jax.sharding import NamedSharding, PartitionSpec as P

import gensbi_sharding as gs
from gensbi_sharding import checkpoint
from gensbi_sharding.checkpoint import CheckpointWriter, abstract_state_for, committed_steps, find_checkpoint, restore
from library_helpers import AxesBlock, Small, mesh, model, unwritable


def test_a_state_donated_to_a_step_is_named_by_save_and_shard_model_and_nothing_is_written(tmp_path):
    # A script that donates its state (jax.jit(step, donate_argnums=0)) and then saves or places the old one got JAX's
    # "Array has been deleted with shape=float32[4]": no variable named, no fix; now both name it and the fix.
    from flax import nnx

    from gensbi_sharding.checkpoint import CheckpointWriter

    mesh = gs.make_mesh(model_axis=2)
    model = gs.init_sharded(lambda: nnx.Linear(8, 4, rngs=nnx.Rngs(0)), mesh, "fsdp")
    graphdef, state = nnx.split(model)
    new = jax.jit(lambda s: jax.tree.map(lambda a: a * 0.5, s), donate_argnums=0)(state)
    with CheckpointWriter(tmp_path / "ckpt") as writer:
        with pytest.raises(RuntimeError, match=r"CheckpointWriter.save: bias \(shape \(4,\)\) was deleted: donated"):
            writer.save(1, state, jax.random.key(0))
        assert writer.steps() == []
        assert writer.save(1, new, jax.random.key(0))  # the state the step returned saves
    with pytest.raises(RuntimeError, match=r"shard_model: bias \(shape \(4,\)\) was deleted.*state = step\(state\)"):
        gs.shard_model(model, mesh, "tensor")
    x = jnp.ones((8, 3))
    x.delete()
    with pytest.raises(RuntimeError, match=r"batch leaf \['x'\] \(shape \(8, 3\)\) was deleted"):
        gs.shard_batch({"x": x}, mesh)
    with pytest.raises(RuntimeError, match=r"host_arrays leaf \[.x.\] \(shape \(8, 3\)\) was deleted"):
        gs.host_to_global_array({"x": x}, mesh=mesh)


@pytest.mark.parametrize("scalar, changed", [(np.int64(2**40), "0"), (np.float64(1e300), "inf")])
def test_a_numpy_scalar_restore_would_change_is_refused_by_save_and_nothing_is_written(tmp_path, scalar, changed):
    """save({"count": np.int64(2**40)}) (x64 off) is refused as its 0-d array is: restore would place it as int32, 0.
    A NumPy scalar that fits saves."""
    state = {"w": np.ones(2, np.float32), "count": scalar}
    with CheckpointWriter(tmp_path / "ckpt") as writer:
        said = rf"count \(shape \(\)\) holds {re.escape(str(scalar))} \({scalar.dtype}\), beyond .*\(to {changed}"
        with pytest.raises(ValueError, match=rf"CheckpointWriter.save: {said}"):
            writer.save(1, state, jax.random.key(0))
        assert writer.steps() == []
        assert writer.save(1, {**state, "count": np.int64(3)}, jax.random.key(0))
    assert [p.name for p in (tmp_path / "ckpt").iterdir() if not p.name.startswith(".")] == ["1"]


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


@pytest.mark.parametrize("value, why", [
    ("~nosuchuser_53/ck", "'~nosuchuser_53' names no home folder here (Could not determine home directory.); pass the "
                          "folder's full path"),
    ("ck\x00/1", "holds a NUL character, which no path can; pass the folder's path without it")])
def test_a_checkpoint_path_no_folder_can_have_is_named_by_every_checkpoint_function(tmp_path, devices, value, why):
    # Was: Path.expanduser's RuntimeError "Could not determine home directory." and os's ValueError "embedded null
    # byte", naming neither the argument nor the value.
    from gensbi_sharding.checkpoint import abstract_state_for, committed_steps, find_checkpoint, restore, saved_config
    model = nnx.Linear(2, 2, rngs=nnx.Rngs(0))
    calls = {"directory": [lambda: CheckpointWriter(value), lambda: committed_steps(value)],
             "path": [lambda: restore(value, abstract_state_for(model, None)), lambda: find_checkpoint(value),
                      lambda: saved_config(value)],
             "base_dir": [lambda: find_checkpoint("1", base_dir=value)]}
    for name, refused in calls.items():
        for call in refused:
            with pytest.raises(ValueError) as err:
                call()
            assert str(err.value) == f"{name}={value!r}: {why}", str(err.value)


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


@pytest.mark.parametrize("below", [None, "gensbi-ckpt/a"])
def test_a_checkpoint_directory_that_cannot_be_written_is_refused_as_the_writer_is_built(unwritable, devices, below):
    # Was: a read-only folder was taken, its first save (after all the training before it) failing; one to be made
    # under it raised mkdir's bare "PermissionError: [Errno 1] Operation not permitted: '/sys/gensbi-ckpt'".
    parent, reason = unwritable
    directory = parent / below if below else parent
    with pytest.raises(OSError) as err:
        CheckpointWriter(directory, async_save=False)
    assert str(err.value) == (f"checkpoint directory {directory}: cannot write in {parent} ({reason}); pass a folder "
                              "you can write to (check its permissions, or a read-only mount)")
    assert not (parent / "gensbi-ckpt").exists()
    assert not any(p.name.startswith(".write-probe-") for p in parent.iterdir())


@pytest.mark.parametrize("below", ["gensbi-ckpt", "gensbi-ckpt/a"])
def test_a_checkpoint_directory_under_proc_is_refused_as_a_folder_taking_no_new_name(devices, below,
                                                                                     proc_takes_no_new_name):
    # Was "checkpoint directory /proc/gensbi-ckpt: cannot write in /proc (No such file or directory)", /proc existing:
    # /proc answers a new name with ENOENT (the harness's output folders said so already).
    with pytest.raises(OSError) as err:
        CheckpointWriter(Path("/proc") / below, async_save=False)
    assert str(err.value) == (
        f"checkpoint directory /proc/{below}: cannot create /proc/gensbi-ckpt: /proc exists, but takes no new files or "
        "folders: making one there fails with \"No such file or directory\" (a virtual file system, such as /proc); "
        "pass a folder you can write to (check its permissions, or a read-only mount)")


@pytest.mark.parametrize("odd, why", [
    ("\\", "a folder separator: arrays would be written outside it"),
    ("[x]", "a pattern: arrays saved there would never be read back")])
def test_a_checkpoint_folder_tensorstore_misreads_is_refused_by_the_writer_and_named_by_restore(tmp_path, devices, odd,
                                                                                                why):
    # Was: saved without a word, then restore said "checkpoint .../1 is damaged: its 'arrays' item cannot be read
    # (ValueError: NOT_FOUND: ...)", telling to move it aside; "a\\b" wrote its arrays into a/b/ beside it.
    model = nnx.Linear(2, 2, rngs=nnx.Rngs(0))
    folder = tmp_path / f"run{odd}1" / "checkpoints"
    with pytest.raises(ValueError) as err:
        CheckpointWriter(folder)
    assert str(err.value) == (f"checkpoint directory {folder} holds {odd!r}, which TensorStore (Orbax's array storage) "
                              f"reads as {why}; rename that folder, or pass another one")
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # nothing made, here or beside it
    with CheckpointWriter(tmp_path / "run1" / "checkpoints", async_save=False) as writer:
        writer.save(1, model, jax.random.key(0))
    (tmp_path / "run1").rename(tmp_path / f"run{odd}1")  # a run folder renamed after its save
    with pytest.raises(ValueError) as err:
        restore(tmp_path / f"run{odd}1", abstract_state_for(model, None))
    assert str(err.value) == (f"checkpoint {folder / '1'} holds {odd!r}, which TensorStore (Orbax's array storage) "
                              f"reads as {why.split(':')[0]}: its arrays cannot be read from there; rename that folder "
                              "and restore from its new path")
    (tmp_path / f"run{odd}1").rename(tmp_path / "run1")  # the fix given restores it
    assert restore(tmp_path / "run1", abstract_state_for(model, None)).step == 1


def test_a_restore_target_without_shardings_names_the_rule_argument_and_the_one_device_form(tmp_path, devices):
    # Was: "build the target with abstract_state_for(node, mesh, table)", a parameter abstract_state_for does not
    # have, for the target abstract_sharded(factory, None) gives (shapes, no shardings).
    from gensbi_sharding.checkpoint import abstract_state_for, restore
    factory = lambda: nnx.Linear(2, 4, rngs=nnx.Rngs(0))  # noqa: E731
    with CheckpointWriter(tmp_path, async_save=False) as writer:
        writer.save(1, nnx.state(factory()), jax.random.key(0))
    with pytest.raises(ValueError, match=r"restore target (bias|kernel) is ShapeDtypeStruct without a sharding; "
                                         r"build the target with abstract_state_for\(node, mesh, rule\) \(mesh=None: "
                                         r"on one device\)$"):
        restore(tmp_path, gs.abstract_sharded(factory, None))
    restored = restore(tmp_path, abstract_state_for(factory, None))  # the fix, as named
    np.testing.assert_array_equal(np.asarray(restored.state["kernel"][...]), np.asarray(factory().kernel[...]))


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


@pytest.mark.parametrize("bad", [
    {"state": None}, {"state": 3}, {"key": None}, {"key": jax.random.PRNGKey(0)}, {"info": 3}, {"info": {1: "a"}}])
def test_save_at_the_step_it_last_saved_still_names_a_bad_state_key_or_info(tmp_path, devices, bad):
    # Was: save(step, ...) at the writer's last saved step returned False before any check: maybe_save(30, ...) then
    # save(30, None, key) (the final save of a loop, state forgotten) passed without a word.
    state = nnx.state(nnx.Linear(2, 2, rngs=nnx.Rngs(0)))
    with CheckpointWriter(tmp_path / "ckpt", every=10, async_save=False) as writer:
        assert writer.maybe_save(10, state, jax.random.key(0))
        args = {"state": state, "key": jax.random.key(0), "info": None, **bad}
        with pytest.raises((TypeError, ValueError), match=r"(state|key|info)=|JSON keys are str"):
            writer.save(10, args["state"], args["key"], info=args["info"])
        assert writer.save(10, state, jax.random.key(0)) is False  # the same step, good arguments: nothing written
        assert writer.steps() == [10]


def test_restore_into_part_of_what_was_saved_names_the_whole_not_hyperparameters(tmp_path, devices):
    # Was: "6 variable(s) differ: state/1/opt_state/...: in the checkpoint, not in the model; ... Build the model with
    # the hyperparameters saved in .../config", though every variable of the target was saved at its shape: a target
    # of (model,) or the Params of (model, optimizer), under no prefix the "saved from a tuple" hint looks for.
    import optax

    from gensbi_sharding.checkpoint import abstract_state_for, restore

    mesh = gs.make_mesh(model_axis=2)

    def pair():
        model = nnx.Linear(4, 8, rngs=nnx.Rngs(0))
        return model, nnx.Optimizer(model, optax.adam(1e-3), wrt=nnx.Param)

    with CheckpointWriter(tmp_path / "ckpt", async_save=False) as writer:
        writer.save(1, nnx.state(pair()), jax.random.key(0))
    for target in (abstract_state_for(lambda: (pair()[0],), mesh, "fsdp"),
                   nnx.state(gs.abstract_sharded(pair, mesh, "fsdp"), nnx.Param)):
        with pytest.raises(ValueError) as err:
            restore(tmp_path / "ckpt", target)
        assert str(err.value).endswith(
            "6 more variable(s) (6 under '1', which the target lacks): restore into a target of all it holds, e.g. "
            "abstract_state_for((model, optimizer), mesh, rule), and keep the part you need"), str(err.value)
        assert "hyperparameters" not in str(err.value)
    restored = restore(tmp_path / "ckpt", abstract_state_for(pair, mesh, "fsdp"))
    assert restored.step == 1 and restored.state[0]["kernel"][...].shape == (4, 8)


@pytest.mark.parametrize("step, state, key, error, needle", [
    ("a", "state", "key", ValueError, "step='a'"),  # was int()'s "invalid literal for int() with base 10"
    (-1, "state", "key", ValueError, "step=-1"),  # was saved as step -1
    (1, "model", "key", TypeError, "state='model'"),  # was saved: a checkpoint holding a string
    (1, "state", None, TypeError, "key=None"),  # was saved without a key, then restore failed on it
])
def test_checkpoint_save_checks_its_arguments(tmp_path, model, step, state, key, error, needle):
    real = {"state": nnx.state(model), "key": jax.random.key(0)}
    writer = checkpoint.CheckpointWriter(tmp_path / "ck", every=1)
    with pytest.raises(error, match=needle.replace("(", r"\(")):
        writer.save(step, real.get(state, state) if isinstance(state, str) else state,
                    real.get(key, key) if isinstance(key, str) else key)
    writer.close()
    assert not any((tmp_path / "ck").glob("*")) if (tmp_path / "ck").exists() else True


@pytest.mark.parametrize("call, needle", [
    # Each was pathlib's "argument should be a str or an os.PathLike object ..., not 'int'" from deep
    # inside (or dict()'s "'int' object is not iterable"), raised after nothing was checked.
    (lambda ck: checkpoint.CheckpointWriter(5), "directory=5: pass a str or os.PathLike, e.g. directory='checkpoints'"),
    (lambda ck: checkpoint.CheckpointWriter(ck, config=5), "config=5 must be a mapping"),
    (lambda ck: checkpoint.CheckpointWriter(ck, async_save="no"), "async_save='no' must be True or False"),
    (lambda ck: checkpoint.restore(5, {"w": 1}), "path=5: pass a str or os.PathLike"),
    (lambda ck: checkpoint.saved_config(None), "path=None: pass a str or os.PathLike"),
    (lambda ck: checkpoint.find_checkpoint("ck", base_dir=5), "base_dir=5: pass a str or os.PathLike"),
    (lambda ck: checkpoint.committed_steps(5), "directory=5: pass a str or os.PathLike"),
])
def test_checkpoint_paths_and_options_get_a_clear_type_error(tmp_path, call, needle):
    with pytest.raises(TypeError) as err:
        call(tmp_path / "ck")
    assert needle in str(err.value), str(err.value)
    assert not (tmp_path / "ck").exists()  # refused before Orbax made the folder


def test_restore_without_a_target_names_abstract_state_for(tmp_path, model):
    # Was "does not fit the current model, 51 variable(s) differ: ... in the checkpoint, not in the model".
    with checkpoint.CheckpointWriter(tmp_path / "ck", every=1) as writer:
        writer.save(1, nnx.state(model), jax.random.key(0))
    with pytest.raises(TypeError, match=r"abstract_state=None .*abstract_state_for\(model, mesh, rule\)"):
        checkpoint.restore(tmp_path / "ck", None)


@pytest.mark.parametrize("saved_typed", [True, False])
@pytest.mark.parametrize("target_typed", [True, False])
def test_restore_gives_a_key_as_the_target_holds_it(tmp_path, mesh, saved_typed, target_typed):
    # Was the saved kind whatever the target: a raw uint32 (2,) array where the model held a typed key, or the reverse.
    with checkpoint.CheckpointWriter(tmp_path) as writer:
        writer.save(1, {"k": jax.random.key(3) if saved_typed else jax.random.PRNGKey(3)}, jax.random.key(0))
    key = jax.random.key(0) if target_typed else jax.random.PRNGKey(0)
    target = {"k": jax.ShapeDtypeStruct(key.shape, key.dtype, sharding=NamedSharding(mesh, P()))}
    restored = checkpoint.restore(tmp_path, target)
    value = restored.state["k"]
    assert (value.dtype, value.shape) == (key.dtype, key.shape)
    assert (jax.random.key_data(value) if target_typed else value).tolist() == [0, 3]
    assert jax.random.key_data(restored.key).tolist() == [0, 0]  # the saved RNG key stays typed


def test_a_zero_size_key_array_is_saved_and_restored_as_its_target_holds_it(tmp_path, mesh):
    # Was Orbax's 'Cannot save arrays with zero size' inside save, then a TimeoutError when the writer exited.
    with checkpoint.CheckpointWriter(tmp_path) as writer:
        writer.save(1, {"none": jax.random.split(jax.random.key(1), 0), "two": jax.random.split(jax.random.key(1), 2)},
                    jax.random.key(0))
    keys = {"none": jax.random.split(jax.random.key(0), 0), "two": jax.random.split(jax.random.key(0), 2)}
    target = {k: jax.ShapeDtypeStruct(v.shape, v.dtype, sharding=NamedSharding(mesh, P())) for k, v in keys.items()}
    state = checkpoint.restore(tmp_path, target).state
    assert [(state[k].dtype, state[k].shape) for k in keys] == [(keys[k].dtype, keys[k].shape) for k in keys]
    assert (jax.random.key_data(state["two"]) == jax.random.key_data(jax.random.split(jax.random.key(1), 2))).all()


@pytest.mark.parametrize("spec", [P("data"), P(None, "model")])
def test_restore_refuses_a_key_sharding_that_cannot_split_the_key(tmp_path, mesh, spec):
    # Was "checkpoint ... is damaged ... (IndivisibleError ...); ... start without it" for a sound checkpoint, or
    # JAX's rank error naming no argument.
    with checkpoint.CheckpointWriter(tmp_path) as writer:
        writer.save(1, {"a": jnp.ones(8)}, jax.random.key(0))
    target = {"a": jax.ShapeDtypeStruct((8,), jnp.float32, sharding=NamedSharding(mesh, P("data")))}
    with pytest.raises(ValueError, match=r"restore target rng \(shape \(2,\)\) cannot be split as .* key_sharding "
                                         r"must fit the saved key's data, e\.g\. PartitionSpec\(\)"):
        checkpoint.restore(tmp_path, target, key_sharding=NamedSharding(mesh, spec))
    assert checkpoint.restore(tmp_path, target).state["a"].tolist() == [1.0] * 8


def block_and_optimizer():
    """A (4, 2) mesh, an ``AxesBlock`` and its Adam optimizer: the nodes the restore-across-nodes tests save."""
    model = AxesBlock(nnx.Rngs(0))
    return gs.make_mesh(model_axis=2), model, nnx.Optimizer(model, optax.adam(1e-3), wrt=nnx.Param)


def save_steps(folder, *nodes):
    """Save ``nnx.state`` of each of ``nodes`` (a node, or a tuple or dict of them) at steps 1, 2, ... in ``folder``."""
    with checkpoint.CheckpointWriter(folder, keep=5) as writer:
        for step, node in enumerate(nodes, start=1):
            writer.save(step, nnx.state(node), jax.random.key(0))


def restore_refusal(folder, target, mesh):
    """The words of the ``ValueError`` ``restore`` raises for ``folder`` into ``target`` laid out by fsdp on ``mesh``."""
    with pytest.raises(ValueError) as error:
        restore(folder, abstract_state_for(target, mesh, "fsdp"))
    return str(error.value)


@pytest.mark.slow  # ~0.7 s on 2 cores
def test_restore_into_one_node_of_a_saved_tuple_or_the_reverse_names_the_target_that_fits(tmp_path, devices):
    # Was: "14 variable(s) differ: state/up/kernel: missing from the checkpoint; ... Build the model with the
    # hyperparameters saved in .../config", though every shape fit: the pair (model, optimizer) was saved.
    mesh, model, optimizer = block_and_optimizer()
    save_steps(tmp_path, (model, optimizer), model)
    for step, target, needle in (
            (1, model, "The checkpoint holds every variable of the target under '0/': it was saved from a tuple or "
                       "dict holding this node, e.g. nnx.state((model, optimizer)); build the target from the same: "
                       "abstract_state_for((model, optimizer), mesh, rule)"),
            (2, (model, optimizer), "The target holds every variable of the checkpoint under '0/': the checkpoint "
                                    "was saved from that one node; build the target from it alone, e.g. "
                                    "abstract_state_for(model, mesh, rule)")):
        refusal = restore_refusal(tmp_path / str(step), target, mesh)
        assert needle in refusal, refusal  # then, into one node: Orbax's read of that part alone
        assert "hyperparameters" not in refusal
    restored = checkpoint.restore(tmp_path / "1", checkpoint.abstract_state_for((model, optimizer), mesh, "fsdp"))
    np.testing.assert_array_equal(restored.state[0]["up"]["kernel"][...], model.up.kernel[...])
    with pytest.raises(ValueError, match=r"Build the model with the hyperparameters it was saved with"):  # shapes differ
        checkpoint.restore(tmp_path / "2", checkpoint.abstract_state_for(AxesBlock(nnx.Rngs(0), hidden=32), mesh))


def test_restore_across_a_model_and_an_optimizer_alone_names_the_moments_not_a_node(tmp_path, devices):
    # Was: "The checkpoint holds every variable of the target under 'opt_state/0/mu/': it was saved from a tuple or dict
    # holding this node, e.g. nnx.state((model, optimizer))" (and the reverse, "saved from that one node"), a target
    # refused again: an nnx.Optimizer holds no model, only moments named as its parameters.
    mesh, model, optimizer = block_and_optimizer()
    save_steps(tmp_path, optimizer, model)
    under = "under 'opt_state/0/mu/' and 'opt_state/0/nu/'"
    for step, target, fix in (
            (1, model, f"The checkpoint holds the other's variables only as an optimizer's moments, {under}: the "
                       "checkpoint was saved from an nnx.Optimizer alone; build the target from the same: "
                       "abstract_state_for(optimizer, mesh, rule)"),
            (2, optimizer, f"The target holds the other's variables only as an optimizer's moments, {under}: the "
                           "checkpoint was saved from a model alone; build the target from the same: "
                           "abstract_state_for(model, mesh, rule)")):
        refusal = restore_refusal(tmp_path / str(step), target, mesh)
        assert refusal.endswith(fix), refusal
    restored = restore(tmp_path / "1", abstract_state_for(optimizer, mesh, "fsdp"))  # the fix given restores it
    assert int(restored.state["step"][...]) == 0


class _Net(nnx.Module):
    """A parent Module holding two Linears of other shapes as attributes ``lin`` and ``out``."""

    def __init__(self, rngs):
        self.lin, self.out = nnx.Linear(4, 8, rngs=rngs), nnx.Linear(8, 2, rngs=rngs)


@pytest.mark.parametrize("part", ["lin", "out"])
def test_restore_of_one_attribute_of_a_saved_module_names_the_parent_and_both_fixes_restore(tmp_path, devices, part):
    # Was: "under 'lin/' and 'out/': it was saved from a tuple or dict holding this node, e.g. nnx.state({'lin':
    # <node>, 'out': <node>}); build the target from the same", of a Module's checkpoint (its attribute lin), naming
    # 'out/' too, whose shapes do not fit, and for a Linear of out's shapes Orbax's read of the part under 'lin/'.
    import orbax.checkpoint as ocp

    mesh, rule, saved = gs.make_mesh(model_axis=2), "fsdp", _Net(nnx.Rngs(0))
    save_steps(tmp_path, saved)
    model = getattr(_Net(nnx.Rngs(1)), part)
    refusal = restore_refusal(tmp_path / "1", model, mesh)
    assert refusal.split(". ", 1)[1].startswith(
        f"The checkpoint holds every variable of the target under '{part}/': it was saved from a parent holding this "
        f"node as '{part}' (a Module with it as attribute self.{part}, or a dict under that key; the checkpoint's top "
        "level: {'lin': <node>, 'out': <node>}); restore that parent and take the node from it: restored = restore("
        f"{str(tmp_path / '1')!r}, abstract_state_for(parent, mesh, rule)); nnx.update(parent, restored.state); "
        f"parent.{part} is it (a dict's: parent[{part!r}]); or read the part under '{part}/' alone with Orbax: "), refusal
    parent = _Net(nnx.Rngs(2))  # the first fix, as written
    exec(refusal.split("take the node from it: ")[1].split(f"; parent.{part} is it")[0],
         {"restore": restore, "abstract_state_for": abstract_state_for, "nnx": nnx, "mesh": mesh, "rule": rule,
          "parent": parent})
    np.testing.assert_array_equal(getattr(parent, part).kernel[...], getattr(saved, part).kernel[...])
    exec(refusal.split("alone with Orbax: ")[1], {"ocp": ocp, "nnx": nnx, "abstract_state_for": abstract_state_for,
                                                  "mesh": mesh, "rule": rule, "model": model})  # the second
    np.testing.assert_array_equal(model.kernel[...], getattr(saved, part).kernel[...])


class _Stack(nnx.Module):
    """A parent Module holding two Linears of other shapes in a list, ``layers``."""

    def __init__(self, rngs):
        self.layers = nnx.List([nnx.Linear(4, 8, rngs=rngs), nnx.Linear(8, 2, rngs=rngs)])


@pytest.mark.parametrize("parent_of, words", [
    (lambda rngs: {"lin": nnx.Linear(4, 8, rngs=rngs), "out": nnx.Linear(8, 2, rngs=rngs)}, "parent['lin']"),
    (_Stack, "parent.layers[0]")])
def test_restore_of_one_node_of_a_saved_dict_or_list_names_it_as_python_reaches_it(tmp_path, devices, parent_of,
                                                                                   words):
    # Was: "...; parent.lin is it" of a saved dict {'lin': ..., 'out': ...} (parent['lin'] there: parent.lin is an
    # AttributeError), and "a Module with it as attribute self.layers.0 ...; parent.layers.0 is it" of a list's item,
    # no Python at all (self.layers[0]).
    mesh, rule, saved = gs.make_mesh(model_axis=2), "fsdp", parent_of(nnx.Rngs(0))
    save_steps(tmp_path, saved)
    node = eval(words, {"parent": parent_of(nnx.Rngs(1))})
    refusal = restore_refusal(tmp_path / "1", node, mesh)
    said = ("parent.layers[0] is it (a dict's: parent['layers'][0])" if "layers" in words else
            "parent.lin is it (a dict's: parent['lin'])")
    assert f"(a Module with it as attribute self{said.split(' is it')[0].removeprefix('parent')}, or a dict" in refusal
    assert f"nnx.update(parent, restored.state); {said}; or read the part" in refusal, refusal
    parent = parent_of(nnx.Rngs(2))  # the fix, as written, then the node as the words name it
    exec(refusal.split("take the node from it: ")[1].split("; parent")[0],
         {"restore": restore, "abstract_state_for": abstract_state_for, "nnx": nnx, "mesh": mesh, "rule": rule,
          "parent": parent})
    np.testing.assert_array_equal(eval(words, {"parent": parent}).kernel[...], eval(words, {"parent": saved}).kernel[...])


def test_restore_names_every_node_holding_the_target_and_the_node_itself_to_build(tmp_path, devices):
    # Was: only the first in sorted order, "under 'ema/'" where 'model/' held it as well; and the target of one node
    # of a pair was "e.g. abstract_state_for(model, mesh, rule)" whichever node that was (the optimizer here).
    mesh, model, optimizer = block_and_optimizer()
    save_steps(tmp_path, {"model": model, "ema": nnx.clone(model)}, model, optimizer)
    for step, target, fix in (
            (1, model, "The checkpoint holds every variable of the target under 'ema/' and 'model/': it was saved "
                       "from a parent holding this node as 'ema' (a Module with it as attribute self.ema, or a dict "
                       "under that key; the checkpoint's top level: {'ema': <node>, 'model': <node>}); restore that "
                       "parent and take the node from it: restored = restore("),
            (2, {"model": model, "ema": nnx.clone(model)}, "The target holds every variable of the checkpoint under "
             "'ema/' and 'model/': the checkpoint was saved from one of them; build the target from it alone, e.g. "
             "abstract_state_for(ema, mesh, rule)"),
            (3, (model, optimizer), "The target holds every variable of the checkpoint under '1/': the checkpoint "
                                    "was saved from that one node; build the target from it alone, e.g. "
                                    "abstract_state_for(optimizer, mesh, rule)")):
        refusal = restore_refusal(tmp_path / str(step), target, mesh)
        assert fix in refusal, refusal  # then, into one node: Orbax's read of that part alone


@pytest.mark.parametrize("saved_as", ["tuple", "dict"])
def test_restore_from_a_checkpoint_of_three_nodes_names_a_target_of_all_three(tmp_path, devices, saved_as):
    # Was: restored into the model, "build the target from the same: abstract_state_for((model, optimizer), mesh,
    # rule)"; restored into that pair, "restore into a target of all it holds, e.g. abstract_state_for((model,
    # optimizer), mesh, rule)" again, the target just refused: a checkpoint of (model, optimizer, ema), or a harness
    # run's {'0', '1', '2', 'best'}, was never named
    mesh = gs.make_mesh(model_axis=2)
    model = AxesBlock(nnx.Rngs(0))
    optimizer, ema = nnx.Optimizer(model, optax.adam(1e-3), wrt=nnx.Param), nnx.clone(model)
    nodes = (model, optimizer, ema) if saved_as == "tuple" else {"model": model, "opt": optimizer, "ema": ema}
    whole = ("(model, optimizer, <node 2>)" if saved_as == "tuple" else
             "{'ema': <node>, 'model': <node>, 'opt': <node>}")
    with checkpoint.CheckpointWriter(tmp_path) as writer:
        writer.save(1, nnx.state(nodes), jax.random.key(0))
    alone = model if saved_as == "tuple" else {"model": model}
    refusal = restore_refusal(tmp_path, alone, mesh)
    if saved_as == "tuple":  # the model alone: under '0/' of the checkpoint
        assert f"e.g. nnx.state({whole}); build the target from the same: abstract_state_for({whole}, mesh, " \
               "rule); or read the part under '0/' alone with Orbax" in refusal, refusal
    pair = (model, optimizer) if saved_as == "tuple" else {"model": model, "opt": optimizer}
    refusal = restore_refusal(tmp_path, pair, mesh)
    lacked = "'2'" if saved_as == "tuple" else "'ema'"
    assert refusal.endswith(
        f"The checkpoint holds the whole target as saved and 2 more variable(s) (2 under {lacked}, which the target "
        f"lacks): restore into a target of all it holds, e.g. abstract_state_for({whole}, mesh, rule), and keep the "
        "part you need"), refusal
    restored = checkpoint.restore(tmp_path, checkpoint.abstract_state_for(nodes, mesh, "fsdp"))  # the target named
    kernel = restored.state[2 if saved_as == "tuple" else "ema"]["up"]["kernel"][...]
    np.testing.assert_array_equal(kernel, model.up.kernel[...])


class _Two(nnx.Module):
    def __init__(self, rngs):
        self.a = nnx.Linear(2, 3, rngs=rngs)
        self.b = nnx.Linear(3, 2, rngs=rngs)


def _save_train_state(directory, tx, wrt):
    from gensbi_sharding import checkpoint
    model = _Two(nnx.Rngs(0))
    with checkpoint.CheckpointWriter(directory) as writer:
        writer.save(1, nnx.state((model, nnx.Optimizer(model, tx, wrt=wrt))), jax.random.key(0))


@pytest.mark.slow
@pytest.mark.parametrize("saved_wrt, target_wrt, example", [
    (nnx.Param, nnx.PathContains("a"), r"the checkpoint's covers b/(bias|kernel) \(1/opt_state/0/mu/b/"),
    (nnx.PathContains("a"), nnx.Param, r"the target's covers b/(bias|kernel) \(1/opt_state/0/mu/b/"),
], ids=["target-covers-fewer", "target-covers-more"])
def test_restoring_into_an_optimizer_of_another_wrt_names_wrt(tmp_path, saved_wrt, target_wrt, example):
    # Was: "another optax transformation or settings", never naming wrt= (the optimizer's transformation was the same).
    import optax
    from gensbi_sharding import checkpoint
    _save_train_state(tmp_path, optax.adam(1e-3), saved_wrt)
    model = _Two(nnx.Rngs(1))
    target = checkpoint.abstract_state_for((model, nnx.Optimizer(model, optax.adam(1e-3), wrt=target_wrt)), None)
    with pytest.raises(ValueError, match=rf"cover different parameters .*{example}.*another wrt= filter"):
        checkpoint.restore(tmp_path / "1", target)


@pytest.mark.slow
def test_restoring_into_an_optimizer_of_another_transformation_still_names_it(tmp_path):
    # Same parameters covered, another transformation (adam saved, sgd with momentum now): not a wrt= difference.
    import optax
    from gensbi_sharding import checkpoint
    _save_train_state(tmp_path, optax.adam(1e-3), nnx.Param)
    model = _Two(nnx.Rngs(1))
    target = checkpoint.abstract_state_for((model, nnx.Optimizer(model, optax.sgd(1e-3, momentum=0.9), wrt=nnx.Param)),
                                           None)
    with pytest.raises(ValueError, match=r"another optax transformation or settings") as info:
        checkpoint.restore(tmp_path / "1", target)
    assert "wrt=" not in str(info.value).split("Only the optimizer state differs")[0]


@pytest.mark.slow
def test_restoring_into_a_stateless_optimizer_names_the_transformation_not_wrt(tmp_path):
    # Plain sgd keeps no per-parameter state: its optimizer covers none, which is another transformation, not wrt=.
    import optax
    from gensbi_sharding import checkpoint
    _save_train_state(tmp_path, optax.adam(1e-3), nnx.Param)
    model = _Two(nnx.Rngs(1))
    target = checkpoint.abstract_state_for((model, nnx.Optimizer(model, optax.sgd(1e-3), wrt=nnx.Param)), None)
    with pytest.raises(ValueError, match=r"another optax transformation or settings") as info:
        checkpoint.restore(tmp_path / "1", target)
    assert "cover different parameters" not in str(info.value)


def test_maybe_save_at_a_step_not_due_still_names_a_bad_state_key_info_or_a_closed_writer(tmp_path, devices):
    # Was: round 45 made save() check its arguments before its no-op at the last saved step; maybe_save(step, ...) at
    # a step not due returned False for any state, key or info, or a closed writer, until its first due step.
    import jax.numpy as jnp
    import pytest

    from gensbi_sharding.checkpoint import CheckpointWriter

    state, key = nnx.state(nnx.Linear(2, 2, rngs=nnx.Rngs(0))), jax.random.key(0)
    writer = CheckpointWriter(tmp_path / "ck", every=10, async_save=False)
    assert writer.maybe_save(3, state, key, info={"best_step": 3}) is False  # valid and not due: nothing written
    for bad_state, bad_key, bad_info, error, message in [
            (None, key, None, TypeError, r"^state=None must be an nnx\.State"),
            (state, jnp.zeros(2), None, TypeError, r"must be a typed JAX PRNG key"),
            (state, key, {"when": object()}, ValueError, r"^info=.* must be JSON-serialisable")]:
        with pytest.raises(error, match=message):
            writer.maybe_save(3, bad_state, bad_key, info=bad_info)
    assert writer.maybe_save(10, state, key) is True and writer.steps() == [10]
    writer.close()
    with pytest.raises(RuntimeError, match="is closed; open a new one to save"):
        writer.maybe_save(11, state, key)
    assert writer.steps() == [10]


def save(directory, state, step=1, **kwargs):
    with CheckpointWriter(directory, **kwargs) as writer:
        assert writer.save(step, state, jax.random.key(0))
        return writer.directory


def test_a_path_with_a_tilde_is_the_home_folder_for_every_checkpoint_function(tmp_path, monkeypatch, devices):
    """``CheckpointWriter("~/ck")`` wrote into a folder named ``~`` under the working directory, and
    ``committed_steps`` and ``base_dir`` read it there, while ``restore("~/ck")`` looked in the home folder."""
    home, cwd = tmp_path / "home", tmp_path / "cwd"
    home.mkdir()
    cwd.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(cwd)
    model = Small(nnx.Rngs(0))
    assert save("~/run/checkpoints", nnx.state(model)) == home / "run" / "checkpoints"
    assert not (cwd / "~").exists()
    assert committed_steps("~/run/checkpoints") == [1]
    mesh = gs.make_mesh(model_axis=2)
    restored = restore("~/run", abstract_state_for(Small(nnx.Rngs(1)), mesh, "fsdp"))
    assert restored.path == home / "run" / "checkpoints" / "1"
    np.testing.assert_array_equal(restored.state["up"]["kernel"].get_value(), model.up.kernel.get_value())
    assert find_checkpoint("run", base_dir="~") == restored.path


@pytest.fixture(scope="module")
def adam_run(tmp_path_factory, devices):
    """A (model, adam optimizer) checkpoint saved under tensor on (4, 2)."""
    mesh = gs.make_mesh(model_axis=2)
    model = gs.init_sharded(lambda: Small(nnx.Rngs(0)), mesh, "tensor", warn=False)
    optimizer = gs.init_optimizer_sharded(model, optax.adam(1e-3), "tensor")
    return save(tmp_path_factory.mktemp("adam") / "checkpoints", nnx.state((model, optimizer))), model


@pytest.mark.slow
def test_a_checkpoint_of_another_optimizer_names_the_optimizer_and_how_to_switch(adam_run, devices):
    """adam saved, sgd restored: every difference is optimizer state, but the fix named the model's hyperparameters;
    following the fix given (the optimizer as saved, then the new one over the restored model) restores the weights."""
    directory, saved = adam_run
    mesh = gs.make_mesh(model_axis=1)
    model = Small(nnx.Rngs(1))
    for tx in (optax.sgd(1e-3), optax.sgd(1e-3, momentum=0.9), optax.lion(1e-3)):
        with pytest.raises(ValueError, match=r"opt_state.*Only the optimizer state differs: the checkpoint was saved "
                                             r"with another optimizer.*nnx.Optimizer\(model, new_tx") as error:
            restore(directory, abstract_state_for((model, nnx.Optimizer(model, tx, wrt=nnx.Param)), mesh, "fsdp"))
        assert "hyperparameters" not in str(error.value)
    restored = restore(directory, abstract_state_for((model, nnx.Optimizer(model, optax.adam(1e-3), wrt=nnx.Param)),
                                                     mesh, "fsdp"))
    nnx.update(model, restored.state[0])
    switched = nnx.Optimizer(model, optax.sgd(1e-3), wrt=nnx.Param)
    np.testing.assert_array_equal(model.up.kernel.get_value(), saved.up.kernel.get_value())
    assert switched.step.get_value() == 0 and jax.tree.leaves(switched.opt_state) == []  # plain sgd keeps no state


@pytest.mark.slow
def test_a_renamed_attribute_is_named_with_both_names(adam_run, devices):
    """self.up renamed self.up_proj: every difference is that name (in the model and in the optimizer's moments), but
    the fix named the model's hyperparameters; a layer added still names them."""
    directory, saved = adam_run
    mesh = gs.make_mesh(model_axis=2)

    def target(model):
        return abstract_state_for((model, nnx.Optimizer(model, optax.adam(1e-3), wrt=nnx.Param)), mesh, "tensor")

    with pytest.raises(ValueError, match=r"up_proj/kernel: missing.*Every difference is one name: the checkpoint's "
                                         r"'up' is the target's 'up_proj'.*name it 'up' again"):
        restore(directory, target(Small(nnx.Rngs(1), first="up_proj")))
    bigger = Small(nnx.Rngs(1))
    bigger.extra = nnx.Linear(4, 4, rngs=nnx.Rngs(2))
    with pytest.raises(ValueError, match="extra/kernel: missing.*Build the model with the hyperparameters"):
        restore(directory, target(bigger))
    restored = restore(directory, target(Small(nnx.Rngs(1))))
    np.testing.assert_array_equal(restored.state[0]["up"]["kernel"].get_value(), saved.up.kernel.get_value())


def test_the_optimizers_own_step_counter_is_a_step(tmp_path, devices):
    """optimizer.step[...] (a 0-d uint32 array) was refused as no integer, naming no fix, and due() gave an array."""
    model = Small(nnx.Rngs(0))
    optimizer = nnx.Optimizer(model, optax.adam(1e-3), wrt=nnx.Param)
    optimizer.step.set_value(optimizer.step.get_value() + 4)
    with CheckpointWriter(tmp_path / "checkpoints", every=2) as writer:
        assert writer.due(optimizer.step[...]) is True and writer.due(np.int64(3)) is False
        assert writer.maybe_save(optimizer.step[...], nnx.state((model, optimizer)), jax.random.key(0)) is True
        assert writer.last_saved == 4 and type(writer.last_saved) is int
        assert writer.save(np.asarray(6), nnx.state((model, optimizer)), jax.random.key(0))
        with pytest.raises(ValueError, match=r"step=8.0 must be an integer >= 0 .*e.g. int\(optimizer.step\[...\]\)"):
            writer.save(8.0, nnx.state((model, optimizer)), jax.random.key(0))
    assert committed_steps(tmp_path / "checkpoints") == [4, 6]


def test_saving_an_abstract_state_is_refused_naming_the_variable(tmp_path, devices):
    """abstract_sharded's model saved by mistake: Orbax's ValueError ('TypeHandler lookup failed for: type=<class
    'jax.ShapeDtypeStruct'>, keypath=(DictKey(key='state'), ...') named no fix, and left a temporary step folder."""
    mesh = gs.make_mesh(model_axis=2)
    abstract = gs.abstract_sharded(lambda: Small(nnx.Rngs(0)), mesh, "fsdp", warn=False)
    with CheckpointWriter(tmp_path / "checkpoints") as writer:
        with pytest.raises(TypeError, match=r"CheckpointWriter.save: down/bias is abstract \(ShapeDtypeStruct.*save a "
                                            r"built state \(init_sharded's"):
            writer.save(1, nnx.state(abstract), jax.random.key(0))
        assert writer.last_saved is None and list((tmp_path / "checkpoints").iterdir()) == []
        assert writer.save(1, nnx.state(gs.init_sharded(lambda: Small(nnx.Rngs(0)), mesh, "fsdp", warn=False)),
                           jax.random.key(0))
    assert committed_steps(tmp_path / "checkpoints") == [1]


@pytest.mark.slow
def test_the_key_restored_by_default_goes_where_a_one_device_target_is(tmp_path, devices):
    """A target on device 3 (no mesh): the key went to device 0, and the first step mixing them raised 'Received
    incompatible devices for jitted computation'."""
    model = Small(nnx.Rngs(0))
    save(tmp_path / "checkpoints", nnx.state(model))
    three = jax.sharding.SingleDeviceSharding(jax.devices()[3])
    target = jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=three), nnx.state(Small(nnx.Rngs(1))))
    restored = restore(tmp_path / "checkpoints", target)
    assert restored.key.sharding == three == restored.state["up"]["kernel"].get_value().sharding
    noised = jax.jit(lambda s, k: jax.tree.map(lambda a: a + jax.random.normal(k, a.shape), s))(restored.state, restored.key)
    assert jax.tree.leaves(noised)[0].sharding == three


def test_a_key_holding_a_dot_beside_a_nested_key_is_refused(tmp_path, devices):
    """{"a.b": ones, "a": {"b": zeros}}: Orbax joins its arrays' keys with ".", so both were one array, saved once and
    restored into both places, without a word (as a key holding "/" was, which is refused)."""
    mesh = gs.make_mesh()
    for value in ({"a.b": jnp.ones(3), "a": {"b": jnp.zeros(3)}}, {"a": {"b.c": jnp.ones(3), "b": {"c": jnp.zeros(3)}}}):
        state = nnx.State({"stats": nnx.BatchStat(value)})
        with CheckpointWriter(tmp_path / "c") as writer, pytest.raises(
                ValueError, match=r"two leaves of the state are named 'stats/a/?.*' or one inside the other: a dict key "
                                  r"holding '/' or '.' beside a nested key"):
            writer.save(1, state, jax.random.key(0))
        assert committed_steps(tmp_path / "c") == []
    # A key holding "." alone, or beside other names, is saved and restored as it was.
    value = {"a.b": jnp.arange(3.0), "a": {"c": jnp.arange(3.0) + 10}}
    save(tmp_path / "ok", nnx.State({"stats": nnx.BatchStat(value)}))
    target = jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=jax.sharding.NamedSharding(
        mesh, jax.sharding.PartitionSpec())), nnx.State({"stats": nnx.BatchStat(value)}))
    restored = restore(tmp_path / "ok", target).state["stats"].get_value()
    np.testing.assert_array_equal(restored["a.b"], np.arange(3.0))
    np.testing.assert_array_equal(restored["a"]["c"], np.arange(3.0) + 10)


def test_a_step_that_is_not_there_names_the_steps_that_are(tmp_path, devices):
    """runs/a/checkpoints/1 after keep=2 deleted it, or a step never saved: 'does not exist', naming none of those on
    disk; now they are named, and the one given restores."""
    model = Small(nnx.Rngs(0))
    with CheckpointWriter(tmp_path / "checkpoints", keep=2) as writer:
        for step in (1, 2, 3):
            writer.save(step, nnx.state(model), jax.random.key(0))
    for step in (1, 99):
        with pytest.raises(FileNotFoundError, match=rf"checkpoints/{step}' does not exist .*checkpoints holds steps "
                                                    rf"\[2, 3\]: pass one, e.g. .*checkpoints/3"):
            restore(tmp_path / "checkpoints" / str(step), abstract_state_for(model, None))
    assert restore(tmp_path / "checkpoints" / "3", abstract_state_for(model, None)).step == 3
    with pytest.raises(FileNotFoundError, match="nowhere/5' does not exist .*; pass a run dir, its checkpoints/ dir"):
        find_checkpoint(tmp_path / "nowhere" / "5")


@pytest.mark.parametrize("value, kept", [(1 + 2j, True), (np.str_("abc"), False), (np.datetime64("2020-01-01"), False),
                                         (np.void(b"ab"), False)])
def test_a_scalar_variable_is_saved_as_it_is_or_refused_by_name(tmp_path, devices, value, kept):
    """A Python complex was taken as a scalar and refused by Orbax ('TypeHandler lookup failed for: type=<class
    'complex'>'), a temporary step folder left; np.str_, np.datetime64 and np.void (np.generic, not numbers) were taken
    as scalars too, and refused alike, naming no fix, where a str is refused naming it."""
    class Holds(nnx.Module):
        def __init__(self):
            self.v = nnx.Variable(value)
            self.w = nnx.Param(jnp.ones(2))

    mesh = gs.make_mesh()
    with CheckpointWriter(tmp_path / "checkpoints") as writer:
        if kept:
            assert writer.save(1, nnx.state(Holds()), jax.random.key(0))
        else:
            for call in (lambda: writer.save(1, nnx.state(Holds()), jax.random.key(0)),
                         lambda: gs.init_sharded(Holds, mesh)):
                with pytest.raises(TypeError, match=rf"v holds {type(value).__name__} .*must be an array \(JAX or "
                                                    r"NumPy\) or a Python/NumPy number or bool"):
                    call()
    if kept:
        restored = restore(tmp_path / "checkpoints", abstract_state_for(Holds(), mesh)).state["v"].get_value()
        assert type(restored) is complex and restored == value
        assert gs.init_sharded(Holds, mesh).v.get_value() == value
    else:
        assert list((tmp_path / "checkpoints").iterdir()) == []


def test_a_writer_given_a_run_folder_is_refused_naming_its_checkpoints_folder(tmp_path, devices):
    """CheckpointWriter(run) beside run/checkpoints/: its steps went to run/<step>, while restore(run) reads
    run/checkpoints and gave the older step there, without a word."""
    model = Small(nnx.Rngs(0))
    save(tmp_path / "run" / "checkpoints", nnx.state(model), step=1)
    with pytest.raises(FileExistsError, match=rf"{tmp_path / 'run'} is a run folder, holding checkpoints/, which "
                                              rf"restore reads.*pass {tmp_path / 'run' / 'checkpoints'}"):
        CheckpointWriter(tmp_path / "run")
    save(tmp_path / "run" / "checkpoints", nnx.state(model), step=2)  # the folder given
    assert restore(tmp_path / "run", abstract_state_for(model, None)).step == 2


@pytest.mark.parametrize("writer", ["manager", "standard", "unnamed", "json first"])
def test_another_writers_orbax_checkpoint_is_named_with_the_orbax_call_that_reads_it(tmp_path, mesh, writer):
    # Was: a folder of GenSBI's pipeline (an Orbax CheckpointManager, item 'state') or a StandardCheckpointer's save
    # read "no checkpoint in ...: looked for complete Orbax step folders <step>/", of complete Orbax step folders;
    # now those are named as another writer's, with the Orbax call that reads one onto abstract_state_for's target
    import re

    import orbax.checkpoint as ocp

    model = AxesBlock(nnx.Rngs(3))
    state = nnx.split(model)[1]
    if writer == "manager":  # as gensbi.recipes.pipeline saves: Composite(state=StandardSave(state)), step = its id
        with ocp.CheckpointManager(tmp_path / "ckpt", options=ocp.CheckpointManagerOptions(create=True)) as manager:
            manager.save(7, args=ocp.args.Composite(state=ocp.args.StandardSave(state)))
    elif writer == "standard":
        with ocp.StandardCheckpointer() as saver:
            saver.save(tmp_path / "ckpt" / "7", state)
    else:  # were suggested Composite(default=...), which Orbax refuses for the one unnamed item ("Cannot provide
        # `args` of type `Composite`"), and Composite(extra=StandardRestore(...)) of a JSON item ("_METADATA does not
        # exist")
        with ocp.CheckpointManager(tmp_path / "ckpt", options=ocp.CheckpointManagerOptions(create=True)) as manager:
            manager.save(7, args=ocp.args.StandardSave(state) if writer == "unnamed" else ocp.args.Composite(
                extra=ocp.args.JsonSave({"epoch": 7}), state=ocp.args.StandardSave(state)))
    target = abstract_state_for(AxesBlock(nnx.Rngs(0)), mesh, "tensor")
    for path in (tmp_path / "ckpt", tmp_path / "ckpt" / "7"):
        with pytest.raises(FileNotFoundError) as refused:
            restore(path, target)
        item = {"manager": "'state'", "standard": "one unnamed item", "unnamed": "'default'",
                "json first": "'extra', 'state'"}[writer]
        assert f"{tmp_path / 'ckpt'} holds Orbax checkpoints another writer saved (step 7: {item}), without the " \
               "items arrays, meta, config that CheckpointWriter saves and restore reads" in str(refused.value)
        call = re.search(r"target = abstract_state_for\(model, mesh, rule\); (.*)$", str(refused.value)).group(1)
        read = eval(call, {"ocp": ocp, "target": target})  # the suggested call, as printed
        restored = read["state"] if writer in ("manager", "json first") else read
        assert restored["up"]["kernel"].get_value().sharding.spec == P(None, "model")
        np.testing.assert_array_equal(restored["up"]["kernel"].get_value(), model.up.kernel.get_value())
    (tmp_path / "job" / "0").mkdir(parents=True)  # a sweep's job folder, no checkpoint of anyone's: as before
    with pytest.raises(FileNotFoundError, match="looked for complete Orbax step folders <step>/ in"):
        restore(tmp_path / "job" / "0", target)


@pytest.mark.parametrize("pair", [False, True])
def test_a_variable_the_saved_model_held_beyond_the_targets_names_the_hyperparameters_not_more_nodes(
        tmp_path, devices, pair):
    # Was: "The checkpoint holds the whole target as saved and 1 more variable(s): restore into a target of all it
    # holds, e.g. abstract_state_for((model, optimizer), mesh, rule)": the extra lies inside the target's own nodes
    # (a model built with use_bias=True, restored into use_bias=False), which no other target of nodes holds.
    def nodes(use_bias):
        model = nnx.Linear(16, 32, use_bias=use_bias, rngs=nnx.Rngs(0))
        return (model, nnx.Optimizer(model, optax.adam(1e-3), wrt=nnx.Param)) if pair else model
    with checkpoint.CheckpointWriter(tmp_path, config={"use_bias": True}) as writer:
        writer.save(1, nodes(True), jax.random.key(0))
    with pytest.raises(ValueError) as error:
        checkpoint.restore(tmp_path, checkpoint.abstract_state_for(nodes(False), gs.make_mesh(model_axis=2)))
    message = str(error.value)
    assert f"{'0/' * pair}bias: in the checkpoint, not in the model" in message, message
    assert message.endswith(f"Build the model with the hyperparameters saved in {tmp_path / '1' / 'config'}"), message


def test_variables_saved_under_nodes_the_target_lacks_and_inside_its_own_name_both_fixes(tmp_path, devices):
    # Was: "... 7 more variable(s) (6 under '1', which the target lacks): restore into a target of all it holds, e.g.
    # abstract_state_for((model, optimizer), mesh, rule)", which holds the use_bias=True model's bias no more.
    def nodes(use_bias):
        model = nnx.Linear(16, 32, use_bias=use_bias, rngs=nnx.Rngs(0))
        return model, nnx.Optimizer(model, optax.adam(1e-3), wrt=nnx.Param)
    with CheckpointWriter(tmp_path, config={"use_bias": True}) as writer:
        writer.save(1, nodes(True), jax.random.key(0))
    mesh = gs.make_mesh(model_axis=2)
    with pytest.raises(ValueError) as error:
        restore(tmp_path, abstract_state_for((nodes(False)[0],), mesh))
    message = str(error.value)
    assert message.endswith(
        "The checkpoint holds the whole target as saved and 7 more variable(s) (6 under '1', which the target lacks; 1 "
        f"inside its own nodes, e.g. 0/bias): build the model with the hyperparameters saved in {tmp_path / '1'}"
        "/config; then restore into a target of all it holds, e.g. abstract_state_for((model, optimizer), mesh, rule), "
        "and keep the part you need"), message
    # Both fixes taken, it restores.
    assert restore(tmp_path, abstract_state_for(nodes(True), mesh)).state[0]["bias"][...].shape == (32,)


def test_restore_of_a_model_out_of_a_harness_run_s_checkpoint_names_orbax_s_read_of_that_part_alone(tmp_path, devices):
    # Was: "build the target from the same: abstract_state_for({'0': <node>, '1': <node>, '2': <node>, 'best':
    # <node>}, mesh, rule)" and nothing else: a harness run's optimizer (its schedule), EMA and best weights, which a
    # user restoring the trained weights into their own model (GenSBI's Flux1 built from its Params) cannot build.
    import re

    import orbax.checkpoint as ocp
    mesh, model, optimizer = block_and_optimizer()
    ema, best = nnx.clone(model), nnx.clone(model)
    for node, value in ((ema, 2.0), (best, 3.0)):
        node.up.kernel[...] = jnp.full(node.up.kernel.shape, value)
    save_steps(tmp_path, {"0": model, "1": optimizer, "2": {"params": ema}, "best": {"params": best}})  # a run's
    refusal = restore_refusal(tmp_path, AxesBlock(nnx.Rngs(1)), mesh)
    assert "The checkpoint holds every variable of the target under '0/' and '2/params/' and 'best/params/'" in refusal
    call = re.search(r"or read the part under '0/' alone with Orbax: target = abstract_state_for\(model, mesh, "
                     r"rule\); (.*)$", refusal).group(1)
    assert call.startswith("item = {'state': {'0': nnx.to_pure_dict(target)}}; part = ocp.Checkpointer("), call
    assert f"restore({str(tmp_path / '1')!r}, " in call and call.endswith(
        "['arrays']['state']['0']; nnx.replace_by_pure_dict(target, part); nnx.update(model, target)"), call
    mine = gs.abstract_sharded(lambda: AxesBlock(nnx.Rngs(1)), mesh, "tensor")  # the user's model, other values
    exec(call, {"ocp": ocp, "nnx": nnx, "model": mine,  # the suggested read, as printed
                "target": abstract_state_for(lambda: AxesBlock(nnx.Rngs(1)), mesh, "tensor")})
    for got, saved in zip(jax.tree.leaves(nnx.state(mine)), jax.tree.leaves(nnx.state(model)), strict=True):
        np.testing.assert_array_equal(got, saved)  # the trained weights under '0/', not the EMA's or best's
    assert mine.up.kernel[...].sharding.spec == P(None, "model")  # read straight into the target's tensor shards


class TwoLayers(nnx.Module):
    def __init__(self, rngs, third=False):
        self.a, self.b = nnx.Linear(4, 8, rngs=rngs), nnx.Linear(8, 4, rngs=rngs)
        if third:
            self.c = nnx.Linear(4, 4, rngs=rngs)


def test_a_model_saved_with_a_submodule_more_names_the_hyperparameters_not_only_a_dict_of_nodes(tmp_path, devices):
    # Was: "... 2 more variable(s) (2 under 'c', which the target lacks): restore into a target of all it holds, e.g.
    # abstract_state_for({'a': <node>, 'b': <node>, 'c': <node>}, mesh, rule)": the model's submodules advised as
    # the nodes of a dict; the model was built with a submodule more, which its saved hyperparameters say.
    with checkpoint.CheckpointWriter(tmp_path) as writer:
        writer.save(1, TwoLayers(nnx.Rngs(0), third=True), jax.random.key(0))
    refusal = restore_refusal(tmp_path, TwoLayers(nnx.Rngs(1)), gs.make_mesh(model_axis=2))
    assert refusal.endswith(
        "The checkpoint holds the whole target as saved and 2 more variable(s) (2 under 'c', which the target lacks): "
        "if the model was saved with more submodules, build the model with the hyperparameters it was saved with "
        "(none saved: CheckpointWriter(..., config=...) saves them); if among more nodes, restore into a target of all it holds, e.g. "
        "abstract_state_for({'a': <node>, 'b': <node>, 'c': <node>}, mesh, rule), and keep the part you need"), refusal
    restored = restore(tmp_path, abstract_state_for(TwoLayers(nnx.Rngs(1), third=True), gs.make_mesh(model_axis=2)))
    assert restored.step == 1  # the model built as saved restores


@pytest.mark.parametrize("rule, message", [
    ("tensr", r"unknown sharding rule 'tensr'.*did you mean 'tensor'\?"),
    ({"embd": "data"}, r"rule table key 'embd' is not a logical axis"),
    (3, r"rule must be a name in \('replicated', 'fsdp', 'tensor'\)")])
def test_abstract_state_for_without_a_mesh_checks_its_rule_as_abstract_sharded_does(rule, message):
    # Was: abstract_state_for(factory, None, rule) read no rule, so a restore script's typo passed on one device (the
    # target built, the checkpoint restored) and failed on a mesh; init_sharded and abstract_sharded refused it there.
    def factory():
        return nnx.Linear(2, 4, rngs=nnx.Rngs(0))

    for build in (gs.abstract_sharded, abstract_state_for):
        with pytest.raises(ValueError, match=message):
            build(factory, None, rule)
    assert abstract_state_for(factory, None, "tensor")["kernel"].get_value().shape == (2, 4)


def test_a_restore_mismatch_names_paths_as_the_target_and_its_fix_name_them(tmp_path):
    # Was: "state/bias: missing from the checkpoint; ...; state/0/bias: in the checkpoint, not in the model; ... The
    # checkpoint holds every variable of the target under '0/'": the list named the checkpoint's item prefix state/,
    # which neither the user's target (nnx.to_flat_state: ('bias',)) nor the fix's '0/' holds.
    model = nnx.Linear(4, 8, rngs=nnx.Rngs(0))
    with CheckpointWriter(tmp_path) as writer:
        writer.save(1, nnx.state((model, nnx.Optimizer(model, optax.adam(1e-3), wrt=nnx.Param))), jax.random.key(0))
    target = abstract_state_for(model, None)
    with pytest.raises(ValueError) as refused:
        restore(tmp_path / "1", target)
    message = str(refused.value)
    assert "differ: bias: missing from the checkpoint; kernel: missing from the checkpoint; 0/bias: in the " in message
    listed = message.split(" differ: ")[1].split(". The")[0].split("; ")
    assert "every variable of the target under '0/'" in message and not any(n.startswith("state/") for n in listed)
    assert {"/".join(map(str, k)) for k, _ in nnx.to_flat_state(target)} == {"bias", "kernel"}


@pytest.mark.slow
@pytest.mark.parametrize("config", [None, {"use_bias": True}])
def test_a_refusal_points_at_the_saved_hyperparameters_only_when_some_were_saved(tmp_path, devices, config):
    # Was: a writer given no config= saved {} as <step>/config, and restore still said "build the model with the
    # hyperparameters saved in <step>/config" (a submodule more, a bias more) or "(its param_dtype: <step>/config)".
    class Two(nnx.Module):
        def __init__(self, more, dtype=jnp.float32):
            self.a = nnx.Linear(4, 8, param_dtype=dtype, rngs=nnx.Rngs(0))
            if more:
                self.b = nnx.Linear(8, 8, rngs=nnx.Rngs(1))
    with CheckpointWriter(tmp_path, config=config) as writer:
        writer.save(1, Two(True), jax.random.key(0))
    mesh, saved_in = gs.make_mesh(model_axis=2), str(tmp_path / "1" / "config")
    for target, told in ((Two(False), "with more submodules, build the model with the hyperparameters "),
                         (Two(True, jnp.bfloat16), "build the model with the dtypes it was saved with (its param_dtype")):
        with pytest.raises(ValueError) as refused:
            restore(tmp_path, abstract_state_for(target, mesh))
        message = str(refused.value)
        assert told in message and (saved_in in message) == bool(config), message
        assert ("CheckpointWriter(..., config=...) saves them" in message) == (config is None and "submodules" in told)


@pytest.mark.slow
def test_a_tuple_restored_from_a_saved_dict_or_the_reverse_names_the_top_level_entries(adam_run, tmp_path, devices):
    """(model, optimizer) saved, {'model': ..., 'opt': ...} restored (or the reverse, or a dict's keys renamed): every
    node fit but the fix named the model's hyperparameters; now the top-level entries of both and the target as saved."""
    directory, saved = adam_run
    mesh = gs.make_mesh(model_axis=2)
    model = Small(nnx.Rngs(1))
    optimizer = nnx.Optimizer(model, optax.adam(1e-3), wrt=nnx.Param)
    with pytest.raises(ValueError, match=r"Only the top-level entries differ: the checkpoint's are '0', '1', the "
                                         r"target's 'model', 'opt' \(a tuple's positions.*abstract_state_for\(\(model, "
                                         r"optimizer\), mesh, rule\)") as refusal:
        restore(directory, abstract_state_for({"model": model, "opt": optimizer}, mesh, "tensor"))
    assert "hyperparameters" not in str(refusal.value)
    as_dict = save(tmp_path / "dict", nnx.state({"model": saved, "opt": optimizer}))
    for target, theirs in (((model, optimizer), "'0', '1'"), ({"m": model, "o": optimizer}, "'m', 'o'")):
        with pytest.raises(ValueError, match=rf"the checkpoint's are 'model', 'opt', the target's {theirs} .*"
                                             r"abstract_state_for\(\{'model': <node>, 'opt': <node>\}, mesh, rule\)"):
            restore(as_dict, abstract_state_for(target, mesh, "tensor"))
    restored = restore(as_dict, abstract_state_for({"model": model, "opt": optimizer}, mesh, "tensor"))  # as saved
    np.testing.assert_array_equal(restored.state["model"]["up"]["kernel"][...], saved.up.kernel[...])


def test_a_target_holding_part_of_the_saved_top_level_names_the_entries_and_how_to_keep_the_part(adam_run, tmp_path,
                                                                                                   devices):
    """(model, optimizer) saved, {'a': model} restored: the fix said to build the model with the hyperparameters it
    was saved with, which it was; now the top-level entries, the one the target's fits, and how to keep that part."""
    directory, saved = adam_run
    mesh = gs.make_mesh(model_axis=2)
    model = Small(nnx.Rngs(1))
    with pytest.raises(ValueError, match=r"The target holds only part of the checkpoint: the checkpoint's are '0', "
                                         r"'1', the target's 'a' \(a tuple's positions.*\); the target's 'a' fits the "
                                         r"saved '0'\. Restore all it holds, e.g\. restored = restore\(path, "
                                         r"abstract_state_for\(\(model, optimizer\), mesh, rule\)\), then keep the "
                                         r"part: nnx\.update\(model, restored\.state\[0\]\)$") as refusal:
        restore(directory, abstract_state_for({"a": model}, mesh, "tensor"))
    assert "hyperparameters" not in str(refusal.value)
    restored = restore(directory, abstract_state_for((model, nnx.Optimizer(model, optax.adam(1e-3), wrt=nnx.Param)),
                                                     mesh, "tensor"))  # the fix, followed
    nnx.update(model, restored.state[0])
    np.testing.assert_array_equal(model.up.kernel[...], saved.up.kernel[...])
    sgd = nnx.Optimizer(saved, optax.sgd(1e-3), wrt=nnx.Param)
    as_dict = save(tmp_path / "dict", nnx.state({"m": saved, "o": sgd}))
    with pytest.raises(ValueError, match=r"the checkpoint's are 'm', 'o', the target's 'a'.*fits the saved 'm'.*"
                                         r"abstract_state_for\(\{'m': <node>, 'o': <node>\}, mesh, rule\)\), then "
                                         r"keep the part: nnx\.update\(model, restored\.state\['m'\]\)$"):
        restore(as_dict, abstract_state_for({"a": model}, mesh, "tensor"))


def test_a_target_part_fitting_several_saved_entries_names_every_one(tmp_path, devices):
    # Was "the target's 'x' fits the saved 'a'": 'b', the same model's shapes, went unnamed.
    directory = save(tmp_path / "two", nnx.state({"a": Small(nnx.Rngs(0)), "b": Small(nnx.Rngs(1))}))
    with pytest.raises(ValueError, match=r"the checkpoint's are 'a', 'b', the target's 'x' .*; the target's 'x' fits "
                                         r"the saved 'a' or 'b'\. Restore all it holds.*restored\.state\['a'\]\)$"):
        restore(directory, abstract_state_for({"x": Small(nnx.Rngs(2))}, gs.make_mesh(model_axis=2), "tensor"))


@pytest.mark.parametrize("dtype, wider", [("uint4", "uint8"), ("float8_e4m3", "float16")])
def test_a_dtype_tensorstore_cannot_hold_is_refused_naming_the_variable_and_nothing_is_written(tmp_path, devices, dtype,
                                                                                                  wider):
    """A state holding a uint4 (or float8_e4m3) array: Orbax's background thread failed ('Unsupported data type:
    "uint4"') with screens of tracebacks, and the writer's RuntimeError then told to keep the folder writable (its
    permissions, free space); now save refuses it up front naming the variable, its dtype and a dtype that holds it.
    Keys and scalars beside it still save."""
    state = {"w": jnp.arange(8).astype(getattr(jnp, dtype)), "k": jax.random.key(1), "s": 1.5, "x": jnp.ones(3)}
    with CheckpointWriter(tmp_path / "checkpoints") as writer:
        with pytest.raises(TypeError, match=rf"CheckpointWriter.save: w is {dtype}, which TensorStore, Orbax's array "
                                            rf"storage, cannot hold: keep it as a dtype it holds \(e\.g\. {wider}\)"):
            writer.save(1, state, jax.random.key(0))
        assert writer.last_saved is None and list((tmp_path / "checkpoints").iterdir()) == []
        assert writer.save(1, {**state, "w": state["w"].astype(wider)}, jax.random.key(0))
    assert committed_steps(tmp_path / "checkpoints") == [1]


def test_a_hydra_config_and_info_are_saved_as_the_plain_data_they_hold(tmp_path, devices):
    """CheckpointWriter(..., config=cfg) of a Hydra DictConfig holding a list or a nested node was refused, 'config must
    be JSON-serialisable (Object of type ListConfig is not JSON serializable)', though the docstring takes any mapping
    and the harness's configs are DictConfigs; now it is saved as plain data, interpolations resolved (info too)."""
    from omegaconf import OmegaConf

    cfg = OmegaConf.create({"model": {"width": 8, "depth": "${model.width}"}, "layers": [1, {"k": 2}]})
    with CheckpointWriter(tmp_path / "checkpoints", config=cfg) as writer:
        assert writer.save(1, {"w": jnp.ones(2)}, jax.random.key(0), info=OmegaConf.create({"losses": [0.5, 0.25]}))
    plain = {"model": {"width": 8, "depth": 8}, "layers": [1, {"k": 2}]}
    assert checkpoint.saved_config(tmp_path / "checkpoints") == plain
    assert checkpoint.saved_info(tmp_path / "checkpoints") == {"losses": [0.5, 0.25]}
    with pytest.raises(ValueError, match=r"config must be JSON-serialisable \(Object of type ndarray is not JSON"):
        CheckpointWriter(tmp_path / "other", config={"cfg": cfg, "x": np.ones(2)})  # still named, beside a config


def test_bytes_and_an_int_key_in_a_hydra_list_are_refused_as_in_a_plain_one(tmp_path):
    """Reading a Hydra ListConfig as a list read any Sequence so: config={"h": b"ab"} was saved as [97, 98] (refused
    before, as a JSON list it is not), and an int key inside a ListConfig was saved as "1" unchecked (refused in a
    plain list)."""
    from omegaconf import OmegaConf

    with pytest.raises(ValueError, match=r"config must be JSON-serialisable \(Object of type bytes is not JSON"):
        CheckpointWriter(tmp_path / "a", config={"h": b"ab"})
    with pytest.raises(ValueError, match=r"^config\['layers'\]\[0\] has the key 1 \(int\); JSON keys are str: use '1'$"):
        CheckpointWriter(tmp_path / "b", config=OmegaConf.create({"layers": [{1: "x"}]}))
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_one_top_level_entry_renamed_is_named_as_renamed_not_as_a_model_and_optimizer(tmp_path, devices):
    """{'model': m} saved, {'net': m} (or (m,)) restored: the top-level check told 'abstract_state_for((model,
    optimizer), mesh, rule)', a target of two entries the checkpoint never held; the one renamed entry is named, as
    before that check: name it 'model' again, and that target restores."""
    mesh = gs.make_mesh(model_axis=2)
    saved = Small(nnx.Rngs(0))
    directory = save(tmp_path / "one", nnx.state({"model": saved}))
    for target, theirs in (({"net": Small(nnx.Rngs(1))}, "net"), ((Small(nnx.Rngs(1)),), "0")):
        with pytest.raises(ValueError, match=rf"Every difference is one name: the checkpoint's 'model' is the target's "
                                             rf"'{theirs}' .*name it 'model' again to restore") as refusal:
            restore(directory, abstract_state_for(target, mesh, "tensor"))
        assert "optimizer" not in str(refusal.value)
    restored = restore(directory, abstract_state_for({"model": Small(nnx.Rngs(1))}, mesh, "tensor"))  # named again
    np.testing.assert_array_equal(restored.state["model"]["up"]["kernel"][...], saved.up.kernel[...])


def test_an_int_key_or_missing_value_inside_a_hydra_list_is_named_as_in_a_plain_list(tmp_path):
    """{'l': [{1: 'x'}]} as a plain dict is refused naming config['l'][0]'s key 1; as a DictConfig (its list a
    ListConfig, which the key check did not enter) it was saved with the key '1', unsaid. A '???' in such a list raised
    OmegaConf's raw MissingMandatoryValue from the JSON dump, where one in a dict is named with its fix."""
    from omegaconf import OmegaConf

    for config in ({"l": [{1: "x"}]}, OmegaConf.create({"l": [{1: "x"}]})):
        with pytest.raises(ValueError, match=r"^config\['l'\]\[0\] has the key 1 \(int\); JSON keys are str: use '1'$"):
            CheckpointWriter(tmp_path / "checkpoints", config=config)
        assert not (tmp_path / "checkpoints").exists()
    with pytest.raises(ValueError, match=r"^config: l\[0\] cannot be read \(Missing mandatory value: l\[0\]\): give it a "
                                         r"value \(an override l\[0\]=\.\.\.\) or drop it"):
        CheckpointWriter(tmp_path / "checkpoints", config=OmegaConf.create({"l": ["???"]}))
    assert not (tmp_path / "checkpoints").exists()


@pytest.mark.parametrize("as_numpy", [False, True])
def test_a_raw_uint32_key_is_refused_naming_wrap_key_data_which_then_saves_its_stream(tmp_path, devices, as_numpy):
    # Was: save(step, state, jax.random.PRNGKey(0)) said only "must be a typed JAX PRNG key, e.g. jax.random.key(0)",
    # whose fix starts another random stream; wrapping the raw data keeps the caller's.
    raw = jax.random.PRNGKey(7)
    raw = np.asarray(raw) if as_numpy else raw
    state = nnx.state(nnx.Linear(2, 2, rngs=nnx.Rngs(0)))
    with CheckpointWriter(tmp_path / "ck", async_save=False) as writer:
        with pytest.raises(TypeError) as err:
            writer.save(1, state, raw)
        fix = str(err.value).rsplit("pass ", 1)[1]
        assert str(err.value).endswith("; this one is raw uint32 key data (jax.random.PRNGKey's): pass "
                                       "jax.random.wrap_key_data(key)"), str(err.value)
        assert writer.save(1, state, eval(fix, {"jax": jax, "key": raw}))  # the fix, as written
    restored = restore(tmp_path / "ck", abstract_state_for(nnx.Linear(2, 2, rngs=nnx.Rngs(1)), None))
    assert np.array_equal(jax.random.key_data(restored.key), np.asarray(raw))


def test_the_fix_for_a_key_on_one_processs_devices_keeps_a_non_default_key_implementation(tmp_path, devices,
                                                                                         monkeypatch):
    # Was: the fix wrapped the placed key data with JAX's default implementation, so for jax.random.key(0,
    # impl="rbg") it raised "JAX encountered invalid PRNG key data: expected key_data.shape to end with (2,)".
    # Several processes are simulated for the refusal alone; the fix is evaluated as written on this one's mesh.
    import gensbi_sharding

    key, mesh = jax.random.key(5, impl="rbg"), gensbi_sharding.make_mesh()
    state = nnx.state(nnx.Linear(2, 2, rngs=nnx.Rngs(0)))
    with CheckpointWriter(tmp_path / "ck", async_save=False) as writer:
        monkeypatch.setattr(jax, "process_count", lambda: 2)
        with pytest.raises(ValueError, match="is on this process's devices alone") as err:
            writer.save(1, state, key)
        monkeypatch.undo()
        assert writer.steps() == []  # nothing written
        placed = eval(str(err.value).rsplit("key = ", 1)[1],
                      {"jax": jax, "gensbi_sharding": gensbi_sharding, "key": key, "mesh": mesh})
        assert jax.random.key_impl(placed) == jax.random.key_impl(key)
        assert placed.sharding.mesh.shape == mesh.shape and placed.sharding.is_fully_replicated  # on the mesh
        assert np.array_equal(jax.random.key_data(placed), jax.random.key_data(key))
        assert writer.save(1, state, placed)


def test_a_uint32_array_no_key_data_is_not_told_to_wrap_it(tmp_path, devices):
    # Was: any uint32 array was called "raw uint32 key data (jax.random.PRNGKey's): pass jax.random.wrap_key_data(key)",
    # which for np.arange(3, dtype=np.uint32) raised "JAX encountered invalid PRNG key data" when followed.
    state = nnx.state(nnx.Linear(2, 2, rngs=nnx.Rngs(0)))
    odd = np.arange(3, dtype=np.uint32)
    with pytest.raises(TypeError):
        jax.random.wrap_key_data(odd)  # the advice, followed, fails: none is offered
    with CheckpointWriter(tmp_path / "ck", async_save=False) as writer:
        with pytest.raises(TypeError) as err:
            writer.save(1, state, odd)
        assert str(err.value).endswith("must be a typed JAX PRNG key, e.g. jax.random.key(0)"), str(err.value)
        assert writer.steps() == []

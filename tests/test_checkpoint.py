"""Checkpoints saved under one (mesh, rule) and restored under another.

The cross-mesh test saves on the 8 simulated devices of this process and restores in
a subprocess that has 4; everything else runs in-process on 8 devices.
"""

import json
import logging
import os
import re
import shutil
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path
from types import SimpleNamespace

import jax
import numpy as np
import optax
import pytest
from flax import nnx
from jax.sharding import NamedSharding, PartitionSpec as P

import gensbi_sharding as contract
from gensbi_sharding.checkpoint import (CheckpointWriter, abstract_state_for, committed_steps,
                                        find_checkpoint, restore, saved_info)
from gensbi_sharding.harness.registry import get_model
from gensbi_sharding.harness.train import make_step_functions

REPO = Path(__file__).resolve().parents[1]
CONFIG = {"model": {"name": "mlp", "width": 16}, "seed": 0}


def build(width=16, depth=1, seed=0):
    model = get_model("mlp")(dim_theta=2, dim_x=2, rngs=nnx.Rngs(seed), width=width, depth=depth, mlp_ratio=4)
    return model, nnx.Optimizer(model, optax.adamw(1e-2), wrt=nnx.Param)


def placed(mesh, rule, seed=0):
    model, optimizer = build(seed=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the experimental-rule notice
        contract.shard_model(model, mesh, rule)
        contract.shard_model(optimizer, mesh, rule)
    return model, optimizer


def fsdp_target(mesh, **sizes):
    return abstract_state_for(lambda: build(**sizes), mesh, dict(contract.RULES["fsdp"]))


BATCHES = [{"theta": np.random.default_rng(i).normal(size=(16, 2)).astype(np.float32),
            "x": np.random.default_rng(100 + i).normal(size=(16, 2)).astype(np.float32)} for i in range(4)]


def run_steps(functions, state, key, mesh, batches, writer=None, start=0):
    """The harness loop in miniature: donated steps, a checkpoint call after each."""
    losses = []
    with contract.mesh_context(mesh):
        for i, batch in enumerate(batches, start=start + 1):
            state, loss = functions.train_step(state, contract.shard_batch(batch, mesh), key)
            losses.append(float(loss))
            if writer is not None:
                writer.maybe_save(i, state, key)
    return state, losses


@pytest.fixture(scope="module")
def saved_run(tmp_path_factory, devices):
    """A run dir with one checkpoint (step 1) saved on a (4, 2) mesh under "tensor"."""
    run_dir = tmp_path_factory.mktemp("runs") / "job"
    mesh = contract.make_mesh(model_axis=2)
    functions, state = make_step_functions(*placed(mesh, "tensor"), mesh)
    key = contract.replicate(jax.random.key(7), mesh)
    state, _ = run_steps(functions, state, key, mesh, BATCHES[:1])
    with CheckpointWriter(run_dir / "checkpoints", config=CONFIG) as writer:
        writer.save(1, state, key)
    expected = {"/".join(map(str, p)): np.asarray(v.get_value()) for p, v in nnx.to_flat_state(state)}
    np.savez(run_dir / "expected.npz", **{n.replace("/", "."): v for n, v in expected.items()})
    return run_dir, expected


RESTORE_ON_4 = textwrap.dedent("""
    import json, os, sys
    import jax
    jax.config.update("jax_platforms", "cpu")
    jax.config.update("jax_num_cpu_devices", 4)
    import numpy as np
    from flax import nnx
    from jax.sharding import NamedSharding, PartitionSpec as P
    sys.path.insert(0, os.getcwd())
    from tests.test_checkpoint import fsdp_target
    import gensbi_sharding as contract
    from gensbi_sharding.checkpoint import restore

    run_dir = sys.argv[1]
    mesh = contract.make_mesh(model_axis=1)
    target = fsdp_target(mesh)
    restored = restore(run_dir, target)
    expected = np.load(os.path.join(run_dir, "expected.npz"))
    got = {"/".join(map(str, p)): v.get_value() for p, v in nnx.to_flat_state(restored.state)}
    want = {"/".join(map(str, p)): v.get_value().sharding for p, v in nnx.to_flat_state(target)}
    up = got["0/blocks/0/up/kernel"]
    print(json.dumps({
        "devices": jax.device_count(), "mesh": list(mesh.devices.shape), "step": restored.step,
        "config": restored.config, "key": np.asarray(jax.random.key_data(restored.key)).tolist(),
        "unequal": [n for n, v in got.items() if not np.array_equal(v, expected[n.replace("/", ".")])],
        "misplaced": [n for n, v in got.items() if not v.sharding.is_equivalent_to(want[n], v.ndim)],
        "up_kernel_fsdp": up.sharding.is_equivalent_to(NamedSharding(mesh, P("data", None)), 2),
        "up_kernel_devices": len(up.sharding.device_set)}))
""")


@pytest.mark.slow  # a fresh process
def test_restore_on_another_mesh_and_rule_in_a_fresh_process(saved_run):
    run_dir, expected = saved_run
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    proc = subprocess.run([sys.executable, "-c", RESTORE_ON_4, str(run_dir)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["devices"] == 4 and out["mesh"] == [4, 1]
    assert out["unequal"] == [] and out["misplaced"] == []
    assert out["up_kernel_fsdp"] and out["up_kernel_devices"] == 4  # ("embed", "mlp") -> P("data", None)
    assert out["step"] == 1 and out["config"] == CONFIG
    assert out["key"] == np.asarray(jax.random.key_data(jax.random.key(7))).tolist()


def test_resumed_training_matches_uninterrupted(tmp_path, devices):
    mesh_a, mesh_b = contract.make_mesh(model_axis=2), contract.make_mesh(model_axis=1)
    key = contract.replicate(jax.random.key(0), mesh_a)
    functions, state = make_step_functions(*placed(mesh_a, "tensor"), mesh_a)
    reference, ref_losses = run_steps(functions, state, key, mesh_a, BATCHES)

    # Interrupted: 3 steps, a checkpoint after each (keep 2), then the process "dies".
    functions, state = make_step_functions(*placed(mesh_a, "tensor"), mesh_a)
    with CheckpointWriter(tmp_path / "run" / "checkpoints", every=1, keep=2, config=CONFIG) as writer:
        final, losses = run_steps(functions, state, key, mesh_a, BATCHES[:3], writer=writer)
        assert writer.save(3, final, key) is False  # the final save after a periodic one is a no-op
        assert writer.steps() == [2, 3]

    # Resumed on (8, 1) under "fsdp", from a model initialised differently.
    model, optimizer = placed(mesh_b, "fsdp", seed=1)
    restored = restore(tmp_path / "run", fsdp_target(mesh_b))
    assert restored.step == 3 and int(restored.state[1]["step"].get_value()) == 3
    nnx.update((model, optimizer), restored.state)
    functions, state = make_step_functions(model, optimizer, mesh_b)
    assert jax.tree.structure(state) == jax.tree.structure(restored.state)
    resumed, more = run_steps(functions, state, restored.key, mesh_b, BATCHES[3:], start=restored.step)

    np.testing.assert_allclose(losses + more, ref_losses, rtol=1e-5, atol=1e-6)
    for got, want in zip(jax.tree.leaves(resumed), jax.tree.leaves(reference)):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-6)
    kernel = resumed[0]["blocks"][0]["up"]["kernel"].get_value()
    assert kernel.sharding.is_equivalent_to(NamedSharding(mesh_b, P("data", None)), 2)


@pytest.mark.slow
def test_relative_path_resolves_against_base_dir(saved_run, monkeypatch):
    run_dir, _ = saved_run
    launch_dir, step_dir = run_dir.parent, run_dir / "checkpoints" / "1"
    monkeypatch.chdir(launch_dir)  # hydra.job.chdir=false: the cwd is the launch dir
    for rel in ("job", "job/checkpoints", "job/checkpoints/1"):
        assert find_checkpoint(rel) == step_dir
    monkeypatch.chdir(run_dir)  # hydra.job.chdir=true: the cwd is the job's output dir
    with pytest.raises(FileNotFoundError, match="resolved to"):
        find_checkpoint("job")
    restored = restore("job", fsdp_target(contract.make_mesh(model_axis=1)), base_dir=launch_dir)
    assert restored.path == step_dir and restored.step == 1


@pytest.mark.slow
def test_a_symlinked_or_dotted_path_gives_the_real_step_folder(saved_run, tmp_path):
    # Was the path as typed, made absolute: through a symlink (runs/latest) the harness recorded resumed_from
    # as latest/checkpoints/1, which names another run once latest moves on; "<step>/.." gave "<step>/../1",
    # whose parent's parent (the run, where its loss history and launch record are looked for) is <step>.
    from omegaconf import OmegaConf

    from gensbi_sharding.harness.resume import resume_point

    step = (saved_run[0] / "checkpoints" / "1").resolve()
    latest = tmp_path / "latest"
    latest.symlink_to(saved_run[0], target_is_directory=True)
    assert find_checkpoint(latest) == find_checkpoint(latest / "checkpoints" / "1") == step
    assert find_checkpoint(f"{step}/..") == step and find_checkpoint(step).parent.parent == step.parent.parent
    for resume, out in (("auto", latest), (str(latest), tmp_path / "next")):  # hydra.run.dir=latest; train.resume=
        assert resume_point(OmegaConf.create({"train": {"resume": resume}}), out) == step


def test_restore_is_quiet(saved_run, caplog):
    """A good restore logs nothing: Orbax's notes on listing steps without item handlers (8 lines) are dropped,
    and only those: the absl logger keeps no filter afterwards."""
    run_dir, _ = saved_run
    with caplog.at_level("INFO", logger="absl"):
        assert restore(run_dir, fsdp_target(contract.make_mesh(model_axis=1))).step == 1
    assert [r.getMessage() for r in caplog.records if r.name == "absl" and r.levelname == "WARNING"] == []
    assert not any(getattr(f, "__module__", "").endswith("checkpoint_steps") for f in logging.getLogger("absl").filters)


def test_no_checkpoint_names_the_path(tmp_path):
    with pytest.raises(FileNotFoundError, match=f"{tmp_path / 'nowhere'}.*does not exist"):
        find_checkpoint(tmp_path / "nowhere")
    (tmp_path / "empty" / "checkpoints").mkdir(parents=True)
    with pytest.raises(FileNotFoundError, match=r"no checkpoint in .*empty.*complete Orbax step folders"):
        restore(tmp_path / "empty", None)
    # Was "no checkpoint in <it>: looked for complete Orbax step folders <step>/ in <it>", the folder named twice
    with pytest.raises(FileNotFoundError) as err:
        find_checkpoint(tmp_path / "empty" / "checkpoints")
    assert str(err.value) == (f"no checkpoint in {tmp_path / 'empty' / 'checkpoints'}: looked for complete Orbax step "
                              "folders <step>/ in it; pass a run dir, its checkpoints/ dir or one step dir")


def test_wrong_width_names_the_variables_and_shapes(saved_run):
    mesh = contract.make_mesh(model_axis=1)
    with pytest.raises(ValueError, match=r"33 variable\(s\) differ: .*"
                       r"0/blocks/0/up/kernel: saved \(16, 64\) float32, target \(32, 128\)"):
        restore(saved_run[0], fsdp_target(mesh, width=32))
    with pytest.raises(ValueError, match="0/blocks/1/up/kernel: missing from the checkpoint"):
        restore(saved_run[0], fsdp_target(mesh, depth=2))


def test_target_without_shardings_is_refused(saved_run):
    abstract = nnx.state(nnx.eval_shape(build))
    with pytest.raises(ValueError, match="without a sharding.*abstract_state_for"):
        restore(saved_run[0], abstract)


def test_half_written_latest_is_never_picked(saved_run, tmp_path):
    run_dir = tmp_path / "job"
    shutil.copytree(saved_run[0], run_dir)
    cut = run_dir / "checkpoints" / "7"  # a step folder whose save (or copy) was cut short
    shutil.copytree(run_dir / "checkpoints" / "1" / "arrays", cut / "arrays")
    (run_dir / "checkpoints" / "9.orbax-checkpoint-tmp-1700000000").mkdir()  # Orbax's own temp folder
    assert committed_steps(run_dir / "checkpoints") == [1]
    assert find_checkpoint(run_dir) == run_dir / "checkpoints" / "1"
    with pytest.raises(FileNotFoundError, match="not a complete checkpoint"):
        find_checkpoint(cut)


def test_a_folder_holding_only_steps_cut_short_names_them_and_no_parent_to_pass(saved_run, tmp_path):
    # Was: "no checkpoint in <run>: looked for complete Orbax step folders <step>/ in <run>/checkpoints", step 7 there
    # unnamed; and ".../7 is not a complete checkpoint (...); pass its parent for the latest complete step", which held
    # none: passed, it was refused again.
    folder = tmp_path / "job" / "checkpoints"
    shutil.copytree(saved_run[0] / "checkpoints" / "1" / "arrays", folder / "7" / "arrays")  # cut short
    with pytest.raises(FileNotFoundError) as err:
        find_checkpoint(tmp_path / "job")
    assert str(err.value) == (f"no checkpoint in {tmp_path / 'job'}: looked for complete Orbax step folders <step>/ in "
                              f"{folder} (step 7: cut short, no commit recorded); pass a run dir, its checkpoints/ dir "
                              "or one step dir")
    with pytest.raises(FileNotFoundError) as err:
        find_checkpoint(folder / "7")
    assert str(err.value) == (f"{folder / '7'} is not a complete checkpoint (Orbax recorded no commit: the save was cut "
                              f"short); {folder} holds no complete step: start without it")
    shutil.copytree(saved_run[0] / "checkpoints" / "1", folder / "1")
    with pytest.raises(FileNotFoundError, match=r"cut short\); pass its parent for the latest complete step, 1$"):
        find_checkpoint(folder / "7")


def test_multirun_job_dir_named_by_a_number(saved_run, tmp_path):
    job = tmp_path / "sweep" / "0"  # Hydra names multirun jobs 0, 1, ...
    shutil.copytree(saved_run[0] / "checkpoints", job / "checkpoints")
    assert find_checkpoint(job) == job / "checkpoints" / "1"
    (tmp_path / "sweep" / "1").mkdir()
    with pytest.raises(FileNotFoundError, match="no checkpoint in"):
        find_checkpoint(tmp_path / "sweep" / "1")


def test_a_file_or_an_item_inside_a_run_names_the_folder_to_pass(saved_run):
    # Was "no checkpoint in <run>/metrics.json: looked for complete Orbax step folders <step>/ in <it>".
    run_dir = saved_run[0]
    step = run_dir / "checkpoints" / "1"
    for inside, fix in ((step / "arrays", step), (step / "meta", step)):
        with pytest.raises(FileNotFoundError) as err:
            find_checkpoint(inside)
        assert str(err.value) == f"{inside} is the {inside.name!r} item of the step folder {step}: pass {fix}"
    (run_dir / "notes.txt").write_text("")
    with pytest.raises(FileNotFoundError) as err:
        find_checkpoint(run_dir / "notes.txt")
    assert str(err.value) == (f"{run_dir / 'notes.txt'} is a file, not a folder: pass a run dir "
                              f"(e.g. {run_dir}), its checkpoints/ dir or one step dir")


def test_a_job_dir_without_checkpoints_is_not_taken_for_a_step_folder(saved_run, tmp_path, caplog):
    # Was: a failed sweep job's folder (named 1, holding Hydra's .hydra/) counted as a step folder of its
    # sweep: "not a complete checkpoint (Orbax recorded no commit: the save was cut short); pass its parent".
    sweep = tmp_path / "sweep"
    shutil.copytree(saved_run[0] / "checkpoints", sweep / "0" / "checkpoints")
    (sweep / "0" / ".hydra").mkdir()
    (sweep / "1" / ".hydra").mkdir(parents=True)
    (sweep / "1" / "metrics.json").write_text('{"status": "error"}')
    with pytest.raises(FileNotFoundError) as err:
        find_checkpoint(sweep / "1")
    assert str(err.value).startswith(f"no checkpoint in {sweep / '1'}: looked for complete Orbax step folders")
    assert "cut short" not in str(err.value)
    assert "Metadata file does not exist" not in caplog.text  # the sweep folder was not scanned as one
    assert committed_steps(sweep) == []  # job folders are no step folders, complete or not


@pytest.mark.parametrize("kwargs, match", [
    ({"every": -1}, "every must be an integer >= 0, got -1"),
    ({"keep": 0}, "keep must be an integer >= 1"),
    ({"config": {"x": object()}}, "config must be JSON-serialisable"),
])
def test_writer_rejects_bad_arguments(tmp_path, kwargs, match):
    with pytest.raises(ValueError, match=match):
        CheckpointWriter(tmp_path / "checkpoints", **kwargs)


def test_a_config_with_a_value_missing_or_not_found_is_refused_naming_its_key(tmp_path):
    # Was: OmegaConf's raw MissingMandatoryValue ("Missing mandatory value: model.width", over three lines) or
    # InterpolationKeyError; now one line naming the key and the fix. Nested configs are named as they fail JSON.
    from omegaconf import OmegaConf

    for config, key, why in (({"a": "???"}, "a", "Missing mandatory value: a"),
                             ({"model": {"width": "???"}}, "model.width", "Missing mandatory value: model.width"),
                             ({"lr": "${nope}"}, "lr", "Interpolation key 'nope' not found")):
        with pytest.raises(ValueError) as refused:
            CheckpointWriter(tmp_path / "checkpoints", config=OmegaConf.create(config))
        assert str(refused.value) == (f"config: {key} cannot be read ({why}): give it a value (an override {key}=...) "
                                      "or drop it, then pass OmegaConf.to_container(cfg, resolve=True)")
    assert not (tmp_path / "checkpoints").exists()  # refused before any folder is made
    with CheckpointWriter(tmp_path / "checkpoints", config=OmegaConf.create({"a": 3, "m": {"w": 8}})) as writer:
        assert writer.config == {"a": 3, "m": {"w": 8}}  # a nested DictConfig: saved as the data it holds


@pytest.mark.slow
def test_info_is_saved_with_the_arrays_and_checked(tmp_path, devices):
    # A caller's own scalars (here, a training loop's early stopping) travel with its checkpoint.
    state, key = nnx.state(build()[0]), jax.random.key(0)
    info = {"best_step": 4, "best_loss": 0.1 + 0.2, "history": [[2, 1.5], [4, 1.25]], "note": None}
    with CheckpointWriter(tmp_path / "checkpoints", config=CONFIG) as writer:
        writer.save(4, state, key, info=info)
        writer.save(6, state, key)  # no info: {}
        with pytest.raises(ValueError) as bad:
            writer.save(8, state, key, info={"best_loss": float("nan")})
        with pytest.raises(TypeError, match=r"info=\[1, 2\] must be a mapping"):
            writer.save(8, state, key, info=[1, 2])
        with pytest.raises(ValueError, match=r"info=\{'w': array\(\[1\.\]\)\} must be JSON-serialisable.*x\.tolist\(\)"):
            writer.save(8, state, key, info={"w": np.ones(1)})
        for bad_keys, where in (({1: "a"}, "info has the key 1 (int)"),
                                ({"h": [{None: 1}]}, "info['h'][0] has the key None (NoneType)")):
            with pytest.raises(ValueError, match=re.escape(where)):  # JSON would rename them silently
                writer.save(8, state, key, info=bad_keys)
        assert writer.steps() == [4, 6]  # a refused info writes nothing
    assert "info={'best_loss': nan} must be JSON-serialisable" in str(bad.value)
    assert "None for NaN or inf" in str(bad.value)
    target = abstract_state_for(lambda: build()[0], None)
    assert restore(tmp_path / "checkpoints" / "4", target).info == info == saved_info(tmp_path / "checkpoints" / "4")
    assert restore(tmp_path / "checkpoints", target).info == {} == saved_info(tmp_path / "checkpoints")
    shutil.rmtree(tmp_path / "checkpoints" / "6" / "meta")  # a damaged step folder is named, not Orbax's KeyError
    with pytest.raises(FileNotFoundError, match=r"checkpoint .*6 is damaged: its 'meta' item cannot be read") as err:
        saved_info(tmp_path / "checkpoints" / "6")
    # Was "resume from another step folder": which one is complete was left to find.
    step = tmp_path / "checkpoints" / "6"
    assert str(err.value).endswith(f"; resume from another step folder: {tmp_path / 'checkpoints' / '4'} (or move "
                                   f"{step} aside, e.g. to {step}.damaged, and pass {tmp_path / 'checkpoints'}, whose "
                                   "newest is then 4)")
    step.rename(f"{step}.damaged")  # what the message says: the folder form now finds step 4
    assert find_checkpoint(tmp_path / "checkpoints") == tmp_path / "checkpoints" / "4"


def test_writer_directory_is_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    writer = CheckpointWriter("out/checkpoints", every=2)
    try:
        assert writer.directory == tmp_path / "out" / "checkpoints"
        assert [s for s in range(1, 7) if writer.due(s)] == [2, 4, 6]
    finally:
        writer.close()


def test_restore_onto_one_device_without_a_mesh(saved_run):
    run_dir, expected = saved_run
    restored = restore(run_dir, abstract_state_for(lambda: build(), None, "tensor"))
    got = {"/".join(map(str, p)): v.get_value() for p, v in nnx.to_flat_state(restored.state)}
    assert got.keys() == expected.keys() and restored.step == 1
    for name, value in got.items():
        np.testing.assert_array_equal(np.asarray(value), expected[name], err_msg=name)
        assert len(value.sharding.device_set) == 1, name
    assert len(restored.key.sharding.device_set) == 1


@pytest.mark.slow  # an end-to-end run (resume, a stop, or processes)
def test_harness_resumes_a_mesh_run_with_mesh_none(tmp_path, devices):
    """``train.resume=<run> mesh=none``: a state saved on a (4, 2) mesh under "tensor" goes to one device."""
    from faults_helpers import compose_tiny
    from omegaconf import OmegaConf

    from gensbi_sharding.harness.state import build_state

    mesh = contract.make_mesh(model_axis=2)
    table = dict(contract.RULES["tensor"])
    saved = compose_tiny("mesh.model_axis=2", "rule=tensor")
    ts = build_state(saved, dim_theta=2, dim_x=2, mesh=mesh, rule_name="tensor", table=table, resume_dir=None)
    functions, state = make_step_functions(ts.model, ts.optimizer, mesh, ema=ts.ema)
    state, _ = run_steps(functions, state, ts.key, mesh, BATCHES[:2])
    with CheckpointWriter(tmp_path / "checkpoints", config=OmegaConf.to_container(saved, resolve=True)) as writer:
        writer.save(2, state, ts.key)
    want = {"/".join(map(str, p)): np.asarray(v.get_value()) for p, v in nnx.to_flat_state(state)}
    resumed = build_state(compose_tiny("mesh=none", f"train.resume={tmp_path}"), dim_theta=2, dim_x=2, mesh=None,
                          rule_name="tensor", table=table, resume_dir=tmp_path / "checkpoints" / "2")
    assert resumed.start_step == 2 and resumed.fallbacks == {}
    got = nnx.state(resumed.nodes)  # model, optimizer and the EMA
    for path, var in nnx.to_flat_state(got):
        name = "/".join(map(str, path))
        np.testing.assert_array_equal(np.asarray(var.get_value()), want[name], err_msg=name)
        assert len(var.get_value().sharding.device_set) == 1, name


class WithEmpty(nnx.Module):
    """A zero-size Param beside an ordinary kernel."""

    def __init__(self, rngs):
        self.empty = nnx.Param(jax.numpy.zeros((0, 3)))
        self.kernel = nnx.Param(jax.random.normal(rngs.params(), (8, 4)), **contract.axes("embed", "mlp"))


def test_zero_size_variables_are_saved_and_restored_on_another_mesh(tmp_path, devices):
    # Was: "ValueError: Cannot save arrays with zero size" (Orbax) at the final save, losing the trained run.
    model = contract.init_sharded(lambda: WithEmpty(nnx.Rngs(0)), contract.make_mesh(model_axis=2), "fsdp")
    optimizer = nnx.Optimizer(model, optax.adam(1e-3), wrt=nnx.Param)  # its moments of `empty` are zero-size too
    with CheckpointWriter(tmp_path / "checkpoints", config=CONFIG) as writer:
        assert writer.save(3, nnx.state((model, optimizer)), jax.random.key(0))
    mesh = contract.make_mesh(model_axis=4)

    def fresh():
        other = WithEmpty(nnx.Rngs(1))
        return other, nnx.Optimizer(other, optax.adam(1e-3), wrt=nnx.Param)

    restored = restore(tmp_path / "checkpoints", abstract_state_for(fresh, mesh, "tensor"))
    model_state, optimizer_state = restored.state[0], restored.state[1]
    moments = [v.shape for v in jax.tree.leaves(optimizer_state) if getattr(v, "size", 1) == 0]
    assert moments == [(0, 3), (0, 3)]  # adam's mu and nu of `empty`
    empty, kernel = model_state["empty"].get_value(), model_state["kernel"].get_value()
    assert empty.shape == (0, 3) and empty.dtype == np.float32 and empty.sharding.mesh.shape == mesh.shape
    np.testing.assert_array_equal(kernel, model.kernel.get_value())
    assert restored.step == 3


def test_writer_refuses_a_file_and_folders_it_would_delete(tmp_path, devices):
    # Was: a file was accepted (Orbax's NotADirectoryError in a background thread), and a user's
    # folder named like a step (7/) was deleted by the keep policy as new steps were saved.
    (tmp_path / "file").write_text("x")
    with pytest.raises(NotADirectoryError, match=r"checkpoint directory .*file is a file"):
        CheckpointWriter(tmp_path / "file")
    mine = tmp_path / "mixed" / "7" / "mine.txt"
    mine.parent.mkdir(parents=True)
    mine.write_text("keep me")
    with pytest.raises(FileExistsError, match=r"folders named like steps that are no checkpoints \(7\)"):
        CheckpointWriter(tmp_path / "mixed", keep=1)
    assert mine.read_text() == "keep me"


def test_a_failed_commit_is_named_at_the_next_save_and_keeps_the_earlier_step(tmp_path, monkeypatch, devices):
    # Was: Orbax's bare PermissionError (no step, no fix); with several processes the others waited out Orbax's
    # 20-minute timeout (tests/test_multihost.py::test_failed_commit_ends_every_process_within_seconds).
    rename = os.rename

    def refused(src, dst, *args, **kwargs):  # the folder turned read-only while step 2 was written
        if str(src).endswith(".orbax-checkpoint-tmp") and Path(dst).name == "2":
            raise PermissionError(1, "Operation not permitted", str(src))
        return rename(src, dst, *args, **kwargs)

    state, key = nnx.state(build()[0]), jax.random.key(0)
    with CheckpointWriter(tmp_path / "checkpoints") as writer:
        writer.save(1, state, key)
        monkeypatch.setattr(os, "rename", refused)
        writer.save(2, state, key)
        with pytest.raises(RuntimeError, match=r"checkpoint step 2 was not saved in .*checkpoints: writing or "
                           r"committing it failed \(PermissionError: .*Operation not permitted.*\)\. Keep the "
                           r"checkpoint folder writable .*checkpoints/1, is kept"):
            writer.save(3, state, key)
        monkeypatch.setattr(os, "rename", rename)
    assert committed_steps(tmp_path / "checkpoints") == [1]
    assert find_checkpoint(tmp_path / "checkpoints").name == "1"  # what a resume restores


def test_commit_barrier_bounds_only_the_wait_for_process_0s_commit(monkeypatch):
    # Was: Orbax's 1200 s for every barrier of a save, so a commit that failed on process 0 held the others 20 min.
    import orbax.checkpoint as ocp

    from gensbi_sharding.checkpoint_lock import commit_barrier

    calls = []
    monkeypatch.setattr(ocp.multihost, "get_barrier_sync_fn", lambda **_: lambda *, key, timeout_ms: calls.append(
        (key, timeout_ms)))
    barrier = commit_barrier(2.5)
    barrier(key="async_write_complete.7", timeout_ms=1_200_000)  # every process's writes: Orbax's bound kept
    barrier(key="async_commit_complete.7", timeout_ms=1_200_000)
    barrier(key="async_commit_complete.8", timeout_ms=900)  # less left of Orbax's bound: that one
    assert calls == [("async_write_complete.7", 1_200_000), ("async_commit_complete.7", 2500),
                     ("async_commit_complete.8", 900)]


def test_writer_config_is_checked_as_info_and_a_closed_writer_refuses(tmp_path, devices):
    # Was: NaN and int keys in config were saved (read back as NaN JSON and "1"); a step already on disk
    # raised Orbax's StepAlreadyExistsError; a save after close returned True and wrote nothing.
    for config, match in (({"lr": float("nan")}, "config must be JSON-serialisable"),
                          ({1: "a"}, r"config has the key 1 \(int\)")):
        with pytest.raises(ValueError, match=match):
            CheckpointWriter(tmp_path / "c", config=config)
    state, key = nnx.state(build()[0]), jax.random.key(0)
    writer = CheckpointWriter(tmp_path / "checkpoints", async_save=False)
    writer.save(1, state, key)
    writer.save(2, state, key)
    with pytest.raises(ValueError, match=r"step 1 is already saved in .*checkpoints \(steps \[1, 2\]\)"):
        writer.save(1, state, key)
    writer.close()
    writer.close()  # idempotent
    with pytest.raises(RuntimeError, match="CheckpointWriter of .* is closed"):
        writer.save(3, state, key)
    assert committed_steps(tmp_path / "checkpoints") == [1, 2]


@pytest.mark.parametrize("damage", ["meta_missing", "meta_not_json", "arrays_data_missing"])
def test_restore_names_a_damaged_step_folder(tmp_path, devices, damage):
    # Was: Orbax's KeyError, json's JSONDecodeError or tensorstore's NOT_FOUND from deep inside.
    model = build()[0]
    with CheckpointWriter(tmp_path / "checkpoints") as writer:
        writer.save(3, nnx.state(model), jax.random.key(0))
    step = tmp_path / "checkpoints" / "3"
    if damage == "meta_missing":
        shutil.rmtree(step / "meta")
    elif damage == "meta_not_json":
        (step / "meta" / "metadata").write_text("{not json")
    else:
        shutil.rmtree(step / "arrays" / "d")
    with pytest.raises(FileNotFoundError, match=r"checkpoint .*3 is damaged: its .* item cannot be read") as err:
        restore(tmp_path / "checkpoints", abstract_state_for(model, None))
    assert str(err.value).endswith("; no other step folder is complete: start without it")



def test_a_damaged_step_folder_s_cause_keeps_its_path_whole(tmp_path, devices):
    # Was, for a step whose arrays/manifest.ocdbt was lost (launch.py train.resume=...): the cause cut at 120
    # characters, '... in OCDBT database at local file "/tmp/b61/e_arrays_man); resume ...': half a path, a quote
    # left open. Now cut at a word boundary outside quotes, " ..." said; TensorStore's spec dump left out.
    model = build()[0]
    with CheckpointWriter(tmp_path / "checkpoints") as writer:
        writer.save(3, nnx.state(model), jax.random.key(0))
        writer.save(4, nnx.state(model), jax.random.key(0))
    step = tmp_path / "checkpoints" / "4"
    (step / "arrays" / "manifest.ocdbt").unlink()
    with pytest.raises(FileNotFoundError, match=r"checkpoint .*4 is damaged: its .* item cannot be read") as err:
        restore(tmp_path / "checkpoints", abstract_state_for(model, None))
    said = str(err.value)
    cause = said[said.index("(ValueError: "):said.index("); resume from another step folder: ")]
    assert f'in OCDBT database at local file "{step / "arrays"}/" does not exist ...' in cause, said
    assert "tensorstore_spec" not in cause and cause.count('"') % 2 == 0, said
    assert said.endswith(f"; resume from another step folder: {tmp_path / 'checkpoints' / '3'} (or move {step} aside, "
                         f"e.g. to {step}.damaged, and the newest is 3)")

def test_saving_a_replicated_state_on_a_cpu_mesh_compiles_nothing_per_device(tmp_path, devices):
    # Orbax's replica-parallel saving has each of the 8 replicas write a slice of every replicated
    # array, compiling one slice program per device and shape on the first save (flux1 preset:
    # 272 compilations, about 5 s); on CPU the devices share one host's memory, so it is off there.
    mesh = contract.make_mesh(model_axis=1)
    # Shapes no other test saves (nothing cached), each with an axis the 8 replicas can split.
    shapes = [(3, 40), (56,), (2, 9, 24), (88, 13)]
    state = {f"w{i}": jax.device_put(np.full(shape, i, np.float32), NamedSharding(mesh, P()))
             for i, shape in enumerate(shapes)}
    from compile_count import compiles  # here: a fresh process imports this module without tests/ on its path

    key = jax.random.key(0)
    with compiles() as compiled, CheckpointWriter(tmp_path / "checkpoints") as writer:
        writer.save(1, state, key)
    # The finite check's program and the key's data: fewer than one per shape, where there were 8 per shape.
    assert len(compiled) < len(shapes), compiled
    target = {name: jax.ShapeDtypeStruct(v.shape, v.dtype, sharding=v.sharding) for name, v in state.items()}
    restored = restore(tmp_path / "checkpoints", target)  # written by the pytree handler, read by the standard one
    for name, value in state.items():
        np.testing.assert_array_equal(np.asarray(restored.state[name]), np.asarray(value))



def test_the_finite_check_of_a_state_on_a_cpu_mesh_compiles_nothing_and_finds_nan_in_any_shard(tmp_path, devices):
    # Was one compiled program (isfinite, all, stack over every leaf) at the first save, 0.5 s on 2 cores; on CPU
    # devices the arrays lie in this host's memory, so the check reads each shard there. NaN or inf in a shard of
    # only one device, whichever its place, is still found; a finite leaf (replicated, or split) is not named.
    mesh = contract.make_mesh(model_axis=2)  # data=4 x model=2
    specs = {"rows": P("data"), "cols": P(None, "model"), "both": P("data", "model"), "whole": P()}

    def put(values, spec):  # from NumPy: JAX slices it on the host, compiling nothing
        return jax.device_put(values, NamedSharding(mesh, spec))

    ok = {name: put(np.ones((8, 6), np.float32), spec) for name, spec in specs.items()}
    ok["bf16"] = put(np.ones((4, 6), jax.numpy.bfloat16), P("data"))
    states = []  # (state, the names the error gives)
    for name, spec in specs.items():
        for where, bad in [((7, 5), np.inf), ((0, 0), np.nan), ((5, 2), -np.inf)]:  # each in a shard of its own
            values = np.ones((8, 6), np.float32)
            values[where] = bad
            states.append(({**ok, name: put(values, spec)}, f"1 array(s) hold NaN or inf, e.g. {name}"))
    states.append(({**ok, "whole": put(np.full((8, 6), np.nan, np.float32), P()),
                    "bf16": put(np.array([[1, np.nan, 1]] * 4 * 2, jax.numpy.bfloat16).reshape(4, 6), P("data"))},
                   "2 array(s) hold NaN or inf, e.g. bf16, whole"))
    from compile_count import compiles  # here: a fresh process imports this module without tests/ on its path

    key = jax.random.key(0)
    with CheckpointWriter(tmp_path / "checkpoints") as writer:
        with compiles() as compiled:
            for state, names in states:
                with pytest.raises(FloatingPointError, match=re.escape(names)):
                    writer.save(3, state, key)
        assert compiled == [], compiled
        assert writer.steps() == []
        assert writer.save(3, ok, key)  # finite: saved
    restored = restore(tmp_path / "checkpoints", {n: jax.ShapeDtypeStruct(v.shape, v.dtype, sharding=v.sharding)
                                                  for n, v in ok.items()})
    assert all(np.asarray(restored.state[n]).tolist() == np.asarray(v).tolist() for n, v in ok.items())

EXIT_WITHOUT_CLOSE = textwrap.dedent("""
    import sys
    import threading
    import jax
    import jax.numpy as jnp
    from gensbi_sharding.checkpoint import CheckpointWriter

    def write():
        writer = CheckpointWriter(sys.argv[1], keep=3)  # never closed
        writer.exit_timeout_s = float(sys.argv[2])
        state = {"w": jnp.full((1024, 1024), 2.0)}  # 4 MB: still being written when the script ends
        writer.save(1, {"w": jnp.ones((512, 512))}, jax.random.key(0))
        writer.save(2, state, jax.random.key(0))  # waits for step 1 first, as Orbax does
        writers.append(writer)

    writers = []
    if sys.argv[3] == "thread":  # made in a worker thread: the script's end is the main thread's
        worker = threading.Thread(target=write)
        worker.start()
        worker.join()
    else:
        if sys.argv[3] == "tools":  # the script's own sys.monitoring tools, in the ids free for any tool
            sys.monitoring.use_tool_id(3, "mine"), sys.monitoring.use_tool_id(4, "mine too")
        write()
    writer = writers[0]
    if sys.argv[3] == "exit":
        sys.exit(3)  # an exception leaving the script: its end too
    if sys.argv[3] == "closed":
        writer.close()  # closed, and still referenced when the script ends: nothing to finish, nothing to say
""")


@pytest.mark.slow  # a fresh process, about 3 s
@pytest.mark.parametrize("how, timeout_s, code", [("end", 60, 0), ("exit", 0, 3), ("closed", 60, 0), ("thread", 60, 0),
                                                    ("tools", 60, 0)])
def test_a_writer_left_open_when_the_script_ends_finishes_its_save_or_names_the_step_lost(tmp_path, how, timeout_s,
                                                                                          code):
    # Was: step 2 lost, Orbax's tracebacks ("cannot schedule new futures after interpreter shutdown"), and in 3 runs of
    # 4 an exit hung for Orbax's 1200 s timeout (its save threads waited for a step folder made by a thread the exit
    # had refused). Now the end of the script finishes the save (at most exit_timeout_s) and says it was left open.
    ck = tmp_path / "ck"
    proc = subprocess.run([sys.executable, "-c", EXIT_WITHOUT_CLOSE, str(ck), str(timeout_s), how], cwd=REPO,
                          env={**os.environ, "JAX_PLATFORMS": "cpu"}, capture_output=True, text=True, timeout=120)
    assert proc.returncode == code, proc.stderr[-3000:]
    warned = [line for line in proc.stderr.splitlines() if "RuntimeWarning" in line]
    where = f"RuntimeWarning: CheckpointWriter({str(ck)!r}) was still open when the script ended"
    fix = "call writer.close(), or save inside `with CheckpointWriter(...) as writer:`, before the script ends"
    if how in ("end", "thread", "tools"):  # thread, tools were: not armed (no script frame in the worker's stack;
        # ids 3 and 4 taken), step 2 cut short by the exit with Orbax's tracebacks
        assert len(warned) == 1 and re.fullmatch(rf"CheckpointWriter:0: {re.escape(where)}; its save of step 2 was "
                                                 rf"finished \(\d+\.\d s\); {re.escape(fix)}", warned[0]), proc.stderr[-3000:]
        assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
        assert committed_steps(ck) == [1, 2]
        target = {"w": jax.ShapeDtypeStruct((1024, 1024), np.float32,
                                            sharding=jax.sharding.SingleDeviceSharding(jax.devices()[0]))}
        np.testing.assert_array_equal(np.asarray(restore(ck, target).state["w"]), np.full((1024, 1024), 2.0))
    elif how == "closed":  # was: 'still open when the script ended' for a writer closed and still referenced
        assert warned == [] and committed_steps(ck) == [1, 2], proc.stderr[-3000:]
    else:  # no time to wait: the step is named as lost, once, and the exit is not held up
        assert warned == [f"CheckpointWriter:0: {where} and step 2 could not be committed: still being written after "
                          f"exit_timeout_s=0 s; it is lost (newest step on disk: 1); {fix}"], proc.stderr[-3000:]
        assert committed_steps(ck) == [1]
        assert "Traceback" not in proc.stderr and "ERROR:absl" not in proc.stderr, proc.stderr[-3000:]  # was 4 of each


EXIT_PROBE = textwrap.dedent("""
    import atexit
    import sys
    from gensbi_sharding.checkpoint_lock import watch_exit

    class Manager:
        def wait_until_finished(self):
            pass

    class Writer:  # what watch_exit reads of a CheckpointWriter, without an Orbax save (a fast test)
        directory, last_saved, exit_timeout_s, _closed, _manager, _status = "ck", None, 5.0, False, Manager(), {}

        def close(self):
            print("closed", flush=True)
            self._closed = True

    def f():
        return 1

    atexit.register(print, "atexit")
    writer = Writer()
    watch_exit(writer)
    returns, traced = [], []  # a coverage tool's (id 1) and a debugger's (sys.settrace) view, the exit watch armed
    sys.monitoring.use_tool_id(1, "coverage")
    sys.monitoring.register_callback(1, sys.monitoring.events.PY_RETURN, lambda code, i, value: returns.append(code))
    sys.monitoring.set_events(1, sys.monitoring.events.PY_RETURN)
    sys.settrace(lambda frame, event, arg: traced.append(event) if frame.f_code is f.__code__ else None)
    for _ in range(3):
        f()
    sys.settrace(None)
    sys.monitoring.set_events(1, 0)
    exec("x = 1")  # module code run in the script's globals, inside it: not its end
    print(f"tool 1: {returns.count(f.__code__)}, traced: {traced.count('call')}", flush=True)
    print("last line", flush=True)
""")


@pytest.mark.slow  # fresh processes, about 2 s each (run together)
def test_the_end_of_a_script_is_found_however_python_runs_it(tmp_path):
    # A file, -m and -c (test above) are scripts: their end finishes an open writer, before atexit; an exec() in the
    # script is not its end; code that a script runs with runpy (an embedding) and `python -i` have no end before the
    # exit. A debugger's and a coverage tool's events, all of them, with the watch armed.
    (tmp_path / "exit_probe.py").write_text(EXIT_PROBE)
    runs = {"file": [sys.executable, "exit_probe.py"], "module": [sys.executable, "-m", "exit_probe"],
            "runpy": [sys.executable, "-c", "import runpy; runpy.run_path('exit_probe.py', run_name='__main__'); "
                                            "print('after run_path')"],
            "interactive": [sys.executable, "-i", "exit_probe.py"]}
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    procs = {how: subprocess.Popen(cmd, cwd=tmp_path, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True) for how, cmd in runs.items()}
    out = {how: proc.communicate(timeout=120) for how, proc in procs.items()}
    seen = "tool 1: 3, traced: 3"
    warned = ("CheckpointWriter:0: RuntimeWarning: CheckpointWriter('ck') was still open when the script ended; it had "
              "saved nothing; call writer.close(), or save inside `with CheckpointWriter(...) as writer:`, before the "
              "script ends")
    for how in ("file", "module"):
        assert out[how][0].splitlines() == [seen, "last line", "closed", "atexit"], (how, out[how])
        assert [line for line in out[how][1].splitlines() if "Warning" in line] == [warned], (how, out[how])
    assert out["runpy"][0].splitlines() == [seen, "last line", "after run_path", "atexit"], out["runpy"]
    assert out["interactive"][0].splitlines() == [seen, "last line", "atexit"], out["interactive"]
    assert all("Warning" not in out[how][1] for how in ("runpy", "interactive")), out
    assert all(proc.returncode == 0 for proc in procs.values()), out


def test_restore_names_a_step_folder_whose_array_data_files_are_gone(tmp_path, devices):
    # Was, for a run's checkpoint (a placed state: its data under arrays/ocdbt.process_0/d) with those files deleted:
    # Orbax's bare "Exception: Encountered error while reading array index ... See full TensorStore details:" and
    # 60 lines of TensorStore spec on the console, the damaged folder and the step to resume from unnamed.
    mesh = contract.make_mesh(model_axis=1)
    model, _ = placed(mesh, "replicated")
    with CheckpointWriter(tmp_path / "checkpoints") as writer:
        writer.save(3, nnx.state(model), jax.random.key(0))
        writer.save(4, nnx.state(model), jax.random.key(0))
    step = tmp_path / "checkpoints" / "4"
    data = [f for f in (step / "arrays").glob("ocdbt.process_*/d/*") if f.is_file()]
    assert data
    for f in data:
        f.unlink()
    with pytest.raises(FileNotFoundError, match=r"checkpoint .*4 is damaged: its 'arrays', 'meta' or 'config' item "
                                                r"cannot be read \(ValueError: [A-Z_]+: Error reading") as err:
        restore(tmp_path / "checkpoints", abstract_state_for(model, mesh, "replicated"))
    assert "\n" not in str(err.value) and str(err.value).endswith(
        f"; resume from another step folder: {tmp_path / 'checkpoints' / '3'} (or move {step} aside, e.g. to "
        f"{step}.damaged, and the newest is 3)")
    assert restore(tmp_path / "checkpoints" / "3", abstract_state_for(model, mesh, "replicated")).step == 3  # the fix


@pytest.mark.parametrize("damaged", [(3,), (3, 2)])
def test_a_damaged_steps_fix_checks_older_steps_without_restoring_them(tmp_path, devices, monkeypatch, damaged):
    # Was: restore of a 3-step folder whose newest step lost its meta item restored step 2 (every array, onto the
    # devices) only to offer it: a big model's cost in time and memory. Now an older step is checked by its items
    # (the arrays' metadata and the JSON items), and only the step asked for is restored.
    import orbax.checkpoint as ocp

    mesh = contract.make_mesh(model_axis=1)
    model, _ = placed(mesh, "replicated")
    folder = tmp_path / "checkpoints"
    with CheckpointWriter(folder, async_save=False, keep=3) as writer:
        for step in (1, 2, 3):
            writer.save(step, nnx.state(model), jax.random.key(0))
    for step in damaged:
        shutil.rmtree(folder / str(step) / "meta")
    read, restored = ocp.Checkpointer.restore, []
    monkeypatch.setattr(ocp.Checkpointer, "restore", lambda self, d, *a, **k: restored.append(Path(d).name) or read(
        self, d, *a, **k))
    with pytest.raises(FileNotFoundError, match=r"checkpoint .*3 is damaged: its 'arrays', 'meta' or 'config' item "
                                                r"cannot be read") as err:
        restore(folder, abstract_state_for(model, mesh, "replicated"))
    assert restored == ["3"]
    moved = [folder / str(step) for step in damaged]  # each damaged step newer than the one offered (was: 3 alone)
    assert str(err.value).endswith(f"; resume from another step folder: {folder / '1' if 2 in damaged else folder / '2'}"
                                   f" (or move {' and '.join(map(str, moved))} aside, e.g. to "
                                   f"{', '.join(f'{m}.damaged' for m in moved)}, and the newest is "
                                   f"{1 if 2 in damaged else 2})"), str(err.value)


def test_a_step_whose_array_data_alone_is_lost_is_named_by_step_damage_and_its_restore(tmp_path, devices):
    # step_damage reads no array data (a big model's cost), but the sizes the arrays' B+tree records: a data file
    # deleted by hand, its metadata intact, is named (was: None, found by the restore alone); the restore refuses in
    # one line, offering the step step_damage passes.
    from gensbi_sharding.checkpoint import step_damage

    mesh = contract.make_mesh(model_axis=1)
    model, _ = placed(mesh, "replicated")
    folder = tmp_path / "checkpoints"
    with CheckpointWriter(folder, async_save=False) as writer:
        for step in (4, 8):
            writer.save(step, nnx.state(model), jax.random.key(0))
    data = [f for f in (folder / "8" / "arrays").glob("ocdbt.process_*/d/*") if f.is_file()]
    assert data
    for f in data:
        f.unlink()
    assert step_damage(folder / "8") in {f"its 'arrays' item cannot be read (its data file {f.relative_to(folder / '8')} "
                                         "is missing)" for f in data}
    assert step_damage(folder / "4") is None
    shutil.rmtree(folder / "4" / "meta")  # an older step damaged too: not offered
    assert step_damage(folder / "4") == "its 'meta' item cannot be read (its folder is missing)"
    with pytest.raises(FileNotFoundError) as err:
        restore(folder, abstract_state_for(model, mesh, "replicated"))
    assert str(err.value).startswith(f"checkpoint {folder / '8'} is damaged: its 'arrays', 'meta' or 'config' item "
                                     "cannot be read (ValueError: "), str(err.value)
    assert str(err.value).endswith("; no other step folder can be read either (steps 4): start without it")


def test_step_damage_names_an_array_data_file_cut_short(tmp_path):
    # Was: None (no array data read); the restore alone found it. Now by the size the arrays' B+tree records.
    from gensbi_sharding.checkpoint import step_damage

    folder = tmp_path / "checkpoints"
    with CheckpointWriter(folder, async_save=False) as writer:
        writer.save(8, {"w": np.arange(4096.0, dtype=np.float32)}, jax.random.key(0))
    big = max((folder / "8" / "arrays").glob("ocdbt.process_*/d/*"), key=lambda f: f.stat().st_size)
    size = big.stat().st_size
    os.truncate(big, 100)
    said = step_damage(folder / "8")
    assert said.startswith(f"its 'arrays' item cannot be read (its data file {big.relative_to(folder / '8')} is cut "
                           "short: 100 of its "), said
    assert int(said.split(" of its ")[1].split()[0]) <= size  # the bytes it held


@pytest.mark.parametrize("manifest", [{}, {"versions": [{"root": {"location": "btreenode:another:form"}}]}])
def test_step_damage_leaves_a_tree_location_it_cannot_read_to_the_restore(tmp_path, monkeypatch, manifest):
    # Was: a manifest without 'versions' (KeyError) or a location of another form (ValueError unpacking it) raised
    # inside the check, which step_damage reports as damage: a step that reads would have been refused.
    import tensorstore as ts
    from gensbi_sharding.checkpoint import step_damage

    folder = tmp_path / "checkpoints"
    with CheckpointWriter(folder, async_save=False) as writer:
        writer.save(8, {"w": np.arange(4096.0, dtype=np.float32)}, jax.random.key(0))
    monkeypatch.setattr(ts.ocdbt, "dump", lambda base, node=None: SimpleNamespace(result=lambda: manifest))
    assert step_damage(folder / "8") is None


def test_step_damage_leaves_the_callers_unraisable_hook_as_it_found_it(tmp_path, monkeypatch):
    # Was: the first damaged arrays item step_damage read installed, for good, a sys.unraisablehook filter of its own
    # (a process global changed by a library call). The late "Event loop is closed" callbacks of the read are now
    # a launcher's to drop (log_file.drop_late_callbacks in launch.py: tests/test_resume_refusals.py).
    from gensbi_sharding.checkpoint import step_damage

    folder = tmp_path / "checkpoints"
    with CheckpointWriter(folder, config=CONFIG, async_save=False) as writer:
        writer.save(8, {"w": jax.numpy.arange(64.0), "v": jax.numpy.ones((32, 32))}, jax.random.key(0), info={})
    (folder / "8" / "arrays" / "manifest.ocdbt").unlink()  # its arrays' database
    monkeypatch.setattr(sys, "unraisablehook", [].append)
    hook = sys.unraisablehook
    assert step_damage(folder / "8").startswith("its 'arrays' item cannot be read (ValueError: NOT_FOUND: ")
    assert sys.unraisablehook is hook


class _ParamNamedOptState(nnx.Module):
    """A model whose parameter sits under an attribute named like an optimizer's state."""

    def __init__(self):
        self.opt_state = nnx.Param(jax.numpy.array([np.inf, 1.0]))
        self.w = nnx.Param(jax.numpy.ones(2))


def test_inf_is_allowed_by_the_variable_type_not_an_opt_state_name(tmp_path, devices):
    # Was: saved, inf and all: the exemption went by a path component "opt_state", so a parameter under a module
    # attribute of that name passed. Now a typed state goes by type (nnx.OptState only); a plain dict, typeless,
    # still by the key's name (the documented limit).
    model = _ParamNamedOptState()
    optimizer = nnx.Optimizer(nnx.Linear(2, 2, rngs=nnx.Rngs(0)), optax.adam(1e-3), wrt=nnx.Param)
    optimizer.opt_state[0].mu["kernel"][...] = jax.numpy.full((2, 2), np.inf)  # an optimizer's own, held as OptState
    with CheckpointWriter(tmp_path / "checkpoints", async_save=False) as writer:
        for state in (nnx.state(model), model, {"m": nnx.state(model)}, (model, optimizer)):
            with pytest.raises(FloatingPointError, match=r"step 1 is not finite \(1 array\(s\) hold NaN or inf, "
                                                         r"e\.g\. (m/|0/)?opt_state\)"):
                writer.save(1, state, jax.random.key(0))
        assert writer.save(1, optimizer, jax.random.key(0))  # the optimizer's inf: its OptState variable's
        # Plain (nnx.to_pure_dict): no types, so the key's name decides: inf under opt_state kept, elsewhere refused.
        assert writer.save(2, nnx.to_pure_dict(nnx.state(model)), jax.random.key(0))
        with pytest.raises(FloatingPointError, match=r"e\.g\. w\)"):
            writer.save(3, {"w": jax.numpy.array([np.inf])}, jax.random.key(0))
        assert writer.steps() == [1, 2]


def _steps_with_damaged_config(tmp_path: Path, steps, damaged) -> Path:
    """Save ``steps`` (with CONFIG, all kept) into ``tmp_path/checkpoints``, then delete each ``damaged`` step's config.

    Returns the checkpoints folder.
    """
    folder = tmp_path / "checkpoints"
    with CheckpointWriter(folder, config=CONFIG, async_save=False, keep=len(steps)) as writer:
        for step in steps:
            writer.save(step, {"w": np.zeros(2, np.float32)}, jax.random.key(0))
    for step in damaged:
        shutil.rmtree(folder / str(step) / "config")
    return folder


@pytest.mark.parametrize("damaged, fix", [
    ((4, 8), "no other step folder can be read either (steps 4): start without it"),
    ((8,), "resume from another step folder: {c}/4 (or move {c}/8 aside, e.g. to {c}/8.damaged, and the newest is 4)"),
    ((4, 8), "resume from another step folder: {c}/2 (or move {c}/8 and {c}/4 aside, e.g. to {c}/8.damaged, "
             "{c}/4.damaged, and the newest is 2)")])
def test_a_damaged_steps_fix_names_only_a_step_that_reads(tmp_path, damaged, fix):
    # Was, with steps 4 and 8 both missing their config item: "resume from another step folder: .../4", damaged too.
    from gensbi_sharding.checkpoint import saved_config

    folder = _steps_with_damaged_config(tmp_path, (2, 4, 8) if fix.endswith("is 2)") else (4, 8), damaged)
    with pytest.raises(FileNotFoundError) as err:
        saved_config(tmp_path)
    assert str(err.value).startswith(f"checkpoint {folder / '8'} is damaged: its 'config' item cannot be read")
    assert str(err.value).endswith("; " + fix.format(c=folder)), str(err.value)


def test_a_damaged_step_passed_by_name_is_advised_a_path_that_exists_once_it_is_moved(tmp_path):
    # Was: "(or move .../8 aside, e.g. to .../8.damaged, and the newest is 4)": the path passed, .../8, then gone.
    from gensbi_sharding.checkpoint import saved_config

    folder = _steps_with_damaged_config(tmp_path, (4, 8), damaged=(8,))
    with pytest.raises(FileNotFoundError) as err:
        saved_config(folder / "8")
    assert str(err.value).endswith(f"; resume from another step folder: {folder / '4'} (or move {folder / '8'} aside, "
                                   f"e.g. to {folder / '8'}.damaged, and pass {folder}, whose newest is then 4)")
    (folder / "8").rename(f"{folder / '8'}.damaged")  # what it says: that path now designates step 4
    assert saved_config(folder) == CONFIG and find_checkpoint(folder) == folder / "4"


@pytest.mark.parametrize("damaged, fix", [
    ((4,), "resume from another step folder: {c}/16 (or pass {c}, whose newest it is)"),
    ((4, 16), "resume from another step folder: {c}/8 (or move {c}/16 aside, e.g. to {c}/16.damaged, and pass {c}, "
              "whose newest is then 8)")])
def test_an_older_damaged_step_passed_by_name_is_not_told_to_move_aside(tmp_path, damaged, fix):
    # Was: "(or move .../4 aside, e.g. to .../4.damaged, and pass .../checkpoints, whose newest is then 8)": step 4,
    # older than 8, never stood in the way; its parent designated 8 already.
    from gensbi_sharding.checkpoint import saved_config

    folder = _steps_with_damaged_config(tmp_path, (4, 8, 16), damaged)
    with pytest.raises(FileNotFoundError) as err:
        saved_config(folder / "4")
    assert str(err.value).endswith("; " + fix.format(c=folder)), str(err.value)
    for step in damaged[1:]:  # what it says
        (folder / str(step)).rename(f"{folder / str(step)}.damaged")
    assert saved_config(folder) == CONFIG and find_checkpoint(folder) == folder / ("16" if damaged == (4,) else "8")

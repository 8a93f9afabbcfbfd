"""Run faults: non-finite checkpoints, file modes, device-count sources, the coordinator, folder locks.

Each test reproduces a case of issue 14 in this process (or a small helper process
without JAX) and checks the right value, message texts included.
"""

import json
import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from omegaconf import OmegaConf

from faults_helpers import REPO, compose_tiny, hint, run_tiny
import gensbi_sharding as contract
from gensbi_sharding.checkpoint import CheckpointWriter, committed_steps, restore, abstract_state_for
from gensbi_sharding.harness import folder_lock, outputs
from gensbi_sharding.harness.config import ConfigError
from gensbi_sharding.harness.devices import check_coordinator, resolve_cpu_count
from gensbi_sharding.harness.override_keys import ListField, list_fields
from gensbi_sharding.harness.override_lists import list_override_problem
from gensbi_sharding.harness.state import build_state
from gensbi_sharding.harness.train import make_step_functions


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ------------------------------------------------------------------ case 3: non-finite checkpoints

def test_a_non_finite_state_never_displaces_a_finite_checkpoint(tmp_path, devices):
    mesh = contract.make_mesh(model_axis=2)
    cfg = compose_tiny("model.init=eager")
    ts = build_state(cfg, dim_theta=2, dim_x=2, mesh=mesh, rule_name="replicated",
                     table=dict(contract.RULES["replicated"]), resume_dir=None)
    _, state = make_step_functions(ts.model, ts.optimizer, mesh)
    poisoned = jax.tree.map(lambda a: a * jnp.nan if jnp.issubdtype(a.dtype, jnp.inexact) else a, state)
    with CheckpointWriter(tmp_path / "checkpoints", every=5, keep=2) as writer:
        for step in range(1, 15):  # NaN from step 12 on: the save at 15 must refuse
            writer.maybe_save(step, state if step < 12 else poisoned, ts.key)
        with pytest.raises(FloatingPointError) as err:
            writer.maybe_save(15, poisoned, ts.key)
        assert writer.steps() == [5, 10]  # keep=2 kept the finite ones
    assert "the train state at step 15 is not finite (36 array(s) hold NaN or inf" in str(err.value)
    assert f"Last finite checkpoint: {tmp_path / 'checkpoints' / '10'}" in str(err.value)
    target = abstract_state_for((ts.model, ts.optimizer), mesh, dict(contract.RULES["replicated"]))
    restored = restore(tmp_path / "checkpoints", target)
    assert restored.step == 10
    assert all(np.isfinite(np.asarray(leaf)).all() for leaf in jax.tree.leaves(restored.state)
               if jnp.issubdtype(leaf.dtype, jnp.inexact))


@pytest.mark.slow  # an end-to-end run (a training or dry run, or processes)
def test_divergence_names_the_last_finite_checkpoint(tmp_path, devices):
    from gensbi_sharding.harness.override_grammar import hydra_override

    out = tmp_path / "my run (1)"  # named as the shell and Hydra read it back (was: as it is, split by the shell)
    metrics = run_tiny(out, "train.learning_rate=1e25", "train.checkpoint_every=1", "train.keep=2")
    assert metrics["status"] == "error"
    assert committed_steps(out / "checkpoints") == [1]  # step 2 on is NaN/inf: never saved
    assert "FloatingPointError: the train state at step 2 is not finite" in metrics["error"]
    assert f"{hydra_override('train.resume', out / 'checkpoints' / '1')} and a lower train.learning_rate" in \
        metrics["error"]
    assert hydra_override("train.resume", out) == f"'train.resume=\"{out}\"'"


# ------------------------------------------------------------------ case 4: ordinary file modes

@pytest.mark.parametrize("umask", [0o022, 0o002])
def test_result_files_get_the_mode_the_umask_gives(tmp_path, umask):
    from gensbi_sharding.harness.evaluate import pair_plot

    old = os.umask(umask)
    try:
        outputs.write_atomic(tmp_path / "sharding.txt", "a: P()\n")
        outputs.write_json(tmp_path / "metrics.json", {"status": "ok"})
        outputs.write_npz(tmp_path / "train_losses.npz", losses=np.zeros(3))
        pair_plot(np.zeros((20, 2)), np.ones((20, 2)), tmp_path / "posterior.png")
        with folder_lock.FolderLock(tmp_path):
            pass
    finally:
        os.umask(old)
    modes = {p.name: oct(p.stat().st_mode & 0o777) for p in tmp_path.iterdir()}
    assert modes == {name: oct(0o666 & ~umask) for name in
                     ("sharding.txt", "metrics.json", "train_losses.npz", "posterior.png", ".run.lock")}


# ------------------------------------------------------------------ case 6: device-count sources

@pytest.mark.parametrize("configured, environ, expected", [
    (None, {}, (8, "default")),
    (4, {}, (4, "devices.cpu_count")),
    (None, {"XLA_FLAGS": "--xla_cpu_foo --xla_force_host_platform_device_count=4"}, (4, "XLA_FLAGS")),
    (None, {"JAX_NUM_CPU_DEVICES": "2"}, (2, "JAX_NUM_CPU_DEVICES")),
    (4, {"XLA_FLAGS": "--xla_force_host_platform_device_count=4"}, (4, "devices.cpu_count")),
])
def test_device_count_source(configured, environ, expected):
    assert resolve_cpu_count(configured, environ) == expected


@pytest.mark.parametrize("configured, environ", [(100000, {}), (None, {"JAX_NUM_CPU_DEVICES": "2048"})])
def test_a_device_count_jax_cannot_start_with_is_refused_naming_the_limit(configured, environ):
    # devices.cpu_count=100000 hung in JAX's start-up, deaf to SIGTERM; 1,024 starts in seconds.
    assert resolve_cpu_count(1024, {}) == (1024, "devices.cpu_count")
    with pytest.raises(ConfigError, match=r"more simulated CPU devices than 1,024: .*set devices.cpu_count=1024 or fewer"):
        resolve_cpu_count(configured, environ)


def test_conflicting_device_counts_stop_the_run_naming_both(tmp_path, monkeypatch, devices):
    monkeypatch.setenv("XLA_FLAGS", "--xla_force_host_platform_device_count=4")
    metrics = run_tiny(tmp_path / "run", "devices.cpu_count=8")
    assert metrics["status"] == "error"
    assert "two device counts disagree: devices.cpu_count=8 and XLA_FLAGS gives 4; set devices.cpu_count=4 " \
           "(or drop it) to use XLA_FLAGS's, or remove the count from XLA_FLAGS to use 8" in metrics["error"]


# ------------------------------------------------------------------ case 7: the coordinator

@pytest.mark.slow  # an end-to-end run (a training or dry run, or processes)
def test_unreachable_coordinator_is_a_recorded_error_naming_it(tmp_path, devices):
    address = f"127.0.0.1:{_free_port()}"  # nobody listens there
    metrics = run_tiny(tmp_path / "run", "distributed.mode=explicit", f"distributed.coordinator_address={address}",
                       "distributed.num_processes=2", "distributed.process_id=1", "distributed.timeout_s=1")
    assert metrics["status"] == "error"
    assert f"process 1 could not join the coordinator at distributed.coordinator_address={address} within " \
           "distributed.timeout_s=1 s (Connection refused)" in metrics["error"]
    assert json.loads((tmp_path / "run" / "metrics.json").read_text())["error"] == metrics["error"]


def test_missing_peer_and_foreign_address_are_errors_naming_the_address():
    address = f"127.0.0.1:{_free_port()}"
    with pytest.raises(ConfigError, match=rf"process\(es\) \[1, 2\] of 3 did not reach the coordinator at "
                                          rf"distributed.coordinator_address={address} within "
                                          r"distributed.timeout_s=0.5 s"):
        check_coordinator(address, 0, 3, 0.5)
    with pytest.raises(ConfigError, match=r"coordinator_address=192\.0\.2\.1:1234 \(.*\): give an address "
                                          "of this host and a free port"):
        check_coordinator("192.0.2.1:1234", 0, 2, 0.5)  # TEST-NET-1: never this machine's


def test_processes_meet_at_the_coordinator_before_jax_joins_them():
    address, errors = f"127.0.0.1:{_free_port()}", []

    def peer(rank):
        try:
            check_coordinator(address, rank, 3, 20)
        except ConfigError as err:
            errors.append(err)

    peers = [threading.Thread(target=peer, args=(rank,)) for rank in (1, 2)]
    for thread in peers:  # the peers start first: they retry until process 0 listens
        thread.start()
    time.sleep(0.5)
    check_coordinator(address, 0, 3, 20)
    for thread in peers:
        thread.join(timeout=20)
    assert errors == [] and not any(thread.is_alive() for thread in peers)


# ------------------------------------------------------------------ case 8: one run per folder

HOLD_LOCK = textwrap.dedent("""
    import sys, time
    from gensbi_sharding.harness.folder_lock import FolderLock
    with FolderLock(sys.argv[1]):
        print("locked", flush=True)
        time.sleep(60)
""")


def test_a_second_run_into_a_busy_folder_stops_naming_the_other(tmp_path, devices):
    out = tmp_path / "run"
    holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(out)], cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        metrics = run_tiny(out)
        assert metrics["status"] == "error"
        assert f"{out} is in use by another run (pid {holder.pid} on {socket.gethostname()}" in metrics["error"]
        assert "two runs must not write into one folder" in metrics["error"]
        assert sorted(p.name for p in out.iterdir()) == [".run.lock", ".run.owner.json"]  # nothing written
    finally:
        holder.kill()
        holder.wait(timeout=30)
    with folder_lock.FolderLock(out):  # the lock went with its holder
        assert json.loads((out / folder_lock.FolderLock.OWNER).read_text())["pid"] == os.getpid()


# ------------------------------------------------------------------ a distributed=local child never outlives its parent

PARENT = textwrap.dedent("""
    import os, subprocess, sys, time
    from gensbi_sharding.harness.run_folder import LOCAL_CHILD_ENV
    read_end, write_end = os.pipe()
    child = subprocess.Popen([sys.executable, "-c",
        "from gensbi_sharding.harness.local_cluster import watch_parent; import time; watch_parent(); time.sleep(60)"],
        env={**os.environ, LOCAL_CHILD_ENV: str(read_end)}, pass_fds=(read_end,))
    os.close(read_end)
    print(child.pid, flush=True)
    time.sleep(60)
""")


@pytest.mark.slow  # multi-process
def test_a_local_child_dies_with_its_parent():
    parent = subprocess.Popen([sys.executable, "-c", PARENT], cwd=REPO, stdout=subprocess.PIPE, text=True)
    child = int(parent.stdout.readline())
    time.sleep(1.0)  # the child has started its watch
    parent.send_signal(signal.SIGKILL)  # no cleanup code of the parent runs
    parent.wait(timeout=30)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and os.path.exists(f"/proc/{child}") \
            and open(f"/proc/{child}/stat").read().split()[2] != "Z":
        time.sleep(0.1)
    assert not os.path.exists(f"/proc/{child}") or open(f"/proc/{child}/stat").read().split()[2] == "Z"


# ------------------------------------------------------------------ case 5: a resumed model of another shape

def test_resume_of_another_shape_names_the_model_overrides(tmp_path, devices, caplog):
    mesh = contract.make_mesh(model_axis=1)
    table = dict(contract.RULES["replicated"])
    saved = compose_tiny("model.width=16", "model.init=eager")
    ts = build_state(saved, dim_theta=2, dim_x=2, mesh=mesh, rule_name="replicated", table=table, resume_dir=None)
    _, state = make_step_functions(ts.model, ts.optimizer, mesh, ema=ts.ema)
    with CheckpointWriter(tmp_path / "checkpoints", config=OmegaConf.to_container(saved, resolve=True)) as w:
        w.save(3, state, ts.key)
    step_dir = tmp_path / "checkpoints" / "3"
    now = compose_tiny(f"train.resume={tmp_path}", "model.init=eager")
    with pytest.raises(ConfigError) as err:
        build_state(now, dim_theta=2, dim_x=2, mesh=mesh, rule_name="replicated", table=table, resume_dir=step_dir)
    assert str(err.value).startswith("the checkpoint was saved with model.width=16 (this run: model.width=32): "
                                     "add model.width=16. checkpoint")
    assert "launched with" not in str(err.value)  # no record of the run's command line here
    # With Hydra's record of the run that saved it, its command line too: a preset (experiment=quick) sets
    # several settings at once, and naming only those that differ sent a user off with half of them.
    (tmp_path / ".hydra").mkdir()
    OmegaConf.save(OmegaConf.create(["experiment=quick", "model.width=16", "train.resume=x", "hydra.run.dir=y"]),
                   tmp_path / ".hydra" / "overrides.yaml")
    with pytest.raises(ConfigError) as err:
        build_state(now, dim_theta=2, dim_x=2, mesh=mesh, rule_name="replicated", table=table, resume_dir=step_dir)
    assert str(err.value).endswith("; the run that saved it was launched with: experiment=quick model.width=16")
    fixed = compose_tiny(f"train.resume={tmp_path}", "model.init=eager",
                         f"model.width={hint(str(err.value), 'model.width')}")
    with caplog.at_level(logging.WARNING, logger="gensbi_sharding"):
        resumed = build_state(fixed, dim_theta=2, dim_x=2, mesh=mesh, rule_name="replicated", table=table,
                              resume_dir=step_dir)
    assert resumed.start_step == 3
    # Saved without info: no early-stopping state to continue, and the run says so.
    assert resumed.early_stopping is None
    assert f"early stopping starts afresh: the checkpoint {step_dir} holds no early-stopping state" in caplog.text
    assert nnx.state(resumed.model, nnx.Param)["in_proj"]["kernel"].shape[1] == 16


def _quick_checkpoint(run: Path) -> Path:
    """Checkpoint 3 of a run saved with experiment=quick's mlp sizes in ``run``, with an empty ``.hydra`` folder for
    the test to write the saving run's overrides into: the step folder."""
    saved = OmegaConf.to_container(compose_tiny("model.init=eager"), resolve=True)  # experiment=quick's mlp
    with CheckpointWriter(run / "checkpoints", config=saved) as writer:
        writer.save(3, {"w": jnp.ones(3)}, jax.random.key(0))
    (run / ".hydra").mkdir()
    return run / "checkpoints" / "3"


def test_resume_of_sizes_a_preset_gave_leads_with_the_preset(tmp_path, devices, monkeypatch):
    # Was: "the checkpoint was saved with model.width=32 model.depth=1 (this run: model.width=128 model.depth=3):
    # add model.width=32 model.depth=1 ...; the run that saved it was launched with: experiment=quick ...": the
    # preset that gave both sizes (and is the whole fix) came last, behind the values it sets.
    from hydra import compose, initialize_config_dir

    from gensbi_sharding.harness.resume import check_resume_settings

    step_dir = _quick_checkpoint(tmp_path)
    (tmp_path / ".hydra" / "overrides.yaml").write_text("- experiment=quick\n- train.steps=4\n")

    def refusal(*task):  # as launch.py's run of python launch.py <task> train.resume=<tmp_path> would say it
        _as_hydra_job(monkeypatch, tmp_path / "new", [*task, f"train.resume={tmp_path}"])
        with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
            cfg = compose("config", overrides=list(task))
        with pytest.raises(ConfigError) as err:
            check_resume_settings(step_dir, cfg)
        return str(err.value).split(" The saved weights")[0]

    assert refusal("train.steps=8") == (
        "the checkpoint was saved under experiment=quick, which gives model.width=32 model.depth=1 (this run: "
        "model.width=128 model.depth=3): add experiment=quick (or model.width=32 model.depth=1).")
    # A size this run types wins over the preset: added after it.
    assert refusal("train.steps=8", "model.width=64") == (
        "the checkpoint was saved under experiment=quick with model.width=32 model.depth=1 (this run: "
        "model.width=64 model.depth=3): add experiment=quick model.width=32 (or model.width=32 model.depth=1).")
    # This run chose the preset too (its size typed over it): the value alone.
    assert refusal("experiment=quick", "model.width=64") == (
        "the checkpoint was saved with model.width=32 (this run: model.width=64): add model.width=32.")



def test_a_refused_resume_composes_only_the_configs_its_hint_needs(tmp_path, devices, monkeypatch):
    # Was 2 Hydra compositions for a preset the saving run chose (the second asked whether the preset is found without
    # the saving run's search path, where it had none), and every group's options looked up (a Hydra search each)
    # where the saving run chose no group at all: 0.6 s and 0.26 s before the refusal on 2 cores. The same words.
    import hydra
    from hydra import initialize_config_dir

    from gensbi_sharding.harness import override_keys
    from gensbi_sharding.harness.resume import check_resume_settings

    step_dir = _quick_checkpoint(tmp_path)
    calls = {"compose": 0, "option_groups": 0}

    def counted(name, call):
        def counting(*args, **kwargs):
            calls[name] += 1
            return call(*args, **kwargs)
        return counting

    def refusal(record, *task):
        (tmp_path / ".hydra" / "overrides.yaml").write_text("".join(f"- {o}\n" for o in record))
        _as_hydra_job(monkeypatch, tmp_path / "new", [*task, f"train.resume={tmp_path}"])
        with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
            cfg = hydra.compose("config", overrides=list(task))
            calls.update(compose=0, option_groups=0)
            with monkeypatch.context() as patched:
                patched.setattr(hydra, "compose", counted("compose", hydra.compose))
                patched.setattr(override_keys, "option_groups", counted("option_groups", override_keys.option_groups))
                with pytest.raises(ConfigError) as err:
                    check_resume_settings(step_dir, cfg)
        return str(err.value).split(" The saved weights")[0], calls["compose"], calls["option_groups"]

    assert refusal(["experiment=quick", "train.steps=4"], "train.steps=8") == (
        "the checkpoint was saved under experiment=quick, which gives model.width=32 model.depth=1 (this run: "
        "model.width=128 model.depth=3): add experiment=quick (or model.width=32 model.depth=1).", 1, 1)
    assert refusal(["model.width=32", "model.depth=1", "train.steps=4"], "train.steps=8") == (
        "the checkpoint was saved with model.width=32 model.depth=1 (this run: model.width=128 model.depth=3): add "
        "model.width=32 model.depth=1.", 0, 0)


def _preempted_run(run, devices_mesh):
    """A folder as a preempted ``experiment=quick model.width=16`` run leaves it: checkpoint 3 and Hydra's record."""
    saved = compose_tiny("model.width=16", "model.init=eager")
    ts = build_state(saved, dim_theta=2, dim_x=2, mesh=devices_mesh, rule_name="replicated",
                     table=dict(contract.RULES["replicated"]), resume_dir=None)
    _, state = make_step_functions(ts.model, ts.optimizer, devices_mesh, ema=ts.ema)
    with CheckpointWriter(run / "checkpoints", config=OmegaConf.to_container(saved, resolve=True)) as w:
        w.save(3, state, ts.key)
    (run / ".hydra").mkdir()
    (run / ".hydra" / "overrides.yaml").write_text("- experiment=quick\n- model.width=16\n")
    outputs.write_json(run / "metrics.json", {"status": "preempted", "preempted_at_step": 3})


@pytest.mark.slow  # a launch (refused before any simulation: about 3 s)
def test_a_refused_resume_leaves_the_folder_s_record_of_the_run_that_saved_it(forked_launches):
    # Hydra rewrites .hydra/overrides.yaml at every launch: a train.resume=auto refused for another model.width
    # left its own command as the folder's record, so the refusal could not name the saving run's command, and
    # every later hint built from the record (a stopped sweep job's continue command) named the refused one.
    proc, run = forked_launches["refused resume"]
    assert proc.returncode == 1, proc.stdout + proc.stderr
    error = next(line for line in (proc.stdout + proc.stderr).splitlines() if line.startswith("[ERROR]"))
    assert "the checkpoint was saved with model.width=16 (this run: model.width=32)" in error
    assert error.endswith("; the run that saved it was launched with: experiment=quick model.width=16")
    assert (run / ".hydra" / "overrides.yaml").read_text() == "- experiment=quick\n- model.width=16\n"
    assert sorted(p.name for p in (run / ".hydra").iterdir()) == ["config.yaml", "hydra.yaml", "overrides.yaml"]
    assert json.loads((run / "metrics.json").read_text())["previous_attempts"][0]["status"] == "preempted"


def test_the_kept_record_is_put_back_only_after_an_attempt_that_continued_nothing(tmp_path):
    from gensbi_sharding.harness.launch_record import keep_record, saved_record, settle_record

    run = tmp_path / "run"
    (run / "checkpoints" / "3").mkdir(parents=True)
    (run / ".hydra").mkdir()
    record = run / ".hydra" / "overrides.yaml"
    record.write_text("- model.width=16\n")
    keep_record(run)
    record.write_text("- model.width=32\n- train.resume=auto\n")  # what Hydra writes for the next attempt
    settle_record(run, continued=True)  # it restored and trained: its record is now the truth
    assert record.read_text() == "- model.width=32\n- train.resume=auto\n" and not saved_record(run).exists()
    keep_record(run)
    record.write_text("- model.width=64\n")
    keep_record(run)  # an attempt killed before it settled, which saved nothing: the older copy is kept
    record.write_text("- model.width=8\n")
    settle_record(run, continued=False)
    assert record.read_text() == "- model.width=32\n- train.resume=auto\n" and not saved_record(run).exists()
    keep_record(run)
    (run / "checkpoints" / "5").mkdir()  # a killed attempt that saved step 5 trained: its record replaces the copy
    record.write_text("- model.width=32\n- train.steps=9\n")
    keep_record(run)
    record.write_text("- model.width=1\n")
    settle_record(run, continued=False)
    assert record.read_text() == "- model.width=32\n- train.steps=9\n"
    fresh = tmp_path / "fresh"
    (fresh / ".hydra").mkdir(parents=True)
    (fresh / ".hydra" / "overrides.yaml").write_text("- a=1\n")
    keep_record(fresh)  # no checkpoint: nothing to keep
    assert not saved_record(fresh).exists()


@pytest.mark.slow  # an end-to-end run (a training run)
def test_resume_from_a_folder_that_saved_no_checkpoint_says_why_and_where_to_look(tmp_path, devices):
    # Was: a dry run's folder, a failed job's or a whole sweep's got "no checkpoint in <folder>" (a failed
    # sweep job: "the save was cut short; pass its parent"), and Orbax's warnings about every job folder.
    from gensbi_sharding.harness.resume import resume_step_dir

    def refusal(path):
        with pytest.raises((FileNotFoundError, ConfigError)) as err:
            resume_step_dir(OmegaConf.create({"train": {"resume": str(path)}}))
        return str(err.value)

    sweep = tmp_path / "sweep"
    assert run_tiny(sweep / "0")["status"] == "ok"
    (sweep / "multirun.yaml").write_text("{}\n")
    (sweep / "1" / ".hydra").mkdir(parents=True)
    outputs.write_json(sweep / "1" / "metrics.json", {"status": "error", "error": "ConfigError: ..."})
    outputs.write_json(tmp_path / "dry" / "metrics.json", {"status": "ok", "dry_run": {"memory": {}}})
    assert refusal(sweep) == (f"train.resume={sweep} is a sweep's folder: resume one of its jobs, "
                              f"e.g. train.resume={sweep / '0'} (jobs with a checkpoint: 0)")
    # Was, for any such run, "resume the run it failed to continue": a fresh run continued none.
    assert refusal(sweep / "1").endswith(f"; {sweep / '1'} holds a run that saved no complete checkpoint (status "
                                         "error): start a new run without train.resume")
    outputs.write_json(sweep / "1" / "metrics.json", {"status": "error", "resumed_from": "/runs/a/checkpoints/4"})
    assert refusal(sweep / "1").endswith(f"; {sweep / '1'} holds a run that saved no complete checkpoint (status "
                                         "error): resume the checkpoint it continued, train.resume=/runs/a/"
                                         "checkpoints/4, or start a new run without train.resume")
    assert refusal(tmp_path / "dry").endswith(f"; {tmp_path / 'dry'} holds a dry run (dry_run=true saves no "
                                              "checkpoint): start a new run without train.resume")
    found = resume_step_dir(OmegaConf.create({"train": {"resume": str(sweep / "0")}}))
    assert found == sweep / "0" / "checkpoints" / "8"
    # Round 45: a folder of runs (outputs/, a date's, an sbibm.py root) said only "pass a run dir"; now it names the
    # newest run with a checkpoint under it, as the override (resume) or the folder (sample.py) to type.
    from gensbi_sharding.harness.own_observation import sample_posterior

    shutil.copytree(sweep / "0", tmp_path / "outputs" / "2026-12-03" / "10-00-00")
    newer = tmp_path / "outputs" / "2026-12-04" / "09-00-00"
    shutil.copytree(sweep / "0", newer)
    os.utime(newer / "checkpoints" / "8")  # its step the newest
    for where in ("outputs", "outputs/2026-12-04"):
        count = 2 if where == "outputs" else 1
        assert f"; it holds {count} run folder(s) with a checkpoint, the newest: train.resume={newer}; or leave " \
               "train.resume out to start fresh" in refusal(tmp_path / where)
        with pytest.raises(FileNotFoundError) as err:
            sample_posterior(tmp_path / where, np.zeros(2))
        assert str(err.value).endswith(f"; it holds {count} run folder(s) with a checkpoint, the newest: {newer}: "
                                       "pass one of them"), str(err.value)
    assert resume_step_dir(OmegaConf.create({"train": {"resume": str(newer)}})) == newer / "checkpoints" / "8"
    assert sample_posterior(newer, np.zeros(2), num_samples=4).shape == (4, 2)  # the folder named samples
    shutil.rmtree(tmp_path / "outputs")
    shutil.rmtree(sweep / "0" / "checkpoints")
    assert refusal(sweep / "0").endswith(f"; {sweep / '0'} holds a completed run whose checkpoints are gone (no "
                                         f"complete step folder in {sweep / '0' / 'checkpoints'}): start a new run "
                                         "without train.resume")
    assert refusal(sweep) == (f"train.resume={sweep} is a sweep's folder: none of its jobs saved a checkpoint "
                              "(a dry run saves none): start a new run without train.resume")


def test_resume_names_the_checkpoint_a_failed_run_continued_as_the_shell_and_hydra_read_it_back(tmp_path):
    """Was: ``train.resume=/tmp/my runs é (1)/checkpoints/4`` as it is: pasted, the shell splits it and Hydra's
    grammar refuses the rest (round 43)."""
    from gensbi_sharding.harness.override_grammar import hydra_override
    from gensbi_sharding.harness.resume import resume_step_dir

    continued = tmp_path / "my runs é (1)" / "checkpoints" / "4"
    outputs.write_json(tmp_path / "b" / "metrics.json", {"status": "error", "resumed_from": str(continued)})
    with pytest.raises(FileNotFoundError) as refused:
        resume_step_dir(OmegaConf.create({"train": {"resume": str(tmp_path / "b")}}))
    assert (f"resume the checkpoint it continued, 'train.resume=\"{continued}\"', or start a new run without "
            "train.resume") in str(refused.value)
    assert hydra_override("train.resume", continued) == f"'train.resume=\"{continued}\"'"


@pytest.mark.slow  # an end-to-end run (resume, a stop, or processes)
def test_a_finished_checkpoint_can_be_evaluated_again(tmp_path, devices):
    # Resuming a checkpoint at train.steps trains nothing and scores its best weights (e.g. with
    # other eval.* settings); one beyond train.steps names the train.steps that evaluates it.
    first = run_tiny(tmp_path / "a", "train.val_every=4")
    checkpoint = tmp_path / "a" / "checkpoints" / "8"
    beyond = run_tiny(tmp_path / "c", f"train.resume={checkpoint}", "train.steps=6")
    assert beyond["status"] == "error"
    # run(cfg) from Python: in the settings it sets (round 48; was launch.py's overrides)
    assert beyond["error"].endswith("is at step 8, beyond cfg.train.steps=6; set cfg.train.steps=8 to evaluate it, "
                                    "or more to train further")
    again = run_tiny(tmp_path / "b", f"train.resume={checkpoint}", "train.val_every=4",
                     f"train.steps={hint(beyond['error'], 'cfg.train.steps')}")
    assert again["status"] == "ok"
    assert (again["steps"], again["resumed_from_step"], again["final_step"]) == (0, 8, 8)
    assert again["best_step"] == first["best_step"]
    assert again["final_val_loss"] == pytest.approx(first["final_val_loss"], rel=1e-6)


@pytest.mark.parametrize("environ, fix", [
    ({}, "devices.cpu_count=9"),
    ({"XLA_FLAGS": "--xla_force_host_platform_device_count=8"}, "XLA_FLAGS=--xla_force_host_platform_device_count=9"),
    ({"JAX_NUM_CPU_DEVICES": "8"}, "JAX_NUM_CPU_DEVICES=9"),
])
def test_local_processes_that_do_not_split_the_devices_name_a_fix_that_runs(monkeypatch, environ, fix):
    # Was "set ... or devices.cpu_count=9" with the count from XLA_FLAGS: that override then stops the run
    # as a second count that disagrees with XLA_FLAGS'.
    from gensbi_sharding.harness.local_cluster import run_local_processes

    for name in ("XLA_FLAGS", "JAX_NUM_CPU_DEVICES"):
        monkeypatch.delenv(name, raising=False)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    cfg = OmegaConf.create({"distributed": {"local_processes": 3}, "devices": {"cpu_count": None}})
    with pytest.raises(ConfigError) as err:
        run_local_processes(cfg, None)
    assert str(err.value).endswith(f"set distributed.local_processes=2 or {fix}")


@pytest.mark.slow  # an end-to-end run (resume, a stop, or processes)
def test_two_environment_device_counts_are_named_and_every_hint_leads_to_a_run(tmp_path, monkeypatch, devices):
    # Was circular: JAX_NUM_CPU_DEVICES=2 with XLA_FLAGS' 4 said "set devices.cpu_count=4"; that, "set 2"; and so on.
    monkeypatch.setenv("JAX_NUM_CPU_DEVICES", "2")
    # The session's compile flags kept (conftest): JAX's cache key holds XLA_FLAGS (all but the device count), so the
    # runs below load the session's programs (was: the count alone, a key of its own: every program compiled again).
    monkeypatch.setenv("XLA_FLAGS", f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count=8")
    for configured in ((), ("devices.cpu_count=4",), ("devices.cpu_count=8",)):  # no devices.cpu_count settles it
        metrics = run_tiny(tmp_path / f"run{len(configured)}{configured}", *configured)
        assert metrics["error"] == (
            "ConfigError: the environment sets two device counts that disagree: JAX_NUM_CPU_DEVICES=2 and "
            "XLA_FLAGS's --xla_force_host_platform_device_count=8; unset one: unset JAX_NUM_CPU_DEVICES to use 8, "
            "or remove the count from XLA_FLAGS to use 2")
    monkeypatch.delenv("JAX_NUM_CPU_DEVICES")  # the hint's first fix: this process has 8 devices
    assert run_tiny(tmp_path / "unset")["status"] == "ok"
    # Both variables agreeing, against devices.cpu_count: the hint's count is then accepted.
    monkeypatch.setenv("JAX_NUM_CPU_DEVICES", "8")
    metrics = run_tiny(tmp_path / "configured", "devices.cpu_count=4")
    assert metrics["error"] == (
        "ConfigError: two device counts disagree: devices.cpu_count=4 and JAX_NUM_CPU_DEVICES and XLA_FLAGS give 8; "
        "set devices.cpu_count=8 (or drop it) to use JAX_NUM_CPU_DEVICES and XLA_FLAGS's, or unset "
        "JAX_NUM_CPU_DEVICES and remove the count from XLA_FLAGS to use 4")
    assert run_tiny(tmp_path / "followed", f"devices.cpu_count={hint(metrics['error'], 'devices.cpu_count')}")[
        "status"] == "ok"


@pytest.mark.slow
@pytest.mark.parametrize("environ, message", [
    ({"JAX_NUM_CPU_DEVICES": "abc"},
     "JAX_NUM_CPU_DEVICES='abc' is not a whole number of simulated CPU devices; unset JAX_NUM_CPU_DEVICES "
     "(devices.cpu_count then gives the count), or set e.g. JAX_NUM_CPU_DEVICES=8"),
    ({"XLA_FLAGS": "--xla_force_host_platform_device_count=four"},
     "XLA_FLAGS's --xla_force_host_platform_device_count=four is not a whole number of simulated CPU devices; "
     "remove it from XLA_FLAGS (devices.cpu_count then gives the count), or give a count, e.g. "
     "--xla_force_host_platform_device_count=8"),
])
def test_an_unreadable_environment_device_count_is_one_line_before_jax(environ, message):
    # Was: a 29-line traceback from JAX's import (JAX_NUM_CPU_DEVICES=abc), or XLA's whole flag list.
    env = {k: v for k, v in os.environ.items() if k not in ("JAX_NUM_CPU_DEVICES", "XLA_FLAGS")}
    proc = subprocess.run([sys.executable, "-c", "import runpy, sys; sys.modules['jax'] = None; "
                           f"sys.argv = ['launch.py']; runpy.run_path({str(REPO / 'launch.py')!r}, run_name='__main__')"],
                          env={**env, **environ}, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and proc.stderr == f"[ERROR] {message}\n"


LIST_REFUSALS = [
    (("eval.observations=3", "dry_run=true"), "eval.observations=3: a list is expected; write eval.observations=[3]"),
    (("model=flux1", "model.id_embedding_strategy=bogus"),
     "model.id_embedding_strategy=bogus: a list is expected: give two of absolute, pos1d, rope1d (parameters, "
     "observations), e.g. model.id_embedding_strategy=[absolute,absolute]"),
    (("model=flux1", "model.axes_dim=8"), "model.axes_dim=8: a list is expected; write model.axes_dim=[8]"),
]


def test_list_typed_keys_come_from_every_schema():
    # From the dataclasses of harness/config.py, every model schema included (the model is chosen at compose time).
    assert list_fields() == {"mesh.devices": ListField(int, "1", frozenset()),
                             "eval.observations": ListField(int, "1", frozenset()),
                             "model.axes_dim": ListField(int, "8,0", frozenset({"flux1"})),
                             "model.id_embedding_strategy": ListField(str, "absolute,absolute", frozenset({"flux1"}))}


@pytest.mark.parametrize("args, message", [
    *LIST_REFUSALS,
    (("-m", "mesh.devices=0", "hydra.run.dir=x"), "mesh.devices=0: a list is expected; write mesh.devices=[0]"),
    # No model= given: the default model (mlp) lacks the key, so the model it belongs to is named too
    # (was: only the list to write, which Hydra then refused as "Key 'id_embedding_strategy' not in 'MLPConfig'").
    (("model.id_embedding_strategy=rope1d",), "model.id_embedding_strategy=rope1d: a key of model=flux1 (add "
     "model=flux1 unless your experiment picks it); a list is expected: give two "
     "of absolute, pos1d, rope1d (parameters, observations), e.g. model.id_embedding_strategy=[rope1d,rope1d]"),
    (("model.axes_dim=8",), "model.axes_dim=8: a key of model=flux1 (add model=flux1 unless your experiment picks "
     "it); a list is expected; write model.axes_dim=[8]"),
    # Not an element either: [true] would be refused in turn, so a value of the element type is shown.
    (("eval.observations=true",), "eval.observations=true: a list of int values is expected and 'true' is not one; "
     "write e.g. eval.observations=[1]"),
    (("model=flux1", "model.axes_dim=x"), "model.axes_dim=x: a list of int values is expected and 'x' is not one; "
     "write e.g. model.axes_dim=[8,0]"),
])
def test_a_scalar_for_a_list_is_refused_naming_the_list_to_write(args, message):
    # Was: Hydra's "Error merging override eval.observations=3 / Invalid value assigned: int is not a
    # ListConfig, list or tuple", naming no fix.
    assert list_override_problem(args) == message
    fix = re.search(r"(?:write|e\.g\.) (\S+=\[.*\])$", message).group(1)
    fixed = [fix if a.split("=")[0] == fix.split("=")[0] else a for a in args if not a.startswith(("-", "hydra."))]
    assert list_override_problem(fixed) is None
    section, key = fix.split("=")[0].split(".")
    composed = compose_tiny(*([] if section != "model" else ["model=flux1"]), *fixed)[section][key]
    assert list(composed) == {"eval.observations=[3]": [3], "mesh.devices=[0]": [0], "eval.observations=[1]": [1],
                              "model.axes_dim=[8]": [8], "model.axes_dim=[8,0]": [8, 0],
                              "model.id_embedding_strategy=[absolute,absolute]": ["absolute", "absolute"],
                              "model.id_embedding_strategy=[rope1d,rope1d]": ["rope1d", "rope1d"]}[fix]


@pytest.mark.parametrize("args", [
    ("eval.observations=[3]",), ("eval.observations=null",), ("eval.observations=[]",),
    ("-m", "eval.observations=[1],[2]"), ("-m", "eval.observations=choice([1],[2])"),
    ("+eval.observations=[3]",), ("++eval.observations=[3]",), ("-m", "eval.observations=[1],[2,3]"),
    ("~eval.observations",), ("eval.observations=${data.num_observation}",), ("eval.num_samples=3",),
    ("hydra.run.dir=3",), ("--help",), ("--cfg", "job"), ("model=mlp", "model.axes_dim=8"),
    ("model=flux1", "model.axes_dim=[6,0]", "model.id_embedding_strategy=[absolute,rope1d]"),
])
def test_valid_forms_for_a_list_key_pass(args):
    assert list_override_problem(args) is None


@pytest.mark.parametrize("args, message", [
    # Was: left to Hydra, whose merge error ("Invalid value assigned: int is not a ListConfig") names no fix.
    # (the fix drops the +: Hydra refused +eval.observations=[3], the key exists; test_override_prefixes.py)
    (("+eval.observations=3",), "+eval.observations=3: a list is expected; write eval.observations=[3]"),
    (("++eval.observations=3",), "++eval.observations=3: a list is expected; write ++eval.observations=[3]"),
    # A sweep whose values are scalars gives every job a scalar (Hydra's merge error again).
    (("-m", "eval.observations=3,4"), "eval.observations=3,4: a sweep of eval.observations gives each job one "
     "value, and a list is expected; write eval.observations=[3],[4] (one job per value) or "
     "eval.observations=[3,4] (one job, one list)"),
    (("-m", "eval.observations=range(1,3)"), "eval.observations=range(1,3): a sweep of eval.observations gives "
     "each job one value, and a list is expected; write eval.observations=[1],[2] (one job per value) or "
     "eval.observations=[1,2] (one job, one list)"),
    (("-m", "eval.observations=choice([3],4)"), "eval.observations=choice([3],4): a sweep of eval.observations "
     "gives each job one value, and a list is expected; write eval.observations=[3],[4] (one job per value) or "
     "eval.observations=[3,4] (one job, one list)"),
])
def test_a_prefixed_or_swept_scalar_for_a_list_is_refused(args, message):
    assert list_override_problem(args) == message
    for fix in re.findall(r"(\S+=\S+) \(one job", message) or [message.rsplit("write ", 1)[1]]:
        assert list_override_problem([*args[:-1], fix]) is None


@pytest.mark.parametrize("args, message", [
    # Was: OmegaConf's traceback "AssertionError: Unexpected type for root: NoneType" (a null list), Hydra's
    # multi-line error past a list's end.
    (("eval.observations.0=3",), "eval.observations.0=3: eval.observations is null here, which has no item 0; set "
     "the whole list, e.g. eval.observations=[3]"),
    (("mesh.devices.0=1",), "mesh.devices.0=1: mesh.devices is null here, which has no item 0; set the whole list, "
     "e.g. mesh.devices=[1]"),
    (("model=flux1", "model.axes_dim.2=4"), "model.axes_dim.2=4: model.axes_dim is [8,0] here, which has no item 2; "
     "set the whole list, e.g. model.axes_dim=[8,0,4]"),
    (("model=flux1", "model.axes_dim.5=4"), "model.axes_dim.5=4: model.axes_dim is [8,0] here, which has no item 5; "
     "set the whole list instead, every item written out (model.axes_dim=[...])"),
    # an item the composed list has: Hydra sets it
    (("model=flux1", "model.axes_dim.1=4"), None),
    (("eval.observations=[1,2]", "eval.observations.1=3"), None),  # the list typed too: applied in order
])
def test_an_item_of_a_list_past_its_end_is_refused_naming_the_list_to_write(compose_config, args, message):
    assert list_override_problem(args) == message
    if message is None:
        assert list(compose_config(*args).model.axes_dim if "axes_dim" in args[-1] else
                    compose_config(*args).eval.observations) == ([8, 4] if "axes_dim" in args[-1] else [1, 3])
    elif "e.g. " in message:
        fix = message.rsplit("e.g. ", 1)[1]
        assert list_override_problem([*args[:-1], fix]) is None
        compose_config(*args[:-1], fix)


def test_an_interpolation_resolving_to_a_scalar_for_a_list_is_a_config_error():
    # Was: "TypeError: 'int' object is not iterable" from the range check, naming no key.
    from gensbi_sharding.harness.config_checks import validate

    with pytest.raises(ConfigError) as err:
        validate(compose_tiny("eval.observations=${data.num_observation}"))
    assert str(err.value) == ("eval.observations=${data.num_observation} resolves to 1, not a list; "
                              "set eval.observations=[${data.num_observation}]")
    validate(compose_tiny("eval.observations=[${data.num_observation}]"))  # the fix passes


@pytest.mark.parametrize("args, message, fix", [
    # Was: Hydra's "Error merging override eval.observations="[3]" / Invalid value assigned: str is not a
    # ListConfig, list or tuple", naming no fix (the inner quotes, kept from the shell, make the list a string).
    (('eval.observations="[3]"',), 'eval.observations="[3]": the quotes make [3] a string, and a list is '
     "expected; write eval.observations=[3] (quote the whole override for the shell: 'eval.observations=[3]')",
     ["eval.observations=[3]"]),
    (("model=flux1", "model.axes_dim='[8,0]'"), "model.axes_dim='[8,0]': the quotes make [8,0] a string, and a list "
     "is expected; write model.axes_dim=[8,0] (quote the whole override for the shell: 'model.axes_dim=[8,0]')",
     ["model=flux1", "model.axes_dim=[8,0]"]),
    (("-m", 'eval.observations="[1]","[2,3]"'), 'eval.observations="[1]","[2,3]": the quotes make [1] a string, '
     "and a list is expected; write eval.observations=[1],[2,3] (quote the whole override for the shell: "
     "'eval.observations=[1],[2,3]')", ["-m", "eval.observations=[1],[2,3]"]),
    # A quoted scalar: the list is [3], not ["3"]; swept quoted values were shown as QuotedString(text=...).
    (('eval.observations="3"',), 'eval.observations="3": a list is expected; write eval.observations=[3]',
     ["eval.observations=[3]"]),
    (("-m", 'eval.observations="3",4'), 'eval.observations="3",4: a sweep of eval.observations gives each job one '
     "value, and a list is expected; write eval.observations=[3],[4] (one job per value) or eval.observations=[3,4] "
     "(one job, one list)", ["-m", "eval.observations=[3],[4]"]),
    # Quoted, and no list of ints either: not shown as the fix (Hydra would refuse [a] in turn).
    (('eval.observations="[a]"',), "eval.observations=\"[a]\": a list of int values is expected and '\"[a]\"' is "
     "not one; write e.g. eval.observations=[1]", ["eval.observations=[1]"]),
])
def test_a_quoted_list_for_a_list_key_is_refused_naming_the_unquoted_list(args, message, fix):
    assert list_override_problem(args) == message
    assert list_override_problem(fix) is None
    if "-m" not in fix:
        key = fix[-1].split("=")[0]
        section, name = key.split(".")
        composed = list(compose_tiny(*fix)[section][name])
        assert composed == {"[3]": [3], "[8,0]": [8, 0], "[1]": [1]}[fix[-1].split("=")[1]]


@pytest.fixture(scope="module")
def forked_launches(tmp_path_factory, devices):
    """The module's ``python launch.py`` runs, each forked from one Python process that imported launch.py's
    modules once (tests/fork_launch.py: ~1.5 s of CPU less per launch; each still a process of its own, from
    launch.py's first line): ``{args: (its launch, its empty working folder)}`` for ``LIST_REFUSALS``, and
    ``"refused resume"``: (``experiment=quick model.width=32 train.resume=auto`` in the repository, into a folder
    ``_preempted_run`` left with ``model.width=16``, that folder)."""
    from fork_launch import run_forked

    root = tmp_path_factory.mktemp("list_refusals")
    folders = [root / str(i) for i in range(len(LIST_REFUSALS))]
    for folder in [*folders, root / "fork"]:
        folder.mkdir()
    run = tmp_path_factory.mktemp("refused_resume") / "run"
    _preempted_run(run, contract.make_mesh(model_axis=1))
    runs = [{"args": args, "cwd": folder} for (args, _), folder in zip(LIST_REFUSALS, folders)]
    runs.append({"args": ["experiment=quick", "model.width=32", "train.resume=auto", f"hydra.run.dir={run}"],
                 "cwd": REPO})
    procs = run_forked(runs, env=dict(os.environ), timeout=300 * 2, workdir=root / "fork")
    launches = {args: (proc, folder) for (args, _), proc, folder in zip(LIST_REFUSALS, procs, folders)}
    launches["refused resume"] = procs[-1], run
    return launches


@pytest.fixture(scope="module")
def list_refusal_launches(forked_launches):
    """``{args: (its launch, its empty working folder)}`` for ``LIST_REFUSALS`` (``forked_launches``)."""
    return forked_launches


@pytest.mark.slow  # launch.py processes (refused while composing, forked: about 3 s in all)
@pytest.mark.parametrize("args, message", LIST_REFUSALS)
def test_a_scalar_for_a_list_stops_launch_in_one_line_writing_nothing(list_refusal_launches, args, message):
    proc, tmp_path = list_refusal_launches[args]
    assert proc.returncode == 1 and proc.stderr == f"[ERROR] {message}\n"
    assert list(tmp_path.iterdir()) == []  # no outputs/ folder


PLATFORM_GPU = ("devices.platform=gpu is not available here: JAX has cpu; set devices.platform=cpu, or "
                "devices.platform=null for JAX's default")


@pytest.mark.slow  # an end-to-end run (the hint followed: a training run)
def test_an_unavailable_platform_names_the_ones_jax_has_and_the_fix(tmp_path, devices):
    # Was: "RuntimeError: Unable to initialize backend 'rocm' ..." naming neither devices.platform nor the fix
    # (and, once JAX had started, devices.platform=gpu was silently ignored).
    metrics = run_tiny(tmp_path / "gpu", "devices.platform=gpu")
    assert metrics["error"] == f"ConfigError: {PLATFORM_GPU}"
    followed = run_tiny(tmp_path / "cpu", f"devices.platform={hint(metrics['error'], 'devices.platform')}")
    assert followed["status"] == "ok"


@pytest.mark.slow
def test_an_unavailable_platform_in_a_fresh_process_is_named_before_jax_starts():
    code = ("from gensbi_sharding.harness.devices import configure_devices\n"
            "try:\n    configure_devices(2, 'gpu')\nexcept Exception as err:\n    print(type(err).__name__, err)\n"
            "import jax\nprint(jax.default_backend(), jax.device_count())")
    env = {k: v for k, v in os.environ.items() if k not in ("JAX_PLATFORMS", "JAX_NUM_CPU_DEVICES", "XLA_FLAGS")}
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert proc.stdout.splitlines() == [f"ConfigError {PLATFORM_GPU}", "cpu 2"], proc.stderr[-2000:]


@pytest.mark.slow  # an end-to-end run (resume, a stop, or processes)
def test_a_resume_before_the_first_validation_says_so(tmp_path, devices, caplog):
    # The checkpoint at step 4 came before any validation (val_every=100): the console said
    # "early stopping: best step None, 0 validation(s)", Python's None shown to the user.
    # train.steps as the tiny config's (8, which the learning-rate schedule compiles into the step): its programs,
    # compiled once for the session, are loaded, not compiled again (was train.steps=4, then 6: two compiles).
    first = run_tiny(tmp_path / "a", "train.val_every=100", "train.checkpoint_every=4")
    assert first["status"] == "ok" and (tmp_path / "a" / "checkpoints" / "4").is_dir()
    with caplog.at_level(logging.INFO, logger="gensbi_sharding"):
        second = run_tiny(tmp_path / "b", "train.val_every=100", f"train.resume={tmp_path / 'a' / 'checkpoints' / '4'}")
    assert second["status"] == "ok", second.get("error")
    resumed = [r.getMessage() for r in caplog.records if r.getMessage().startswith("resumed from")]
    assert len(resumed) == 1 and resumed[0].endswith("; early stopping: no validation yet"), resumed


def _as_hydra_job(monkeypatch, out, task, mode=None):
    """Make Hydra's config say this process is the job in ``out``, launched with overrides ``task``."""
    from hydra.conf import HydraConf
    from hydra.core.hydra_config import HydraConfig

    hydra = OmegaConf.create({"hydra": OmegaConf.structured(HydraConf)})
    hydra.hydra.runtime.output_dir, hydra.hydra.overrides.task = str(out), task
    if mode is not None:
        hydra.hydra.mode = mode
    monkeypatch.setattr(HydraConfig.instance(), "cfg", None)
    HydraConfig.instance().set_config(hydra)


@pytest.mark.slow  # an end-to-end run (resume, a stop, or processes)
def test_local_processes_killed_from_outside_name_their_last_checkpoint_and_the_command_that_continues(
        tmp_path, monkeypatch, caplog):
    # Was: process 1 killed (SIGKILL, e.g. the OOM killer) after checkpoint 300: metrics.json said only
    # "process 1 of 2 died (killed by SIGKILL) ...; process 0 died (killed by SIGABRT)", naming neither the
    # checkpoint that holds the work nor the command that continues it (train.resume=auto in its folder).

    from gensbi_sharding.harness import local_cluster

    out = tmp_path / "run"
    with CheckpointWriter(out / "checkpoints", every=1) as writer:  # what the processes had saved
        writer.save(300, {"w": jnp.ones(3)}, jax.random.key(0))
    (out / "checkpoints" / "400.orbax-checkpoint-tmp").mkdir()  # the save the kill cut short
    # The earlier attempt's record (train.resume=auto): not this attempt's, which wrote none.
    outputs.write_json(out / "metrics.json", {"status": "preempted", "error": "preempted by SIGTERM at step 200",
                                              "steps": 200})
    _as_hydra_job(monkeypatch, out, ["distributed=local", "train.steps=2000"])
    real_popen = subprocess.Popen

    def killed_child(command, env, pass_fds, stderr):  # rank 1 is killed; rank 0 aborts as JAX's heartbeat check does
        rank = int(next(c for c in command if c.startswith("distributed.process_id=")).split("=")[1])
        return real_popen([sys.executable, "-c", "import os, signal, time; time.sleep(%s); os.kill(os.getpid(), "
                           "signal.%s)" % ((0.1, "SIGKILL") if rank else (0.6, "SIGABRT"))], stderr=stderr)

    monkeypatch.setattr(local_cluster.subprocess, "Popen", killed_child)
    cfg = OmegaConf.create({"distributed": {"local_processes": 2, "run_timeout_s": 60, "heartbeat_s": 1},
                            "devices": {"cpu_count": 8}, "mesh": {"spec": "auto", "devices": None}})
    with caplog.at_level(logging.INFO):
        metrics = local_cluster.run_local_processes(cfg, out)
    # The parent reads the folder names, not Orbax: Orbax started JAX there and put its notes on the console.
    assert [r.name for r in caplog.records if r.name != "gensbi_sharding"] == []
    # Was "started 2 local processes (...)" alone: launch.log holds the parent's lines only, the run's are elsewhere.
    assert caplog.messages[0].endswith(f"4 CPU devices each); each logs to process_<i>.log in {out}")
    assert metrics["status"] == "error" and metrics["process_exit_codes"] == [-signal.SIGABRT, -signal.SIGKILL]
    assert metrics["error"].startswith("process 1 of 2 died (killed by SIGKILL)")
    # Was "...; process 0 reported: preempted by SIGTERM at step 200" and steps 200: the earlier attempt's.
    assert "reported" not in metrics["error"] and "steps" not in metrics
    assert metrics["error"].endswith(
        f"process 0 died (killed by SIGABRT); its last checkpoint is step 300 ({out / 'checkpoints' / '300'}): "
        f"continue with: python launch.py distributed=local train.steps=2000 train.resume=auto hydra.run.dir={out}")
    # Nothing saved: nothing to continue from, so no such command; the one that runs it again, as a one-process run
    # that failed before its first save names it (was: none, though it was killed from outside, not by its settings).
    shutil.rmtree(out / "checkpoints")
    error = local_cluster.run_local_processes(cfg, out)["error"]
    assert "continue with" not in error and error.endswith(
        "process 0 died (killed by SIGABRT); it saved no checkpoint: run it again with: python launch.py "
        f"distributed=local train.steps=2000 train.resume=auto hydra.run.dir={out}")
    # The job's record, as run() writes it: was only status, error and exit codes (no config: process 0
    # wrote no metrics.json, and the parent's own record was replaced by the processes' outcome).
    from gensbi_sharding.harness.run import run

    (out / "metrics.json").unlink()
    job = run(compose_tiny("distributed=local", "distributed.heartbeat_s=1"))
    record = json.loads((out / "metrics.json").read_text())
    assert job["status"] == record["status"] == "error" and record["error"].startswith("process 1 of 2 died")
    assert record["config"]["distributed"]["local_processes"] == 2 and record["config"]["train"]["steps"] == 8


@pytest.mark.slow  # an end-to-end run (a training or dry run, or processes)
@pytest.mark.parametrize("signum, status", [(signal.SIGTERM, "preempted"), (signal.SIGINT, "interrupted")])
def test_a_stop_while_the_local_processes_start_up_is_a_stop_not_a_death(tmp_path, monkeypatch, signum, status):
    # Was, for Ctrl-C (or SLURM's SIGTERM) a few seconds after `launch.py distributed=local`: "process 0 of 2
    # died (killed by SIGTERM) ...: process 1 died (killed by SIGTERM)", status error, exit code 1: the
    # forwarded signal had reached processes still importing, before their handlers were installed.

    from gensbi_sharding.harness import local_cluster

    out = tmp_path / "run"
    out.mkdir()
    _as_hydra_job(monkeypatch, out, ["distributed=local"])
    real_popen = subprocess.Popen
    monkeypatch.setattr(local_cluster.subprocess, "Popen", lambda command, env, pass_fds, stderr: real_popen(
        [sys.executable, "-c", "import time; time.sleep(30)"],  # still starting up: the default handlers
        stderr=stderr))
    threading.Timer(1.0, os.kill, (os.getpid(), signum)).start()
    cfg = OmegaConf.create({"distributed": {"local_processes": 2, "run_timeout_s": 60, "heartbeat_s": 1},
                            "devices": {"cpu_count": 8}, "mesh": {"spec": "auto", "devices": None}})
    metrics = local_cluster.run_local_processes(cfg, out)
    assert metrics["status"] == status and metrics["process_exit_codes"] == [-signal.SIGTERM] * 2
    assert metrics["stop_signal"] == signum  # a preempted job's is handed on: submitit requeues on it
    stop = "interrupted by Ctrl-C (SIGINT)" if status == "interrupted" else "preempted by SIGTERM"
    assert metrics["error"] == (
        f"{stop} while the processes were starting up, before training (nothing trained: no checkpoint to save); "
        f"continue with: python launch.py distributed=local train.resume=auto hydra.run.dir={out}")


@pytest.mark.slow  # an end-to-end run (a training or dry run, or processes)
@pytest.mark.parametrize("signum, status", [(signal.SIGTERM, "preempted"), (signal.SIGINT, "interrupted")])
def test_a_stop_that_ended_one_local_process_still_starting_up_ends_the_others_at_once(tmp_path, monkeypatch, signum,
                                                                                      status):
    # SLURM signals every process of the job, a terminal's Ctrl-C every process of its group: process 1, still
    # starting up (no handler: ended by it), before their parent; process 0 had started its run (its handler took
    # the stop) and waited at the coordinator for process 1. Was: "process 1 of 2 died (killed by SIGTERM)" once the
    # dead peer's grace (distributed.heartbeat_s + 5 s) ran out.
    from gensbi_sharding.harness import local_cluster

    out = tmp_path / "run"
    out.mkdir()
    _as_hydra_job(monkeypatch, out, ["distributed=local"])
    real_popen = subprocess.Popen
    waits = "import signal, time; signal.signal(signal.SIGTERM, lambda *a: None); time.sleep(30)"  # its run's handler
    ended = f"import os, signal, time; time.sleep(0.5); os.kill(os.getpid(), {int(signum)})"  # no handler yet

    def start(command, env, pass_fds, stderr):
        rank = int(next(c for c in command if c.startswith("distributed.process_id=")).split("=")[1])
        return real_popen([sys.executable, "-c", ended if rank else waits], stderr=stderr)

    monkeypatch.setattr(local_cluster.subprocess, "Popen", start)
    threading.Timer(2.0, os.kill, (os.getpid(), signum)).start()  # the parent's, after process 1 ended
    cfg = OmegaConf.create({"distributed": {"local_processes": 2, "run_timeout_s": 60, "heartbeat_s": 10},
                            "devices": {"cpu_count": 8}, "mesh": {"spec": "auto", "devices": None}})
    metrics = local_cluster.run_local_processes(cfg, out)
    assert metrics["status"] == status and metrics["process_exit_codes"] == [-signal.SIGKILL, -signum], metrics
    stop = "interrupted by Ctrl-C (SIGINT)" if status == "interrupted" else "preempted by SIGTERM"
    assert metrics["error"] == (
        f"{stop} while the processes were starting up, before training (nothing trained: no checkpoint to save); "
        f"continue with: python launch.py distributed=local train.resume=auto hydra.run.dir={out}")


@pytest.mark.slow  # an end-to-end run (a training or dry run, or processes)
@pytest.mark.parametrize("moment", ["checking", "starting"])
def test_a_stop_while_the_parent_starts_its_local_processes_reaches_them_and_starts_no_more(tmp_path, monkeypatch,
                                                                                          moment):
    # Was: a SIGTERM before the parent took the signals over to pass them on (while it checked the job, and while it
    # started its processes) was the run's watch's alone: no process heard of it, each started and trained on (here
    # until the run bound stopped them, 5 s later: "stopped at distributed.run_timeout_s=5 s", no stop signal).
    from gensbi_sharding.harness import local_cluster
    from gensbi_sharding.harness.run import run

    out = tmp_path / "run"
    out.mkdir()
    _as_hydra_job(monkeypatch, out, ["distributed=local", "distributed.run_timeout_s=5"])
    real_popen, real_check, started = subprocess.Popen, local_cluster.model_group_problem, []

    def check(*args):  # the parent's last check of the job, before any process starts
        os.kill(os.getpid(), signal.SIGTERM)
        return real_check(*args)

    def start(command, env, pass_fds, stderr):
        started.append(command)
        child = real_popen([sys.executable, "-c", "import time; time.sleep(30)"], stderr=stderr)  # starting up
        if moment == "starting":  # as the first process starts
            os.kill(os.getpid(), signal.SIGTERM)
        return child

    monkeypatch.setattr(local_cluster.subprocess, "Popen", start)
    if moment == "checking":
        monkeypatch.setattr(local_cluster, "model_group_problem", check)
    metrics = run(compose_tiny("distributed=local", "distributed.run_timeout_s=5"))
    assert len(started) == {"checking": 0, "starting": 1}[moment]  # none starts after the stop
    assert metrics["status"] == "preempted" and metrics["stop_signal"] == signal.SIGTERM, metrics.get("error")
    assert metrics["process_exit_codes"] == [-signal.SIGTERM] * len(started)
    assert metrics["error"] == (
        "preempted by SIGTERM while the processes were starting up, before training (nothing trained: no checkpoint "
        "to save); continue with: python launch.py distributed=local distributed.run_timeout_s=5 train.resume=auto "
        f"hydra.run.dir={out}")
    assert json.loads((out / "metrics.json").read_text())["error"] == metrics["error"]


@pytest.mark.slow  # an end-to-end run (a training or dry run, or processes)
def test_the_run_bound_reached_while_the_local_processes_start_up_is_named_with_a_bound_they_can_start_within(
        tmp_path, monkeypatch):
    # Was, for distributed=local distributed.run_timeout_s=1: "preempted by SIGTERM while the processes were
    # starting up ...; continue with: ... distributed.run_timeout_s=1 ...", stop_signal SIGTERM (handed on as a
    # preemption): no signal came, and the command stopped at the same bound again, every attempt.
    from gensbi_sharding.harness import local_cluster

    out = tmp_path / "run"
    out.mkdir()
    _as_hydra_job(monkeypatch, out, ["distributed=local", "distributed.run_timeout_s=1"])
    real_popen = subprocess.Popen
    monkeypatch.setattr(local_cluster.subprocess, "Popen", lambda command, env, pass_fds, stderr: real_popen(
        [sys.executable, "-c", "import time; time.sleep(30)"], stderr=stderr))  # never past start-up
    cfg = OmegaConf.create({"distributed": {"local_processes": 2, "run_timeout_s": 1, "heartbeat_s": 1},
                            "devices": {"cpu_count": 8}, "mesh": {"spec": "auto", "devices": None}})
    metrics = local_cluster.run_local_processes(cfg, out)
    assert metrics["status"] == "preempted" and metrics["stop_signal"] is None
    assert metrics["error"] == (
        "stopped at distributed.run_timeout_s=1 s while the processes were starting up, before training (nothing "
        "trained: no checkpoint to save); continue with: python launch.py distributed=local "
        f"distributed.run_timeout_s=120 train.resume=auto hydra.run.dir={out}")
    assert metrics["process_exit_codes"] == [-signal.SIGTERM] * 2


def test_ctrl_c_of_a_local_processes_sweep_writes_its_summary_and_the_whole_sweep_command(
        tmp_path, monkeypatch, caplog):
    # Was: Ctrl-C in job 0 of `-m distributed=local rule=fsdp,tensor` ended the sweep with no sweep_summary.*
    # (a one-process sweep writes it, with a "not run" row) and without the command that continues it whole.
    from hydra.types import RunMode

    from gensbi_sharding.harness import local_cluster
    from gensbi_sharding.harness.run import run

    sweep = tmp_path / "sweep"
    (sweep / "0" / ".hydra").mkdir(parents=True)
    OmegaConf.save(OmegaConf.create(["distributed=local", "rule=fsdp"]), sweep / "0" / ".hydra" / "overrides.yaml")
    OmegaConf.save({"hydra": {"overrides": {"task": ["distributed=local", "rule=fsdp,tensor"]}}},
                   sweep / "multirun.yaml")
    _as_hydra_job(monkeypatch, sweep / "0", ["distributed=local", "rule=fsdp"], mode=RunMode.MULTIRUN)
    monkeypatch.setattr(sys, "argv", ["launch.py", "-m", "distributed=local", "rule=fsdp,tensor",
                                      f"hydra.sweep.dir={sweep}"])
    real_popen = subprocess.Popen

    def child(command, env, pass_fds, stderr):  # a process that stops as for Ctrl-C (exit 130), once both started
        if "distributed.process_id=1" in command:
            threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT)).start()
        return real_popen([sys.executable, "-c", "import signal, sys, time; "
                           "signal.signal(signal.SIGTERM, lambda *a: sys.exit(130)); time.sleep(30)"], stderr=stderr)

    monkeypatch.setattr(local_cluster.subprocess, "Popen", child)
    with caplog.at_level(logging.INFO, logger="gensbi_sharding"), pytest.raises(KeyboardInterrupt):
        run(compose_tiny("distributed=local", "rule=fsdp"))
    assert json.loads((sweep / "0" / "metrics.json").read_text())["status"] == "interrupted"
    rows = (sweep / "sweep_summary.csv").read_text().splitlines()
    assert [row.split(",")[:2] + [row.split(",")[-2]] for row in rows[1:]] == [
        ["0", "fsdp", "interrupted"], ["1", "tensor", "not run"]]
    assert (f"to continue the whole sweep, this job and those not started: python launch.py -m distributed=local "
            f"rule=fsdp,tensor train.resume=auto hydra.sweep.dir={sweep}") in caplog.messages


@pytest.mark.slow  # an end-to-end run (a training or dry run, or processes)
def test_the_run_bound_says_on_the_console_to_raise_it_when_continuing(tmp_path, monkeypatch, caplog):
    # Was: only metrics.json said "raise distributed.run_timeout_s for the rest"; the console showed the
    # processes' "continue with: ... distributed.run_timeout_s=30 ...", which stops every attempt at 30 s again.

    from gensbi_sharding.harness import local_cluster

    out = tmp_path / "run"
    out.mkdir()
    _as_hydra_job(monkeypatch, out, ["distributed=local", "distributed.run_timeout_s=1"])
    real_popen = subprocess.Popen
    record = {"status": "preempted", "error": "preempted by SIGTERM at step 11"}
    stopped = (f"import json, signal, sys, time; signal.signal(signal.SIGTERM, lambda *a: (json.dump("
               f"{record!r}, open({str(out / 'metrics.json')!r}, 'w')), sys.exit(75))); "
               "time.sleep(30)")  # as process 0 stops: its record, exit 75
    monkeypatch.setattr(local_cluster.subprocess, "Popen", lambda command, env, pass_fds, stderr: real_popen(
        [sys.executable, "-c", stopped], stderr=stderr))
    cfg = OmegaConf.create({"distributed": {"local_processes": 2, "run_timeout_s": 1, "heartbeat_s": 1},
                            "devices": {"cpu_count": 8}, "mesh": {"spec": "auto", "devices": None}})
    with caplog.at_level(logging.INFO):
        metrics = local_cluster.run_local_processes(cfg, out)
    assert metrics["status"] == "preempted" and metrics["process_exit_codes"] == [75, 75]
    assert metrics["error"] == ("stopped at distributed.run_timeout_s=1 s: preempted by SIGTERM at step 11; raise "
                                "distributed.run_timeout_s for the rest")
    assert caplog.messages[-1] == ("when you continue, raise distributed.run_timeout_s (e.g. "
                                   "distributed.run_timeout_s=2): with 1 s every attempt stops there again")


def test_a_file_is_on_disk_before_its_name_is(tmp_path, monkeypatch):
    # Was: renamed without fsync: after a machine crash the new name could hold a zero-length or cut-off file
    # (a half-written metrics.json, c2st.csv or table), though no process ever saw one.
    events = []
    fsync, replace = os.fsync, os.replace
    monkeypatch.setattr(os, "fsync", lambda fd: events.append(("fsync", os.fstat(fd).st_size)) or fsync(fd))
    monkeypatch.setattr(os, "replace", lambda a, b: events.append(("replace", os.path.basename(b))) or replace(a, b))
    outputs.write_atomic(tmp_path / "sbibm_table.md", "| task |\n")
    assert events == [("fsync", 9), ("replace", "sbibm_table.md")]
    assert (tmp_path / "sbibm_table.md").read_text() == "| task |\n" and len(list(tmp_path.iterdir())) == 1

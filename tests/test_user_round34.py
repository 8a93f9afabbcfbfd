"""Faults a new user met in round 34, working from the README in a fresh clone (one test each, tiny).

Each test names what was typed, what happened, and checks what happens now.
"""

import shlex

import jax
import jax.numpy as jnp
import pytest
from omegaconf import OmegaConf

from faults_helpers import REPO, compose_tiny
from gensbi_sharding.checkpoint import CheckpointWriter
from gensbi_sharding.harness.config import ConfigError


def _as_hydra_job(monkeypatch, out, task, hydra_overrides=()):
    """Make Hydra's config say this process is the job in ``out``, launched with overrides ``task`` (and
    ``hydra_overrides``, which Hydra records apart: ``hydra.searchpath=...``)."""
    from hydra.conf import HydraConf
    from hydra.core.hydra_config import HydraConfig

    hydra = OmegaConf.create({"hydra": OmegaConf.structured(HydraConf)})
    hydra.hydra.runtime.output_dir, hydra.hydra.overrides.task = str(out), task
    hydra.hydra.overrides.hydra = list(hydra_overrides)
    monkeypatch.setattr(HydraConfig.instance(), "cfg", None)
    HydraConfig.instance().set_config(hydra)


def _saved_run(run, saved_cfg, overrides, hydra_overrides=()):
    """A run folder as a finished run leaves it: checkpoint 3 of ``saved_cfg`` and Hydra's record of its command."""
    with CheckpointWriter(run / "checkpoints", config=OmegaConf.to_container(saved_cfg, resolve=True)) as writer:
        writer.save(3, {"w": jnp.ones(3)}, jax.random.key(0))
    (run / ".hydra").mkdir()
    (run / ".hydra" / "overrides.yaml").write_text("".join(f"- {o}\n" for o in overrides))
    if hydra_overrides:
        OmegaConf.save({"hydra": {"overrides": {"hydra": list(hydra_overrides)}}}, run / ".hydra" / "hydra.yaml")
    return run / "checkpoints" / "3"


def _refusal(monkeypatch, step_dir, out, *task, searchpath=None):
    """The refusal ``python launch.py <task> train.resume=<run>`` gets, up to "The saved weights"."""
    from hydra import compose, initialize_config_dir

    from gensbi_sharding.harness.config import register_configs
    from gensbi_sharding.harness.resume import check_resume_settings

    register_configs()
    searched = [f"hydra.searchpath=[file://{searchpath}]"] if searchpath else []
    _as_hydra_job(monkeypatch, out, [*task, f"train.resume={step_dir.parent.parent}"], searched)
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        cfg = compose("config", overrides=[*task, *searched])
    with pytest.raises(ConfigError) as err:
        check_resume_settings(step_dir, cfg)
    return str(err.value).split(" The saved weights")[0]


def test_a_refused_resume_names_only_the_presets_that_give_the_saved_model(tmp_path, devices, monkeypatch):
    # Typed: python launch.py model=flux1 rule=fsdp train.steps=30 train.resume=runs/f, runs/f saved by
    # experiment=quick model=flux1 rule=tensor mesh.model_axis=2. Was: "the checkpoint was saved under
    # experiment=quick rule=tensor, which gives model.mlp_ratio=2.0 ...: add experiment=quick rule=tensor": the
    # saving run's rule gives no model setting, and adding it would put the resumed run back on the old rule,
    # where the README says a run resumes onto whatever rule it is given.
    step_dir = _saved_run(tmp_path / "run", compose_tiny("rule=tensor", "mesh.model_axis=2", "model.init=eager"),
                          ["experiment=quick", "rule=tensor", "mesh.model_axis=2", "train.steps=8"])
    assert _refusal(monkeypatch, step_dir, tmp_path / "new", "rule=fsdp", "train.steps=30") == (
        "the checkpoint was saved under experiment=quick, which gives model.width=32 model.depth=1 (this run: "
        "model.width=128 model.depth=3): add experiment=quick (or model.width=32 model.depth=1).")


def test_a_refused_resume_names_every_override_it_needs_at_once(tmp_path, devices, monkeypatch):
    # Typed: python launch.py model=flux1 train.resume=runs/f, runs/f saved by model=flux1 experiment=quick
    # train.ema_decay=0.0 data.theta_transform=support. Was: two tries, the first naming experiment=quick alone
    # (the model's sizes), the run with it added then refused for data.theta_transform and train.ema_decay.
    from hydra import compose, initialize_config_dir

    from gensbi_sharding.harness.resume import check_resume_settings

    saved = ["model=flux1", "train.ema_decay=0.0", "data.theta_transform=support"]
    step_dir = _saved_run(tmp_path / "run", compose_tiny(*saved, "model.init=eager"),
                          ["experiment=quick", *saved, "train.steps=8"])
    needed = "data.theta_transform=support train.ema_decay=0.0"
    assert _refusal(monkeypatch, step_dir, tmp_path / "new", "model=flux1", "train.steps=30") == (
        "the checkpoint was saved under experiment=quick, which gives model.mlp_ratio=2.0 model.num_heads=2 "
        "model.depth=1 model.depth_single_blocks=1 (this run: model.mlp_ratio=4.0 model.num_heads=4 model.depth=2 "
        f"model.depth_single_blocks=4): add experiment=quick {needed} (or model.mlp_ratio=2.0 model.num_heads=2 "
        f"model.depth=1 model.depth_single_blocks=1 {needed}).")
    # train.steps short of the checkpoint's step (3), refused next: named with them (was: a third try).
    assert _refusal(monkeypatch, step_dir, tmp_path / "new", "model=flux1", "train.steps=2").endswith(
        f"add experiment=quick train.steps=3 {needed} (or model.mlp_ratio=2.0 model.num_heads=2 model.depth=1 "
        f"model.depth_single_blocks=1 {needed} train.steps=3).")
    with pytest.raises(ConfigError) as err:  # the task's settings alone differing: the same
        with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
            cfg = compose("config", overrides=["model=flux1", "experiment=quick", "train.steps=2"])
        check_resume_settings(step_dir, cfg)
    assert f"add {needed} train.steps=3 (it is at step 3, beyond train.steps=2), or start" in str(err.value)
    for fix in (["experiment=quick"], ["model.mlp_ratio=2.0", "model.num_heads=2", "model.depth=1",
                                       "model.depth_single_blocks=1"]):  # either fix, as named, resumes it
        with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
            cfg = compose("config", overrides=["model=flux1", "train.steps=30", *fix, *needed.split()])
        check_resume_settings(step_dir, cfg)


def test_a_refused_resume_names_the_steps_its_preset_would_cut_short(tmp_path, devices, monkeypatch):
    # Typed: python launch.py model=flux1 train.resume=runs/f, runs/f saved at step 40 by model=flux1
    # experiment=quick train.steps=40. Was: "add experiment=quick", then, with it, "train.resume=runs/f is at step
    # 40, beyond train.steps=20" (the preset's steps): a second try.
    from hydra import compose, initialize_config_dir

    from gensbi_sharding.harness.resume import check_resume_settings

    run = tmp_path / "run"
    saved = OmegaConf.to_container(compose_tiny("model=flux1", "model.init=eager", "train.steps=40"), resolve=True)
    with CheckpointWriter(run / "checkpoints", config=saved) as writer:
        writer.save(40, {"w": jnp.ones(3)}, jax.random.key(0))
    (run / ".hydra").mkdir()
    (run / ".hydra" / "overrides.yaml").write_text("- model=flux1\n- experiment=quick\n- train.steps=40\n")
    step_dir = run / "checkpoints" / "40"
    assert _refusal(monkeypatch, step_dir, tmp_path / "new", "model=flux1").startswith(
        "the checkpoint was saved under experiment=quick, which gives model.mlp_ratio=2.0 ")
    assert _refusal(monkeypatch, step_dir, tmp_path / "new", "model=flux1").endswith(
        "add experiment=quick train.steps=40 (or model.mlp_ratio=2.0 model.num_heads=2 model.depth=1 "
        "model.depth_single_blocks=1).")
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        cfg = compose("config", overrides=["model=flux1", "experiment=quick", "train.steps=40"])
    check_resume_settings(step_dir, cfg)  # the fix named, as typed: no refusal, and step 40 is within train.steps
    assert cfg.train.steps >= 40
    # A preset whose steps reach the checkpoint's: no train.steps named (test above: step 3 under quick's 20).


def test_a_refused_resume_of_a_preset_of_one_s_own_names_its_search_path(tmp_path, devices, monkeypatch):
    # Typed (README, "A preset of your own"): python launch.py "hydra.searchpath=[file://$PWD/my_conf]"
    # model=my_flux1 rule=tensor ...; then train.resume=<it> with model=flux1 rule=fsdp. Was: "add model=my_flux1
    # rule=tensor": model=my_flux1 without its search path is refused ("model=my_flux1: no such option").
    conf = tmp_path / "my_conf"
    (conf / "model").mkdir(parents=True)
    (conf / "model" / "my_mlp.yaml").write_text("defaults:\n  - /mlp_schema\n  - _self_\nname: mlp\nwidth: 24\n"
                                                 "depth: 2\n")
    search = f"hydra.searchpath=[file://{conf}]"
    saved = compose_tiny(search, "model=my_mlp", "rule=tensor", "model.init=eager")
    step_dir = _saved_run(tmp_path / "run", saved, ["model=my_mlp", "rule=tensor", "train.steps=8"], [search])
    assert _refusal(monkeypatch, step_dir, tmp_path / "new", "rule=fsdp", "train.steps=30") == (
        "the checkpoint was saved under model=my_mlp, which gives model.width=24 model.depth=2 (this run: "
        f"model.width=128 model.depth=3): add {shlex.quote(search)} model=my_mlp (or model.width=24 model.depth=2).")
    # This run searches the folder too: the preset alone.
    assert _refusal(monkeypatch, step_dir, tmp_path / "new", "rule=fsdp", searchpath=conf).endswith(
        "add model=my_mlp (or model.width=24 model.depth=2).")


def test_a_sweep_whose_job_was_continued_alone_on_another_rule_names_its_unfinished_jobs(tmp_path):
    # Typed: python launch.py -m experiment=quick rule=replicated,fsdp train.checkpoint_every=500 hydra.sweep.dir=sp,
    # SIGTERM in job 0; its printed command, edited to continue on another mesh and rule (the README: resume onto
    # whatever mesh and rule you have): ... rule=tensor mesh.model_axis=2 train.resume=auto hydra.mode=RUN
    # hydra.run.dir=sp/0 (completed); then the sweep's own command with train.resume=auto, for job 1. Was: "job 0 of
    # this sweep (rule=replicated) would continue folder sp/0, which ran rule=tensor: ... rerun the sweep with its
    # values in the order it first ran" (they were), and no command for job 1, which never started.
    from gensbi_sharding.harness.run_folder import RESUMABLE
    from gensbi_sharding.harness.sweep_hints import moved_jobs_problem, unfinished_jobs_hint

    job = tmp_path / "0"
    (job / ".hydra").mkdir(parents=True)
    (job / ".hydra" / "overrides.yaml").write_text("- experiment=quick\n- rule=tensor\n- mesh.model_axis=2\n"
                                                   "- train.resume=auto\n")
    OmegaConf.save({"hydra": {"mode": "RUN"}}, job / ".hydra" / "hydra.yaml")  # a job continued alone
    (job / "metrics.json").write_text('{"status": "ok"}')
    jobs = [["experiment=quick", "rule=replicated"], ["experiment=quick", "rule=fsdp"]]
    assert moved_jobs_problem(tmp_path, jobs) is None
    assert unfinished_jobs_hint([job], RESUMABLE, jobs, sweep_dir=tmp_path) == (
        "; a sweep folder holding completed jobs is never rerun as a whole: continue its one unfinished job (never "
        "started) with: python launch.py experiment=quick rule=fsdp train.resume=auto hydra.mode=RUN "
        f"hydra.run.dir={tmp_path / '1'}")
    # Written by a sweep (its jobs' record says MULTIRUN), other values still mean another sweep's folder.
    OmegaConf.save({"hydra": {"mode": "MULTIRUN"}}, job / ".hydra" / "hydra.yaml")
    assert "which ran rule=tensor" in moved_jobs_problem(tmp_path, jobs)


def _readme_python(holding):
    """The README's ```python block whose text holds ``holding``."""
    import re

    blocks = re.findall(r"```python\n(.*?)```", (REPO / "README.md").read_text(), re.S)
    return next(block for block in blocks if holding in block)


@pytest.fixture(scope="module")
def readme_examples(request, tmp_path_factory):
    """``{holding: its run}``: each README example the session's tests run, as ``python <file of the block>`` in a
    folder of its own (``PYTHONPATH`` the repository), forked one after the other from one process that imported
    JAX, Flax and optax once (tests/fork_launch.py: each still a process of its own, from the block's first line)."""
    import os

    from fork_launch import run_forked

    wanted = [item.callspec.params["holding"] for item in request.session.items
              if getattr(item, "originalname", None) == "test_the_readme_s_library_examples_run_as_printed"
              and item.callspec.params["printed"] is not None]
    root = tmp_path_factory.mktemp("readme")
    (root / "run.py").write_text("import runpy, sys\nrunpy.run_path(sys.argv[1], run_name='__main__')\n")
    runs = []
    for i, holding in enumerate(wanted):
        (root / str(i)).mkdir()
        (root / f"{i}.py").write_text(_readme_python(holding))
        runs.append({"args": [str(root / f"{i}.py")], "cwd": root / str(i)})
    (root / "fork").mkdir()
    procs = run_forked(runs, env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=300 * max(len(runs), 1),
                       workdir=root / "fork", script=root / "run.py", imports=("jax", "flax.nnx", "optax"))
    return dict(zip(wanted, procs))


@pytest.mark.parametrize("holding, printed", [
    ("class Block(nnx.Module)", "P(None, 'model')"),
    ("A training script of your own", None),  # (the prose before it; the block itself below)
    ("def factory():", "30 P('data', None) True"),
    pytest.param("def flux1_factory():", "(8, 2) (8, 2)", marks=pytest.mark.slow),  # GenSBI's models: 30 s
])
def test_the_readme_s_library_examples_run_as_printed(request, holding, printed):
    # Typed: the README's Python examples, copied into a file, in a fresh clone. Was: the library's part had no
    # example of a training script of one's own (sharded init, steps, checkpoints, a restore onto another mesh),
    # and its table showed CheckpointWriter(dir, every=, keep=).save(...), where save ignores every= (maybe_save
    # reads it): a loop calling save each step wrote every step.
    readme = (REPO / "README.md").read_text()
    if printed is None:
        assert holding in readme and "`.maybe_save(step, state, key)` (saves when `step` is a multiple of N)" in readme
        return
    proc = request.getfixturevalue("readme_examples")[holding]
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == printed


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


def test_sampling_a_checkpoint_says_what_it_samples_not_that_it_resumed(tmp_path, devices, caplog):
    # Typed: python sample.py runs/f x_o.npy (README, "Your own observation"). Was, on the console: "resumed from
    # runs/f/checkpoints/20 at step 20, placed by rule 'tensor' on one device (no mesh); early stopping: best step
    # 20, 1 validation(s)": nothing is resumed, no rule places anything on one device, and no early stopping runs;
    # for a checkpoint without early-stopping state, a warning that early stopping starts afresh. Still, after
    # that fix: "sampling checkpoint ..., placed by rule 'tensor' on one device (no mesh)" (the run's rule named).
    import logging

    import gensbi_sharding as gs
    from gensbi_sharding.harness.state import build_state
    from gensbi_sharding.harness.train import make_step_functions

    cfg = compose_tiny("model.init=eager")
    table = dict(gs.RULES["replicated"])
    ts = build_state(cfg, dim_theta=2, dim_x=2, mesh=None, rule_name="replicated", table=table, resume_dir=None)
    _, state = make_step_functions(ts.model, ts.optimizer, None, ema=ts.ema)
    with CheckpointWriter(tmp_path / "checkpoints", config=OmegaConf.to_container(cfg, resolve=True)) as writer:
        writer.save(3, state, ts.key)
    step_dir = tmp_path / "checkpoints" / "3"
    for sampling, said in ((True, f"sampling checkpoint {step_dir} (step 3), on one device (no mesh); "
                                   "its newest weights"),
                           (False, f"resumed from {step_dir} at step 3, on one device (no mesh)")):
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="gensbi_sharding"):
            build_state(cfg, dim_theta=2, dim_x=2, mesh=None, rule_name="replicated", table=table,
                        resume_dir=step_dir, sampling=sampling)
        assert any(r.getMessage().startswith(said) for r in caplog.records), caplog.text
        assert ("early stopping starts afresh" in caplog.text) is not sampling


def test_benchmark_help_names_each_default_once():
    # Typed: python benchmarks/gensbi_scale.py --help. Was: "--timeout TIMEOUT  seconds the dry-run sweep ... may
    # run (default 3600) (default: 3600)": the help text said its default, and the scripts' formatter adds it again.
    import re

    for script in sorted((REPO / "benchmarks").glob("*.py")):
        source = script.read_text()
        if "new_parser" in source or "HelpFormatter" in source:  # cli_args's: argparse's defaults formatter
            assert not re.findall(r"help=[^\n]*\(default \d+\)", source), script.name


def test_a_model_file_listing_a_schema_never_stored_names_the_missing_step(tmp_path):
    # Typed (README, "A model of your own in the harness", its steps begun with the config file):
    # conf/model/tiny.yaml listing /tiny_schema, then python launch.py model=tiny experiment=quick. Was Hydra's
    # "In 'model/tiny': Could not load 'tiny_schema'." and its config search path, naming no step.
    from gensbi_sharding.harness.override_types import override_problem

    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "tiny.yaml").write_text("defaults:\n  - /tiny_schema\n  - _self_\n")
    (tmp_path / "model" / "wide.yaml").write_text("defaults:\n  - /mlp_schema\n  - _self_\nwidth: 256\n")
    search = f"hydra.searchpath=[file://{tmp_path}]"
    assert override_problem([search, "model=tiny", "experiment=quick"]) == (
        f"model=tiny: {tmp_path / 'model' / 'tiny.yaml'} lists /tiny_schema, which no schema is stored as: add its "
        "settings' dataclass to gensbi_sharding/harness/config.py (subclassing ModelConfig, name: str = \"tiny\"), "
        "stored by register_configs as tiny_schema, or list one that is: /flux1_schema, /mlp_schema, "
        "/simformer_schema, /transformer_schema (README: A model of your own in the harness)")
    assert override_problem([search, "-m", "model=wide,tiny"]).startswith("model=wide,tiny: ")  # one of a sweep
    assert override_problem([search, "model=wide"]) is None and override_problem(["model=flux1"]) is None
    (tmp_path / "model" / "broken.yaml").write_text("defaults: [\n")  # YAML cannot read it: Hydra's error names it
    assert override_problem([search, "model=broken"]) is None


@pytest.mark.slow  # a launch of launch.py (explicit mode, one process: about 8 s)
def test_a_run_in_explicit_mode_ends_with_its_result_line(tmp_path):
    # Typed (README, "Running on several hosts": distributed.mode=explicit takes coordinator_address, num_processes
    # and process_id), one command per host. Was: process 0's console ended at "[7/7] outputs: ...", without the
    # line every other run ends with ("done in ... s: ...; outputs in ..."): distributed.process_id set was taken
    # for one of distributed=local's processes, whose parent says it.
    import socket
    import subprocess
    import sys

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.run([sys.executable, "launch.py", "experiment=quick", "train.steps=4", "eval.enabled=false",
                           "distributed.mode=explicit", f"distributed.coordinator_address=localhost:{port}",
                           "distributed.num_processes=1", "distributed.process_id=0", f"hydra.run.dir={tmp_path / 'r'}"],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    last = proc.stdout.strip().splitlines()[-1]  # (the progress bar: stderr)
    assert last.startswith("done in ") and last.endswith(f"outputs in {tmp_path / 'r'}"), last


def test_a_second_ctrl_c_landing_in_a_gc_callback_is_deferred_not_dropped(caplog):
    # Typed: Ctrl-C twice during a run (README, Preemption: "press it again to stop at once"). Was, on the console:
    # "Exception ignored in: <function _xla_gc_callback ...> Traceback ... KeyboardInterrupt": the second press
    # landed in JAX's gc callback (gc.callbacks), where Python prints the exception and drops it, as in a __del__
    # (which was deferred already); the run stopped only at the next step boundary, for the first press.
    import gc
    import logging
    import sys

    from gensbi_sharding.harness import interrupt_hold

    frames = []

    def callback(phase, info):  # as jax._src.lib's _xla_gc_callback: run by the collector, in the main thread
        frames.append(sys._getframe())

    gc.callbacks.append(callback)
    try:
        gc.collect()
        interrupt_hold.reset()
        with caplog.at_level(logging.WARNING, logger="gensbi_sharding"):
            assert interrupt_hold.defer_interrupt(frames[0]) is True
    finally:
        gc.callbacks.remove(callback)
        interrupt_hold.reset()
    assert "Ctrl-C again: stopping at the next checkpoint, or as the first asked" in caplog.text
    assert interrupt_hold.defer_interrupt(sys._getframe()) is False  # anywhere else: at once, as before


def test_sampling_a_run_still_training_before_its_first_checkpoint_says_so(tmp_path):
    # Typed: python sample.py multirun/.../1 x_o.npy while that sweep job trained (train.checkpoint_every=0: a
    # checkpoint only at its end). Was: "has no checkpoint to sample ... Sampling needs a trained run's saved weights:
    # pass the folder of a run that trained", about a run that was training there and would save one.
    import subprocess
    import sys

    import numpy as np

    from gensbi_sharding.harness.own_observation import sample_posterior

    run = tmp_path / "run"
    run.mkdir()
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time\nfrom gensbi_sharding.harness.folder_lock "
                               f"import FolderLock\nlock = FolderLock({str(run)!r})\nlock.acquire()\nprint('held', flush=True)\n"
                               "time.sleep(60)"], stdout=subprocess.PIPE, text=True, env={"PYTHONPATH": str(REPO)})
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(FileNotFoundError) as err:
            sample_posterior(run, np.zeros(2))
    finally:
        holder.kill()
        holder.wait(timeout=30)
    assert f"; its run is still training (pid {holder.pid} on " in str(err.value)
    assert str(err.value).split(") and has saved none yet")[1] == (
        ": it saves one at its end, and every train.checkpoint_every steps if set; sample it then")


def test_the_sweep_table_names_the_group_option_a_job_continued_alone_ran_with(tmp_path):
    # Typed: -m distributed=local ... rule=fsdp,tensor, stopped in job 0; job 0 continued alone in one process (its
    # printed command without distributed=local). Was: sweep_summary.md's "distributed" column empty for job 0 (no
    # override named it, and the config holds the group's fields, not its name), "local" for job 1.
    from gensbi_sharding.harness.summary import summary_rows
    from gensbi_sharding.harness.summary_columns import key_cell

    for number, overrides, choice in ((0, ["rule=fsdp", "train.resume=auto"], "none"),
                                      (1, ["distributed=local", "rule=tensor"], "local")):
        job = tmp_path / str(number)
        (job / ".hydra").mkdir(parents=True)
        (job / ".hydra" / "overrides.yaml").write_text("".join(f"- {o}\n" for o in overrides))
        OmegaConf.save({"hydra": {"runtime": {"choices": {"distributed": choice, "rule": "x", "hydra/env": None}}}},
                       job / ".hydra" / "hydra.yaml")
        (job / "metrics.json").write_text('{"status": "ok", "config": {"distributed": {"mode": "none"}}}')
    rows = summary_rows(tmp_path)
    assert [(key_cell(r, "distributed"), key_cell(r, "rule")) for r in rows] == [("none", "fsdp"), ("local", "tensor")]

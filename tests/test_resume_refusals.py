"""``train.resume=<run>`` refused when the saved run cannot continue as asked: each refusal names the folder as
typed, the presets and overrides that give the saved model, and the steps a preset would cut short.
"""

import logging
import os
import re
import shlex
import shutil
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from omegaconf import OmegaConf

import gensbi_sharding as contract
from faults_helpers import REPO, as_hydra_job, assert_refused_before_training, compose_tiny, hint, run_tiny
from library_helpers import lose_step_metadata
from gensbi_sharding.checkpoint import CheckpointWriter
from gensbi_sharding.harness import outputs
from gensbi_sharding.harness.config import ConfigError
from gensbi_sharding.harness.resume import check_resume_settings
from gensbi_sharding.harness.schedule import COUNTS_STEPS, learning_rate_schedule
from gensbi_sharding.harness.state import build_state
from gensbi_sharding.harness.train import make_step_functions


def test_a_resume_refusal_names_the_folder_as_typed_and_under_run_cfg_as_python_sets_it(tmp_path):
    # Was: "train.resume=/tmp/.../my runs/it's: checkpoint path ... does not exist" (the folder as is: pasted, the
    # shell splits it at the space and waits for the quote to close), and in those launch.py words under run(cfg).
    from hydra.core.hydra_config import HydraConfig

    from hydra import compose, initialize_config_dir

    from faults_helpers import compose_tiny
    from gensbi_sharding.harness.config import ConfigError
    from gensbi_sharding.harness.config_checks import validate
    from gensbi_sharding.harness.override_grammar import hydra_override
    from gensbi_sharding.harness.resume import resume_step_dir
    from gensbi_sharding.harness.run import run

    folder = tmp_path / "my runs" / "it's"
    typed = hydra_override("train.resume", folder)
    assert typed == f"""'train.resume="{str(folder).replace("'", "'\"'\"'")}"'"""  # one shell word, read back by Hydra
    cfg = compose_tiny()
    cfg.train.resume = str(folder)
    with pytest.raises(ConfigError) as refused:  # as raised: launch.py's run names it so
        resume_step_dir(cfg)
    assert str(refused.value).startswith(f"{typed}: checkpoint path ")
    assert str(refused.value).endswith("as train.resume=<folder>; or leave train.resume out to start fresh")

    cfg = compose_tiny(output_dir=tmp_path / "py")
    cfg.train.resume = str(folder)
    metrics = run(cfg)  # refused before any simulation
    assert metrics["status"] == "error"
    assert metrics["error"].startswith(f"ConfigError: cfg.train.resume={str(folder)!r}: checkpoint path ")
    assert metrics["error"].endswith("as cfg.train.resume='<folder>'; or set cfg.train.resume=None to start fresh")

    for value, said in [("Auto ", "{} is read as a folder name; to continue from this run's own folder, pass {} "
                                  "(lower case)"),
                        ("", "{} is empty: pass {} (this run's folder), a run or checkpoint folder, or {} "
                             "to start fresh")]:
        cfg = compose_tiny()
        cfg.train.resume = value
        with pytest.raises(ConfigError) as refused:  # run(cfg) from Python: no Hydra app
            validate(cfg)
        # WORDS77: from Python, "leave it out" is said as the setting that leaves it out
        assert str(refused.value) == said.format(f"cfg.train.resume={value!r}", "cfg.train.resume='auto'",
                                                 "set cfg.train.resume=None")
        before = HydraConfig.instance().cfg
        with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
            HydraConfig.instance().set_config(compose("config", return_hydra_config=True))
        try:  # launch.py's run: its overrides, each one shell word
            with pytest.raises(ConfigError) as refused:
                validate(cfg)
        finally:
            HydraConfig.instance().cfg = before
        assert str(refused.value) == said.format(hydra_override("train.resume", value) if value else "train.resume=''",
                                                 "train.resume=auto", "leave it out")


def test_a_checkpoint_beyond_train_steps_is_refused_naming_the_folder_as_typed(tmp_path):
    # Was: "train.resume=/tmp/.../my runs is at step 8, ..." (run.py: the folder as is, launch.py's words from Python).
    import jax
    import jax.numpy as jnp
    from hydra import compose, initialize_config_dir
    from hydra.core.hydra_config import HydraConfig

    from faults_helpers import compose_tiny
    from gensbi_sharding.checkpoint import CheckpointWriter
    from gensbi_sharding.harness.config import ConfigError
    from gensbi_sharding.harness.resume import check_resume_settings

    run_dir = tmp_path / "my runs"
    with CheckpointWriter(run_dir / "checkpoints", async_save=False) as writer:
        writer.save(8, {"w": jnp.zeros(2)}, jax.random.key(0))
    cfg = compose_tiny("train.steps=6")
    cfg.train.resume = str(run_dir)
    with pytest.raises(ConfigError) as refused:  # run(cfg) from Python
        check_resume_settings(run_dir / "checkpoints" / "8", cfg)
    assert str(refused.value) == (f"cfg.train.resume={str(run_dir)!r} is at step 8, beyond cfg.train.steps=6; set "
                                  "cfg.train.steps=8 to evaluate it, or more to train further")
    before = HydraConfig.instance().cfg
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        HydraConfig.instance().set_config(compose("config", return_hydra_config=True))
    try:  # launch.py's run
        with pytest.raises(ConfigError) as refused:
            check_resume_settings(run_dir / "checkpoints" / "8", cfg)
    finally:
        HydraConfig.instance().cfg = before
    assert str(refused.value) == (f"'train.resume={run_dir}' is at step 8, beyond train.steps=6; set train.steps=8 "
                                  "to evaluate it, or more to train further")


def test_a_dry_run_with_train_resume_names_a_folder_with_a_space_as_one_setting(tmp_path):
    # run(cfg) from Python, cfg.dry_run=True and cfg.train.resume='<tmp>/my runs/old': was "cfg.dry_run=True with
    # cfg.train.resume='<tmp>/my' runs/old: ...", the folder cut at its space (launch.py's words named it unquoted,
    # "train.resume=<tmp>/my runs/old", no override one could type). A folder named 123 is a folder, not a number
    # (was: cfg.train.resume=123).
    import ast
    import re
    import shlex

    from faults_helpers import compose_tiny
    from omegaconf import open_dict

    from gensbi_sharding.harness.config_checks import dry_run_resume_problem
    from gensbi_sharding.harness.override_grammar import parse
    from gensbi_sharding.harness.run import run

    for old in (str(tmp_path / "my runs" / "old"), "123"):
        cfg = compose_tiny("dry_run=true", output_dir=tmp_path / "dry")
        with open_dict(cfg):
            cfg.train.resume = old
        said = re.match(r"ConfigError: cfg\.dry_run=True with cfg\.train\.resume=(.*?): a dry run trains nothing",
                        run(cfg)["error"])
        assert said and ast.literal_eval(said[1]) == old, run(cfg)["error"]
        typed = re.match(r"dry_run=true with (.*?): a dry run", dry_run_resume_problem(cfg))[1]
        assert parse(shlex.split(typed)).parsed[0].hydra.value() == old  # one word, as Hydra reads it back
    assert not (tmp_path / "dry").exists()


def _saved_checkpoint(folder, *overrides, ts=None, info=None):
    """A step-3 checkpoint of the tiny config under ``overrides`` (one device; ``ts``: that state, else a new one),
    and its step folder."""
    saved = compose_tiny("mesh=none", *overrides)
    if ts is None:
        ts = build_state(saved, dim_theta=2, dim_x=2, mesh=None, rule_name="replicated", table={}, resume_dir=None)
    _, state = make_step_functions(ts.model, ts.optimizer, None, ema=ts.ema)
    with CheckpointWriter(folder / "checkpoints", config=OmegaConf.to_container(saved, resolve=True)) as writer:
        writer.save(3, state, ts.key, info=info)
    return folder / "checkpoints" / "3"


def _resumed(folder, step_dir, *overrides):
    now = compose_tiny("mesh=none", f"train.resume={folder}", *overrides)
    check_resume_settings(step_dir, now)
    return build_state(now, dim_theta=2, dim_x=2, mesh=None, rule_name="replicated", table={}, resume_dir=step_dir)


def _counts(state) -> int:
    return sum(path[-1] == "count" for path, _ in nnx.to_flat_state(nnx.state(state.optimizer)))


@pytest.mark.slow
def test_a_run_resumed_under_another_schedule_restores_or_is_refused_naming_the_fix(tmp_path):
    # Was: train.resume=<a cosine run> train.schedule=constant noted "from step 8 the learning rate follows this
    # run's schedule, 0.003", then refused the checkpoint as saved "with another optimizer", advising
    # nnx.Optimizer(model, new_tx, wrt=nnx.Param), Python no launch.py user can type: a constant rate without
    # warm-up is a float to optax.adamw, whose state then holds no step count; a schedule's holds one.
    cosine = _saved_checkpoint(tmp_path / "cosine")
    resumed = _resumed(tmp_path / "cosine", cosine, "train.schedule=constant", "train.learning_rate=0.01")
    assert resumed.start_step == 3
    assert _counts(resumed) == 2  # Adam's and the schedule's, as saved: restored, not refused
    # That run's own checkpoint (saved under train.schedule=constant, its state counting steps, as its info says)
    # continues under either schedule (was: read by its config as uncounted, refused whatever the schedule).
    assert resumed.counts_steps
    again = _saved_checkpoint(tmp_path / "again", "train.schedule=constant", ts=resumed,
                              info={COUNTS_STEPS: resumed.counts_steps})
    for schedule in ("constant", "cosine"):
        assert _counts(_resumed(tmp_path / "again", again, f"train.schedule={schedule}")) == 2
    schedule = learning_rate_schedule(learning_rate=0.01, steps=8, schedule="constant", counted=True)
    assert [float(schedule(step)) for step in (0, 3, 7)] == pytest.approx([0.01] * 3)
    # The other way, a constant run's checkpoint continued under a schedule, cannot restore: refused before,
    # naming the settings it was saved with (was: the same "another optimizer" refusal).
    constant = _saved_checkpoint(tmp_path / "constant", "train.schedule=constant")
    for change in (["train.schedule=cosine"], ["train.schedule=constant", "train.warmup_steps=2"]):
        with pytest.raises(ConfigError) as err:
            _resumed(tmp_path / "constant", constant, *change)
        assert str(err.value).startswith(
            f"checkpoint {constant} was saved with train.schedule=constant train.warmup_steps=0, a constant learning "
            f"rate whose optimizer state holds no step count, so it cannot continue under a schedule (this run: "
            f"{' '.join(c for c in change if c != 'train.schedule=constant')}): add train.schedule=constant "
            "train.warmup_steps=0 (train.learning_rate may change)"), str(err.value)
    resumed = _resumed(tmp_path / "constant", constant, "train.schedule=constant", "train.learning_rate=0.01")
    assert resumed.start_step == 3 and _counts(resumed) == 1  # Adam's only, as saved


def test_the_resume_note_names_every_setting_a_step_trains_under():
    # Was: train.resume=<an unfinished run> train.weight_decay=0.5 (or another EMA decay, data.batch_size) trained on
    # under the new value without a word; only the schedule's four settings were compared.
    from gensbi_sharding.harness.schedule import schedule_change_note

    train = {"steps": 20, "learning_rate": 0.003, "schedule": "cosine", "warmup_steps": 0, "weight_decay": 1e-4,
             "ema_decay": 0.999}
    saved = {"train": train, "data": {"batch_size": 64}}
    now = {"train": {**train, "weight_decay": 0.5, "ema_decay": 0.9}, "data": {"batch_size": 128}}
    assert schedule_change_note(saved, now, 7) == (
        "train.resume: the checkpoint at step 7 trained with train.weight_decay=0.0001 train.ema_decay=0.999 "
        "data.batch_size=64 (this run: train.weight_decay=0.5 train.ema_decay=0.9 data.batch_size=128): from step 7 "
        "this run's values apply; add train.weight_decay=0.0001 train.ema_decay=0.999 data.batch_size=64 to continue "
        "the run as it would have gone", True)
    note, unfinished = schedule_change_note(saved, {**now, "train": {**now["train"], "steps": 30}}, 20)
    assert not unfinished and note.startswith("train.resume: the checkpoint at step 20 trained with train.steps=20 "
                                              "train.weight_decay=0.0001 ") and "gives 0" in note
    assert schedule_change_note(saved, {"train": dict(train), "data": {"batch_size": 64}}, 7) is None


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
    as_hydra_job(monkeypatch, out, [*task, f"train.resume={step_dir.parent.parent}"], hydra_overrides=searched)
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        cfg = compose("config", overrides=[*task, *searched])
    with pytest.raises(ConfigError) as err:
        check_resume_settings(step_dir, cfg)
    return str(err.value).split(" The saved weights")[0]


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
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
@pytest.mark.slow
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


# The resumed runs the fixes lead to, by composed config: the three cases' fixes each compose the same config
# (train.ema_decay=0 on two_moons' own data settings), and a run of one config from one checkpoint ends alike.
_FOLLOWED = {}


def run_followed(out, *overrides: str) -> dict:
    """``run_tiny(out, *overrides)``, run once per composed config (the output folder aside): a case whose fix
    composes the config another case's fix ran reads that run's metrics."""
    from omegaconf import OmegaConf

    from faults_helpers import compose_tiny

    key = OmegaConf.to_yaml(compose_tiny(*overrides))
    if key not in _FOLLOWED:
        _FOLLOWED[key] = run_tiny(out, *overrides)
    return _FOLLOWED[key]


@pytest.fixture(scope="module")
def no_ema_run(tmp_path_factory, devices):
    out = tmp_path_factory.mktemp("no_ema")
    assert run_tiny(out, "train.ema_decay=0")["status"] == "ok"
    return out


@pytest.mark.slow  # end-to-end runs (run_tiny: a refused one per case, and the fixes' one)
@pytest.mark.parametrize("changed, fix", [
    # The EMA on or off: restore failed listing 12 "missing from the checkpoint" paths and pointing at a folder.
    (("train.ema_decay=0.999",), "train.ema_decay=0"),
    # Another parameter space or data space: the restore fitted and training went on, silently wrong.
    (("train.ema_decay=0", "data.theta_transform=support"), "data.theta_transform=none"),  # two_moons': none
    # Another task: a shape error listing paths, no word of data=.
    (("train.ema_decay=0", "data=slcp", "data.batch_size=64"), "data=two_moons"),
])
def test_resume_under_other_settings_names_the_override_that_fits(no_ema_run, tmp_path, changed, fix):
    out = tmp_path / "b"
    metrics = run_tiny(out, f"train.resume={no_ema_run}", "train.steps=16", *changed)
    # run(cfg), from Python: the fix as such a caller makes it (launch.py's "add <fix>": test_resume_python_words_r76g)
    said = {"train.ema_decay=0": "set cfg.train.ema_decay=0", "data.theta_transform=none":
            "set cfg.data.theta_transform='none'", "data=two_moons": "add 'data=two_moons' to the overrides cfg is "
            "composed with"}[fix]
    assert_refused_before_training(metrics, out, said, str(no_ema_run / "checkpoints" / "8"))
    assert "missing from the checkpoint" not in metrics["error"]
    key, value = fix.split("=")
    # The fix replaces what it names; the data settings go with data= (the task's own defaults).
    followed = [o for o in changed if o.startswith("train.") and not o.startswith(key + "=")] + [fix]
    again = run_followed(tmp_path / "c", f"train.resume={no_ema_run}", "train.steps=16", *followed)
    assert again["status"] == "ok" and again["start_step"] == 8, again.get("error")


@pytest.mark.slow
def test_a_resume_on_other_simulations_keeps_the_checkpoints_z_scores(no_ema_run, tmp_path):
    # A resume with another data.num_simulations (or seed) recomputed the z-score statistics from the
    # new simulations, so the saved weights met shifted inputs and outputs without a word: the same
    # weights, evaluated at their own step, scored C2ST 0.883 with the original budget and 0.900 with 1000.
    from gensbi_sharding.checkpoint import saved_info
    from gensbi_sharding.harness.simulation_data import NORMALIZATION

    saved = saved_info(no_ema_run / "checkpoints" / "8")[NORMALIZATION]
    assert len(saved["theta_mean"]) == 2 and len(saved["x_std"]) == 2 and min(saved["theta_std"]) > 0
    scored = ("train.steps=8", "train.ema_decay=0", "eval.enabled=true", "eval.num_samples=300", "eval.c2st_folds=2")
    same = run_tiny(tmp_path / "same", f"train.resume={no_ema_run}", *scored)
    other = run_tiny(tmp_path / "other", f"train.resume={no_ema_run}", *scored, "data.num_simulations=1536")
    assert same["status"] == other["status"] == "ok", (same.get("error"), other.get("error"))
    samples = [np.load(t / "posterior_samples.npz")["samples"] for t in (tmp_path / "same", tmp_path / "other")]
    np.testing.assert_array_equal(samples[0], samples[1])  # the same weights in the same coordinates
    assert same["c2st"] == other["c2st"]


@pytest.mark.parametrize("value, message", [
    # No Hydra app running: run(cfg) from Python, in the settings it sets (round 48)
    ("Auto", "cfg.train.resume='Auto' is read as a folder name; to continue from this run's own folder, pass "
             "cfg.train.resume='auto' (lower case)"),
    ("''", "cfg.train.resume='' is empty: pass cfg.train.resume='auto' (this run's folder), a run or checkpoint "
           "folder, or set cfg.train.resume=None to start fresh"),  # WORDS77: was "leave it out", no Python words
])
def test_a_resume_hint_ends_without_a_contradicting_example(value, message):
    # Was: "...pass train.resume=auto (lower case); e.g. train.resume=null".
    from faults_helpers import compose_tiny
    from gensbi_sharding.harness.config import ConfigError
    from gensbi_sharding.harness.config_checks import validate

    with pytest.raises(ConfigError) as err:
        validate(compose_tiny(f"train.resume={value}"))
    assert str(err.value) == message


@pytest.mark.slow
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


@pytest.mark.slow
def test_resume_of_sizes_a_preset_gave_leads_with_the_preset(tmp_path, devices, monkeypatch):
    # Was: "the checkpoint was saved with model.width=32 model.depth=1 (this run: model.width=128 model.depth=3):
    # add model.width=32 model.depth=1 ...; the run that saved it was launched with: experiment=quick ...": the
    # preset that gave both sizes (and is the whole fix) came last, behind the values it sets.
    from hydra import compose, initialize_config_dir

    from gensbi_sharding.harness.resume import check_resume_settings

    step_dir = _quick_checkpoint(tmp_path)
    (tmp_path / ".hydra" / "overrides.yaml").write_text("- experiment=quick\n- train.steps=4\n")

    def refusal(*task):  # as launch.py's run of python launch.py <task> train.resume=<tmp_path> would say it
        as_hydra_job(monkeypatch, tmp_path / "new", [*task, f"train.resume={tmp_path}"])
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


@pytest.mark.slow
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
        as_hydra_job(monkeypatch, tmp_path / "new", [*task, f"train.resume={tmp_path}"])
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
    # its best job named by its score (session 73: was "e.g." the first job, whatever the jobs scored)
    assert re.fullmatch(re.escape(f"train.resume={sweep} is a sweep's folder: resume one of its jobs, the lowest best "
                                  "val loss, ") + r"\d+\.\d{4}" + re.escape(f": train.resume={sweep / '0'} (jobs with a "
                                                                          "checkpoint: 0)"), refusal(sweep))
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


@pytest.mark.slow  # ~0.6 s on 2 cores
def test_resume_from_a_run_whose_step_lost_its_orbax_metadata_names_it_not_checkpoints_gone(tmp_path):
    # Was: "... (step 5: cut short, no commit recorded); ...; <run> holds a completed run whose checkpoints are gone (no
    # complete step folder in <run>/checkpoints)", of a run that trained and saved step 5, whose step metadata was
    # deleted (or left out of a copy) since: the step is there.
    from gensbi_sharding.checkpoint import find_checkpoint
    from gensbi_sharding.harness.resume import resume_step_dir

    with CheckpointWriter(tmp_path / "run" / "checkpoints", async_save=False) as writer:
        writer.save(5, nnx.Linear(2, 2, rngs=nnx.Rngs(0)), jax.random.key(0))
    lose_step_metadata(tmp_path / "run" / "checkpoints" / "5")
    outputs.write_json(tmp_path / "run" / "metrics.json", {"status": "ok"})
    for given in (tmp_path / "run", tmp_path / "run" / "checkpoints", tmp_path / "run" / "checkpoints" / "5"):
        with pytest.raises(FileNotFoundError) as found:
            find_checkpoint(given)
        assert "its items are there, but not Orbax's step metadata, the record of its commit" in str(found.value)
        # the run's folder: find_checkpoint's refusal as it is; its checkpoints/ or step folder (no metrics.json
        # there) also names the override (was, after the first fix: the bare FileNotFoundError, no key)
        with pytest.raises(FileNotFoundError if given == tmp_path / "run" else ConfigError) as err:
            resume_step_dir(OmegaConf.create({"train": {"resume": str(given)}}))
        assert str(found.value) in str(err.value)
        assert (given == tmp_path / "run") or str(err.value).startswith("train.resume="), str(err.value)


def test_resume_from_a_copied_step_that_lost_its_metadata_says_what_to_do_when_its_source_is_gone(tmp_path):
    # Was: "... copy the step folder again whole from where it was saved); ...", and nothing else, for a copy whose
    # source may be gone: now the newest complete step left beside it, named as an override that resumes it, or that
    # none is left.
    from gensbi_sharding.harness.resume import resume_step_dir

    with CheckpointWriter(tmp_path / "run" / "checkpoints", async_save=False, keep=5) as writer:
        for step in (3, 5):
            writer.save(step, nnx.Linear(2, 2, rngs=nnx.Rngs(0)), jax.random.key(0))
    shutil.copytree(tmp_path / "run" / "checkpoints", tmp_path / "copy" / "checkpoints")
    lose_step_metadata(tmp_path / "copy" / "checkpoints" / "5")
    shutil.rmtree(tmp_path / "run")  # the source is gone
    with pytest.raises(ConfigError) as err:
        resume_step_dir(OmegaConf.create({"train": {"resume": str(tmp_path / "copy" / "checkpoints" / "5")}}))
    fix = f"train.resume={tmp_path / 'copy' / 'checkpoints' / '3'}"
    assert str(err.value).endswith(f"; if the folder it was copied from is gone, resume the newest complete step "
                                   f"left, {fix}; or leave train.resume out to start fresh"), str(err.value)
    assert resume_step_dir(OmegaConf.create({"train": {"resume": fix.split("=", 1)[1]}})) == (
        tmp_path / "copy" / "checkpoints" / "3")  # the fix, as given, resumes
    shutil.rmtree(tmp_path / "copy" / "checkpoints" / "3")  # none left: said so, of each folder that designates it
    outputs.write_json(tmp_path / "copy" / "metrics.json", {"status": "ok"})
    for given in ("copy", "copy/checkpoints", "copy/checkpoints/5"):
        with pytest.raises((ConfigError, FileNotFoundError)) as err:
            resume_step_dir(OmegaConf.create({"train": {"resume": str(tmp_path / given)}}))
        assert (f"; if the folder it was copied from is gone, no complete step is left in "
                f"{tmp_path / 'copy' / 'checkpoints'} to resume; or ") in str(err.value), str(err.value)


def test_resume_of_a_copy_whose_newest_step_lost_its_metadata_is_refused_naming_both_steps(tmp_path):
    # Was: train.resume=<copy> (or <copy>/checkpoints) resumed step 3 without a word, step 5 there whole but for its
    # Orbax step metadata (left out of the copy): two saves of training dropped.
    from gensbi_sharding.harness.resume import resume_step_dir

    with CheckpointWriter(tmp_path / "run" / "checkpoints", async_save=False, keep=5) as writer:
        for step in (3, 5):
            writer.save(step, nnx.Linear(2, 2, rngs=nnx.Rngs(0)), jax.random.key(0))
    shutil.copytree(tmp_path / "run", tmp_path / "copy")
    lose_step_metadata(tmp_path / "copy" / "checkpoints" / "5")
    checkpoints = tmp_path / "copy" / "checkpoints"
    for given in (tmp_path / "copy", checkpoints):
        with pytest.raises(ConfigError) as err:
            resume_step_dir(OmegaConf.create({"train": {"resume": str(given)}}))
        assert str(err.value) == (
            f"train.resume={given}: step 5 in {checkpoints} is newer than its newest complete step, 3, but lost "
            "Orbax's step metadata, the record of its commit (deleted, or left out of a copy): copy that step folder "
            "again whole from where it was saved; if the folder it was copied from is gone, resume the newest "
            f"complete step left, train.resume={checkpoints / '3'}")
    assert resume_step_dir(OmegaConf.create({"train": {"resume": str(checkpoints / "3")}})) == checkpoints / "3"
    assert resume_step_dir(OmegaConf.create({"train": {"resume": str(tmp_path / "run")}})) == (
        tmp_path / "run" / "checkpoints" / "5")  # the source, whole: its newest step, as before


def test_resume_of_a_copied_step_that_lost_its_metadata_advises_no_parent_that_is_refused(tmp_path):
    # Was: train.resume=<copy>/checkpoints/5 said "... pass its parent for the latest complete step, 3, as
    # train.resume=<folder>": passed, <copy>/checkpoints was refused in turn (step 5 newer than 3, its metadata lost).
    from gensbi_sharding.harness.resume import resume_step_dir

    with CheckpointWriter(tmp_path / "run" / "checkpoints", async_save=False, keep=5) as writer:
        for step in (3, 5):
            writer.save(step, nnx.Linear(2, 2, rngs=nnx.Rngs(0)), jax.random.key(0))
    checkpoints = tmp_path / "copy" / "checkpoints"
    shutil.copytree(tmp_path / "run" / "checkpoints", checkpoints)
    lose_step_metadata(checkpoints / "5")
    with pytest.raises(ConfigError) as err:
        resume_step_dir(OmegaConf.create({"train": {"resume": str(checkpoints / "5")}}))
    assert str(err.value) == (
        f"train.resume={checkpoints / '5'}: {checkpoints / '5'} is not a complete checkpoint (its items are there, but "
        "not Orbax's step metadata, the record of its commit (deleted, or left out of a copy): copy the step folder "
        "again whole from where it was saved); if the folder it was copied from is gone, resume the newest complete "
        f"step left, train.resume={checkpoints / '3'}; or leave train.resume out to start fresh")
    with pytest.raises(ConfigError, match="step 5 in .* is newer than its newest complete step, 3"):
        resume_step_dir(OmegaConf.create({"train": {"resume": str(checkpoints)}}))  # the parent: refused
    assert resume_step_dir(OmegaConf.create({"train": {"resume": str(checkpoints / "3")}})) == checkpoints / "3"


def test_the_refusal_of_a_copied_step_that_lost_its_metadata_is_worded_from_its_folders(tmp_path, monkeypatch):
    # Was: find_checkpoint's message cut at "; pass its parent": a library refusal worded otherwise leaked its advice
    # to pass the parent (refused) into the harness's message. Now the folders say what the message is.
    from gensbi_sharding import checkpoint
    from gensbi_sharding.harness.resume import resume_step_dir
    from library_helpers import steps_with_the_newest_unconfirmed

    checkpoints = tmp_path / "copy" / "checkpoints"
    steps_with_the_newest_unconfirmed(checkpoints)
    with pytest.raises(ConfigError) as err:
        resume_step_dir(OmegaConf.create({"train": {"resume": str(checkpoints / "5")}}))
    found = checkpoint.find_checkpoint

    def reworded(path, base_dir=None):
        try:
            return found(path, base_dir)
        except FileNotFoundError as refused:
            raise FileNotFoundError(str(refused).replace("; pass its parent for", "; use the parent folder for"))

    monkeypatch.setattr(checkpoint, "find_checkpoint", reworded)
    with pytest.raises(ConfigError) as again:
        resume_step_dir(OmegaConf.create({"train": {"resume": str(checkpoints / "5")}}))
    assert str(again.value) == str(err.value) and "parent" not in str(err.value), str(again.value)


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


def test_the_command_that_saved_a_step_is_the_kept_record_s_up_to_its_step(tmp_path):
    # Was: the folder's own record for every step of another run's folder, though an attempt killed before it settled
    # (or a run from Python) left .hydra/saved_by/ holding the record of the launch that saved the steps up to its own.
    from gensbi_sharding.harness.saving_record import launched_with

    run = tmp_path / "run"
    (run / ".hydra" / "saved_by").mkdir(parents=True)
    (run / ".hydra" / "overrides.yaml").write_text("- model.width=48\n")  # the killed attempt's, saved step 12
    (run / ".hydra" / "saved_by" / "overrides.yaml").write_text("- model.width=24\n")
    (run / ".hydra" / "saved_by" / "step").write_text("8")
    said = "; the run that saved it was launched with: model.width="
    assert [launched_with(run / "checkpoints" / step) for step in ("4", "8", "12")] == [
        f"{said}24", f"{said}24", f"{said}48"]


#: Resumes of ``saved`` (step 8 of a 20-step run under experiment=quick) its settings refuse, each (args, its
#: refusal's lines after "[ERROR] "): run by ``refused_resumes``, one launch.py process each; {tmp} is the test's
#: folder, {step} the checkpoint's step folder; "out" the folder the command names for its outputs.
REFUSED_RESUMES = {
    "another model": (["train.resume={tmp}/saved", "hydra.run.dir={tmp}/out"], [
        "the checkpoint was saved under experiment=quick, which gives model.width=32 model.depth=1 (this "
        "run: model.width=128 model.depth=3): add experiment=quick (or model.width=32 model.depth=1). The saved "
        "weights compute that model, not this one; or start a new run without train.resume; the run that saved it "
        "was launched with: experiment=quick"]),
    "another task": (["experiment=quick", "data=slcp", "train.resume={tmp}/saved", "hydra.run.dir={tmp}/out"], [
        "checkpoint {step} was saved with data=two_moons (this run: data=slcp), which decides the task: "
        "its arrays mean nothing otherwise; add data=two_moons, or start a new run without train.resume; the run "
        "that saved it was launched with: experiment=quick"]),
    "beyond train.steps": (["experiment=quick", "train.steps=4", "train.resume={tmp}/saved",
                            "hydra.run.dir={tmp}/out"], [
        "train.resume={tmp}/saved is at step 8, beyond train.steps=4; set train.steps=8 to evaluate it, "
        "or more to train further (train.steps=20 finishes the run that saved it)"]),
    "a sweep of another model": (["-m", "seed=0,1", "train.resume={tmp}/saved", "hydra.sweep.dir={tmp}/out"], [
        "this sweep's config is refused for 2 of the 2 jobs, before any job ran (nothing was written); fix or drop the "
        "values named, then run the sweep again:",  # every job's one refusal, once (was: once per job, alike)
        "  all 2 jobs: the checkpoint was saved under experiment=quick, which gives "
        "model.width=32 model.depth=1 (this run: model.width=128 model.depth=3): add experiment=quick (or "
        "model.width=32 model.depth=1). The saved weights compute that model, not this one; or start a new run "
        "without train.resume; the run that saved it was launched with: experiment=quick"]),
}


@pytest.fixture(scope="module")
def refused_resumes(tmp_path_factory):
    """``{name: (its process, its folder)}`` for ``REFUSED_RESUMES``, forked from one process (tests/fork_launch.py);
    each folder holds ``saved``, a run's folder with a step-8 checkpoint and Hydra's record of its command."""
    from faults_helpers import launches_in_folders, saved_checkpoint

    def saved_run(folder):
        saved_checkpoint(folder / "saved", {"model": {"name": "mlp", "width": 32, "depth": 1},
                                            "data": {"name": "two_moons"}, "train": {"steps": 20}}, {})
        (folder / "saved" / ".hydra").mkdir()
        (folder / "saved" / ".hydra" / "overrides.yaml").write_text("- experiment=quick\n")

    return launches_in_folders(tmp_path_factory.mktemp("refused_resumes"),
                               {name: args for name, (args, _) in REFUSED_RESUMES.items()}, saved_run)


@pytest.mark.slow  # launch.py processes (forked: about a second each)
@pytest.mark.parametrize("name", list(REFUSED_RESUMES))
def test_a_resume_its_settings_refuse_is_refused_before_any_folder_is_made(refused_resumes, name):
    # Was: `python launch.py train.resume=<run> model.width=32` (another model, task or transform, a step beyond
    # train.steps) was refused by the run, inside the folder Hydra had made for it: .hydra/, .run.lock, launch.log,
    # error.txt and metrics.json left behind ("error after 214.2 ms; traceback in outputs/.../error.txt"); a sweep
    # ran every job, each refused so. The step beyond train.steps of an unfinished run now names the steps that
    # finish it in the refusal (the run warned of it before refusing; the check before the folder warns of nothing).
    proc, folder = refused_resumes[name]
    assert proc.returncode == 1 and not (folder / "out").exists() and not (folder / "outputs").exists(), proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    said = [line.format(tmp=folder, step=folder / "saved" / "checkpoints" / "8")
            for line in REFUSED_RESUMES[name][1]]
    assert proc.stderr.strip().splitlines() == [f"[ERROR] {said[0]}", *said[1:]]


@pytest.mark.slow  # a launch.py process (forked)
def test_a_refused_resume_of_a_step_whose_arrays_do_not_read_prints_no_late_tracebacks(tmp_path):
    # The reads of a damaged arrays item still under way when Orbax's loop closed each raise "RuntimeError: Event loop
    # is closed" on TensorStore's threads, after step_damage returned: 38 tracebacks above the refusal's one line for
    # experiment=quick's run. launch.py drops them (log_file.drop_late_callbacks); the library changes no hook.
    from faults_helpers import launches_in_folders

    def damaged_run(folder):
        config = OmegaConf.to_container(compose_tiny(), resolve=True)
        with CheckpointWriter(folder / "saved" / "checkpoints", config=config, async_save=False) as writer:
            writer.save(8, {f"layer{i}": {"w": jnp.arange(64.0) + i, "b": jnp.ones(8)} for i in range(20)},
                        jax.random.key(0), info={})
        (folder / "saved" / "checkpoints" / "8" / "arrays" / "manifest.ocdbt").unlink()  # its arrays' database

    (proc, folder), = launches_in_folders(tmp_path, {"damaged": [
        "experiment=quick", "train.resume={tmp}/saved", "hydra.run.dir={tmp}/out"]}, damaged_run).values()
    step = folder / "saved" / "checkpoints" / "8"
    assert proc.returncode == 1 and not (folder / "out").exists() and proc.stdout == "", proc.stderr
    assert "Event loop is closed" not in proc.stderr, proc.stderr[-3000:]
    # (asyncio's own "Task exception was never retrieved", logged now and then as the process ends, is not this)
    said = next(line for line in proc.stderr.splitlines() if line.startswith("[ERROR]"))
    assert said.startswith(f"[ERROR] FileNotFoundError: checkpoint {step} is damaged: its 'arrays' item cannot be read "
                           "(ValueError: NOT_FOUND: Error opening \"zarr\" driver: Metadata at "), proc.stderr
    assert said.endswith(f" in OCDBT database at local file \"{step / 'arrays'}/\" does not exist ...); no other step "
                         "folder is complete: start without it"), proc.stderr


def test_a_resume_of_a_step_whose_config_item_is_gone_is_refused_before_its_folder(tmp_path):
    # Was: '[WARNING] the check of the run's config could not run (FileNotFoundError: checkpoint .../8 is damaged: its
    # 'config' item cannot be read ...; a fault of gensbi_sharding's own, not of this command)', then the run's own
    # refusal of it inside the folder Hydra had made (error.txt, launch.log, metrics.json left there).
    from gensbi_sharding.harness.resume_source import resume_source_problem

    config = OmegaConf.to_container(compose_tiny(), resolve=True)
    with CheckpointWriter(tmp_path / "run" / "checkpoints", config=config, async_save=False) as writer:
        for step in (4, 8):
            writer.save(step, {"w": jnp.zeros(2)}, jax.random.key(0), info={})
    shutil.rmtree(tmp_path / "run" / "checkpoints" / "8" / "config")
    steps = tmp_path / "run" / "checkpoints"
    said = resume_source_problem(compose_tiny(f"train.resume={tmp_path / 'run'}"), tmp_path / "new")
    assert said.startswith(f"FileNotFoundError: checkpoint {steps / '8'} is damaged: its 'config' item cannot be read")
    assert said.endswith(f"resume from another step folder: {steps / '4'} (or move {steps / '8'} aside, e.g. to "
                         f"{steps / '8'}.damaged, and pass {steps}, whose newest is then 4)"), said


@pytest.mark.parametrize("older", [(), (4,)])
def test_a_resume_of_a_step_whose_arrays_item_is_gone_is_refused_before_its_folder(tmp_path, older):
    # Was: launch.py experiment=quick train.resume=<run> hydra.run.dir=<new>, <run>/checkpoints/8/arrays deleted, was
    # refused by the run ("its 'arrays' item cannot be read (KeyError: ...)") only after <new> held error.txt,
    # launch.log and metrics.json: the check before the folder read the config and meta items only.
    from gensbi_sharding.harness.resume_source import resume_source_problem

    config = OmegaConf.to_container(compose_tiny(), resolve=True)
    with CheckpointWriter(tmp_path / "run" / "checkpoints", config=config, async_save=False) as writer:
        for step in (*older, 8):
            writer.save(step, {"w": jnp.zeros(2)}, jax.random.key(0), info={})
    shutil.rmtree(tmp_path / "run" / "checkpoints" / "8" / "arrays")
    steps = tmp_path / "run" / "checkpoints"
    said = resume_source_problem(compose_tiny(f"train.resume={tmp_path / 'run'}"), tmp_path / "new")
    fix = (f"resume from another step folder: {steps / '4'} (or move {steps / '8'} aside, e.g. to {steps / '8'}.damaged, "
           "and the newest is 4)" if older else "no other step folder is complete: start without it")
    assert said == (f"FileNotFoundError: checkpoint {steps / '8'} is damaged: its 'arrays' item cannot be read (its "
                    f"folder is missing); {fix}")
    assert not (tmp_path / "new").exists()


@pytest.mark.parametrize("damage", ["largest file deleted", "every file emptied"])
@pytest.mark.parametrize("older", [(), (4,), (2, 4)])
@pytest.mark.fast_cases(2)
def test_a_resume_of_a_step_whose_arrays_do_not_read_is_refused_before_its_folder(tmp_path, older, damage):
    # Was: launch.py experiment=quick train.resume=<run> hydra.run.dir=<new>, one file of <run>/checkpoints/8/arrays
    # deleted (a data file, or its database's manifest), passed the check before the folder (its items' folders were
    # there) and was refused by the run ("its 'arrays' item cannot be read (ValueError: ...)") after <new> held
    # error.txt, launch.log and metrics.json. An older step whose arrays do not read either is not the fix.
    from gensbi_sharding.harness.resume_source import resume_source_problem

    config = OmegaConf.to_container(compose_tiny(), resolve=True)
    with CheckpointWriter(tmp_path / "run" / "checkpoints", config=config, async_save=False, keep=3) as writer:
        for step in (*older, 8):
            writer.save(step, {"w": jnp.arange(64.0)}, jax.random.key(0), info={})
    steps = tmp_path / "run" / "checkpoints"
    for step in [8, *older[1:]]:  # with two older steps, the newer of them (4) is damaged too
        files = [f for f in (steps / str(step) / "arrays").rglob("*") if f.is_file()]
        if damage == "largest file deleted":
            max(files, key=lambda f: f.stat().st_size).unlink()
        else:
            for f in files:
                f.write_bytes(b"")
    said = resume_source_problem(compose_tiny(f"train.resume={tmp_path / 'run'}"), tmp_path / "new")
    assert said.startswith(f"FileNotFoundError: checkpoint {steps / '8'} is damaged: its 'arrays' item cannot be "
                           "read ("), said
    moved = [steps / "8", *(steps / str(step) for step in older[1:])]  # each damaged one newer than the fix's
    fix = (f"resume from another step folder: {steps / str(older[0])} (or move {' and '.join(map(str, moved))} aside, "
           f"e.g. to {', '.join(f'{m}.damaged' for m in moved)}, and the newest is {older[0]})" if older else
           "no other step folder is complete: start without it")
    assert said.endswith(f"); {fix}"), said
    assert not (tmp_path / "new").exists()


def test_the_check_before_a_resumes_folder_reads_no_array_data(tmp_path, monkeypatch):
    # Was: every train.resume=<run> (and train.resume=auto, and a refused folder holding checkpoints) read every array
    # of every step in a child process before any folder (2.6 s here, more under load; a GPU run's whole checkpoint a
    # second time in host memory). Now the library's step_damage: the arrays' metadata, the JSON items; no child.
    import subprocess

    import orbax.checkpoint as ocp

    from gensbi_sharding.harness.resume_source import resume_source_problem

    config = OmegaConf.to_container(compose_tiny(), resolve=True)
    with CheckpointWriter(tmp_path / "run" / "checkpoints", config=config, async_save=False, keep=3) as writer:
        for step in (4, 8):
            writer.save(step, {"w": jnp.arange(64.0)}, jax.random.key(0), info={})
    read = []
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: read.append(a) or pytest.fail("a child process"))
    for handler in (ocp.PyTreeCheckpointHandler, ocp.StandardCheckpointHandler, ocp.Checkpointer):
        monkeypatch.setattr(handler, "restore", lambda *a, **k: read.append(a) or pytest.fail("an array read"))
    assert resume_source_problem(compose_tiny(f"train.resume={tmp_path / 'run'}"), tmp_path / "new") is None
    (tmp_path / "run" / "checkpoints" / "8" / "arrays" / "manifest.ocdbt").unlink()  # its arrays' database
    said = resume_source_problem(compose_tiny(f"train.resume={tmp_path / 'run'}"), tmp_path / "new")
    assert said.startswith(f"FileNotFoundError: checkpoint {tmp_path / 'run' / 'checkpoints' / '8'} is damaged: its "
                           "'arrays' item cannot be read (ValueError: NOT_FOUND: "), said
    assert said.endswith(f"resume from another step folder: {tmp_path / 'run' / 'checkpoints' / '4'} (or move "
                         f"{tmp_path / 'run' / 'checkpoints' / '8'} aside, e.g. to "
                         f"{tmp_path / 'run' / 'checkpoints' / '8'}.damaged, and the newest is 4)"), said
    assert read == [] and not (tmp_path / "new").exists()


@pytest.mark.slow  # end-to-end runs (run_tiny: the saved run, two refused resumes, the fix followed)
def test_a_resume_of_a_step_whose_array_data_alone_is_lost_is_refused_with_a_fix_its_folder_takes(tmp_path, devices):
    # run_tiny calls run(cfg) itself, past launch.py's check before the folder (checkpoint.step_damage, which names a
    # data file deleted by hand by the sizes the arrays' B+tree records): here the run's own restore finds it. Was:
    # "...; no other step folder is complete: start without it", but the same command without train.resume was then
    # refused the folder its refusal was recorded in ("rerun with train.resume=<run>"); under train.resume=auto,
    # the library's "resume from another step folder" where the folder's own run is the fix.
    assert run_tiny(tmp_path / "run", "train.ema_decay=0")["status"] == "ok"
    for f in (tmp_path / "run" / "checkpoints" / "8" / "arrays").glob("ocdbt.process_*/d/*"):
        f.unlink()
    metrics = run_tiny(tmp_path / "new", f"train.resume={tmp_path / 'run'}", "train.steps=16", "train.ema_decay=0")
    assert metrics["error"].startswith(f"FileNotFoundError: checkpoint {tmp_path / 'run' / 'checkpoints' / '8'} is "
                                       "damaged: its 'arrays', 'meta' or 'config' item cannot be read (ValueError: ")
    assert metrics["error"].endswith("; no other step folder is complete: start without train.resume, in another "
                                     "hydra.run.dir (this one records this refusal)"), metrics["error"]
    outputs.write_json(tmp_path / "run" / "metrics.json", {**outputs.read_metrics(tmp_path / "run" / "metrics.json"),
                                                           "status": "preempted"})
    metrics = run_tiny(tmp_path / "run", "train.resume=auto", "train.steps=16", "train.ema_decay=0")
    step_dir = tmp_path / "run" / "checkpoints" / "8"
    assert metrics["error"].endswith(f"; move {step_dir} aside, e.g. to {step_dir}.damaged, and run the same command "
                                     "again: it starts afresh in this folder (no other step is complete)"), metrics
    step_dir.rename(f"{step_dir}.damaged")
    assert run_tiny(tmp_path / "run", "train.resume=auto", "train.steps=16", "train.ema_decay=0")["status"] == "ok"


@pytest.mark.slow
@pytest.mark.parametrize("steps, then", [((4, 8), "resumes from step 4"),
                                         ((8,), "starts afresh in this folder (no other step is complete)")])
def test_a_damaged_step_of_the_runs_own_folder_names_the_fix_that_folder_takes(tmp_path, steps, then):
    # Was, under train.resume=auto (a preempted run continued in its folder): "...; no other step folder is complete:
    # start without it", but the same command without train.resume was refused ("rerun with train.resume=auto to
    # continue it in this folder"), which refused it again; or "resume from another step folder: <its step 4>".
    from gensbi_sharding.harness.resume_refusal import refuse_resume_settings

    config = OmegaConf.to_container(compose_tiny(), resolve=True)
    with CheckpointWriter(tmp_path / "checkpoints", config=config, async_save=False) as writer:
        for step in steps:
            writer.save(step, {"w": jnp.zeros(2)}, jax.random.key(0), info={})
    step_dir = tmp_path / "checkpoints" / "8"
    shutil.rmtree(step_dir / "config")
    with pytest.raises(FileNotFoundError) as err:
        refuse_resume_settings(step_dir, compose_tiny("train.resume=auto"))
    assert str(err.value).startswith(f"checkpoint {step_dir} is damaged: its 'config' item cannot be read ")
    assert str(err.value).endswith(f"; move {step_dir} aside, e.g. to {step_dir}.damaged, and run the same command "
                                   f"again: it {then}"), str(err.value)
    with pytest.raises(FileNotFoundError) as named:  # another run's folder: the library's words, as they were
        refuse_resume_settings(step_dir, compose_tiny(f"train.resume={tmp_path}"))
    assert "and run the same command again" not in str(named.value)


@pytest.mark.parametrize("steps, then", [((2, 4, 8), "resumes from step 2"),
                                         ((4, 8), "starts afresh in this folder (no other step is readable)")])
def test_a_damaged_step_names_the_older_steps_damaged_the_same_way(tmp_path, steps, then):
    # Was, with checkpoints/4 lost its config item too: "move .../8 aside ... and run the same command again: it
    # resumes from step 4", which refused step 4 the same way ("move .../4 aside ...": a second round).
    from gensbi_sharding.harness.resume_refusal import refuse_resume_settings

    config = OmegaConf.to_container(compose_tiny(), resolve=True)
    with CheckpointWriter(tmp_path / "checkpoints", config=config, async_save=False, keep=3) as writer:
        for step in steps:
            writer.save(step, {"w": jnp.zeros(2)}, jax.random.key(0), info={})
    step_dir, older = tmp_path / "checkpoints" / "8", tmp_path / "checkpoints" / "4"
    shutil.rmtree(step_dir / "config")
    shutil.rmtree(older / "config")
    with pytest.raises(FileNotFoundError) as err:
        refuse_resume_settings(step_dir, compose_tiny("train.resume=auto"))
    assert str(err.value).endswith(f"; move {step_dir} aside, e.g. to {step_dir}.damaged, and {older} too (whose "
                                   f"config item cannot be read either), and run the same command again: it {then}")


@pytest.mark.parametrize("lost, then", [({8: "meta"}, "; move {8} aside, e.g. to {8}.damaged, and run the same command "
                                         "again: it resumes from step 4"),
                                        ({8: "config", 4: "meta"}, "; move {8} aside, e.g. to {8}.damaged, and {4} too "
                                         "(whose meta item cannot be read either), and run the same command again: it "
                                         "starts afresh in this folder (no other step is readable)")])
def test_a_step_that_lost_its_meta_item_is_named_as_one_that_lost_its_config(tmp_path, lost, then):
    # Was, under train.resume=auto: checkpoints/8 without its meta item got the library's words ("resume from another
    # step folder: .../4"), which the folder's run does not take; and with 8's config item lost and 4's meta item,
    # "move .../8 aside ...: it resumes from step 4", which then refused step 4 (a second round).
    from gensbi_sharding.harness.resume_refusal import refuse_resume_settings

    config = OmegaConf.to_container(compose_tiny(), resolve=True)
    with CheckpointWriter(tmp_path / "checkpoints", config=config, async_save=False, keep=3) as writer:
        for step in (4, 8):
            writer.save(step, {"w": jnp.zeros(2)}, jax.random.key(0), info={})
    steps = {step: tmp_path / "checkpoints" / str(step) for step in (4, 8)}
    for step, item in lost.items():
        shutil.rmtree(steps[step] / item)
    with pytest.raises(FileNotFoundError) as err:
        refuse_resume_settings(steps[8], compose_tiny("train.resume=auto"))
    assert str(err.value).startswith(f"checkpoint {steps[8]} is damaged: its '{lost[8]}' item cannot be read ")
    assert str(err.value).endswith(then.replace("{8}", str(steps[8])).replace("{4}", str(steps[4]))), str(err.value)


@pytest.mark.parametrize("damaged, then", [
    ({8: "arrays"}, "; move {8} aside, e.g. to {8}.damaged, and run the same command again: it resumes from step 4"),
    ({8: "arrays", 4: "arrays"}, "; move {8} aside, e.g. to {8}.damaged, and {4} too (whose arrays item cannot be read "
     "either), and run the same command again: it resumes from step 2"),
    ({8: "config", 4: "arrays"}, "; move {8} aside, e.g. to {8}.damaged, and {4} too (whose arrays item cannot be read "
     "either), and run the same command again: it resumes from step 2"),
    ({8: "arrays", 4: "arrays", 2: "arrays"}, "; move {8} aside, e.g. to {8}.damaged, and {4} and {2} too (whose "
     "arrays item cannot be read either), and run the same command again: it starts afresh in this folder (no other "
     "step is readable)")])
@pytest.mark.fast_cases(2)
def test_a_step_of_the_runs_own_folder_whose_arrays_do_not_read_names_the_step_it_resumes_from(tmp_path, damaged, then):
    # Was, under train.resume=auto (a preempted run continued in its folder): a newest step whose arrays were damaged
    # passed the check of its settings, and the restore said the library's fix ("resume from another step folder:
    # .../4"), which this folder's run does not take; an older step whose arrays were damaged was named as the one
    # "it resumes from" (its config and meta items read), refused in turn by the restore.
    from gensbi_sharding.harness.resume_refusal import refuse_resume_settings

    config = OmegaConf.to_container(compose_tiny(), resolve=True)
    with CheckpointWriter(tmp_path / "checkpoints", config=config, async_save=False, keep=3) as writer:
        for step in (2, 4, 8):
            writer.save(step, {"w": jnp.arange(64.0)}, jax.random.key(0), info={})
    steps = {step: tmp_path / "checkpoints" / str(step) for step in (2, 4, 8)}
    for step, item in damaged.items():
        if item == "arrays":  # one file lost (its folder is there: the items' folders all are)
            files = [f for f in (steps[step] / "arrays").rglob("*") if f.is_file()]
            max(files, key=lambda f: f.stat().st_size).unlink()
        else:
            shutil.rmtree(steps[step] / item)
    with pytest.raises(FileNotFoundError) as err:
        refuse_resume_settings(steps[8], compose_tiny("train.resume=auto"))
    assert str(err.value).startswith(f"checkpoint {steps[8]} is damaged: its '{damaged[8]}' item cannot be read ")
    said = then
    for step in (8, 4, 2):
        said = said.replace("{%d}" % step, str(steps[step]))
    assert str(err.value).endswith(said), str(err.value)


@pytest.mark.parametrize("text, why", [
    ("{}", "a JSON object with no status, which every run writes (it is empty)"),
    ('{"final_step": 20}', "a JSON object with no status, which every run writes (its keys: final_step)"),
    ("[1, 2]", "a JSON list, not an object"), ('{"stat', "JSONDecodeError: ")])
@pytest.mark.fast_cases(2)
def test_a_resume_of_a_folder_whose_record_is_damaged_says_what_is_wrong_before_any_folder(tmp_path, text, why):
    # Was, train.resume=<folder> whose metrics.json was {} (no checkpoint there): "... holds a run that saved no
    # complete checkpoint (status None)"; a list or a truncated file: read_metrics's "choose another hydra.run.dir",
    # of the run's own folder, which was fine, refused after Hydra had made it (error.txt, launch.log left there).
    from gensbi_sharding.harness.resume_source import resume_source_problem

    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "metrics.json").write_text(text)
    said = resume_source_problem(compose_tiny(f"train.resume={tmp_path / 'old'}"), tmp_path / "new")
    assert said.startswith(f"FileNotFoundError: train.resume={tmp_path / 'old'}: {tmp_path / 'old'} holds no complete "
                           f"checkpoint, and its record {tmp_path / 'old' / 'metrics.json'} cannot be read ({why}"), said
    assert said.endswith("): nothing there to resume; start a new run without train.resume"), said
    assert not (tmp_path / "new").exists() and (tmp_path / "old" / "metrics.json").read_text() == text


@pytest.mark.slow
@pytest.mark.parametrize("saved_x64", [True, False])
def test_a_checkpoint_of_a_run_under_the_other_x64_setting_is_refused_naming_the_variable(tmp_path, saved_x64):
    # Was: 'JAX_ENABLE_X64=1 launch.py experiment=quick train.resume=<a run without it> train.steps=40' resumed without
    # a word: two_moons simulated anew in 64 bits (other draws: another training and validation set), its step-40
    # validation loss judged against the saved best of the other set, and the step-20 weights scored as the best.
    run = tmp_path / "run"
    step_dir = _saved_checkpoint(run)
    outputs.write_json(run / "metrics.json", {"status": "ok", "jax_enable_x64": saved_x64})
    now = compose_tiny("mesh=none", f"train.resume={run}")
    on = bool(jax.config.jax_enable_x64)
    if saved_x64 == on:  # the same setting as this process's: it continues
        check_resume_settings(step_dir, now)
        return
    with pytest.raises(ConfigError) as refused:
        check_resume_settings(step_dir, now)
    said = {True: "on", False: "off"}
    assert str(refused.value).startswith(
        f"checkpoint {step_dir} was trained with JAX_ENABLE_X64 {said[saved_x64]} ({run / 'metrics.json'}: "
        f"jax_enable_x64 {str(saved_x64).lower()}), this run has it {said[on]}: the task's simulations and losses "
        "differ under it, so it would train on other data and judge its validation losses against the saved best on "
        f"another set; {'set JAX_ENABLE_X64=1' if saved_x64 else 'unset JAX_ENABLE_X64'} to train it further, or "
        "start a new run without train.resume"), refused.value
    outputs.write_json(run / "metrics.json", {"status": "ok"})  # a run that recorded none (older): continues
    check_resume_settings(step_dir, now)


@pytest.mark.slow
def test_the_x64_setting_checked_is_the_one_of_the_attempt_that_saved_the_step(tmp_path):
    # Was: 'JAX_ENABLE_X64=1 launch.py experiment=quick hydra.run.dir=<run> train.resume=auto', <run> interrupted at
    # step 4 without it, was refused, but its refused attempt's record (status error, jax_enable_x64 true at its top
    # level, the interrupted attempt moved to previous_attempts) let the same command, run again, resume step 4 in
    # 64 bits: only the record's top level was read.
    run = tmp_path / "run"
    step_dir = _saved_checkpoint(run)
    on = bool(jax.config.jax_enable_x64)
    saver = {"status": "interrupted", "final_step": 3, "steps": 8, "resumed_from_step": None, "jax_enable_x64": not on}
    outputs.write_json(run / "metrics.json", {"status": "error", "final_step": None, "jax_enable_x64": on,
                                              "previous_attempts": [saver]})
    now = compose_tiny("mesh=none", "train.resume=auto")
    with pytest.raises(ConfigError) as refused:
        check_resume_settings(step_dir, now)
    said = {True: "on", False: "off"}
    assert str(refused.value).startswith(
        f"checkpoint {step_dir} was trained with JAX_ENABLE_X64 {said[not on]} ({run / 'metrics.json'}: "
        f"previous_attempts[0].jax_enable_x64 {str(not on).lower()}), this run has it {said[on]}: "), refused.value
    later = {"status": "ok", "final_step": 6, "resumed_from_step": 3, "jax_enable_x64": on}  # trained on from 3
    outputs.write_json(run / "metrics.json", {**later, "previous_attempts": [saver]})
    with pytest.raises(ConfigError, match=r"previous_attempts\[0\]\.jax_enable_x64"):
        check_resume_settings(step_dir, now)  # step 3 is still the first attempt's
    outputs.write_json(run / "metrics.json", {**later, "resumed_from_step": 2, "previous_attempts": [saver]})
    check_resume_settings(step_dir, now)  # step 3 saved by the later attempt, under this process's setting


@pytest.mark.slow
def test_a_checkpoint_of_the_other_x64_setting_may_still_be_evaluated(tmp_path):
    # Was: 'JAX_ENABLE_X64=1 launch.py experiment=quick train.resume=<a run without it> train.steps=20' (its final
    # step: nothing left to train, evaluated only, as it ran before this round) refused as "it would train on other
    # data", and the beyond-train.steps refusal's own fix (train.steps=<its step>, 'to evaluate it') refused the same.
    run = tmp_path / "run"
    step_dir = _saved_checkpoint(run)
    on = bool(jax.config.jax_enable_x64)
    outputs.write_json(run / "metrics.json", {"status": "ok", "final_step": 3, "jax_enable_x64": not on})
    check_resume_settings(step_dir, compose_tiny("mesh=none", f"train.resume={run}", "train.steps=3"))
    evaluate = r"is at step 3, beyond cfg\.train\.steps=2; set cfg\.train\.steps=3 to evaluate it"
    with pytest.raises(ConfigError, match=evaluate):
        check_resume_settings(step_dir, compose_tiny("mesh=none", f"train.resume={run}", "train.steps=2"))
    with pytest.raises(ConfigError, match="was trained with JAX_ENABLE_X64"):  # more steps: trained on, refused
        check_resume_settings(step_dir, compose_tiny("mesh=none", f"train.resume={run}", "train.steps=4"))

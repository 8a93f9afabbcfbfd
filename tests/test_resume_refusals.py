"""``train.resume=<run>`` refused when the saved run cannot continue as asked: each refusal names the folder as
typed, the presets and overrides that give the saved model, and the steps a preset would cut short.
"""

import pytest
from flax import nnx
from omegaconf import OmegaConf

from faults_helpers import REPO, compose_tiny
from gensbi_sharding.checkpoint import CheckpointWriter
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
                        ("", "{} is empty: pass {} (this run's folder), a run or checkpoint folder, or leave it out "
                             "to start fresh")]:
        cfg = compose_tiny()
        cfg.train.resume = value
        with pytest.raises(ConfigError) as refused:  # run(cfg) from Python: no Hydra app
            validate(cfg)
        assert str(refused.value) == said.format(f"cfg.train.resume={value!r}", "cfg.train.resume='auto'")
        before = HydraConfig.instance().cfg
        with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
            HydraConfig.instance().set_config(compose("config", return_hydra_config=True))
        try:  # launch.py's run: its overrides, each one shell word
            with pytest.raises(ConfigError) as refused:
                validate(cfg)
        finally:
            HydraConfig.instance().cfg = before
        assert str(refused.value) == said.format(hydra_override("train.resume", value) if value else "train.resume=''",
                                                 "train.resume=auto")


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

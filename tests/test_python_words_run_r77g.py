"""``run(cfg)`` from Python says every refusal and resume note in cfg's settings (WORDS77B).

Was (r77-int): ``validate``'s refusals from ``run(cfg)`` said launch.py's fixes ("seed=-1 must be >= 0; e.g. seed=0",
"all fixed together: seed=0 train.ema_decay=0.999"): ``run_steps``/``run_job`` called ``validate_every`` outside any
``in_python_words``. The resume's compute-dtype note ("add model.dtype=float32"), the held-out notes ("add
data.shards=2", "add data.val_fraction=0.1 to the command") and the train-further hint of a run that stopped early
("the same call with cfg.train.steps=16 train.patience=0 ...": the text fallback knew no ``train.patience``) were
launch.py's words too. Under launch.py (a Hydra app: its own process and distributed=local's) every word is as before.
"""

import subprocess
import sys

import pytest

from faults_helpers import REPO, compose_tiny, run_tiny
from gensbi_sharding.harness.python_words import in_python_words, said_as


@pytest.mark.slow  # a run(cfg) (the run's imports and its folder), twice
def test_run_cfgs_validate_refusal_names_cfgs_setting(tmp_path):
    metrics = run_tiny(tmp_path / "one", "seed=-1")
    assert metrics["status"] == "error"
    assert metrics["error"] == "ConfigError: seed=-1 must be >= 0; e.g. cfg.seed=0"
    # the reason names the value refused (as seed's does), not reworded as a setting; the fix is one
    steps = run_tiny(tmp_path / "steps", "train.steps=-3")["error"]
    assert steps == "ConfigError: train.steps=-3 must be >= 1; e.g. cfg.train.steps=3000", steps


@pytest.mark.slow  # a run(cfg)
def test_run_cfgs_listed_refusals_are_fixed_together_by_cfgs_settings(tmp_path):
    error = run_tiny(tmp_path / "two", "seed=-1", "train.ema_decay=2")["error"]
    assert error == ("ConfigError: 2 settings are refused, each with its fix:\n  seed=-1 must be >= 0; e.g. cfg.seed=0"
                     "\n  train.ema_decay=2.0 must lie in [0, 1) (0: no EMA), e.g. cfg.train.ema_decay=0.999\n  "
                     "all fixed together: cfg.seed=0 and cfg.train.ema_decay=0.999"), error


@pytest.mark.slow  # a run(cfg)
def test_a_distributed_local_run_cfg_is_refused_in_cfgs_settings(tmp_path):
    # run_job's own validate_every (before distributed=local's processes would start), from Python
    error = run_tiny(tmp_path / "local", "distributed=local", "seed=-1")["error"]
    assert error == "ConfigError: seed=-1 must be >= 0; e.g. cfg.seed=0", error


@pytest.mark.slow  # a run(cfg) under Hydra's app state, twice
def test_under_a_hydra_app_the_run_says_launch_pys_overrides(tmp_path):
    # launch.py's job and each distributed=local process run under Hydra's app: the overrides they take, as before
    from faults_helpers import under_command
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import read_write

    from gensbi_sharding.harness.run import run

    def refused(*overrides):
        def check(cfg):
            with read_write(HydraConfig.get()):  # the job's folder, as Hydra's app sets it
                HydraConfig.get().runtime.output_dir = str(tmp_path / str(len(overrides)))
            return run(cfg)["error"]
        return under_command(["experiment=quick", "train.steps=8", "eval.enabled=false", *overrides], check)

    assert refused("seed=-1") == "ConfigError: seed=-1 must be >= 0; e.g. seed=0"
    assert refused("distributed=local", "seed=-1") == "ConfigError: seed=-1 must be >= 0; e.g. seed=0"


@pytest.mark.slow  # launch.py in a process of its own
def test_a_distributed_local_launch_with_a_bad_value_names_the_override(tmp_path):
    done = subprocess.run([sys.executable, "launch.py", "experiment=quick", "distributed=local", "seed=-1",
                           f"hydra.run.dir={tmp_path / 'run'}"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode != 0
    assert "seed=-1 must be >= 0; e.g. seed=0" in done.stderr, done.stderr
    assert "cfg." not in done.stderr, done.stderr


def test_the_compute_dtype_note_names_the_setting_that_keeps_the_saved_dtype():
    from gensbi_sharding.harness.resume_settings import compute_dtype_note

    saved = {"model": {"dtype": "float32"}, "train": {"steps": 40}}
    now = {"model": {"dtype": "bfloat16"}, "train": {"steps": 40}, "eval": {"enabled": False}}
    launch, unfinished = compute_dtype_note(saved, now, 20)
    assert unfinished and launch.endswith("; add model.dtype=float32 to compute as the saved run did"), launch
    with in_python_words():  # check_resume_in_run, as run(cfg) makes it
        python, _ = compute_dtype_note(saved, now, 20)
    assert python.endswith("; set cfg.model.dtype='float32' to compute as the saved run did"), python


def test_the_held_out_notes_name_the_settings_that_keep_the_saved_split():
    from gensbi_sharding.harness.held_out import held_out_changes
    from gensbi_sharding.harness.held_out_fix import held_out_warning

    saved = {"data": {"shards": 2}}
    assert held_out_changes(saved, {}, {"data": {"shards": None}}, 1) == [
        "data shards 2 -> 1 (data.shards=null in 1 process(es); add data.shards=2 for the checkpoint's pairs)"]
    split = held_out_warning(["data.val_fraction=0.1 -> 0.2"], ["data.val_fraction=0.1"])
    assert split.endswith("; add data.val_fraction=0.1 to the command to keep the checkpoint's data split and its best "
                          "weights"), split
    with in_python_words():  # build_state's warning, as run(cfg)'s run_steps makes it
        shards = held_out_changes(saved, {}, {"data": {"shards": None}}, 1)
        apart = held_out_changes({"data": {"shards": 3}}, {}, {"data": {"shards": None}}, 2)
        split = held_out_warning(["data.val_fraction=0.1 -> 0.2"], ["data.val_fraction=0.1"])
    assert shards == ["data shards 2 -> 1 (data.shards=null in 1 process(es); set cfg.data.shards=2 for the "
                      "checkpoint's pairs)"], shards
    assert apart[0].endswith("its pairs need a process count that divides 3, with cfg.data.shards=3)"), apart
    assert split.endswith("; set cfg.data.val_fraction=0.1 to keep the checkpoint's data split and its best "
                          "weights"), split


def test_a_run_that_stopped_early_is_trained_further_by_cfgs_settings(tmp_path):
    # fresh_folder's refusal of a completed run, made inside run(cfg)'s claim (in_python_words)
    from gensbi_sharding.harness.further_hint import train_further_hint

    run = tmp_path / "run"
    launch = train_further_hint(run, 8, 16, None, stopped_early=True)
    assert launch.endswith(f"into a new folder: the same command with train.steps=16 train.patience=0 "
                           f"train.resume={run} hydra.run.dir={run}-steps16"), launch
    with pytest.raises(FileExistsError) as refused, in_python_words():
        raise FileExistsError(f"never overwritten; choose another {said_as('hydra.run.dir', 'cfg.output_dir')}"
                              f"{train_further_hint(run, 8, 16, None, stopped_early=True)}")
    assert str(refused.value) == (
        f"never overwritten; choose another cfg.output_dir; to train it further from its final checkpoint (step 8) "
        f"into a new folder: the same call with cfg.train.steps=16 and cfg.train.patience=0 and "
        f"cfg.train.resume={str(run)!r} and cfg.output_dir={f'{run}-steps16'!r}; set cfg.output_dir in "
        f"omegaconf.open_dict(cfg)")


def test_the_runs_below_a_folder_are_named_as_the_setting_that_takes_one(tmp_path):
    from gensbi_sharding.harness.runs_below import runs_note

    class Refused(Exception):
        runs = [tmp_path / "runs" / "b c"]  # find_checkpoint's scan, as data

    assert runs_note(tmp_path, "train.resume", Refused()) == (
        f"; it holds 1 run folder(s) with a checkpoint, the newest: 'train.resume={tmp_path}/runs/b c'")
    with in_python_words():  # resume_step_dir's refusal, as run(cfg) makes it
        said = runs_note(tmp_path, "train.resume", Refused())
    assert said == f"; it holds 1 run folder(s) with a checkpoint, the newest: cfg.train.resume='{tmp_path}/runs/b c'"

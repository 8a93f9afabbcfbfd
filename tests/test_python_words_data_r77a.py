"""A refusal keeps its fix as data and says it in the caller's words (WORDS77).

Was: ``python_words`` read launch.py's finished text back with regexes ("add model.width=32" -> "set
cfg.model.width=32"): a fix said with another verb, a quoted command or a second pass broke it, and what it did not
know stayed launch.py's (the resume warnings' "add train.steps=40", the empty ``train.resume``'s "leave it out",
``validate``'s "e.g. seed=0"). Now the check that makes a refusal says its fix through one renderer
(``python_words.setting``, ``fix_said``, ``said_as``; ``refusal.said``), chosen by the caller (``in_python_words``:
a Python caller where no Hydra app runs); launch.py's words are as they were.
"""

import logging

import pytest

from gensbi_sharding.harness.config import ConfigError
from gensbi_sharding.harness.python_words import fix_said, in_python_words, python_caller, setting
from gensbi_sharding.harness.refusal import Refusal
from gensbi_sharding.harness.schedule import schedule_change_note, schedule_refusal

TRAIN = {"steps": 40, "learning_rate": 1e-3, "schedule": "cosine", "warmup_steps": 0}


def test_the_caller_chooses_the_words():
    assert not python_caller()
    with in_python_words():
        assert python_caller()
        assert setting("train.steps", 8) == "cfg.train.steps=8"
        assert setting("hydra.run.dir", "runs/my run") == "cfg.output_dir='runs/my run'"
        assert setting("train.resume", "<copy>") == "cfg.train.resume='<copy>'"
    assert setting("train.steps", 8) == "train.steps=8"  # launch.py's, byte for byte as before
    assert setting("train.resume", "runs/my run") == "'train.resume=runs/my run'"
    assert setting("train.resume", "<copy>") == "train.resume=<copy>"


def test_an_unfinished_runs_resume_warning_names_the_setting_to_finish_it():
    saved, now = {"train": TRAIN}, {"train": {**TRAIN, "steps": 20}}
    launch = schedule_change_note(saved, now, 20)
    with in_python_words():  # check_resume_in_run, run(cfg)'s: was "add train.steps=40" from Python too
        python = schedule_change_note(saved, now, 20)
    assert launch[0].endswith("this run, train.steps=20, trains nothing and scores its weights as they are; add "
                              "train.steps=40 to finish it"), launch
    assert python[0].endswith("this run, cfg.train.steps=20, trains nothing and scores its weights as they are; set "
                              "cfg.train.steps=40 to finish it"), python


def test_a_changed_schedules_warning_names_the_settings_that_continue_it():
    saved, now = {"train": TRAIN, "data": {"batch_size": 64}}, {"train": {**TRAIN, "learning_rate": 1e-2},
                                                               "data": {"batch_size": 32}}
    with in_python_words():
        python, unfinished = schedule_change_note(saved, now, 10)
    assert unfinished
    assert python.endswith("; set cfg.train.learning_rate=0.001 and cfg.data.batch_size=64 to continue the run as "
                           "it would have gone"), python
    assert schedule_change_note(saved, now, 10)[0].endswith(
        "; add train.learning_rate=0.001 data.batch_size=64 to continue the run as it would have gone")


def test_a_schedule_the_saved_optimizer_cannot_follow_names_settings():
    saved = {"train": {**TRAIN, "schedule": "constant"}}
    with in_python_words():
        python = schedule_refusal(saved, {"train": TRAIN}, {})
    assert python.endswith(": set cfg.train.schedule='constant' and cfg.train.warmup_steps=0 (train.learning_rate may "
                           "change), or start a new run with cfg.train.resume=None"), python
    assert schedule_refusal(saved, {"train": TRAIN}, {}).endswith(
        ": add train.schedule=constant train.warmup_steps=0 (train.learning_rate may change), or start a new run "
        "without train.resume")


def test_an_empty_train_resume_is_left_out_by_the_setting_that_leaves_it_out():
    from faults_helpers import compose_tiny
    from gensbi_sharding.harness.config_checks import validate

    with pytest.raises(ConfigError) as refused:
        validate(compose_tiny("train.resume=''"))  # no Hydra app: run(cfg) from Python
    assert str(refused.value).endswith("a run or checkpoint folder, or set cfg.train.resume=None to start fresh")


def test_a_dry_run_resume_refusal_in_python_words():
    from omegaconf import OmegaConf

    from gensbi_sharding.harness.config_checks import dry_run_resume_problem

    cfg = OmegaConf.create({"dry_run": True, "train": {"resume": "runs/a b"}})
    assert dry_run_resume_problem(cfg) == (
        "dry_run=true with 'train.resume=runs/a b': a dry run trains nothing, continues no run and never writes into "
        "a run's folder; drop train.resume (a dry run in another hydra.run.dir), or drop dry_run=true to continue the "
        "run")
    with in_python_words():
        assert dry_run_resume_problem(cfg) == (
            "cfg.dry_run=True with cfg.train.resume='runs/a b': a dry run trains nothing, continues no run and never "
            "writes into a run's folder; set cfg.train.resume=None (a dry run in another cfg.output_dir), or set "
            "cfg.dry_run=False to continue the run")


def test_validates_refusals_name_cfgs_settings_to_a_python_caller():
    # run(cfg) reaches validate_every; inside in_python_words (the caller's choice) its fixes are cfg's settings
    from faults_helpers import compose_tiny
    from gensbi_sharding.harness.checked_fix import validate_every

    with pytest.raises(ConfigError) as one:
        validate_every(compose_tiny("seed=-1"))
    assert str(one.value) == "seed=-1 must be >= 0; e.g. seed=0"  # outside: launch.py's words, as before
    with in_python_words(), pytest.raises(ConfigError) as one:
        validate_every(compose_tiny("seed=-1"))
    assert str(one.value) == "seed=-1 must be >= 0; e.g. cfg.seed=0"
    with in_python_words(), pytest.raises(ConfigError) as two:
        validate_every(compose_tiny("seed=-1", "eval.c2st_folds=1"))
    said = str(two.value)
    assert said.endswith("all fixed together: cfg.seed=0 and cfg.eval.c2st_folds=2"), said


def test_a_reworded_fix_still_renders_in_python():
    # The point of keeping the fix as data: a message that says its fix in other words than "add ..." (here "; set "
    # and "(or ...)") or quotes a value with a space is said right to a Python caller. python_words, reading text,
    # knew only "add"/"(or": it left "; set model.width=32" as launch.py's.
    launch = Refusal("the checkpoint was saved with model.width=32", ("model.width=32", "model.name='my mlp'"))
    assert launch == "the checkpoint was saved with model.width=32; set model.width=32 model.name='my mlp'"
    with in_python_words():
        python = Refusal("the checkpoint was saved with model.width=32", ("model.width=32", "model.name='my mlp'"))
        assert python == ("the checkpoint was saved with model.width=32; set cfg.model.width=32 and "
                          "cfg.model.name='my mlp'")
        assert python.fix == ("model.width=32", "model.name='my mlp'")  # the data checks try: unchanged


def test_a_presets_fix_is_the_overrides_to_compose_with():
    words = ["'hydra.searchpath=[file:///my conf]'", "model=my_flux1", "model.num_heads=3"]
    assert fix_said(words) == "add 'hydra.searchpath=[file:///my conf]' model=my_flux1 model.num_heads=3"
    with in_python_words():
        assert fix_said(words) == ("add 'hydra.searchpath=[file:///my conf]', 'model=my_flux1', 'model.num_heads=3' "
                                   "to the overrides cfg is composed with")


@pytest.mark.slow  # a checkpoint (Orbax: ~2 s)
def test_run_cfgs_resume_warning_is_said_in_python_words(tmp_path, caplog):
    from omegaconf import OmegaConf

    from faults_helpers import compose_tiny, saved_checkpoint
    from gensbi_sharding.harness.resume import check_resume_in_run

    saved = OmegaConf.to_container(compose_tiny("train.steps=40"), resolve=True)
    step_dir = saved_checkpoint(tmp_path / "run", saved, {}, step=20)
    with caplog.at_level(logging.WARNING, logger="gensbi_sharding"):
        check_resume_in_run(step_dir, compose_tiny(f"train.resume={tmp_path / 'run'}", "train.steps=20"))
    said = [r.getMessage() for r in caplog.records if "unfinished run" in r.getMessage()]
    assert said and said[0].endswith("set cfg.train.steps=40 to finish it"), said

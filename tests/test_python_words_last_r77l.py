"""The folder's refusals (``folder_lock``, ``fresh_folder``, ``resume_command``, ``further_hint.rerun_hint``) say
their settings from data (``python_words.setting``, ``override_said``, ``said_as``) in the caller's words, not
for ``python_words``' text fallback to reword on the way out (WORDS77C).

Was: a stopped run whose record kept ``train.resume=runs/my run`` (Hydra's record holds the value as typed, a space
unquoted) was told from ``run(cfg)`` "rerun with cfg.train.resume='runs/my' run to continue it in this folder" (the
fallback's regex ended the value at the space), one kept as ``train.resume=runs/a(1)`` "cfg.train.resume='runs/a(1')"
(its ``)`` read as the sentence's). Now the recorded override is read as Hydra reads it.
"""

import json

import pytest
from omegaconf import OmegaConf

from gensbi_sharding.harness.folder_lock import folder_problem
from gensbi_sharding.harness.fresh_folder import ensure_fresh
from gensbi_sharding.harness.further_hint import rerun_hint
from gensbi_sharding.harness.python_words import in_python_words, override_said
from gensbi_sharding.harness.resume_command import auto_problem, resumed_metrics

NOTE = "; set cfg.output_dir in omegaconf.open_dict(cfg)"


def _recorded(run, typed):
    (run / ".hydra").mkdir(parents=True, exist_ok=True)
    OmegaConf.save(OmegaConf.create(["experiment=quick", typed]), run / ".hydra" / "overrides.yaml")
    return run


@pytest.mark.parametrize("typed, value", [("train.resume=runs/my run", "runs/my run"),
                                          ("train.resume='runs/my run'", "runs/my run"),
                                          ("train.resume=runs/a(1)", "runs/a(1)")])
def test_a_stopped_runs_rerun_hint_names_its_recorded_resume_as_hydra_reads_it(tmp_path, typed, value):
    run = _recorded(tmp_path / "run", typed)
    assert rerun_hint(run, "continue it", "", None, False) == f"rerun with {typed} to continue it in this folder"
    with pytest.raises(FileExistsError) as refused, in_python_words():
        raise FileExistsError(rerun_hint(run, "continue it", "", None, False))
    assert str(refused.value) == f"rerun with cfg.train.resume={value!r} to continue it in this folder"


def test_override_said_reads_a_recorded_override_as_hydra_does():
    assert override_said("train.resume=runs/my run") == "train.resume=runs/my run"
    assert override_said("train.resume=runs/my run", "'train.resume=runs/my run'") == "'train.resume=runs/my run'"
    with in_python_words(reword=False):
        assert override_said("train.resume=runs/my run") == "cfg.train.resume='runs/my run'"
        assert override_said(r"train.resume=runs/a\,b") == "cfg.train.resume='runs/a,b'"  # Hydra's escape undone
        assert override_said("train.resume=auto") == "cfg.train.resume='auto'"


def test_the_folder_refusals_say_cfgs_settings_from_data(tmp_path):
    # reword=False: no text fallback on the way out; each message is said as it is made
    (tmp_path / "file").write_text("")
    (tmp_path / "sweep").mkdir()
    (tmp_path / "sweep" / "multirun.yaml").write_text("{}")
    launch = folder_problem(tmp_path / "file" / "sub", sweep=False)
    assert launch == f"hydra.run.dir={tmp_path}/file/sub: {tmp_path}/file is a file, not a folder; choose another " \
                     "hydra.run.dir"
    with in_python_words(reword=False):
        assert folder_problem(tmp_path / "file" / "sub", sweep=False) == (
            f"cfg.output_dir={str(tmp_path / 'file' / 'sub')!r}: {tmp_path}/file is a file, not a folder; "
            "choose another cfg.output_dir")
        assert folder_problem(tmp_path / "sweep", sweep=False) == (
            f"cfg.output_dir={str(tmp_path / 'sweep')!r} is a sweep's folder ({tmp_path}/sweep/multirun.yaml): a "
            "run never writes into a sweep's folder; choose another cfg.output_dir")
    assert folder_problem(tmp_path / "sweep", sweep=False).endswith(
        "choose another hydra.run.dir (a sweep's job: hydra.run.dir=<sweep>/<job>)")


def test_fresh_folders_refusals_say_cfgs_settings_from_data(tmp_path):
    killed = tmp_path / "killed"
    (killed / "checkpoints" / "5").mkdir(parents=True)
    with pytest.raises(FileExistsError) as launch:
        ensure_fresh(killed)
    assert str(launch.value).endswith(f"or in a new folder with train.resume={killed} hydra.run.dir=<new folder>")
    with pytest.raises(FileExistsError) as python, in_python_words(reword=False):
        ensure_fresh(killed)
    assert str(python.value).endswith(
        f"continue it here by the same call with cfg.train.resume='auto', or in a new folder with "
        f"cfg.train.resume={str(killed)!r} and cfg.output_dir='<new folder>'"), python.value
    with pytest.raises(FileExistsError) as dry, in_python_words(reword=False):
        ensure_fresh(killed, dry_run=True)
    assert str(dry.value).endswith("a dry run writes only into a fresh folder: choose another cfg.output_dir for the "
                                   "dry run"), dry.value
    done = tmp_path / "done"
    done.mkdir()
    (done / "metrics.json").write_text(json.dumps({"status": "ok"}))
    with pytest.raises(FileExistsError) as ok, in_python_words(reword=False):
        ensure_fresh(done, dry_run=True)
    assert str(ok.value).endswith("which are never overwritten; choose another cfg.output_dir for the dry run (a dry "
                                  "run writes only into a fresh folder)"), ok.value


def test_resume_commands_refusals_say_cfgs_settings_from_data(tmp_path):
    run = _recorded(tmp_path / "run", "train.resume='runs/my run'")
    auto = OmegaConf.create({"train": {"resume": "auto"}})
    assert auto_problem(run, auto) == (
        f"hydra.run.dir={run} holds a run continuing 'runs/my run' that saved no checkpoint of its own: "
        "train.resume=auto would train it from step 0 instead; rerun with 'train.resume='\"'\"'runs/my run'\"'\"'' "
        "(its own command), or choose another hydra.run.dir")
    with in_python_words(reword=False):
        assert auto_problem(run, auto) == (
            f"cfg.output_dir={str(run)!r} holds a run continuing 'runs/my run' that saved no checkpoint of its own: "
            "cfg.train.resume='auto' would train it from step 0 instead; rerun with cfg.train.resume='runs/my run' "
            "(its own command), or choose another cfg.output_dir")
    gone = tmp_path / "gone"
    gone.mkdir()
    (gone / "metrics.json").write_text("{not json")
    with pytest.raises(FileNotFoundError) as refused, in_python_words(reword=False):
        resumed_metrics(gone / "metrics.json", str(gone))
    said = str(refused.value)
    assert said.startswith(f"cfg.train.resume={str(gone)!r}: ") and said.endswith(
        "nothing there to resume; start a new run with cfg.train.resume=None"), said


def test_the_open_dict_note_follows_a_folder_named_as_cfg_output_dir(tmp_path):
    killed = tmp_path / "killed"
    (killed / "checkpoints" / "5").mkdir(parents=True)
    with pytest.raises(FileExistsError) as refused, in_python_words(), in_python_words():  # said once, not twice
        ensure_fresh(killed)
    assert str(refused.value).endswith(f"and cfg.output_dir='<new folder>'{NOTE}"), refused.value
    assert str(refused.value).count(NOTE) == 1


def test_a_busy_folders_refusal_says_cfgs_folder_and_the_note_from_data(tmp_path):
    from filelock import FileLock

    from gensbi_sharding.harness.folder_lock import FolderInUseError, FolderLock

    held = FileLock(tmp_path / FolderLock.LOCK, timeout=0, is_singleton=False)  # another open file: flock refuses
    held.acquire()
    try:
        with pytest.raises(FolderInUseError) as launch:
            FolderLock(tmp_path).acquire()
        assert str(launch.value).endswith("or choose another hydra.run.dir (or hydra.sweep.dir)"), launch.value
        with pytest.raises(FolderInUseError) as python, in_python_words(), in_python_words():
            FolderLock(tmp_path).acquire()
        assert str(python.value).endswith(f"wait for it to end, or choose another cfg.output_dir{NOTE}"), python.value
        assert str(python.value).count(NOTE) == 1
    finally:
        held.release()
def test_the_config_folder_and_damaged_record_refusals_say_cfgs_settings_from_data(tmp_path):
    # checkout_folders' and outputs.read_metrics' refusals, the last the text fallback reworded
    from gensbi_sharding.harness.paste_command import CHECKOUT

    in_conf = CHECKOUT / "conf" / "my_run"
    assert folder_problem(in_conf, sweep=False).endswith("choose a folder outside it, e.g. hydra.run.dir=outputs/my_run")
    assert folder_problem(CHECKOUT, sweep=False).endswith(
        f"choose a new folder, e.g. hydra.run.dir={CHECKOUT / 'outputs' / 'new_run'}")
    damaged = tmp_path / "damaged"
    damaged.mkdir()
    (damaged / "metrics.json").write_text("{not json")
    with pytest.raises(FileExistsError) as launch:
        ensure_fresh(damaged)
    assert "choose another hydra.run.dir (or hydra.sweep.dir), or move" in str(launch.value)
    with in_python_words(reword=False):
        assert folder_problem(in_conf, sweep=False).endswith("e.g. cfg.output_dir='outputs/my_run'")
        assert folder_problem(CHECKOUT, sweep=False).endswith(
            f"e.g. cfg.output_dir={str(CHECKOUT / 'outputs' / 'new_run')!r}")
        with pytest.raises(FileExistsError) as python:
            ensure_fresh(damaged)
    assert f"choose another cfg.output_dir, or move {damaged / 'metrics.json'} aside" in str(python.value), python.value

"""A yes/no word in a config file the command reads (``plot: yes``) is refused as the command line refuses it."""

from pathlib import Path

from gensbi_sharding.harness.command_checks import command_problem


def own_file(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_a_yes_in_ones_own_eval_file_is_refused_naming_file_key_and_fix(tmp_path):
    # Was: launch.py eval=my_eval with conf's eval/my_eval.yaml saying 'plot: yes' ran with plots on (YAML 1.1 reads
    # yes as true), where eval.plot=yes on the command line is refused.
    path = own_file(tmp_path, "eval/my_eval.yaml", "defaults:\n  - default\n  - _self_\nplot: yes\n")
    unread = own_file(tmp_path, "eval/other.yaml", "defaults:\n  - default\n  - _self_\nplot: on\n")
    command = [f"hydra.searchpath=[file://{tmp_path}]", "experiment=quick", "eval=my_eval"]
    assert command_problem(command) == (
        f"{path}, line 4: plot: yes (eval.plot) is a yes/no word, read as true, which the command line refuses "
        "(eval.plot=yes); write plot: true there")
    path.write_text(path.read_text().replace("plot: yes", "plot: true"))  # the fix, as written; other.yaml: not read
    assert command_problem(command) is None and unread.exists()


def test_a_presets_off_and_a_bare_no_in_a_text_setting_are_refused(tmp_path):
    preset = own_file(tmp_path, "experiment/mine.yaml",
                      "# @package _global_\ndefaults:\n  - quick\neval:\n  plot: off\n")
    command = [f"hydra.searchpath=[file://{tmp_path}]", "experiment=mine"]
    assert command_problem(command).endswith("line 5: plot: off (eval.plot) is a yes/no word, read as false, which "
                                             "the command line refuses (eval.plot=off); write plot: false there")
    preset.write_text(preset.read_text().replace("plot: off", "plot: false") + "train:\n  resume: no\n")
    assert command_problem(command) == (
        f"{preset}, line 7: resume: no (train.resume) is a yes/no word, which YAML reads as false, not the text 'no' "
        "the command line gives (train.resume=no); write resume: 'no' there for the text")
    preset.write_text(preset.read_text().replace("resume: no", "resume: 'no'"))  # the fix, as written
    assert "resume" not in (command_problem(command) or "")


def test_a_sweeps_every_job_has_its_files_checked(tmp_path):
    # Only the first job's files were read: -m eval=fine,mine ran mine's 'plot: yes' as true.
    own_file(tmp_path, "eval/fine.yaml", "defaults:\n  - default\n  - _self_\nplot: false\n")
    mine = own_file(tmp_path, "eval/mine.yaml", "defaults:\n  - default\n  - _self_\nnum_samples: 64\nplot: Yes\n")
    problem = command_problem(["-m", f"hydra.searchpath=[file://{tmp_path}]", "experiment=quick", "eval=fine,mine"])
    assert problem == (f"{mine}, line 5: plot: Yes (eval.plot) is a yes/no word, read as true, which the command "
                       "line refuses (eval.plot=Yes); write plot: true there")

"""A yes/no word in a config file the command reads (``plot: yes``) is refused as the command line refuses it."""

from pathlib import Path

import pytest
from gensbi_sharding.harness.command_checks import command_problem


def own_file(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.mark.slow  # ~0.7 s on 2 cores
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


@pytest.mark.slow
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


@pytest.mark.slow  # ~0.8 s on 2 cores
def test_a_models_own_yes_no_setting_is_typed_by_that_models_schema(tmp_path):
    # Was: model settings typed by the base ModelConfig, which has no qkv_bias: flux1's 'qkv_bias: no' was told
    # "not the text 'no' ...; write qkv_bias: false there for a yes/no, or qkv_bias: 'no' for the text" (a bool), and
    # a quoted 'yes' (OmegaConf: true; model.qkv_bias=yes refused) passed.
    mine = own_file(tmp_path, "model/myflux.yaml", "defaults:\n  - flux1\n  - _self_\nqkv_bias: 'yes'\n")
    command = [f"hydra.searchpath=[file://{tmp_path}]", "experiment=quick", "model=myflux"]
    assert command_problem(command) == (
        f"{mine}, line 4: qkv_bias: yes (model.qkv_bias) is a yes/no word, read as true, which the command line "
        "refuses (model.qkv_bias=yes); write qkv_bias: true there")
    mine.write_text(mine.read_text().replace("qkv_bias: 'yes'", "qkv_bias: no"))
    assert command_problem(command) == (
        f"{mine}, line 4: qkv_bias: no (model.qkv_bias) is a yes/no word, read as false, which the command line "
        "refuses (model.qkv_bias=no); write qkv_bias: false there")
    mine.write_text(mine.read_text().replace("qkv_bias: no", "qkv_bias: false"))  # the fix, as written
    assert command_problem(command) is None


@pytest.mark.slow  # ~0.7 s on 2 cores
def test_hydras_own_yes_no_setting_in_a_preset_is_not_refused_its_text_one_is(tmp_path):
    # Was: 'hydra: {job: {chdir: no}}' in one's preset was refused as text ("write chdir: false there for a yes/no,
    # or chdir: 'no' for the text"), though hydra.job.chdir is Hydra's yes/no and reads no as false, as the command
    # line's hydra.job.chdir=no does.
    preset = own_file(tmp_path, "experiment/mine.yaml",
                      "# @package _global_\ndefaults:\n  - quick\nhydra:\n  job:\n    chdir: no\n")
    command = [f"hydra.searchpath=[file://{tmp_path}]", "experiment=mine"]
    assert command_problem(command) is None and command_problem(["experiment=quick", "hydra.job.chdir=no"]) is None
    preset.write_text(preset.read_text() + "    name: off\n")  # a text setting of Hydra's: YAML's false, 'False'
    assert command_problem(command) == (
        f"{preset}, line 7: name: off (hydra.job.name) is a yes/no word, which YAML reads as false, not the text "
        "'off' the command line gives (hydra.job.name=off); write name: 'off' there for the text")


def test_a_bare_yes_in_hydras_env_set_is_refused_as_the_text_it_is_there(tmp_path):
    # Was (97b8ec9): every Hydra setting that no dataclass types was left alone, hydra.job.env_set's too, a mapping of
    # texts: 'MY_FLAG: yes' set the job's MY_FLAG to 'True' (Hydra's conversion of YAML's true), where
    # hydra.job.env_set.MY_FLAG=yes on the command line gives 'yes'.
    from hydra.conf import JobConf
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from omegaconf import OmegaConf

    preset = own_file(tmp_path, "experiment/mine.yaml",
                      "# @package _global_\ndefaults:\n  - quick\nhydra:\n  job:\n    env_set:\n      MY_FLAG: yes\n")
    command = [f"hydra.searchpath=[file://{tmp_path}]", "experiment=mine"]
    assert command_problem(command) == (
        f"{preset}, line 7: MY_FLAG: yes (hydra.job.env_set.MY_FLAG) is a yes/no word, which YAML reads as true, not "
        "the text 'yes' the command line gives (hydra.job.env_set.MY_FLAG=yes); write MY_FLAG: 'yes' there for the "
        "text")
    assert OverridesParser.create().parse_overrides(["hydra.job.env_set.MY_FLAG=yes"])[0].value() == "yes"
    preset.write_text(preset.read_text().replace("MY_FLAG: yes", "MY_FLAG: 'yes'"))  # the fix, as written
    assert command_problem(command) is None
    job = OmegaConf.merge(OmegaConf.structured(JobConf), OmegaConf.create(preset.read_text())["hydra"]["job"])
    assert job.env_set.MY_FLAG == "yes"  # the quoted word reaches the job's environment as written

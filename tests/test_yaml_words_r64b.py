"""A bare true/false in a text setting of a config file (``hydra.job.env_set``'s ``MY_FLAG: true``) is refused."""

from pathlib import Path

import pytest

from gensbi_sharding.harness.command_checks import command_problem
from gensbi_sharding.harness.groups import CONF

def own_file(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path

def test_a_bare_true_in_env_set_is_refused_and_the_quoted_fix_sets_the_text_true(tmp_path):
    # Was: 'MY_FLAG: true' under hydra.job.env_set in one's preset ran with MY_FLAG=True (Python's spelling), unrefused.
    from hydra import compose, initialize_config_dir

    preset = own_file(tmp_path, "experiment/mine.yaml", "# @package _global_\ndefaults:\n  - quick\nhydra:\n  job:\n"
                                                        "    env_set:\n      MY_FLAG: true\n")
    command = [f"hydra.searchpath=[file://{tmp_path}]", "experiment=mine"]
    assert command_problem(command) == (
        f"{preset}, line 7: MY_FLAG: true (hydra.job.env_set.MY_FLAG) is YAML's true, which this text setting takes "
        "as 'True' (Python's spelling), not the text 'true'; write MY_FLAG: 'true' there for the text")
    preset.write_text(preset.read_text().replace("MY_FLAG: true", "MY_FLAG: 'true'"))  # the fix, as written
    assert command_problem(command) is None
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose("config", overrides=command, return_hydra_config=True)
    assert cfg.hydra.job.env_set.MY_FLAG == "true"

def test_a_bare_false_in_a_text_setting_is_refused_a_yes_no_settings_is_not(tmp_path):
    preset = own_file(tmp_path, "experiment/mine.yaml",
                      "# @package _global_\ndefaults:\n  - quick\neval:\n  plot: false\ntrain:\n  resume: false\n")
    command = [f"hydra.searchpath=[file://{tmp_path}]", "experiment=mine"]
    assert command_problem(command) == (
        f"{preset}, line 7: resume: false (train.resume) is YAML's false, which this text setting takes as 'False' "
        "(Python's spelling), not the text 'false'; write resume: 'false' there for the text")
    preset.write_text(preset.read_text().replace("  resume: false\n", ""))
    assert command_problem(command) is None  # plot: false, a yes/no's own word


@pytest.mark.slow  # a sweep: its 9 jobs composed (over MAX_JOBS is the fault), twice
def test_a_sweep_of_more_jobs_than_command_defaults_composes_has_its_files_checked(tmp_path):
    # Was: -m eval=fine,other,mine model=mlp,transformer,flux1 (9 jobs, over command_defaults.MAX_JOBS = 8) checked
    # no file, so mine's 'plot: yes' ran as true.
    for name in ("fine", "other"):
        own_file(tmp_path, f"eval/{name}.yaml", "defaults:\n  - default\n  - _self_\nplot: false\n")
    mine = own_file(tmp_path, "eval/mine.yaml", "defaults:\n  - default\n  - _self_\nplot: yes\n")
    command = ["-m", f"hydra.searchpath=[file://{tmp_path}]", "experiment=quick", "eval=fine,other,mine",
               "model=mlp,transformer,flux1"]
    assert command_problem(command) == (f"{mine}, line 4: plot: yes (eval.plot) is a yes/no word, read as true, "
                                        "which the command line refuses (eval.plot=yes); write plot: true there")
    mine.write_text(mine.read_text().replace("plot: yes", "plot: true"))  # the fix, as written
    assert command_problem(command) is None

"""A null in a config file for a setting of Hydra's that cannot be null is refused in one line (round 64).

Was: ``hydra.job.env_set: {MY_FLAG: null}`` in one's preset got Hydra's multi-line "field
'hydra.job.env_set.MY_FLAG' is not Optional ... In 'experiment/mine'", naming no fix.
"""

from pathlib import Path

from gensbi_sharding.harness.command_checks import command_problem
from gensbi_sharding.harness.groups import CONF


def own_file(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def composed_env(command):
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose("config", overrides=command, return_hydra_config=True).hydra.job.env_set


def test_a_null_env_set_entry_is_refused_naming_file_line_and_a_fix_that_composes(tmp_path):
    preset = own_file(tmp_path, "experiment/mine.yaml",
                      "# @package _global_\ndefaults:\n  - quick\nhydra:\n  job:\n    env_set: {MY_FLAG: null}\n")
    command = [f"hydra.searchpath=[file://{tmp_path}]", "experiment=mine"]
    assert command_problem(command) == (
        f"{preset}, line 6: MY_FLAG: null (hydra.job.env_set.MY_FLAG) is YAML's null, which Hydra's "
        "hydra.job.env_set.MY_FLAG cannot take; write MY_FLAG: '' there for an empty value, or delete that line to "
        "leave it unset")
    preset.write_text(preset.read_text().replace("MY_FLAG: null", "MY_FLAG: ''"))  # the fix, as written
    assert command_problem(command) is None and composed_env(command).MY_FLAG == ""


def test_an_empty_value_or_tilde_is_a_null_too_and_another_hydra_setting_is_told_to_delete_the_line(tmp_path):
    preset = own_file(tmp_path, "experiment/mine.yaml",
                      "# @package _global_\nhydra:\n  job:\n    env_set:\n      MY_FLAG:\n")
    command = [f"hydra.searchpath=[file://{tmp_path}]", "experiment=mine"]
    assert command_problem(command).startswith(f"{preset}, line 5: MY_FLAG: (hydra.job.env_set.MY_FLAG) is YAML's "
                                               "null")
    preset.write_text("# @package _global_\nhydra:\n  run:\n    dir: ~\n")
    assert command_problem(command) == (
        f"{preset}, line 4: dir: ~ (hydra.run.dir) is YAML's null, which Hydra's hydra.run.dir cannot take; delete "
        "that line so hydra.run.dir keeps its default")


def test_an_optional_hydra_setting_and_a_file_the_command_does_not_read_are_left_alone(tmp_path):
    own_file(tmp_path, "experiment/mine.yaml", "# @package _global_\nhydra:\n  job:\n    chdir: null\n")
    own_file(tmp_path, "experiment/unread.yaml", "# @package _global_\nhydra:\n  job:\n    env_set: {A: null}\n")
    assert command_problem([f"hydra.searchpath=[file://{tmp_path}]", "experiment=mine"]) is None

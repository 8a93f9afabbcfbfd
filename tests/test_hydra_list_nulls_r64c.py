"""A null item in a list of Hydra's (``hydra.job.env_copy: [~]``) in a config file is refused in one line."""

from __future__ import annotations

from gensbi_sharding.harness.command_checks import command_problem


def test_a_null_item_of_hydra_job_env_copy_is_refused_naming_file_line_and_fix(tmp_path):
    # Was: command_problem None, then Hydra's multi-line "In 'experiment/mine': ValidationError raised while composing
    # config: Invalid type assigned: NoneType is not a subclass of str ... full_key: hydra.job.env_copy[0]"
    preset = tmp_path / "my" / "experiment" / "mine.yaml"
    preset.parent.mkdir(parents=True)
    preset.write_text("# @package _global_\nhydra:\n  job:\n    env_copy:\n      - HOME\n      - ~\n")
    command = [f"hydra.searchpath=[file://{tmp_path / 'my'}]", "experiment=mine"]
    assert command_problem(command) == (f"{preset}, line 6: an item ~ of hydra.job.env_copy is YAML's null, which "
                                        "Hydra's hydra.job.env_copy cannot hold; delete that item")
    preset.write_text("# @package _global_\nhydra:\n  job:\n    env_copy:\n      - HOME\n")  # the fix: passes
    assert command_problem(command) is None

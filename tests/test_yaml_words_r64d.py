"""A bare ``True``/``False`` in a text setting of a config file is what the setting reads: not refused; ``true``,
``TRUE`` (what YAML gives differs from what was written) are, and the advice keeps what was written."""

from pathlib import Path

import pytest

from gensbi_sharding.harness.command_checks import command_problem
from gensbi_sharding.harness.groups import CONF


def preset(folder: Path, body: str) -> tuple[Path, list[str]]:
    path = folder / "experiment" / "mine.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("# @package _global_\ndefaults:\n  - quick\n" + body)
    return path, [f"hydra.searchpath=[file://{folder}]", "experiment=mine"]


def composed(command: list[str]):
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose("config", overrides=command, return_hydra_config=True)


@pytest.mark.parametrize("word", ["True", "False"])
def test_a_bare_python_spelled_word_in_env_set_is_not_refused(tmp_path, word):
    # Was: "MY_FLAG: True ... takes as 'True', not the text 'true'; write MY_FLAG: 'true'": the variable IS 'True'.
    _, command = preset(tmp_path, f"hydra:\n  job:\n    env_set:\n      MY_FLAG: {word}\n")
    assert command_problem(command) is None
    assert composed(command).hydra.job.env_set.MY_FLAG == word


def test_a_bare_False_in_a_text_setting_is_not_refused(tmp_path):
    _, command = preset(tmp_path, "train:\n  resume: False\n")
    assert command_problem(command) is None


@pytest.mark.slow
def test_an_upper_case_TRUE_is_refused_and_the_advice_keeps_what_was_written(tmp_path):
    path, command = preset(tmp_path, "hydra:\n  job:\n    env_set:\n      MY_FLAG: TRUE\n")
    assert command_problem(command) == (
        f"{path}, line 7: MY_FLAG: TRUE (hydra.job.env_set.MY_FLAG) is YAML's true, which this text setting takes "
        "as 'True' (Python's spelling), not the text 'TRUE'; write MY_FLAG: 'TRUE' there for the text")
    path.write_text(path.read_text().replace("MY_FLAG: TRUE", "MY_FLAG: 'TRUE'"))  # the advice, as written
    assert command_problem(command) is None
    assert composed(command).hydra.job.env_set.MY_FLAG == "TRUE"

"""A run's record holding only part of this harness's config (``train`` with its ``steps``) is still ours.

BREAK74's check took a ``.hydra/config.yaml`` lacking any of ``mesh``, ``rule``, ``train`` for another Hydra app's,
so a folder whose record held ``train: {steps: 3000}`` alone (test_continued_runs' launch killed before its first
checkpoint) was refused as "holds launch.log, not written by a run", its record no longer set aside. Another app's
``train: true`` flag (the Lightning-Hydra template's) still marks nothing.
"""

import pytest

from gensbi_sharding.harness.folder_lock import folder_problem
from gensbi_sharding.harness.foreign_record import another_apps_record


def _record(tmp_path, config: str):
    (tmp_path / ".hydra").mkdir()
    (tmp_path / ".hydra" / "config.yaml").write_text(config)
    return tmp_path / ".hydra"


@pytest.mark.parametrize("config", ["train:\n  steps: 3000\n", "mesh: {}\n", "rule: {}\nseed: 0\n",
                                    "mesh: {}\nrule: {}\ntrain: {steps: 20}\n"])
def test_a_record_with_one_of_ours_is_ours(tmp_path, config):
    assert another_apps_record(_record(tmp_path, config)) is False


@pytest.mark.parametrize("config", ["train: true\ntrainer:\n  max_epochs: 3\n", "train:\n  epochs: 3\n",
                                    "model:\n  lr: 0.1\n"])
def test_another_apps_record_is_still_told_apart(tmp_path, config):
    assert another_apps_record(_record(tmp_path, config)) is True


def test_a_run_killed_before_its_first_checkpoint_is_not_refused_its_own_folder(tmp_path):
    _record(tmp_path, "train:\n  steps: 3000\n")
    (tmp_path / "launch.log").write_text("[1/7] devices\n")
    assert folder_problem(tmp_path, sweep=False) is None

"""A run's default folder under a working directory that TensorStore misreads (``cwd[1]``), and a sweep subdir's fix.

Was (r73-break): ``cd "/tmp/cwd[1]" && python launch.py`` was refused as
``'hydra.run.dir="/tmp/cwd[1]/outputs/2026-12-07/07-35-43-620777"': ...; choose another hydra.run.dir, e.g.
hydra.run.dir=/tmp/cwd_1_/outputs/2026-12-07/07-35-43-620777``: a setting the user never typed, and a fix pinning one
timestamped folder. Now the working directory is named as the fault, and the fix keeps the config's own pattern,
quoted so that bash pastes ``${now:...}`` to Hydra. ``misread_folder_problem`` quotes the subdir it names
(``hydra.sweep.subdir=${hydra.job.num}`` unquoted is bash's bad substitution).
"""

from __future__ import annotations

import shlex

import pytest
from omegaconf import OmegaConf

from gensbi_sharding.harness import folder_claim
from gensbi_sharding.harness.folder_lock import folder_problem
from gensbi_sharding.harness.sweep_subdirs import misread_folder_problem

DEFAULT = "outputs/${now:%Y-%m-%d}/${now:%H-%M-%S-%f}"


@pytest.mark.parametrize("sweep", [False, True])
def test_the_working_directory_is_named_with_a_fix_that_pastes(tmp_path, monkeypatch, sweep):
    cwd = tmp_path / "cwd[1]"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    key = "hydra.sweep.dir" if sweep else "hydra.run.dir"
    said = folder_problem(cwd / "outputs" / "2026-12-07" / "07-35-43-620777", sweep=sweep, as_typed=DEFAULT)
    fix = f"'{key}={tmp_path}/cwd_1_/{DEFAULT}'"
    assert said == (f"the working directory {cwd} holds '[1]', which TensorStore (Orbax's array storage) reads as a "
                    f"pattern: arrays saved there would never be read back, and {key} ({DEFAULT}) puts the "
                    f"{'sweep' if sweep else 'run'}'s folder under it; run from a folder without it, or set {key} to "
                    f"one outside it, e.g. {fix}")
    assert shlex.split(fix) == [f"{key}={tmp_path}/cwd_1_/{DEFAULT}"]  # one word, ${now:...} left to Hydra
    assert "07-35-43-620777" not in said


def test_a_typed_absolute_folder_keeps_its_own_refusal(tmp_path, monkeypatch):
    cwd = tmp_path / "cwd[1]"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    said = folder_problem(cwd / "run", sweep=False, as_typed=str(cwd / "run"))
    assert said.startswith("'hydra.run.dir=") and said.endswith(f"e.g. hydra.run.dir={tmp_path}/cwd_1_/run")


def test_the_callback_passes_the_config_s_folder_as_typed(tmp_path, monkeypatch, capsys):
    from hydra.core.utils import setup_globals

    setup_globals()  # Hydra's ${now:...} resolver, as a launch registers it
    cwd = tmp_path / "cwd[1]"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    config = OmegaConf.create({"hydra": {"run": {"dir": "outputs/${now:%Y-%m-%d}/${now:%H-%M-%S-%f}"}},
                               "distributed": {"mode": "none", "process_id": None}})
    with pytest.raises(SystemExit):
        folder_claim.RefuseCompletedRun().on_run_start(config)
    err = capsys.readouterr().err
    assert f"[ERROR] the working directory {cwd} holds '[1]'" in err and f"'hydra.run.dir={tmp_path}/cwd_1_/outputs/" \
        "${now:%Y-%m-%d}/${now:%H-%M-%S-%f}'" in err


def test_the_sweep_subdir_named_pastes_into_bash(tmp_path):
    said = misread_folder_problem("${hydra.job.num}_${eval.observations}", [["eval.observations=[1]"]], ["0_[1]"],
                                  tmp_path)
    assert said.startswith("'hydra.sweep.subdir=${hydra.job.num}_${eval.observations}' gives job 0 ")

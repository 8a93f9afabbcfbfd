"""``hydra.run.dir`` / ``hydra.sweep.dir`` holding ``[x]`` or ``\\``, which TensorStore (Orbax's array storage) misreads.

Was: accepted; the run built its mesh, model and data, then the checkpoint writer refused its folder at
``[5/7] train`` (~30 s on 2 cores, minutes on a real model) as "[ERROR] ValueError: ..." with a traceback file, the
folder left holding a run that never trained. Now ``folder_problem`` (the Hydra callback's check, before Hydra makes
the folder) refuses it naming the override and a folder that works.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gensbi_sharding.harness.folder_lock import folder_problem
from gensbi_sharding.write_probe import check_array_path

PATTERN = ("holds '[x]', which TensorStore (Orbax's array storage) reads as a pattern: arrays saved there would never "
           "be read back")
SEPARATOR = ("holds '\\\\', which TensorStore (Orbax's array storage) reads as a folder separator: arrays would be "
             "written outside it")


@pytest.mark.parametrize("sweep", [False, True])
@pytest.mark.parametrize(("name", "fault", "fixed"), [("run[x]", PATTERN, "run_x_"), ("a\\b", SEPARATOR, "a_b")])
def test_a_folder_tensorstore_misreads_is_refused_before_it_is_made(tmp_path, sweep, name, fault, fixed):
    key = "hydra.sweep.dir" if sweep else "hydra.run.dir"
    folder = tmp_path / name
    said = folder_problem(folder, sweep=sweep, before_hydra=True)
    assert said is not None
    assert f"its checkpoint folder {folder / 'checkpoints'} {fault}; choose another {key}, e.g. {key}=" in said
    assert said.endswith(str(tmp_path / fixed))
    assert folder_problem(tmp_path / fixed, sweep=sweep) is None  # the folder it names works
    check_array_path(tmp_path / fixed / "checkpoints", "checkpoint directory", saving=True)  # and the writer takes it
    assert not folder.exists()


def test_a_pattern_in_a_parent_folder_is_refused_too(tmp_path):
    said = folder_problem(tmp_path / "runs[1]" / "a", sweep=False)
    assert said is not None and PATTERN.replace("[x]", "[1]") in said
    assert said.endswith(str(tmp_path / "runs_1_" / "a"))


@pytest.mark.parametrize("name", ["a[]b", "a]b[", "plain-run_1.2"])
def test_brackets_tensorstore_reads_as_they_are_pass(tmp_path, name):
    assert folder_problem(tmp_path / name, sweep=False) is None

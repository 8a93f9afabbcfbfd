"""A sweep's job folder (``hydra.sweep.subdir`` resolved) holding ``[x]`` or ``\\``, which TensorStore misreads.

Was: ``-m seed=0,1 hydra.sweep.subdir='${hydra.job.num}_${eval.observations}' eval.observations=[1]`` started every
job; each built its mesh, model and data, then its checkpoint writer refused ``<sweep>/0_[1]/checkpoints`` at
``[5/7] train`` (a ``[1]`` is a pattern to TensorStore). Now the sweep is refused before any job runs
(``misread_folder_problem``, from the Hydra callback's claim of the sweep folder), naming the subdir, the job and a
subdir that works.
"""

from __future__ import annotations

import pytest

from gensbi_sharding.harness.sweep_subdirs import misread_folder_problem

JOBS = [["seed=0", "eval.observations=[1]"], ["seed=1", "eval.observations=[1]"]]
SUBDIR = "${hydra.job.num}_${eval.observations}"


def test_a_job_folder_holding_a_pattern_is_refused(tmp_path):
    said = misread_folder_problem(SUBDIR, JOBS, ["0_[1]", "1_[1]"], tmp_path)
    assert said == (f"'hydra.sweep.subdir={SUBDIR}' gives job 0 (seed=0 eval.observations=[1]) the folder 0_[1]: "
                    f"job 0's checkpoint folder {tmp_path / '0_[1]' / 'checkpoints'} holds '[1]', which TensorStore "
                    "(Orbax's array storage) reads as a pattern: arrays saved there would never be read back; leave "
                    "that value out of the jobs' folder names, e.g. hydra.sweep.subdir='${hydra.job.num}'")


def test_a_later_job_and_a_backslash_are_named(tmp_path):
    said = misread_folder_problem("${x}", JOBS, ["0_a", "1_a\\b"], tmp_path)
    assert said is not None and said.startswith("'hydra.sweep.subdir=${x}' gives job 1 (seed=1 eval.observations=[1]) "
                                                "the folder 1_a\\b: job 1's checkpoint folder")
    assert "reads as a folder separator: arrays would be written outside it" in said


@pytest.mark.parametrize("folders", [None, [], ["0", "1"], ["0_fsdp_2", "1_[]"]])
def test_folders_tensorstore_reads_as_they_are_pass(tmp_path, folders):
    assert misread_folder_problem(SUBDIR, JOBS, folders, tmp_path) is None

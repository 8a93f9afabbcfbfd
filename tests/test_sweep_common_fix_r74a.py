"""A refused sweep whose jobs offer different fixes of one setting it does not vary names the value that fixes all.

Was: ``-m rule=replicated,fsdp mesh.model_axis=1,2 data.num_simulations=1000`` listed ``set data.batch_size=896`` for
the (8, 1) jobs and ``set data.batch_size=900`` for the (4, 2) jobs, and nothing else: a user typing one job's fix
(900) into the command had the (8, 1) jobs refused again (harness/sweep_common_fix.py).
"""

import pytest

from gensbi_sharding.harness.refusal import Refusal
from gensbi_sharding.harness.sweep_common_fix import common_fix, with_fix

JOBS = [["mesh.model_axis=1"], ["mesh.model_axis=2"]]


def _refusal(value: int) -> Refusal:
    return Refusal("ConfigError: data.batch_size=1024 cannot be used", f"data.batch_size={value}")


def test_with_fix_replaces_a_key_the_job_sets_and_adds_any_other():
    assert with_fix(["rule=fsdp", "data.batch_size=1024"], ["data.batch_size=896"]) == [
        "rule=fsdp", "data.batch_size=896"]
    assert with_fix(["rule=fsdp"], ["data.batch_size=896"]) == ["rule=fsdp", "data.batch_size=896"]


def test_the_first_fix_that_leaves_no_job_refused_is_named():
    tried = []

    def still_refused(jobs):  # 900 does not split over 8 devices; 896 splits over 8 and 4
        tried.append([job[-1] for job in jobs])
        return [0] if jobs[0][-1] == "data.batch_size=900" else []

    refused = [(0, JOBS[0], _refusal(900)), (1, JOBS[1], _refusal(896))]  # the failing one offered first
    line = common_fix(refused, JOBS, still_refused)
    assert line == ("one value for every job (their own fixes differ: data.batch_size=900, data.batch_size=896; a "
                    "setting the sweep does not vary takes one value): set data.batch_size=896")
    assert tried == [["data.batch_size=900"] * 2, ["data.batch_size=896"] * 2]


def test_no_fix_for_every_job_is_said_so():
    refused = [(0, JOBS[0], _refusal(896)), (1, JOBS[1], _refusal(900))]
    line = common_fix(refused, JOBS, lambda jobs: [0])
    assert line.startswith("no one of the jobs' own fixes (data.batch_size=896, data.batch_size=900) fixes every job")


@pytest.mark.parametrize("refused", [
    [(0, JOBS[0], _refusal(896)), (1, JOBS[1], _refusal(896))],  # one fix: the message's own
    [(1, JOBS[1], Refusal("ConfigError: mesh.model_axis=3", "mesh.model_axis=2")),  # a swept key: sweep_drop's line
     (0, JOBS[0], Refusal("ConfigError: mesh.model_axis=5", "mesh.model_axis=4"))],
    [(0, JOBS[0], "a refusal that offers no override")],
    # examples, either valid for every job: data.theta_transform=nonee on two_moons (none) and sir (support)
    [(0, JOBS[0], Refusal("ConfigError: nonee", "data.theta_transform=none", how="; e.g. ")),
     (1, JOBS[1], Refusal("ConfigError: nonee", "data.theta_transform=support", how="; e.g. "))],
])
def test_nothing_is_added_where_there_is_no_choice_to_make(refused):
    assert common_fix(refused, JOBS, lambda jobs: []) == ""


@pytest.mark.slow
def test_the_refused_sweep_names_one_batch_size_every_mesh_takes():
    from test_sweep_check import sweep_refusal

    said = sweep_refusal("experiment=quick", "rule=replicated,fsdp", "mesh.model_axis=1,2",
                         "data.num_simulations=1000", "data.batch_size=1024")
    assert "job 0 (rule=replicated mesh.model_axis=1)" in said and "set data.batch_size=900" in said
    assert said.splitlines()[-1] == (
        "one value for every job (their own fixes differ: data.batch_size=896, data.batch_size=900; a setting the "
        "sweep does not vary takes one value): set data.batch_size=896")
    # and that value is refused by no job
    assert sweep_refusal("experiment=quick", "rule=replicated,fsdp", "mesh.model_axis=1,2",
                         "data.num_simulations=1000", "data.batch_size=896") is None

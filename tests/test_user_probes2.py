"""User probes, second pass: faults found by using the library as its users would."""

import pytest

from test_multihost import FAIL_BOUND_S, launch


# ---------------------------------------------------------------------------- host_to_global_array, 2 processes

@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("kind, theirs", [
    ("rows", "['x'] (8, 3) float32"), ("dtype", "['x'] (4, 3) int32"),
    ("tree", "PyTreeDef({'x': *, 'y': *})"), ("trailing", "['x'] (4, 5) float32")])
def test_processes_passing_other_inputs_all_raise_naming_both(kind, theirs):
    # Was: each process built its own global shape ((8, 3) on one, (16, 3) on the other) or dtype, and a
    # jitted sum gave wrong numbers (1094713344.0 for int32 bits read as float32); another tree aborted both.
    runs = launch(f"mismatch_{kind}")
    for p, run in enumerate(runs):
        assert run["rc"] == 0, run["stderr"][-3000:]
        error = run["result"]["error"]
        assert error is not None and f"process {p} passes tree" in error, error
        assert f"process {1 - p} passes tree" in error and theirs in error, error
        assert "['x'] (4, 3) float32" in error and "same tree, dtypes and shapes" in error
        assert run["seconds"] < FAIL_BOUND_S


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_process_failing_its_own_check_makes_the_other_raise_too():
    runs = launch("mismatch_local")
    assert "process 1 passes leading size 3" in runs[1]["result"]["error"]
    assert "process 1 failed: process 1 passes leading size 3" in runs[0]["result"]["error"]
    assert all(run["rc"] == 0 and run["seconds"] < FAIL_BOUND_S for run in runs)

"""The library's checks across processes (``check_processes``): processes passing other inputs, one failing its
own check, unchecked calls running no collective, a model group spanning processes, describe's device count.

Two real processes per case (tests/multihost_worker.py), launched once for the module.
"""

import pytest

from test_multihost import FAIL_BOUND_S, LAUNCH_TIMEOUT_S, WORKER, free_port, launch


# The process-group cases of this file: two workers each (multihost_worker.py).
CASES = ("mismatch_rows", "mismatch_dtype", "mismatch_tree", "mismatch_trailing", "mismatch_local", "unchecked",
         "model_axis_first", "describe")


@pytest.fixture(scope="module")
def groups():
    """``{case: its runs}`` (per process: rc, seconds, result, stdout, stderr, as ``launch`` gives them) for
    ``CASES``: each case's two workers forked at once on a port of their own, the cases one after the other, all
    from one Python process that imported JAX and the library once (tests/fork_launch.py: ~1.5 s of CPU less per
    case than a process of its own each); ``seconds`` from the case's start. A case that hung is launched again
    by ``launch`` (a fresh port, and a second attempt: test_multihost.py's guard against a rare gloo hang)."""
    import json
    import os
    import tempfile
    from pathlib import Path

    from fork_launch import REPO, run_forked

    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
               JAX_PLATFORMS="cpu", PYTHONUNBUFFERED="1")
    ports = {case: free_port() for case in CASES}
    with tempfile.TemporaryDirectory() as work:
        procs = run_forked([{"args": [case, str(ports[case]), str(p), "2"], "cwd": os.getcwd(), "group": case}
                            for case in CASES for p in range(2)], env=env,
                           timeout=len(CASES) * (LAUNCH_TIMEOUT_S + 60), workdir=Path(work), script=WORKER,
                           imports=("jax", "gensbi_sharding"), deadline_s=LAUNCH_TIMEOUT_S, grouped=True)
    found = {}
    for i, case in enumerate(CASES):
        pair = procs[2 * i:2 * i + 2]
        if any(proc.hung for proc in pair):
            found[case] = launch(case)
            continue
        found[case] = []
        for proc in pair:
            at = proc.stdout.rfind("RESULT {")  # gloo's C++ logging may share the JSON's line
            found[case].append({"rc": proc.returncode, "seconds": proc.seconds,
                                "result": json.JSONDecoder().raw_decode(proc.stdout[at + 7:])[0] if at >= 0 else None,
                                "stdout": proc.stdout, "stderr": proc.stderr})
    return found


@pytest.mark.slow
@pytest.mark.timeout(900)  # the first test here waits for every case's group (groups)
@pytest.mark.parametrize("kind, theirs", [
    ("rows", "['x'] (8, 3) float32"), ("dtype", "['x'] (4, 3) int32"),
    ("tree", "PyTreeDef({'x': *, 'y': *})"), ("trailing", "['x'] (4, 5) float32")])
def test_processes_passing_other_inputs_all_raise_naming_both(groups, kind, theirs):
    # Was: each process built its own global shape ((8, 3) on one, (16, 3) on the other) or dtype, and a
    # jitted sum gave wrong numbers (1094713344.0 for int32 bits read as float32); another tree aborted both.
    runs = groups[f"mismatch_{kind}"]
    for p, run in enumerate(runs):
        assert run["rc"] == 0, run["stderr"][-3000:]
        error = run["result"]["error"]
        assert error is not None and f"process {p} passes tree" in error, error
        assert f"process {1 - p} passes tree" in error and theirs in error, error
        assert "['x'] (4, 3) float32" in error and "same tree, dtypes and shapes" in error
        assert run["seconds"] < FAIL_BOUND_S


@pytest.mark.slow
@pytest.mark.timeout(900)  # the first test here waits for every case's group (groups)
def test_a_process_failing_its_own_check_makes_the_other_raise_too(groups):
    runs = groups["mismatch_local"]
    assert "process 1 passes leading size 3" in runs[1]["result"]["error"]
    assert "process 1 failed: process 1 passes leading size 3" in runs[0]["result"]["error"]
    assert all(run["rc"] == 0 and run["seconds"] < FAIL_BOUND_S for run in runs)


@pytest.mark.slow
@pytest.mark.timeout(900)  # the first test here waits for every case's group (groups)
def test_unchecked_calls_run_no_collective(groups):
    # The check is a blocking collective: a training loop checks its first batch only (the harness does).
    # Unchecked, each process takes its own rows for every process's (the mismatch_rows case, checked, raises).
    runs = groups["unchecked"]
    assert [run["result"]["shape"] for run in runs] == [[8, 3], [16, 3]]
    assert all(run["rc"] == 0 and run["seconds"] < FAIL_BOUND_S for run in runs)


@pytest.mark.slow
@pytest.mark.timeout(900)  # the first test here waits for every case's group (groups)
def test_model_group_spanning_processes_by_axis_order_names_the_axis_fix(groups):
    # Was "Choose a model_axis (now 2) that divides this process's 4 devices": 2 does divide 4.
    for run in groups["model_axis_first"]:
        error = run["result"]["error"]
        assert "model group of devices [0, 2048] spans processes [0, 1]" in error
        assert ("The size 2 divides this process's 4 devices: make \"model\" the last mesh axis "
                "('model', 'data', 'replica')") in error


@pytest.mark.slow
@pytest.mark.timeout(900)  # the first test here waits for every case's group (groups)
def test_describe_counts_every_process_devices(groups):
    runs = groups["describe"]
    for p, run in enumerate(runs):
        result = run["result"]
        # kernel (4, 8) f32 split 4 ways (32 B) + bias 32 B whole: 64 B on each of the 8 devices.
        # Was 0 on the other process's 4 devices, and "min 0 B".
        assert result["per_device"] == {str(d): 64 for d in (0, 1, 2, 3, 2048, 2049, 2050, 2051)}
        assert result["totals"].endswith("per device max 64 B, min 64 B")
        assert result["local"] == {str(d + 2048 * p): 64 for d in range(4)}  # bytes_per_device: this process's

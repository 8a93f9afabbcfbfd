"""The console's numbered step lines as a run prints them."""

import logging

import pytest
from faults_helpers import run_tiny


@pytest.mark.slow
def test_a_run_without_evaluation_says_its_step_6_was_skipped(tmp_path, caplog):
    # Was: "[5/7] train: ..." then "[7/7] outputs: ...", step 6 never named. One run of 2 steps (over 2 s: the run is
    # what prints the lines, in order).
    with caplog.at_level(logging.INFO, logger="gensbi_sharding"):
        metrics = run_tiny(tmp_path / "run", "train.steps=2", "train.log_every=1")  # TINY: eval.enabled=false
    assert metrics["status"] == "ok" and metrics["c2st"] is None
    steps = [r.getMessage() for r in caplog.records if r.getMessage().startswith("[")]
    assert [line[:5] for line in steps] == [f"[{n}/7]" for n in range(1, 8)], steps
    assert steps[5] == "[6/7] sample + C2ST: skipped (eval.enabled=false; c2st null)"


@pytest.mark.slow
def test_metrics_json_names_the_devices_a_run_used_beside_those_jax_sees(tmp_path):
    # Was: device_count 8 for a mesh=none run (one device; data_parallel_size 1, mesh_shape null) and no field
    # saying how many it used. dry_run: the counts are recorded before anything trains (two of them: over 2 s).
    one = run_tiny(tmp_path / "none", "mesh=none", "dry_run=true")
    every = run_tiny(tmp_path / "dict", "mesh=dict", "mesh.model_axis=2", "dry_run=true")
    assert (one["device_count"], one["devices_used"], one["mesh_shape"]) == (8, 1, None)
    assert (every["device_count"], every["devices_used"], every["mesh_shape"]) == (8, 8, [4, 2])

"""The console's numbered step lines as a run prints them."""

import logging

from faults_helpers import run_tiny


def test_a_run_without_evaluation_says_its_step_6_was_skipped(tmp_path, caplog):
    # Was: "[5/7] train: ..." then "[7/7] outputs: ...", step 6 never named. One run of 2 steps (over 2 s: the run is
    # what prints the lines, in order).
    with caplog.at_level(logging.INFO, logger="gensbi_sharding"):
        metrics = run_tiny(tmp_path / "run", "train.steps=2", "train.log_every=1")  # TINY: eval.enabled=false
    assert metrics["status"] == "ok" and metrics["c2st"] is None
    steps = [r.getMessage() for r in caplog.records if r.getMessage().startswith("[")]
    assert [line[:5] for line in steps] == [f"[{n}/7]" for n in range(1, 8)], steps
    assert steps[5] == "[6/7] sample + C2ST: skipped (eval.enabled=false; c2st null)"


"""REVIEW73C's faults in the best job a sweep's refusal and summary name (U4-U6).

- U4: jobs tied at 3 decimals named the first by number (0.9524 before 0.9516).
- U5: ``best_line`` printed ``at  samples/s`` for tied jobs without a speed (dry-run or 0-step jobs).
- U6: without C2ST, val losses of another ``data.theta_transform`` or held-out set were ranked against each other.
"""

import pytest

from gensbi_sharding.harness.best_job import best_line, lowest


def _ok(**fields):
    return {"status": "ok", "data": "two_moons", **fields}


def test_of_jobs_tied_to_three_decimals_the_lowest_unrounded_is_named():
    assert lowest({"0": _ok(c2st=0.9524), "1": _ok(c2st=0.9516), "2": _ok(c2st=0.9520)}) == ("C2ST", 0.952,
                                                                                             ["1", "2", "0"])
    assert lowest({"0": _ok(c2st=0.952), "1": _ok(c2st=0.952)})[2] == ["0", "1"]  # equal: in job order


def test_a_tie_without_a_speed_leaves_the_speed_out():
    rows = [{"job": str(k), "metrics": _ok(c2st=0.9, samples_per_s=speed)} for k, speed in enumerate([None, 10.0])]
    assert best_line(rows) == "best: job 0, C2ST 0.900 (job 1 reads the same to 3 decimals)"


def _val(loss, theta_transform="support", num_simulations=1000, seed=0):
    return _ok(best_val_loss=loss, config={"seed": seed, "data": {"theta_transform": theta_transform, "val_fraction":
                                                                  0.1, "num_simulations": num_simulations},
                                           "train": {"val_draws": 8}})


@pytest.mark.parametrize("other", [{"theta_transform": "none"}, {"num_simulations": 2000}, {"seed": 1}])
def test_val_losses_of_other_spaces_or_held_out_sets_are_not_ranked(other):
    assert lowest({"0": _val(1.2), "1": _val(0.75, **other)}) is None
    assert best_line([{"job": "0", "metrics": _val(1.2)}, {"job": "1", "metrics": _val(0.75, **other)}]) == ""
    assert lowest({"0": _val(1.2), "1": _val(0.75)}) == ("best val loss", 0.75, ["1"])  # comparable: ranked

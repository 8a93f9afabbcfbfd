"""A checkpoint saved after its best validation samples the best weights (review of session 68).

Was: ``EarlyStopping.with_best`` returned the state as it was whenever the last validation was the best, so a
checkpoint saved steps later (``train.checkpoint_every`` not a multiple of ``train.val_every``, a preempted run's
newest) sampled its newer weights while sample.py said "the weights of its best validation (step N)".
"""

import logging
from types import SimpleNamespace

import numpy as np
import pytest

from faults_helpers import run_tiny
from gensbi_sharding.harness.own_observation import sample_posterior
from gensbi_sharding.harness.validation import EarlyStopping


def test_with_best_decides_by_the_states_step_not_the_last_validation():
    stopper = EarlyStopping()
    stopper.observe(3, 1.0, lambda: "weights of step 3")
    functions = SimpleNamespace(with_weights=lambda state, weights: weights)
    assert stopper.with_best(functions, "weights of step 3", 3) == "weights of step 3"
    # The last validation (step 3) is the best, but the state is of step 4: was returned as it was.
    assert stopper.with_best(functions, "weights of step 4", 4) == "weights of step 3"
    assert stopper.kept_best_step() == 3 and EarlyStopping().kept_best_step() is None
    assert EarlyStopping().with_best(functions, "weights of step 4", 4) == "weights of step 4"  # none kept


@pytest.mark.slow  # trains a run and samples two of its checkpoints
def test_a_checkpoint_saved_after_its_best_validation_samples_that_validations_weights(tmp_path, caplog):
    from gensbi_sharding.harness.tasks import get_task, observation

    out = tmp_path / "run"
    # Validations at steps 3, 6, 8; a checkpoint every step, all kept: step 4's best is step 3's.
    assert run_tiny(out, "train.val_every=3", "train.checkpoint_every=1", "train.keep=8")["status"] == "ok"
    x_o = observation(get_task("two_moons"), 1)
    drawn = {}
    with caplog.at_level(logging.INFO, logger="gensbi_sharding"):
        for step in (3, 4, 5):
            details = {}
            drawn[step] = sample_posterior(out / "checkpoints" / str(step), x_o, seed=1, num_samples=32,
                                           details=details)
            assert (details["step"], details["checkpoint_step"]) == (3, step)
            assert details["weights"] == "EMA at the best validation step"
    np.testing.assert_array_equal(drawn[4], drawn[3])  # was: step 4's own weights
    np.testing.assert_array_equal(drawn[5], drawn[3])
    said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("sampling checkpoint")]
    assert len(said) == 3 and all(line.endswith("the weights of its best validation (step 3)") for line in said)

"""A weight decay that AdamW turns into sign flips is refused before the run (round 70, BREAK70A).

Was: ``train.weight_decay=1000`` (with the default ``train.learning_rate=0.003``) passed the checks (>= 0) and
trained; AdamW's decoupled decay multiplies every weight by ``1 - lr * wd = -2`` each step, so the weights grew
until the first logged window's loss was NaN, after the simulations and the compile, and the error then named the
learning rate as the cause ("training diverged ... lower train.learning_rate"). Between 1 and 2 it trained garbage
without a word (the weights flip sign each step). Now ``lr * wd >= 1`` is refused with the value and a fix.
"""

import pytest

from faults_helpers import compose_tiny

from gensbi_sharding.harness.config import ConfigError
from gensbi_sharding.harness.config_checks import validate


@pytest.mark.slow
@pytest.mark.parametrize("overrides,factor,fix", [
    (("train.weight_decay=1000",), "-2", "train.weight_decay=0.0001"),
    (("train.weight_decay=400",), "-0.2", "train.weight_decay=0.0001"),
    (("train.weight_decay=2000", "train.learning_rate=5e-4"), "0", "train.weight_decay=0.0001"),  # lr * wd = 1
])
def test_a_decay_that_flips_the_weights_is_refused_with_a_fix_that_passes(overrides, factor, fix):
    with pytest.raises(ConfigError) as refused:
        validate(compose_tiny(*overrides))
    message = str(refused.value)
    assert "AdamW multiplies every weight by 1 - learning_rate * weight_decay = " + factor + " per step" in message
    assert message.endswith(f"; e.g. {fix} (or a lower train.learning_rate)"), message
    validate(compose_tiny(*overrides, fix))  # the advice pasted passes


@pytest.mark.parametrize("decay", ["0", "0.0001", "333"])  # 333 * 0.003 < 1: strong, yet it shrinks the weights
def test_a_decay_below_one_over_the_rate_passes(decay):
    validate(compose_tiny(f"train.weight_decay={decay}"))


@pytest.mark.parametrize("rate", ["1e4", "1e25"])
def test_a_rate_far_too_large_at_the_default_decay_is_left_to_training_whose_error_names_the_rate(rate):
    """The rate, not the decay, is the cause there: training diverges and says so ("lower train.learning_rate"), as
    the divergence tests (test_train.py, test_non_finite_states.py, test_launch.py) drive it (review of round 70)."""
    validate(compose_tiny(f"train.learning_rate={rate}"))

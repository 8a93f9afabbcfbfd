"""A data factory of one's own returning x or theta of a wrong dtype or rank is told the change that fixes it (r64).

Was: every such refusal ended "e.g. x_train[:, None] for one feature", also for a (rows, dim) array of bools, text or
complex numbers, or a (rows, 2, 3) one, where that change fixes nothing.
"""

import dataclasses
import re

import numpy as np
import pytest

from gensbi_sharding.harness.config import ConfigError
from gensbi_sharding.harness.own_data import check_factory_result
from gensbi_sharding.harness.simulation_data import SimulationData


def _data(x_train, x_val, dim_x=2):
    rng = np.random.default_rng(0)
    theta = rng.normal(size=(12, 2)).astype(np.float32)
    return SimulationData("mine", theta[:10], x_train, theta[10:], x_val, observation=np.zeros(dim_x, np.float32),
                          reference_samples=np.zeros((0, 2), np.float32), theta_mean=np.zeros(2, np.float32),
                          theta_std=np.ones(2, np.float32), x_mean=np.zeros(dim_x, np.float32),
                          x_std=np.ones(dim_x, np.float32))


def _pasted(message, field, value):
    """The refusal's suggested expression, evaluated on ``value`` as the factory would."""
    expression = re.search(r"e\.g\. (.+?)(?:, one flat row| for one|, each part| in the factory|$)", message).group(1)
    return eval(expression, {"np": np, field: value})


X = np.random.default_rng(1).normal(size=(12, 2)).astype(np.float32)


@pytest.mark.parametrize("kind, x, dim_x, fix", [
    ("bool", X > 0, 2, "x_train.astype(np.float32) in the factory"),
    ("text", X.astype(str), 2, "x_train.astype(np.float32) in the factory"),
    ("complex", X + 1j * X, 4, "np.concatenate([x_train.real, x_train.imag], axis=1), each part columns of its own"),
    ("3-D", np.repeat(X[:, :, None], 3, axis=2), 6, "x_train.reshape(len(x_train), -1), one flat row per simulation"),
    ("1-D", X[:, 0], 1, "x_train[:, None] for one feature"),  # the one case the old advice fitted: kept
])
def test_the_refusal_names_the_change_for_its_kind_and_that_change_passes(kind, x, dim_x, fix):
    with pytest.raises(ConfigError) as refused:
        check_factory_result(_data(x[:10], x[10:]), "mine")
    message = str(refused.value)
    assert message == (f"data=mine's factory returned x_train of shape {x[:10].shape} and dtype {x.dtype}: give "
                       f"(rows, dim_x) real numbers, e.g. {fix}")
    fixed = _data(_pasted(message, "x_train", x[:10]), _pasted(message, "x_train", x[10:]), dim_x)
    checked = check_factory_result(fixed, "mine")  # the fix, applied to both splits, passes every check
    assert checked.x_train.shape == (10, dim_x) and checked.x_train.dtype == np.float32
    np.testing.assert_array_equal(checked.x_val, np.asarray(_pasted(message, "x_train", x[10:]), np.float32))


def test_x_of_values_below_zero_under_a_log_transform_is_told_to_set_it_to_none_which_passes():
    # Was: "returned x_train (z-scored, after its transforms) with NaN or inf in 6 row(s) of 10: drop the simulations
    # its x_transform or theta_bijection cannot map" for most of the data set, with no word of data.x_transform=log
    logged = dataclasses.replace(_data(X[:10], X[10:]), x_transform="log")
    rows = int((X[:10] <= 0).any(1).sum())
    with pytest.raises(ConfigError) as refused:
        check_factory_result(logged, "mine", x_transform="log")
    assert str(refused.value) == (
        f"data=mine's factory returned x_train with values <= 0 in {rows} row(s) of 10, which data.x_transform=log "
        "cannot map (log needs x > 0): set data.x_transform=none, or drop those simulations in the factory and count "
        "them in dropped_non_finite, as load_task does")
    assert check_factory_result(_data(X[:10], X[10:]), "mine", x_transform="none").x_transform == "none"  # the fix

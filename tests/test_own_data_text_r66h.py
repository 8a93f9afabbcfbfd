"""A data factory's x or theta of a dtype that is no real number is told a change that runs on it (r66)."""

import re

import numpy as np
import pytest

from gensbi_sharding.harness.config import ConfigError
from gensbi_sharding.harness.own_data import check_factory_result
from gensbi_sharding.harness.simulation_data import SimulationData


def _data(x_train, x_val, dim_x=2):
    theta = np.random.default_rng(0).normal(size=(12, 2)).astype(np.float32)
    return SimulationData("mine", theta[:10], x_train, theta[10:], x_val, observation=np.zeros(dim_x, np.float32),
                          reference_samples=np.zeros((0, 2), np.float32), theta_mean=np.zeros(2, np.float32),
                          theta_std=np.ones(2, np.float32), x_mean=np.zeros(dim_x, np.float32),
                          x_std=np.ones(dim_x, np.float32))


def _refusal(x):
    with pytest.raises(ConfigError) as refused:
        check_factory_result(_data(x[:10], x[10:], dim_x=x.shape[1] if x.ndim == 2 else 1), "mine")
    return str(refused.value)


X = np.random.default_rng(1).normal(size=(12, 2)).astype(np.float32)
WORDS = np.array([["low", "high"][i % 2] for i in range(24)]).reshape(12, 2)


@pytest.mark.parametrize("x", [WORDS, WORDS.astype(object), WORDS.astype(bytes), WORDS[:, 0]],
                         ids=["text", "object", "bytes", "1-D text"])
def test_text_that_is_no_number_is_told_what_to_do_not_a_cast_that_raises(x):
    # Was: "e.g. x_train.astype(np.float32) in the factory", which raised pasted: could not convert string to float
    with pytest.raises(ValueError):
        x.astype(np.float32)
    message = _refusal(x)
    entry = "b'low'" if x.dtype.kind == "S" else "'low'"
    where = "0, 0" if x.ndim == 2 else "0"
    assert message == (f"data=mine's factory returned x_train of shape {x[:10].shape} and dtype {x.dtype}: give "
                       f"(rows, dim_x) real numbers: x_train[{where}] is {entry}, which is no number (np.float32 "
                       "cannot read it); make each entry a number in the factory, e.g. a category its index in one "
                       "list of the categories, the same list for every split")
    categories = ["low", "high"]  # what it says to do, done: passes
    codes = np.vectorize(lambda e: categories.index(e.decode() if isinstance(e, bytes) else e))(x)
    codes = codes.reshape(len(codes), -1).astype(np.float32)
    assert check_factory_result(_data(codes[:10], codes[10:], codes.shape[1]), "mine").x_train.shape == codes[:10].shape


@pytest.mark.parametrize("x, fix, dim_x", [
    (X[:, 0] > 0, "x_train[:, None].astype(np.float32) for one feature", 1),  # was x_train[:, None]: bools still
    (np.repeat(X[:, :, None], 3, axis=2).astype(str), "x_train.reshape(len(x_train), -1).astype(np.float32), one flat "
     "row per simulation", 6),
    (X.astype(object), "x_train.astype(np.float32) in the factory", 2),  # numbers in an object array: the cast runs
    (X[:, 0] + 1j, "np.concatenate([x_train[:, None].real, x_train[:, None].imag], axis=1) for one feature, each part "
     "columns of its own", 2),
], ids=["1-D bool", "3-D numbers as text", "object numbers", "1-D complex"])
def test_the_change_offered_runs_on_the_array_and_passes_in_one_round(x, fix, dim_x):
    message = _refusal(x)
    assert message.endswith(f"real numbers, e.g. {fix}"), message
    code = re.search(r"e\.g\. (.+?)(?:, one flat row| for one|, each part| in the factory|$)", message).group(1)
    fixed = [eval(code, {"np": np, "x_train": part}) for part in (x[:10], x[10:])]  # the advice, run on the array
    assert check_factory_result(_data(*fixed, dim_x), "mine").x_train.shape == (10, dim_x)

"""A data set of one's own whose factory returns arrays of no columns (``theta`` of shape (rows, 0)) or a count of
dropped simulations that is no count: refused before any model is built, naming the field."""

import numpy as np
import pytest


def _data(dim_theta: int, dim_x: int):
    from gensbi_sharding.harness.simulation_data import SimulationData

    def rows(n, dim):
        return np.zeros((n, dim), np.float32)

    return SimulationData("mine", rows(10, dim_theta), rows(10, dim_x), rows(2, dim_theta), rows(2, dim_x),
                          observation=np.zeros(dim_x, np.float32), reference_samples=rows(0, dim_theta),
                          theta_mean=np.zeros(dim_theta, np.float32), theta_std=np.ones(dim_theta, np.float32),
                          x_mean=np.zeros(dim_x, np.float32), x_std=np.ones(dim_x, np.float32), x_transform="none")


@pytest.mark.parametrize("dims, field", [((0, 2), "theta_train"), ((2, 0), "x_train")])
def test_a_factory_returning_no_columns_is_refused_naming_the_field(dims, field):
    from gensbi_sharding.harness.config import ConfigError
    from gensbi_sharding.harness.own_data import check_factory_result

    with pytest.raises(ConfigError) as refused:
        check_factory_result(_data(*dims), "mine", x_transform="none")
    assert str(refused.value).startswith(f"data=mine's factory returned {field} of shape (10, 0): no ")
    assert ">= 1" in str(refused.value)


def test_a_factory_returning_one_column_each_is_taken():
    from gensbi_sharding.harness.own_data import check_factory_result

    checked = check_factory_result(_data(1, 1), "mine", x_transform="none")
    assert checked.theta_train.shape == (10, 1) and checked.x_val.shape == (2, 1)


@pytest.mark.parametrize("dropped", [None, "3", -5, 2.5, True])
def test_a_factory_counting_its_dropped_simulations_as_no_count_is_refused(dropped):
    # Was: None or "3" a TypeError ("unsupported operand type(s) for +") in the pipeline's sum, far from the factory;
    # -5 or 2.5 taken and written to metrics.json as non_finite_simulations.
    import dataclasses

    from gensbi_sharding.harness.config import ConfigError
    from gensbi_sharding.harness.own_data import check_factory_result

    with pytest.raises(ConfigError) as refused:
        check_factory_result(dataclasses.replace(_data(2, 2), dropped_non_finite=dropped), "mine")
    assert str(refused.value).startswith(f"data=mine's factory returned dropped_non_finite={dropped!r}: ")
    assert "an int >= 0" in str(refused.value)


def test_a_numpy_count_of_dropped_simulations_is_taken_as_an_int():
    import dataclasses

    from gensbi_sharding.harness.own_data import check_factory_result

    checked = check_factory_result(dataclasses.replace(_data(2, 2), dropped_non_finite=np.int64(3)), "mine")
    assert checked.dropped_non_finite == 3 and type(checked.dropped_non_finite) is int

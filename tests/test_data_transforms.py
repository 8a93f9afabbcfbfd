"""Simulations outside a data transform's domain (``data.x_transform=log``) named as such, with the transform."""

import logging

import numpy as np
import pytest

from faults_helpers import patch_task
from gensbi_sharding.harness import data as D


@pytest.mark.slow
def test_simulations_outside_the_transform_domain_are_named_as_such(monkeypatch, caplog):
    patch_task(monkeypatch, {3: np.nan}, observation=[0.5, 0.5])  # a positive observation
    with caplog.at_level(logging.WARNING, logger="gensbi_sharding"):
        sims = D.load_task("two_moons", num_simulations=200, x_transform="log")
    assert (sims.x_train > 0).all() and (sims.x_val > 0).all()
    outside = sims.dropped_non_finite - 1
    assert outside > 50  # two_moons' data are mostly not positive
    assert (f"dropped {sims.dropped_non_finite} simulation(s) of task 'two_moons': 1 whose theta or x hold "
            f"NaN or inf, {outside} outside the domain of the transforms (data.x_transform=log needs x > 0"
            in caplog.text)


@pytest.mark.slow
def test_no_simulation_inside_the_transform_domain_names_the_transform(monkeypatch):
    patch_task(monkeypatch, {}, observation=[0.5, 0.5])
    with pytest.raises(ValueError, match=r"outside the domain of the transforms.*set data\.x_transform=none"):
        D.load_task("two_moons", num_simulations=4, x_transform="log", seed=1)

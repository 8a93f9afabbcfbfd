"""C2ST computes the number sbibm's ``c2st(X=reference, Y=samples)`` computes for the same sets and seed."""

import numpy as np
import pytest
from sklearn.model_selection import KFold, cross_val_score
from sklearn.neural_network import MLPClassifier

from gensbi_sharding.harness.evaluate import c2st, c2st_scores


def sbibm_recipe(reference, samples, seed=1, n_folds=5):
    """sbibm.metrics.c2st's steps, written out here from its description (sbibm needs torch, not installed here):
    float32 sets z-scored by X (the reference, unbiased std), X first and labelled 0, Y after it labelled 1, an MLP
    of two relu layers of 10 * dim units (adam, max_iter 10,000) under shuffled KFold, both seeded with ``seed``."""
    x, y = np.asarray(reference, np.float32), np.asarray(samples, np.float32)
    mean, std = x.mean(0), x.std(0, ddof=1)
    x, y = (x - mean) / std, (y - mean) / std
    dim = x.shape[1]
    clf = MLPClassifier(activation="relu", hidden_layer_sizes=(10 * dim, 10 * dim), max_iter=10000, solver="adam",
                        random_state=seed)
    data, target = np.concatenate((x, y)), np.concatenate((np.zeros(len(x)), np.ones(len(y))))
    return cross_val_score(clf, data, target, cv=KFold(n_splits=n_folds, shuffle=True, random_state=seed),
                           scoring="accuracy")


@pytest.fixture(scope="module")
def sets():
    rng = np.random.default_rng(3)  # the review's data: the old order fitted other folds
    return rng.standard_normal((80, 2)) * 1.3 + 0.2, rng.standard_normal((80, 2))  # samples, reference


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0])
def test_c2st_scores_are_sbibms_folds(sets, seed):
    samples, reference = sets
    expected = sbibm_recipe(reference, samples, seed=seed, n_folds=3)
    np.testing.assert_array_equal(c2st_scores(samples, reference, seed=seed, n_folds=3), expected)
    assert c2st(samples, reference, seed=seed, n_folds=3) == pytest.approx(expected.mean())


@pytest.mark.slow
def test_c2st_default_seed_is_sbibms(sets):
    samples, reference = sets
    np.testing.assert_array_equal(c2st_scores(samples, reference, n_folds=3), sbibm_recipe(reference, samples,
                                                                                           n_folds=3))

"""The C2ST metric and pair plots (posterior samples: ``posterior.posterior_draws``).

scikit-learn and matplotlib are imported inside the functions that need
them, so importing this module stays cheap and never starts JAX's backend.
"""

from __future__ import annotations

import io
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from gensbi_sharding.harness.ctrl_c_fit import fit_through_ctrl_c
from gensbi_sharding.nodes import is_int

__all__ = ["c2st", "c2st_scores", "pair_plot"]


def c2st_scores(samples: Any, reference: Any, *, seed: int = 1, n_folds: int = 5,
                max_samples: int | None = None, n_jobs: int | None = None) -> np.ndarray:
    """Classifier two-sample test: the accuracy of each fold, as sbibm computes C2ST.

    The protocol of the SBI benchmark (Lueckmann et al. 2021, "Benchmarking
    Simulation-Based Inference"), computed as ``sbibm.metrics.c2st(X=reference,
    Y=samples, seed=seed, n_folds=n_folds)`` computes it for float32 sets: both sets
    in float32, z-scored with the reference's mean and (unbiased) std, the reference
    first and labelled 0, the samples after it labelled 1 (the order fixes which rows
    each shuffled fold holds), and classified by sklearn's ``MLPClassifier`` (two relu
    hidden layers of 10 * dim units, adam, up to 10,000 epochs; sklearn's convergence
    tolerance stops it far sooner) under shuffled K-fold cross-validation, ``seed``
    seeding both. The benchmark scores 10,000 samples against the task's 10,000
    reference samples with 5 folds. The first ``n = min(len(samples), len(reference), max_samples)``
    rows of each set are used, so ``samples[:n]`` and ``reference[:n]`` reproduce
    the result exactly. BLAS runs on one thread: the scores do not depend on the
    core count, and parallel jobs on a shared machine do not oversubscribe it.

    Parameters
    ----------
    samples, reference : array_like, shapes (n, dim), (m, dim)
        Posterior samples and reference samples, same units, finite.
    seed : int
        Seeds the folds and the classifier; 1, sbibm's default, if not given.
    n_folds : int
        Number of folds, >= 2.
    max_samples : int, optional
        Cap on the rows per set.
    n_jobs : int, optional
        Folds fitted in parallel worker processes (joblib's loky; -1: one per core),
        which ignore SIGINT: a Ctrl-C is what this process's handler makes of it, as
        with the default, which fits them one after another in this process.

    Returns
    -------
    ndarray, shape (n_folds,), float64
        Held-out accuracy of each fold, in [0, 1]: about 0.5 when the two sets share
        a distribution, 1.0 when they are perfectly separable.

    Raises
    ------
    ValueError
        If the sets are not 2-D, differ in dim, contain non-finite values, have
        fewer than ``n_folds`` rows after the cut, or an argument is invalid.
    """
    a = np.asarray(samples, dtype=np.float32)  # sbibm's tensors are float32, and sklearn fits float32 as float32
    b = np.asarray(reference, dtype=np.float32)
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[1]:
        raise ValueError(f"samples and reference must be 2-D with the same dim, got shapes "
                         f"{a.shape} and {b.shape}")
    if not is_int(n_folds) or n_folds < 2:
        raise ValueError(f"n_folds={n_folds!r} must be an integer >= 2")
    n = min(len(a), len(b), max_samples if max_samples is not None else len(a))
    if n < n_folds:
        raise ValueError(f"c2st needs at least n_folds={n_folds} rows per set, has {n} (shapes "
                         f"{a.shape}, {b.shape}, max_samples={max_samples})")
    a, b = a[:n], b[:n]
    for what, arr in (("samples", a), ("reference", b)):
        bad = int((~np.isfinite(arr)).any(axis=1).sum())
        if bad:
            raise ValueError(f"{what} has {bad} row(s) with NaN or inf; drop them or fix the sampler")
    mean, std = b.mean(0), b.std(0, ddof=1)
    std = np.where(std > 0, std, 1.0)  # a constant reference feature would divide by zero
    data = (np.concatenate([b, a]) - mean) / std  # sbibm's order: the shuffled folds then hold the rows sbibm's do
    labels = np.concatenate([np.zeros(n), np.ones(n)])

    from sklearn.model_selection import KFold, cross_val_score
    from sklearn.neural_network import MLPClassifier
    from threadpoolctl import threadpool_limits

    dim = data.shape[1]
    clf = MLPClassifier(hidden_layer_sizes=(10 * dim, 10 * dim), activation="relu", solver="adam",
                        max_iter=10_000, random_state=seed)
    folds = KFold(n_splits=n_folds, shuffle=True, random_state=seed)
    if n_jobs is not None and n_jobs > n_folds:  # a worker per fold at most: more have nothing to fit
        n_jobs = n_folds  # (not eval.c2st_jobs=100000 handed to joblib as is)
    with threadpool_limits(limits=1, user_api="blas"):
        return np.asarray(fit_through_ctrl_c(lambda: cross_val_score(
            clf, data, labels, cv=folds, scoring="accuracy", n_jobs=n_jobs), n_jobs not in (None, 1)), dtype=np.float64)


def c2st(samples: Any, reference: Any, *, seed: int = 1, n_folds: int = 5,
         max_samples: int | None = None, n_jobs: int | None = None) -> float:
    """The mean over folds of ``c2st_scores`` (same arguments): sbibm's C2ST number."""
    return float(np.mean(c2st_scores(samples, reference, seed=seed, n_folds=n_folds,
                                     max_samples=max_samples, n_jobs=n_jobs)))


def pair_plot(samples: Any, reference: Any, path: str | os.PathLike,
              labels: Sequence[str] | None = None, max_points: int = 2000,
              title: str | None = None) -> str:
    """Save a corner plot of posterior samples over reference samples as a PNG.

    Diagonal: overlaid histograms per dimension; lower triangle: scatter plots of
    each pair (at most ``max_points`` random rows per set, to keep the file small).
    Drawn on a standalone Agg canvas, so pyplot's global backend and figure list
    are untouched; written to a temporary file in the target folder and renamed,
    so an interrupted call leaves no half-written PNG.

    Parameters
    ----------
    samples, reference : array_like, shapes (n, dim), (m, dim)
    path : str or PathLike
        Output file; its folder must exist.
    labels : sequence of str, optional
        One axis label per dimension; default theta_1 .. theta_dim.
    title : str, optional
        Figure title (also the PNG's Title), e.g. task, observation, rule, mesh and C2ST.

    Returns
    -------
    str
        The path written.

    Raises
    ------
    ValueError
        If the sets are not 2-D with the same dim, or ``labels`` has the wrong length.
    """
    a, b = np.asarray(samples, dtype=np.float64), np.asarray(reference, dtype=np.float64)
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[1]:
        raise ValueError(f"samples and reference must be 2-D with the same dim, got shapes "
                         f"{a.shape} and {b.shape}")
    dim = a.shape[1]
    labels = list(labels) if labels is not None else [f"theta_{i + 1}" for i in range(dim)]
    if len(labels) != dim:
        raise ValueError(f"labels has {len(labels)} entries, need one per dim ({dim})")
    rng = np.random.default_rng(0)
    a = a[rng.choice(len(a), max_points, replace=False)] if len(a) > max_points else a
    b = b[rng.choice(len(b), max_points, replace=False)] if len(b) > max_points else b

    from gensbi_sharding.harness.agg_figure import agg_figure

    fig = agg_figure(figsize=(max(2.2 * dim, 4.8), max(2.2 * dim, 4.8)))  # room for the title on 2-D tasks
    grid = fig.subplots(dim, dim, squeeze=False)
    for i in range(dim):
        for j in range(dim):
            ax = grid[i, j]
            if j > i:
                ax.set_axis_off()
                continue
            if i == j:
                bins = np.histogram_bin_edges(np.concatenate([a[:, i], b[:, i]]), bins=40)
                ax.hist(b[:, i], bins=bins, density=True, alpha=0.5, color="C1", label="reference")
                ax.hist(a[:, i], bins=bins, density=True, alpha=0.5, color="C0", label="posterior")
                ax.set_yticks([])
            else:
                ax.scatter(b[:, j], b[:, i], s=1, alpha=0.3, color="C1", rasterized=True)
                ax.scatter(a[:, j], a[:, i], s=1, alpha=0.3, color="C0", rasterized=True)
            if i == dim - 1:
                ax.set_xlabel(labels[j])
            if j == 0 and i > 0:
                ax.set_ylabel(labels[i])
    grid[0, 0].legend(loc="upper right", fontsize="small")
    if title:
        # One line per " | " part: a one-line title is cut at both ends on a 2-D task's plot.
        fig.suptitle(title.replace(" | ", "\n"), fontsize="medium")
    fig.tight_layout()
    from gensbi_sharding.harness.outputs import write_atomic

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=80, metadata={"Title": title or ""})
    write_atomic(path, buffer.getvalue())  # atomic, and readable as the umask allows
    return os.fspath(path)

"""SBI benchmark data sets: simulate a task's budget of (theta, x) pairs, drop the unusable, split, batch.

Every data set comes from ``sbibm_jax`` (see ``harness.tasks``), which ships the
observations and the reference posterior samples inside the package, so nothing here
needs a network. JAX and ``sbibm_jax`` are only touched inside functions: importing
this module must not start JAX's backend (the device count may not be set yet).
The maps into the model's z-scored space are ``harness.simulation_data``'s.
"""
from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from gensbi_sharding.harness.factories import register_data
from gensbi_sharding.harness.hints import batch_size_problem, mesh_alternatives
from gensbi_sharding.harness.simulation_data import SimulationData, global_stats
from gensbi_sharding.harness.split_rows import shard_train_rows, simulations_for, split_sizes
from gensbi_sharding.harness.units import is_int
from gensbi_sharding.harness.tasks import (TASKS, check_observation, check_transforms, get_task,
                                           prior_bijection, reference_samples, simulate, task_dims,
                                           to_unconstrained, transform_x, usable_observation)
from gensbi_sharding import batch_size_divisor, check_batch_divisible, shard_batch

if TYPE_CHECKING:  # annotations only: launch.py's start imports this module without JAX (test_start_imports)
    from jax.sharding import Mesh

__all__ = ["load_task", "iterate_batches", "TASKS", "task_dims", "split_sizes", "shard_train_rows"]

log = logging.getLogger("gensbi_sharding")


def load_task(name: str, *, num_simulations: int = 10_000, val_fraction: float = 0.1,
              seed: int = 0, num_observation: int = 1, process_index: int = 0,
              process_count: int = 1, theta_transform: str = "support",
              x_transform: str = "none") -> SimulationData:
    """Simulate a budget of (theta, x) pairs from the prior of an sbibm task.

    Parameters
    ----------
    name : str
        sbibm task name, e.g. "two_moons", "gaussian_linear", "slcp".
    num_simulations : int
        Total simulation budget (train + val), over all processes together.
    val_fraction : float
        Share of each process's simulations held out for validation, in (0, 1).
    seed : int
        Seed of the simulation stream; each process folds in its ``process_index``.
    num_observation : int
        Which of the task's 10 observations (1..10) to condition on.
    process_index, process_count : int
        This process's rank and the number of processes. Each process simulates
        only its share of the budget; the statistics are combined over processes.
    theta_transform : {"support", "none"}
        "support": the model sees ``theta`` through the inverse of the bijection onto
        the prior's support (``harness.tasks.prior_bijection``); "none": as simulated
        (the sampler then rejects draws outside the support, ``harness.posterior``).
    x_transform : {"none", "log"}
        "log" for positive data spanning decades (lotka_volterra).

    Returns
    -------
    SimulationData
        Its ``dropped_non_finite`` counts this shard's dropped simulations (the log line names every shard's):
        ``pipeline.build_pipeline`` sums the shards' counts, as it does a data set of one's own's.

    Raises
    ------
    ValueError
        For a non-integer or too-small budget, ``val_fraction`` outside (0, 1),
        ``num_observation`` outside 1..10, an inconsistent process pair, an
        unknown task name or transform, or fewer than 2 valid simulations.
    """
    _check_int("num_simulations", num_simulations, 2, "data.num_simulations=10000")
    _check_int("num_observation", num_observation, 1, "data.num_observation=1")
    _check_int("seed", seed, 0, "seed=0")
    check_observation(num_observation)
    check_transforms(theta_transform, x_transform)
    if isinstance(val_fraction, bool) or not isinstance(val_fraction, (int, float, np.number)) \
            or not 0.0 < float(val_fraction) < 1.0:
        raise ValueError(f"val_fraction={val_fraction!r} must be a number strictly between 0 and 1, "
                         "e.g. data.val_fraction=0.1")
    _check_int("process_count", process_count, 1, "process_count=jax.process_count()")
    _check_int("process_index", process_index, 0, "process_index=jax.process_index()")
    if process_index >= process_count:
        raise ValueError(f"process_index={process_index} must be below process_count={process_count}")
    # Checked on the smallest share, so every process fails alike instead of one
    # raising while the others wait for it in the statistics all-gather.
    if num_simulations // process_count < 2:
        raise ValueError(f"num_simulations={num_simulations} leaves some of the {process_count} "
                         "process(es) fewer than 2 simulations (one train, one val): raise "
                         f"data.num_simulations to at least {2 * process_count}")
    n_local = num_simulations // process_count + (process_index < num_simulations % process_count)

    import jax  # deferred: importing this module must not start the backend

    task = get_task(name)
    x_o = usable_observation(task, num_observation, x_transform)
    theta, x = simulate(task, jax.random.fold_in(jax.random.key(seed), process_index), n_local)
    bijection = prior_bijection(task) if theta_transform == "support" else None
    # As sbi does with invalid simulations: drop them before any statistic or split sees them,
    # and the draws the transforms send to infinity (a uniform draw exactly on its bound, log of x <= 0),
    # counted apart: those are no fault of the simulator.
    finite = np.isfinite(theta).all(axis=1) & np.isfinite(x).all(axis=1)
    inside = (np.isfinite(transform_x(x_transform, x)).all(axis=1)
              & np.isfinite(to_unconstrained(bijection, theta)).all(axis=1))
    keep = finite & inside
    theta, x = theta[keep], x[keep]
    dropped, outside = n_local - len(theta), int((finite & ~inside).sum())
    if len(theta) < 2:
        if not outside:
            raise ValueError(f"{dropped} of the {n_local} simulations of task {name!r} (process "
                             f"{process_index}) hold NaN or inf, leaving {len(theta)}: fewer than 2 (one "
                             "train, one val); check the simulator or raise data.num_simulations")
        fix = "data.x_transform=none" if x_transform == "log" else "data.theta_transform=none"
        raise ValueError(f"{dropped} of the {n_local} simulations of task {name!r} (process {process_index}) "
                         f"are unusable, leaving {len(theta)}: fewer than 2 (one train, one val); "
                         f"{dropped - outside} hold NaN or inf, {outside} lie outside the domain of the "
                         f"transforms ({_domain(x_transform, theta_transform)}); set {fix}")
    n_train, n_val = split_sizes(len(theta), val_fraction)
    # Prior draws are i.i.d., so a contiguous split is as random as a shuffled one.
    theta_train, theta_val = theta[:n_train], theta[n_train:]
    x_train, x_val = x[:n_train], x[n_train:]
    totals, (theta_mean, theta_std), (x_mean, x_std) = global_stats(
        [dropped, n_val, outside], [to_unconstrained(bijection, theta_train), transform_x(x_transform, x_train)],
        process_count)
    shards = "" if process_count == 1 else f" over {process_count} shards"
    if totals[0] and not totals[2]:
        log.warning("dropped %d simulation(s) of task %r whose theta or x hold NaN or inf (of %d "
                    "simulated%s); training uses the finite ones", totals[0], name, num_simulations, shards)
    elif totals[0]:
        log.warning("dropped %d simulation(s) of task %r: %d whose theta or x hold NaN or inf, %d outside the "
                    "domain of the transforms (%s) (of %d simulated%s); training uses the others", totals[0],
                    name, totals[0] - totals[2], totals[2], _domain(x_transform, theta_transform),
                    num_simulations, shards)
    return SimulationData(name=name, theta_train=theta_train, x_train=x_train, theta_val=theta_val,
                          x_val=x_val, observation=x_o, reference_samples=reference_samples(task, num_observation),
                          theta_mean=theta_mean, theta_std=theta_std, x_mean=x_mean, x_std=x_std,
                          theta_bijection=bijection, x_transform=x_transform,
                          dropped_non_finite=dropped, val_pairs=totals[1])  # totals[1]: every process's val pairs


def _domain(x_transform: str, theta_transform: str) -> str:
    """What the transforms need, in override terms: "data.x_transform=log needs x > 0; ..."."""
    needs = ["data.x_transform=log needs x > 0"] if x_transform == "log" else []
    needs += ["data.theta_transform=support needs theta inside the prior's support"] \
        if theta_transform == "support" else []
    return "; ".join(needs)


def iterate_batches(theta: np.ndarray, x: np.ndarray, *, batch_size: int, seed: int, mesh: Mesh | None,
                    epoch_shuffle: bool = True, place: bool = True) -> Iterator[dict[str, Any]]:
    """An endless stream of training batches, epoch after epoch.

    The inputs are validated, and the batch size checked against the mesh, when
    this is called, before any batch is drawn. Each epoch is a permutation drawn
    from ``numpy.random.default_rng([seed, epoch])`` (reproducible, different per
    epoch); the incomplete last batch of an epoch is dropped.

    Parameters
    ----------
    theta, x : array_like, (n, dim_theta), (n, dim_x)
        Training pairs (normally z-scored).
    batch_size : int
        Rows per batch: a multiple of the mesh's data-parallel size, at most n.
    seed : int
        Seed of the shuffling stream.
    mesh : jax.sharding.Mesh or None
        Mesh to split batches over; None: no check, no placement.
    epoch_shuffle : bool
        False: every epoch walks the rows in stored order.
    place : bool
        True: ``shard_batch`` onto ``mesh`` (jax arrays split over the batch
        axes). False, or mesh None: numpy arrays.

    Yields
    ------
    dict
        ``{"theta": (batch_size, dim_theta), "x": (batch_size, dim_x)}``, float32.

    Raises
    ------
    ValueError
        If theta/x are not 2-D with equal row counts, batch_size is not a positive
        integer, exceeds n, or is not divisible by the data-parallel size (the
        message then names ``data.batch_size=<nearest valid>`` and the meshes that keep it).
    """
    theta = np.asarray(theta, dtype=np.float32)
    x = np.asarray(x, dtype=np.float32)
    if theta.ndim != 2 or x.ndim != 2 or theta.shape[0] != x.shape[0]:
        raise ValueError(f"theta and x must be 2-D with the same number of rows, got shapes "
                         f"{theta.shape} and {x.shape}")
    _check_int("batch_size", batch_size, 1, "data.batch_size=256")
    _check_int("seed", seed, 0, "seed=0")
    n = theta.shape[0]
    problem = batch_size_problem(batch_size, shards=1, data_parallel=batch_size_divisor(mesh), train_rows=n)
    if problem:
        raise ValueError(problem + mesh_alternatives(batch_size, shards=1, train_rows=n, mesh=mesh))
    check_batch_divisible({"theta": theta[:batch_size], "x": x[:batch_size]}, mesh, "train")
    return _batches(theta, x, batch_size, seed, mesh, epoch_shuffle, place)


def _batches(theta, x, batch_size, seed, mesh, epoch_shuffle, place):
    n, epoch = theta.shape[0], 0
    while True:
        order = (np.random.default_rng([seed, epoch]).permutation(n) if epoch_shuffle
                 else np.arange(n))
        for start in range(0, n - batch_size + 1, batch_size):
            rows = order[start:start + batch_size]
            batch = {"theta": theta[rows], "x": x[rows]}
            yield shard_batch(batch, mesh) if place else batch
        epoch += 1


def _check_int(what: str, value: Any, minimum: int, fix: str) -> None:
    if not is_int(value) or value < minimum:
        raise ValueError(f"{what}={value!r} must be an integer >= {minimum}, e.g. {fix}")


def _register(name: str) -> None:
    def load(**kwargs: Any) -> SimulationData:
        return load_task(name, **kwargs)

    load.__name__ = load.__qualname__ = f"load_{name}"
    load.__doc__ = f"``load_task({name!r}, **kwargs)``."
    register_data(name, built_in=True)(load)


# One registered factory per task: ``get_data(name)(**kwargs)`` is ``load_task(name, **kwargs)``.
for _task in TASKS:
    _register(_task)

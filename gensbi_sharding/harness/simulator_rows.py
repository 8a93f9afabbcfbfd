"""Simulation of an sbibm task's rows: ``simulate`` (at prior draws) and ``simulate_at`` (at given parameters).

Simulation runs one jitted ``lax.map`` over the rows: the ODE tasks (sir,
lotka_volterra) solve each row on its own, so a row whose solver fails becomes a
NaN row instead of turning the whole batch into NaN (Equinox, under which diffrax
runs, reduces a failure over a vmapped batch to "any row failed"). JAX is imported
inside the functions, so importing this module never starts JAX's backend.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

__all__ = ["simulate", "simulate_at"]


def simulate(task: Any, key: Any, num_simulations: int) -> tuple[np.ndarray, np.ndarray]:
    """Draw ``num_simulations`` parameters from the prior and simulate one data set each.

    Parameters
    ----------
    task : sbibm_jax task
    key : jax.Array
        Typed PRNG key; split into a prior key and one simulator key per row.
    num_simulations : int

    Returns
    -------
    theta, x
        As ``simulate_at`` (which raises its ``RuntimeError`` here too).
    """
    import jax

    prior_key, sim_key = jax.random.split(key)
    return simulate_at(task, sim_key, task.get_prior(prior_key, num_simulations))


def simulate_at(task: Any, key: Any, theta: Any) -> tuple[np.ndarray, np.ndarray]:
    """Simulate one data set at each row of ``theta`` (drawn from any proposal, not only the prior).

    ``simulate`` is this at prior draws; a sequential scheme (``benchmarks/sequential_rounds.py``) calls it
    at draws of a truncated prior.

    Parameters
    ----------
    task : sbibm_jax task
    key : jax.Array
        Typed PRNG key of the simulator; split into one key per row.
    theta : array_like, (n, dim_theta)
        Parameters to simulate at.

    Returns
    -------
    theta, x : ndarray, (n, dim_theta), (n, dim_x), float32
        Rows whose simulation failed hold NaN in ``x`` (the caller drops them).

    Raises
    ------
    RuntimeError
        If the simulator aborts because Equinox was imported before ``get_task`` could
        set ``EQX_ON_ERROR=nan``; the message says to set it in the environment.
    """
    import jax

    theta = jax.numpy.asarray(theta, dtype=jax.numpy.float32)
    keys = jax.random.split(key, theta.shape[0])
    try:
        x = _jitted_rows(task, key)(keys, theta)
    except Exception as err:
        equinox = sys.modules.get("equinox")  # imported by the ODE tasks' simulators (diffrax), not by the others'
        if equinox is None or not isinstance(err, equinox.EquinoxRuntimeError):
            raise
        raise RuntimeError(f"the {task.name} simulator failed on some prior draws and Equinox is set to "
                           "raise; run with EQX_ON_ERROR=nan in the environment so that failed rows "
                           "become NaN and are dropped") from None
    return np.asarray(theta, dtype=np.float32), np.asarray(x, dtype=np.float32)


#: One jitted row-by-row simulation per task kind, (its type, its name): made anew on every call, it compiled
#: anew (~0.35 s), once per data shard, so data.shards=1000 sat in step [3/7] for minutes. A task's simulator
#: depends on its kind only (sbibm_jax's simulator parameters are fixed per task; the key get_simulator takes
#: is not used by its simulator, which gets a key a row), so shards and runs in one process share it.
_ROWS: dict[tuple[type, str], Any] = {}


def _jitted_rows(task: Any, key: Any) -> Any:
    """``rows(keys, theta)``: ``task``'s simulator over the rows of ``theta``, one ``lax.map`` step a row, jitted."""
    kind = (type(task), task.name)
    if kind not in _ROWS:
        import jax

        simulator = task.get_simulator(key)
        _ROWS[kind] = jax.jit(lambda keys, theta: jax.lax.map(lambda pair: simulator(pair[0], pair[1][None])[0],
                                                               (keys, theta)))
    return _ROWS[kind]

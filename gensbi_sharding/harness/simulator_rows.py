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


#: One jitted row-by-row simulation per task kind (``_task_kind``): made anew on every call, it compiled anew
#: (~0.35 s), once per data shard, so data.shards=1000 sat in step [3/7] for minutes. A task's simulator depends on
#: its type and settings only (the key get_simulator takes is not used by its simulator, which gets a key a row), so
#: shards and runs in one process share it.
_ROWS: dict[tuple, Any] = {}


def _task_kind(task: Any) -> tuple:
    """``task``'s type and its settings (``GaussianLinear(dim=5, simulator_scale=0.5)``: its scalars and its
    ``simulator_params``' values): two tasks of one kind simulate alike. Not (type, name) only, so a task of the
    same name with other settings, from Python (``simulate_at``), is not simulated with the first one's simulator: an
    AssertionError for another dim, another scale's data without a word."""
    import numpy as np

    def fingerprint(value: Any) -> object:
        if value is None or isinstance(value, (bool, int, float, str)):
            return value
        if isinstance(value, dict):
            return tuple((str(k), fingerprint(v)) for k, v in sorted(value.items(), key=lambda kv: str(kv[0])))
        try:
            array = np.asarray(value)
        except Exception:  # noqa: BLE001 - not array-like: its text
            return repr(value)
        return (array.shape, array.dtype.str, array.tobytes()) if array.dtype.kind in "biufc" else repr(value)

    settings = {k: v for k, v in vars(task).items() if k == "simulator_params" or not isinstance(v, (dict, list))}
    return (type(task), tuple((k, fingerprint(v)) for k, v in sorted(settings.items())
                              if k == "simulator_params" or v is None or isinstance(v, (bool, int, float, str))))


def _jitted_rows(task: Any, key: Any) -> Any:
    """``rows(keys, theta)``: ``task``'s simulator over the rows of ``theta``, one ``lax.map`` step a row, jitted."""
    kind = _task_kind(task)
    if kind not in _ROWS:
        import jax

        simulator = task.get_simulator(key)
        _ROWS[kind] = jax.jit(lambda keys, theta: jax.lax.map(lambda pair: simulator(pair[0], pair[1][None])[0],
                                                               (keys, theta)))
    return _ROWS[kind]

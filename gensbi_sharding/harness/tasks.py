"""The eight sbibm tasks: simulation, the prior's bijection, observations and reference posteriors.

Every task comes from ``sbibm_jax`` (Lueckmann et al. 2021, "Benchmarking
Simulation-Based Inference", ported to JAX), which ships the 10 observations and
their 10,000 reference posterior samples inside the package: nothing here needs a
network. JAX and ``sbibm_jax`` are imported inside the functions, so importing this
module never starts JAX's backend.

Simulation is ``harness.simulator_rows``' (re-exported here as ``simulate`` and ``simulate_at``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from gensbi_sharding.harness.simulator_rows import simulate, simulate_at
from gensbi_sharding.harness.units import is_int

__all__ = ["TASKS", "SBIBM_JAX_OTHER_TASKS", "TASK_DIMS", "NUM_OBSERVATIONS", "THETA_TRANSFORMS", "X_TRANSFORMS",
           "get_task", "task_dims",
           "simulate", "simulate_at", "prior_bijection", "to_unconstrained", "to_constrained", "transform_x",
           "check_transforms", "observation", "reference_samples", "check_observation", "usable_observation",
           "check_evaluation", "REFERENCE_SAMPLES", "num_samples_problem", "observation_file", "log_refusal",
           "logged_finite"]

#: sbibm tasks with reference posteriors, registered as data sets (``data=<name>``).
TASKS: tuple[str, ...] = ("two_moons", "gaussian_linear", "gaussian_linear_uniform", "gaussian_mixture",
                          "slcp", "sir", "lotka_volterra", "bernoulli_glm")
#: The tasks ``sbibm_jax.get_available_tasks()`` lists beyond ``TASKS`` (pinned against it by
#: tests/test_name_case_r64break.py; importing sbibm_jax to ask costs a refusal ~2.7 s and JAX). Such a name is no
#: typo: offering the nearest registered one (gaussian_random_field -> gaussian_mixture) misled (``name_hints``).
SBIBM_JAX_OTHER_TASKS = ("beer_molbiosystems", "bernoulli_glm_raw", "gaussian_random_field",
                         "gaussian_random_field_256", "gravitational_waves", "slcp_distractors", "spherical_grf",
                         "spherical_grf_128", "toy_lensing")
#: ``(dim_theta, dim_x)`` of each task, known without sbibm_jax (whose tasks start JAX's backend, which must wait
#: for a job's device count): a sweep's pre-check reads them. tests/test_simulation_budget.py checks them.
TASK_DIMS: dict[str, tuple[int, int]] = {
    "two_moons": (2, 2), "gaussian_linear": (10, 10), "gaussian_linear_uniform": (10, 10),
    "gaussian_mixture": (2, 2), "slcp": (5, 8), "sir": (2, 10), "lotka_volterra": (4, 20), "bernoulli_glm": (10, 10)}
#: Observations per task, numbered 1..10 as in sbibm.
NUM_OBSERVATIONS = 10
#: Reference posterior samples sbibm-jax ships per task and observation (a test loads them all): the config checks
#: refuse more eval.num_samples before any folder is made, loading none (not at step [3/7], in the run's
#: folder).
REFERENCE_SAMPLES = 10_000
#: ``data.theta_transform``: through the prior's support bijection, or as simulated (draws outside rejected).
THETA_TRANSFORMS = ("support", "none")
#: ``data.x_transform``: "log" for positive data spanning decades (lotka_volterra).
X_TRANSFORMS = ("none", "log")


def get_task(name: str) -> Any:
    """The ``sbibm_jax`` task ``name``; ``ValueError`` listing ``TASKS`` for any other name."""
    if name not in TASKS:
        raise ValueError(f"unknown sbibm task {name!r}; registered here: {', '.join(TASKS)} "
                         "(e.g. data=slcp)")
    # A failed ODE solve must give a NaN row (dropped later), not abort the simulation:
    # Equinox reads this, its documented switch, once when it is first imported.
    os.environ.setdefault("EQX_ON_ERROR", "nan")
    import sbibm_jax

    return sbibm_jax.get_task(name)


def task_dims(name: str) -> tuple[int, int]:
    """``(dim_theta, dim_x)`` of an sbibm task, without simulating anything."""
    task = get_task(name)
    return task.dim_theta, task.dim_x


def prior_bijection(task: Any) -> Any:
    """The bijection from R^dim_theta onto the support of the task's prior.

    ``numpyro.distributions.transforms.biject_to(prior.support)``: a logistic map
    scaled to the box for a uniform prior, ``exp`` for a positive (log-normal) one,
    the identity for an unbounded one. Training on ``transform.inv(theta)`` and
    pushing samples through ``transform`` puts every posterior sample inside the
    prior's support.
    """
    from numpyro.distributions.transforms import biject_to

    return biject_to(task.get_prior_dist().support)


def to_constrained(bijection: Any, u: Any) -> Any:
    """``bijection(u)``: unconstrained values onto the support; None is the identity.

    Numpy in, float32 numpy out; a JAX array stays a JAX array (usable under jit).
    """
    if bijection is None:
        return u
    out = bijection(u)
    return np.asarray(out, dtype=np.float32) if isinstance(u, np.ndarray) else out


def to_unconstrained(bijection: Any, theta: Any) -> Any:
    """``bijection.inv(theta)``; a value on the support's boundary maps to +-inf."""
    if bijection is None:
        return theta
    out = bijection.inv(theta)
    return np.asarray(out, dtype=np.float32) if isinstance(theta, np.ndarray) else out


def transform_x(kind: str, x: Any, *, inverse: bool = False) -> Any:
    """The data transform ``kind`` ("none" or "log"), or its inverse; numpy or JAX arrays."""
    if kind == "none":
        return x
    if isinstance(x, np.ndarray):
        with np.errstate(divide="ignore", invalid="ignore"):  # non-positive rows become invalid
            return np.exp(x) if inverse else np.log(x)
    import jax.numpy as jnp

    return jnp.exp(x) if inverse else jnp.log(x)


def check_transforms(theta_transform: str, x_transform: str) -> None:
    """``ValueError`` naming the override for a transform name that is not known."""
    if theta_transform not in THETA_TRANSFORMS:
        raise ValueError(f"theta_transform={theta_transform!r} is not one of {', '.join(THETA_TRANSFORMS)}; "
                         "set data.theta_transform=support")
    if x_transform not in X_TRANSFORMS:
        raise ValueError(f"x_transform={x_transform!r} is not one of {', '.join(X_TRANSFORMS)}; "
                         "set data.x_transform=none")


def observation(task: Any, num_observation: int) -> np.ndarray:
    """Observation ``num_observation`` (1..10) of ``task`` as a float32 (dim_x,) vector."""
    check_observation(num_observation)
    return np.asarray(task.get_observation(num_observation), dtype=np.float32).reshape(-1)


def usable_observation(task: Any, num_observation: int, x_transform: str = "none", *, asked: Sequence[int] = (),
                       chosen: int | None = None) -> np.ndarray:
    """``observation``, checked finite and inside the domain of ``x_transform`` (log: every value > 0).

    ``asked`` (``eval.observations``) and ``chosen`` (``data.num_observation``, default ``num_observation``): what
    the refusal of a log offers to read instead (``log_refusal``, as the check before any folder).

    Raises
    ------
    ValueError
        Naming the observation, its values and the override that fixes it.
    """
    x_o = observation(task, num_observation)
    if not np.all(np.isfinite(x_o)):
        raise ValueError(f"observation {num_observation} of task {task.name!r} holds non-finite values "
                         f"{x_o.tolist()}: the posterior cannot be conditioned on it; choose another with "
                         "data.num_observation=<1..10> (or leave it out of eval.observations)")
    if not np.all(np.isfinite(transform_x(x_transform, x_o))):
        raise ValueError(log_refusal(task.name, num_observation, float(x_o.min()), lambda j: observation(task, j),
                                     asked, chosen))
    return x_o


def check_evaluation(data: Any, evaluation: Any, observations: list[int]) -> None:
    """Before training: every observation to score (``observations``) and ``data.num_observation`` is usable under
    ``data.x_transform``, and each scored one has ``evaluation.num_samples`` reference rows; ``data``, ``evaluation``:
    a config's ``data`` and ``eval``.

    C2ST compares as many posterior samples as reference samples (sbibm: 10,000 each),
    so more samples than the reference holds would be drawn and not scored.

    Raises
    ------
    ValueError
        Naming the observation or ``eval.num_samples`` and the override that fixes it.
    """
    name, num_samples, task = data.name, evaluation.num_samples, get_task(data.name)
    for k in dict.fromkeys([*observations, data.num_observation]):  # as the check before any folder reads them
        usable_observation(task, k, data.x_transform, asked=evaluation.observations or (), chosen=data.num_observation)
        rows = len(reference_samples(task, k)) if k in observations else num_samples
        if num_samples > rows:
            raise ValueError(f"eval.num_samples={num_samples} exceeds the {rows} reference posterior samples "
                             f"of task {name!r} (observation {k}) that C2ST compares them with, row for row; "
                             f"set eval.num_samples={rows}")


def num_samples_problem(name: str, evaluation: Any) -> str | None:
    """Why ``evaluation`` (a config's ``eval``) draws more than task ``name``'s ``REFERENCE_SAMPLES`` rows (None: it
    does not, scores nothing, or ``name`` is no sbibm task)."""
    if name in TASKS and evaluation.enabled and (num_samples := evaluation.num_samples) > REFERENCE_SAMPLES:
        return (f"eval.num_samples={num_samples} exceeds the {REFERENCE_SAMPLES} reference posterior samples of "
                f"task {name!r} (per observation) that C2ST compares them with, row for row; set "
                f"eval.num_samples={REFERENCE_SAMPLES}")
    return None


#: The most ODE steps a run samples with (``eval.ode_steps``, ``sample.py --ode-steps``): flow-matching samplers use
#: 10-1,000 and gain little beyond; each step runs the network over every sample, so 100,000,000 (accepted before)
#: sampled for days after training, its result lost with the allocation.
ODE_STEPS_MAX = 10_000


def ode_steps_problem(ode_steps: int) -> Any:
    """Why ``eval.ode_steps`` is out of range (below 1, or above ``ODE_STEPS_MAX``), naming it and a fix; None if
    not."""
    from gensbi_sharding.harness.refusal import Refusal

    if ode_steps < 1:
        return f"eval.ode_steps={ode_steps} must be >= 1"
    if ode_steps > ODE_STEPS_MAX:
        return Refusal(f"eval.ode_steps={ode_steps} is above {ODE_STEPS_MAX:,}: each step runs the network over every "
                       f"sample, {ode_steps // 32:,} times the default's (32) sampling time; flow-matching samplers "
                       "use 10-1,000 steps", "eval.ode_steps=1000")
    return None


def observation_file(name: str, num_observation: int) -> Path | None:
    """The file ``sbibm_jax``'s task ``name`` reads observation ``num_observation`` from (``get_observation``:
    ``tasks/<name>/files/num_observation_<k>/observation.csv`` in the package), found without importing the package
    (its tasks start JAX's backend); None where the installed package holds no such file."""
    import importlib.util

    spec = importlib.util.find_spec("sbibm_jax")  # locates, imports nothing
    roots = (spec.submodule_search_locations or []) if spec is not None else []
    where = ("tasks", name, "files", f"num_observation_{num_observation}", "observation.csv")
    return next((path for root in roots if (path := Path(root, *where)).is_file()), None)


#: Reference samples read once per (task kind, observation) and shared, read-only: read anew (a bz2 CSV, ~13 ms) for
#: every data shard, each shard also held a copy of its own (1000 shards of gaussian_linear: 400 MB).
_REFERENCE: dict[tuple[type, str, int], np.ndarray] = {}


def reference_samples(task: Any, num_observation: int) -> np.ndarray:
    """The task's reference posterior samples for observation ``num_observation``: (10000, dim_theta), read-only."""
    check_observation(num_observation)
    kind = (type(task), task.name, int(num_observation))
    if kind not in _REFERENCE:
        samples = np.array(task.get_reference_posterior_samples(num_observation), dtype=np.float32)
        samples.flags.writeable = False  # one array for every shard and run: none may change it for the others
        _REFERENCE[kind] = samples
    return _REFERENCE[kind]


def check_observation(num_observation: int) -> None:
    """``ValueError`` naming the override unless ``num_observation`` is one of 1..10."""
    if not is_int(num_observation) or not 1 <= num_observation <= NUM_OBSERVATIONS:
        raise ValueError(f"num_observation={num_observation!r} is out of range: sbibm tasks have "
                         f"observations 1..{NUM_OBSERVATIONS}; set data.num_observation (or "
                         "eval.observations) to one of them")


def logged_finite(x_o: np.ndarray | None) -> bool:
    """Whether the log of ``x_o`` is finite: every value > 0 (None, no file read: False)."""
    return x_o is not None and bool(np.all(np.isfinite(transform_x("log", x_o))))


def log_refusal(name: str, k: int, smallest: float, read: Callable[[int], np.ndarray | None],
                asked: Sequence[int] = (), num_observation: int | None = None) -> str:
    """The one refusal of ``data.x_transform=log`` on observation ``k`` of task ``name``, whose smallest value is
    ``smallest``: the check before any folder (``log_observation_problem``) and the run's once the task is loaded
    (``usable_observation``) say the same (the second fix too, not data.x_transform=none alone).

    ``read(j)``: observation ``j`` (None where none reads); ``asked``: ``eval.observations`` (scored; empty: none
    asked); ``num_observation``: ``data.num_observation`` (default ``k``). Where the task has observations of
    positive data, the overrides reading only those are a second fix.
    """
    num_observation = k if num_observation is None else num_observation
    refusal = (f"data.x_transform=log needs positive data, but observation {k} of task {name!r} holds "
               f"{smallest:g}: the posterior cannot be conditioned on its log; set data.x_transform=none "
               "(log suits positive data spanning decades, as data=lotka_volterra's)")
    good = [j for j in range(1, NUM_OBSERVATIONS + 1) if logged_finite(read(j))]
    if not good:
        return refusal
    asked = list(asked)
    keep = [j for j in asked if j in good] or good  # eval.observations: the usable ones asked, else all usable
    # data.num_observation one of those scored (good[0], beside eval.observations=[8], would not be scored)
    fix = [f"data.num_observation={keep[0]}"] * (num_observation not in good) + [
        f"eval.observations=[{','.join(map(str, keep))}]"] * bool(set(asked) - set(good))
    return (f"{refusal}, or keep it and read only observations of positive data ({name}'s "
            f"{', '.join(map(str, good))}): {' '.join(fix)}")

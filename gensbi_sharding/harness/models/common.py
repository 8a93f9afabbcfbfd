"""What every velocity field of the harness shares: input checks, time features, small output init.

A velocity field ``v(theta_t, x, t)`` of flow matching takes a batch of parameters
``theta_t`` (B, dim_theta), observations ``x`` (B, dim_x) and flow times ``t`` (B,) or ();
``prepare_inputs`` checks and casts them the same way for every model, and
``time_embedding`` turns ``t`` into sinusoidal features; ``compute_dtype`` reads GenSBI's dtype settings.
Model wrappers (the MLP, the transformer, GenSBI's Flux1 and Simformer) import these from here.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from flax import nnx

from gensbi_sharding import PartitionAxis
from gensbi_sharding.harness.config import DTYPES
from gensbi_sharding.harness.units import is_int

__all__ = ["MAX_TIME_FREQUENCY", "small_init", "positive_int", "compute_dtype", "check_partition_axis",
           "time_embedding", "prepare_inputs", "gensbi_params"]

# The highest angular frequency of the time embedding. t lives in [0, 1], so frequencies
# from 1 (one smooth feature over the whole interval) to 1000 resolve both the coarse
# position and small steps of an ODE solver.
MAX_TIME_FREQUENCY = 1000.0

# Output layers start small, not zero: the initial velocity is then close to 0 (the loss
# starts near E||theta_1 - theta_0||^2) yet still depends on every input, so gradients
# reach every layer at step one and the "depends on x / t" checks hold at initialisation.
small_init = nnx.initializers.variance_scaling(1e-2, "fan_in", "truncated_normal")


def positive_int(name: str, value) -> int:
    """``value`` as an ``int`` if it is a positive integer; ``ValueError`` naming ``name`` otherwise."""
    if not is_int(value) or value < 1:  # NumPy integers pass; bools, floats and strings do not
        raise ValueError(f"{name} must be a positive integer, got {value!r}; pass e.g. {name}=8")
    return int(value)


def compute_dtype(key: str, value) -> jnp.dtype:
    """``value`` ("float32", "bfloat16", "float16") as a dtype; ``ValueError`` naming ``model.<key>``.

    Shared by GenSBI's two wrappers (``flux1``, ``simformer``): their ``param_dtype`` and ``dtype`` settings."""
    if value not in DTYPES:
        raise ValueError(f"model.{key}={value!r} is not one of {', '.join(DTYPES)}; "
                         f"pass e.g. model.{key}=float32")
    return jnp.dtype(value)


def check_partition_axis(value) -> PartitionAxis | None:
    """``value`` if it is a ``PartitionAxis`` or None; ``ValueError`` otherwise."""
    if value is not None and not isinstance(value, PartitionAxis):
        raise ValueError(f"partition_axis must be a PartitionAxis or None, got {value!r}; build one "
                         "with PartitionAxis.for_rule(rule, mesh)")
    return value


#: The wrappers of GenSBI's models, by the ``params`` field only their kind has: how to wrap a model of that kind.
_WRAPPERS = {"dim_obs": "Flux1Velocity(model)", "dim_joint": "SimformerVelocity(model, dim_theta=...)"}


def gensbi_params(model, wrapper: str, field: str):
    """``model.params`` if ``model`` is a GenSBI model a wrapper can call; ``ValueError`` naming the fix otherwise.

    The wrappers read their sizes from ``model.params`` and call the model without a guidance strength, so
    a ``...Params`` passed in place of its model, a model of the other kind (``field``: ``dim_obs`` for
    Flux1, ``dim_joint`` for the joint models), or one built with ``guidance_embed=True`` failed later: an
    ``AttributeError``, or GenSBI's "Didn't get guidance strength" at the first call.

    Parameters
    ----------
    model : nnx.Module
        What the user handed the wrapper.
    wrapper : str
        The wrapper's name, for the message.
    field : str
        A ``params`` field only the models this wrapper calls have.

    Returns
    -------
    The model's ``params`` dataclass.

    Raises
    ------
    ValueError
        Naming what was given and the call that fits it.
    """
    name = type(model).__name__
    fits = next((how for key, how in _WRAPPERS.items() if hasattr(model, key)), None)
    if not hasattr(model, "params") and fits:  # the dataclass itself, not the model built from it
        built = f"{name.removesuffix('Params') or 'Model'}(params)"
        raise ValueError(f"{wrapper} takes the GenSBI model, got its {name}; build the model first: "
                         f"{fits.replace('(model', '(' + built, 1)}")
    params = getattr(model, "params", None)
    if not hasattr(params, field):
        fits = next((how for key, how in _WRAPPERS.items() if hasattr(params, key)), None)
        raise ValueError(f"{wrapper} wraps a GenSBI model whose params have {field}, got {name}"
                         + (f"; wrap this one with {fits}" if fits else "; build gensbi.models.Flux1 or Simformer, "
                            "or wrap your own module in a velocity field v(theta_t, x, t) of your own"))
    if getattr(params, "guidance_embed", False):
        raise ValueError(f"{name} built with guidance_embed=True expects a guidance strength at every call, which "
                         f"{wrapper} (flow matching without guidance) never passes; build its params with "
                         "guidance_embed=False")
    return params


def time_embedding(t: jax.Array, dim: int) -> jax.Array:
    """Sinusoidal features of the flow time.

    The transformer positional encoding of Vaswani et al. (2017, "Attention is all you
    need"), used for diffusion time by Ho et al. (2020, DDPM), with geometrically spaced
    angular frequencies from 1 to ``MAX_TIME_FREQUENCY`` suited to ``t`` in [0, 1].

    Parameters
    ----------
    t : jax.Array, shape (B,), float
        Flow time of each sample.
    dim : int
        Number of features, even: ``dim // 2`` sines followed by as many cosines.

    Returns
    -------
    jax.Array, shape (B, dim), float32
    """
    if dim < 2 or dim % 2:
        raise ValueError(f"time_embed_dim must be an even integer >= 2, got {dim!r}; pass e.g. 32")
    freqs = jnp.exp(jnp.linspace(0.0, math.log(MAX_TIME_FREQUENCY), dim // 2, dtype=jnp.float32))
    angles = t.astype(jnp.float32)[:, None] * freqs[None, :]
    return jnp.concatenate([jnp.sin(angles), jnp.cos(angles)], axis=-1)


def prepare_inputs(theta_t, x, t, dim_theta: int, dim_x: int):
    """Check the velocity-field inputs and return them as float32, ``t`` broadcast to (B,).

    Parameters
    ----------
    theta_t : array, shape (B, dim_theta)
    x : array, shape (B, dim_x)
    t : array, shape (B,) or () (one time for the whole batch, as ODE solvers pass it)

    Returns
    -------
    tuple of jax.Array
        ``theta_t`` (B, dim_theta), ``x`` (B, dim_x), ``t`` (B,), all float32.
    """
    theta_t, x, t = (jnp.asarray(a, jnp.float32) for a in (theta_t, x, t))
    if theta_t.ndim != 2 or theta_t.shape[1] != dim_theta:
        raise ValueError(f"theta_t must have shape (B, {dim_theta}), got {theta_t.shape}; "
                         "add a batch axis or build the model with the right dim_theta")
    batch = theta_t.shape[0]
    if x.shape != (batch, dim_x):
        raise ValueError(f"x must have shape ({batch}, {dim_x}) to match theta_t, got {x.shape}; "
                         "pass one observation per theta_t row (broadcast it with jnp.broadcast_to)")
    if t.shape not in ((), (batch,)):
        raise ValueError(f"t must have shape () or ({batch},), got {t.shape}; pass one time per sample")
    return theta_t, x, jnp.broadcast_to(t, (batch,))

"""Residual MLP velocity field ``v(theta_t, x, t)`` for conditional flow matching.

The network sees one vector per sample, ``concat(theta_t, x, time_embedding(t))``, so it
is the simplest baseline; every parameter carries logical axis names (see
``gensbi_sharding.sharding``) so the same module can be replicated, FSDP-sharded over
``embed`` or tensor-sharded over ``mlp`` without code changes.

Parameter annotations (shape: logical axes)
-------------------------------------------
- ``in_proj`` kernel, bias                 (d_in, W): ("in", "embed"); (W,): ("embed",)
- ``blocks[i].norm`` scale, bias           (W,): ("embed",)
- ``blocks[i].up`` kernel, bias            (W, H): ("embed", "mlp"); (H,): ("mlp",)
- ``blocks[i].down`` kernel, bias          (H, W): ("mlp", "embed"); (W,): ("embed",)
- ``out_norm`` scale, bias                 (W,): ("embed",)
- ``out_proj`` kernel, bias                (W, dim_theta): ("embed", "out"); (dim_theta,): ("out",)

with ``d_in = dim_theta + dim_x + time_embed_dim``, ``W = width``, ``H = mlp_ratio * width``.

Activations: the (B, W) residual stream is constrained to ``("batch", "hidden")`` after the
input projection and after every block, through the model's ``partition_axis`` (see
``gensbi_sharding.activations``; None, the default, constrains nothing).
"""

from __future__ import annotations

import math
import operator

import jax
import jax.numpy as jnp
from flax import nnx

from gensbi_sharding.activations import PartitionAxis, constrain
from gensbi_sharding.harness.registry import register_model
from gensbi_sharding.sharding import axes

__all__ = ["MLPVelocity", "make_mlp", "time_embedding", "prepare_inputs", "positive_int",
           "check_partition_axis"]

# The highest angular frequency of the time embedding. t lives in [0, 1], so frequencies
# from 1 (one smooth feature over the whole interval) to 1000 resolve both the coarse
# position and small steps of an ODE solver.
_MAX_TIME_FREQUENCY = 1000.0

# Output layers start small, not zero: the initial velocity is then close to 0 (the loss
# starts near E||theta_1 - theta_0||^2) yet still depends on every input, so gradients
# reach every layer at step one and the "depends on x / t" checks hold at initialisation.
small_init = nnx.initializers.variance_scaling(1e-2, "fan_in", "truncated_normal")


def positive_int(name: str, value) -> int:
    """``value`` as an ``int`` if it is a positive integer; ``ValueError`` naming ``name`` otherwise."""
    try:
        as_int = operator.index(value)  # numpy integers pass; floats and strings do not
    except TypeError:
        as_int = None
    if as_int is None or isinstance(value, bool) or as_int < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}; pass e.g. {name}=8")
    return as_int


def check_partition_axis(value) -> PartitionAxis | None:
    """``value`` if it is a ``PartitionAxis`` or None; ``ValueError`` otherwise."""
    if value is not None and not isinstance(value, PartitionAxis):
        raise ValueError(f"partition_axis must be a PartitionAxis or None, got {value!r}; build one "
                         "with PartitionAxis.for_rule(rule, mesh)")
    return value


def time_embedding(t: jax.Array, dim: int) -> jax.Array:
    """Sinusoidal features of the flow time.

    The transformer positional encoding of Vaswani et al. (2017, "Attention is all you
    need"), used for diffusion time by Ho et al. (2020, DDPM), with geometrically spaced
    angular frequencies from 1 to ``_MAX_TIME_FREQUENCY`` suited to ``t`` in [0, 1].

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
    freqs = jnp.exp(jnp.linspace(0.0, math.log(_MAX_TIME_FREQUENCY), dim // 2, dtype=jnp.float32))
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


class ResidualBlock(nnx.Module):
    """Pre-LayerNorm residual MLP block: ``h + down(gelu(up(norm(h))))``.

    Parameters
    ----------
    width : int
        Feature size ``W`` of the residual stream.
    hidden : int
        Feature size ``H`` of the expansion.
    rngs : nnx.Rngs
    """

    def __init__(self, width: int, hidden: int, *, rngs: nnx.Rngs):
        self.norm = nnx.LayerNorm(width, rngs=rngs, scale_metadata=axes("embed"),
                                  bias_metadata=axes("embed"))
        self.up = nnx.Linear(width, hidden, rngs=rngs, kernel_metadata=axes("embed", "mlp"),
                             bias_metadata=axes("mlp"))
        self.down = nnx.Linear(hidden, width, rngs=rngs, kernel_metadata=axes("mlp", "embed"),
                               bias_metadata=axes("embed"))

    def __call__(self, h: jax.Array) -> jax.Array:
        """``h``: (B, W) float32 -> (B, W) float32."""
        return h + self.down(jax.nn.gelu(self.up(self.norm(h))))


class MLPVelocity(nnx.Module):
    """Residual MLP velocity field ``v(theta_t, x, t) -> (B, dim_theta)``; see the module docstring."""

    def __init__(self, *, dim_theta: int, dim_x: int, rngs: nnx.Rngs, width: int,
                 depth: int, mlp_ratio: int, time_embed_dim: int,
                 partition_axis: PartitionAxis | None = None):
        self.dim_theta, self.dim_x, self.time_embed_dim = dim_theta, dim_x, time_embed_dim
        # Static (part of the graph definition): a jitted step traces with this strategy.
        self.partition_axis = check_partition_axis(partition_axis)
        d_in = dim_theta + dim_x + time_embed_dim
        self.in_proj = nnx.Linear(d_in, width, rngs=rngs, kernel_metadata=axes("in", "embed"),
                                  bias_metadata=axes("embed"))
        self.blocks = nnx.List([ResidualBlock(width, mlp_ratio * width, rngs=rngs)
                                for _ in range(depth)])
        self.out_norm = nnx.LayerNorm(width, rngs=rngs, scale_metadata=axes("embed"),
                                      bias_metadata=axes("embed"))
        self.out_proj = nnx.Linear(width, dim_theta, rngs=rngs, kernel_init=small_init,
                                   kernel_metadata=axes("embed", "out"), bias_metadata=axes("out"))

    def __call__(self, theta_t, x, t) -> jax.Array:
        """Velocity at ``theta_t`` given observation ``x`` and time ``t``.

        Parameters
        ----------
        theta_t : array, shape (B, dim_theta)
        x : array, shape (B, dim_x)
        t : array, shape (B,) or ()

        Returns
        -------
        jax.Array, shape (B, dim_theta), float32
        """
        theta_t, x, t = prepare_inputs(theta_t, x, t, self.dim_theta, self.dim_x)
        stream = ("batch", "hidden")
        h = self.in_proj(jnp.concatenate([theta_t, x, time_embedding(t, self.time_embed_dim)], -1))
        h = constrain(h, stream, self.partition_axis)
        for block in self.blocks:
            h = constrain(block(h), stream, self.partition_axis)
        return self.out_proj(self.out_norm(h))


@register_model("mlp")
def make_mlp(*, dim_theta: int, dim_x: int, rngs: nnx.Rngs, width: int = 256, depth: int = 4,
             mlp_ratio: int = 4, time_embed_dim: int = 32,
             partition_axis: PartitionAxis | None = None) -> MLPVelocity:
    """Build a residual MLP velocity field.

    Parameters
    ----------
    dim_theta, dim_x : int
        Sizes of the parameter and observation vectors.
    rngs : nnx.Rngs
        Needs a ``params`` stream.
    width : int, default 256
        Residual-stream size (logical axis ``embed``); a multiple of 8 splits evenly
        under FSDP on 8 devices.
    depth : int, default 4
        Number of residual blocks.
    mlp_ratio : int, default 4
        Hidden size of each block is ``mlp_ratio * width`` (logical axis ``mlp``).
    time_embed_dim : int, default 32
        Number of sinusoidal time features (even).
    partition_axis : PartitionAxis, optional
        Activation layout under a mesh (``PartitionAxis.for_rule``); None: unconstrained.
        Settable later as ``model.partition_axis`` (before ``nnx.split``).

    Returns
    -------
    MLPVelocity
    """
    dims = {k: positive_int(k, v) for k, v in dict(
        dim_theta=dim_theta, dim_x=dim_x, width=width, depth=depth, mlp_ratio=mlp_ratio,
        time_embed_dim=time_embed_dim).items()}
    if dims["time_embed_dim"] % 2:
        raise ValueError(f"time_embed_dim must be even (sines and cosines), got {time_embed_dim}; "
                         f"pass {time_embed_dim + 1}")
    return MLPVelocity(rngs=rngs, partition_axis=partition_axis, **dims)

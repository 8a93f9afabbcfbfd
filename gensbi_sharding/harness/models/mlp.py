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

import jax
import jax.numpy as jnp
from flax import nnx

from gensbi_sharding import PartitionAxis, axes, constrain
from gensbi_sharding.harness.config import MLPConfig  # the one source of the defaults
from gensbi_sharding.harness.models.common import (
    check_partition_axis, positive_int, prepare_inputs, small_init, time_embedding)
from gensbi_sharding.harness.factories import register_model

__all__ = ["MLPVelocity", "make_mlp"]

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


@register_model("mlp", built_in=True)
def make_mlp(*, dim_theta: int, dim_x: int, rngs: nnx.Rngs, width: int = MLPConfig.width,
             depth: int = MLPConfig.depth, mlp_ratio: int = MLPConfig.mlp_ratio,
             time_embed_dim: int = MLPConfig.time_embed_dim,
             partition_axis: PartitionAxis | None = None) -> MLPVelocity:
    """Build a residual MLP velocity field.

    Parameters
    ----------
    dim_theta, dim_x : int
        Sizes of the parameter and observation vectors.
    rngs : nnx.Rngs
        Needs a ``params`` stream.
    width : int, default 128
        Residual-stream size (logical axis ``embed``); a multiple of 8 splits evenly
        under FSDP on 8 devices.
    depth : int, default 3
        Number of residual blocks.
    mlp_ratio : int, default 2
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

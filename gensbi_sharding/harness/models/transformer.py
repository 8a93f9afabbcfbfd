"""Token transformer velocity field ``v(theta_t, x, t)``, in the style of Simformer and Flux.

Every scalar of ``theta_t`` and of ``x`` becomes one token, as in Simformer (Gloeckler et
al. 2024, "All-in-one simulation-based inference"): ``value * value_embed[i] +
token_embed[i]``, plus a learned flag vector on the condition (``x``) tokens. Pre-LN blocks
of multi-head self-attention and an MLP mix the tokens; the flow time enters every
LayerNorm by adaptive LayerNorm (adaLN, Peebles & Xie 2023, "Scalable diffusion models
with transformers", DiT), as in Flux (Black Forest Labs, 2024). One scalar per ``theta``
token is read out.

Parameter annotations (shape: logical axes)
-------------------------------------------
- ``value_embed``, ``token_embed`` tables      (V, E): ("vocab", "embed")
- ``condition_flag``                          (E,): ("embed",)
- ``time_in`` kernel, bias                    (T, E): ("in", "mlp"); (E,): ("mlp",)
- ``time_out`` kernel, bias                   (E, E): ("mlp", "embed"); (E,): ("embed",)
- ``blocks[i].modulation`` kernel, bias       (E, 4, E): (None, None, "embed"); (4, E): (None, "embed")
- ``blocks[i].query``/``key``/``value`` kernel (E, heads, D): ("embed", "heads", None), no bias
- ``blocks[i].attn_out`` kernel, bias         (heads, D, E): ("heads", None, "embed"); (E,): ("embed",)
- ``blocks[i].up`` kernel, bias               (E, H): ("embed", "mlp"); (H,): ("mlp",)
- ``blocks[i].down`` kernel, bias             (H, E): ("mlp", "embed"); (E,): ("embed",)
- ``final_modulation`` kernel, bias           (E, 2, E): (None, None, "embed"); (2, E): (None, "embed")
- ``readout`` kernel, bias                    (E, 1): ("embed", "out"); (1,): ("out",)

``E = embed``, ``D = embed // heads``, ``H = mlp_ratio * embed``, ``T = time_embed_dim``;
``V`` is the token count ``dim_theta + dim_x`` rounded up to a multiple of 8. The LayerNorms
have no parameters: adaLN supplies their scale and shift, as in DiT.

Activations are constrained through the model's ``partition_axis`` (see
``gensbi_sharding.activations``; None, the default, constrains nothing): the (B, N, E)
tokens to ``("batch", "sequence", "hidden")`` when built and after every block, the
(B, E) time features to ``("batch", "hidden")``, and the (B, N, heads, D) queries, keys
and values to ``("batch", "query_sequence" | "key_sequence", "heads", "head_dim")``.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from flax import nnx

from gensbi_sharding import PartitionAxis, axes, constrain
from gensbi_sharding.harness.config import TransformerConfig  # the one source of the defaults
from gensbi_sharding.harness.models.common import (
    check_partition_axis, positive_int, prepare_inputs, small_init, time_embedding)
from gensbi_sharding.harness.factories import register_model

__all__ = ["TransformerVelocity", "make_transformer", "VOCAB_MULTIPLE"]

# Token tables are padded to this many rows: "vocab" maps to the "model" mesh axis under
# tensor parallelism, and a dimension that does not divide by the axis size cannot be
# placed (two_moons has 4 tokens, slcp 13). The unused rows cost V - n embeddings.
VOCAB_MULTIPLE = 8

_TOKENS = ("batch", "sequence", "hidden")


def _modulate(h: jax.Array, shift: jax.Array, scale: jax.Array) -> jax.Array:
    # DiT's "1 + scale": a zero modulation leaves the normalised tokens unchanged.
    return h * (1.0 + scale[:, None, :]) + shift[:, None, :]


class TransformerBlock(nnx.Module):
    """Pre-LN block ``h + attn(adaLN(h)); h + mlp(adaLN(h))`` on (B, N, E) tokens.

    Parameters
    ----------
    embed : int
        Token size ``E``.
    heads : int
        Number of attention heads; ``embed`` must divide by it.
    hidden : int
        Hidden size of the MLP.
    rngs : nnx.Rngs
    """

    def __init__(self, embed: int, heads: int, hidden: int, *, rngs: nnx.Rngs):
        head_dim = embed // heads
        # adaLN: shift and scale for both norms, each an (E,) vector like a LayerNorm's
        # parameters, hence "embed" on the output; the input axis stays unsharded because
        # one array cannot use the same mesh axis twice.
        self.modulation = nnx.LinearGeneral(embed, (4, embed), rngs=rngs,
                                     kernel_metadata=axes(None, None, "embed"),
                                     bias_metadata=axes(None, "embed"))
        self.norm = nnx.LayerNorm(embed, use_scale=False, use_bias=False, rngs=rngs)
        qkv = dict(use_bias=False, rngs=rngs, kernel_metadata=axes("embed", "heads", None))
        self.query = nnx.LinearGeneral(embed, (heads, head_dim), **qkv)
        self.key = nnx.LinearGeneral(embed, (heads, head_dim), **qkv)
        self.value = nnx.LinearGeneral(embed, (heads, head_dim), **qkv)
        self.attn_out = nnx.LinearGeneral((heads, head_dim), embed, axis=(-2, -1), rngs=rngs,
                                   kernel_metadata=axes("heads", None, "embed"),
                                   bias_metadata=axes("embed"))
        self.up = nnx.Linear(embed, hidden, rngs=rngs, kernel_metadata=axes("embed", "mlp"),
                             bias_metadata=axes("mlp"))
        self.down = nnx.Linear(hidden, embed, rngs=rngs, kernel_metadata=axes("mlp", "embed"),
                               bias_metadata=axes("embed"))

    def attention(self, h: jax.Array, partition_axis: PartitionAxis | None = None) -> jax.Array:
        """Full (unmasked) multi-head self-attention, (B, N, E) -> (B, N, E)."""
        q = constrain(self.query(h), ("batch", "query_sequence", "heads", "head_dim"), partition_axis)
        kv = ("batch", "key_sequence", "heads", "head_dim")  # (B, N, heads, D)
        k, v = constrain(self.key(h), kv, partition_axis), constrain(self.value(h), kv, partition_axis)
        logits = jnp.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(q.shape[-1])
        weights = jax.nn.softmax(logits, axis=-1)
        return self.attn_out(jnp.einsum("bhqk,bkhd->bqhd", weights, v))

    def __call__(self, h: jax.Array, cond: jax.Array,
                 partition_axis: PartitionAxis | None = None) -> jax.Array:
        """``h``: (B, N, E) tokens, ``cond``: (B, E) time features -> (B, N, E), float32.

        ``partition_axis`` is the owning model's activation strategy (None: unconstrained).
        """
        shift1, scale1, shift2, scale2 = jnp.unstack(self.modulation(cond), axis=1)
        h = h + self.attention(_modulate(self.norm(h), shift1, scale1), partition_axis)
        return h + self.down(jax.nn.gelu(self.up(_modulate(self.norm(h), shift2, scale2))))


class TransformerVelocity(nnx.Module):
    """Token transformer velocity field ``v(theta_t, x, t) -> (B, dim_theta)``; see the module doc."""

    def __init__(self, *, dim_theta: int, dim_x: int, rngs: nnx.Rngs, embed: int, depth: int,
                 heads: int, mlp_ratio: int, time_embed_dim: int,
                 partition_axis: PartitionAxis | None = None):
        self.dim_theta, self.dim_x, self.time_embed_dim = dim_theta, dim_x, time_embed_dim
        # Static (part of the graph definition): a jitted step traces with this strategy.
        self.partition_axis = check_partition_axis(partition_axis)
        n_tokens = dim_theta + dim_x
        vocab = -(-n_tokens // VOCAB_MULTIPLE) * VOCAB_MULTIPLE
        table = axes("vocab", "embed")
        self.value_embed = nnx.Embed(vocab, embed, rngs=rngs, embedding_metadata=table)
        self.token_embed = nnx.Embed(vocab, embed, rngs=rngs, embedding_metadata=table)
        self.condition_flag = nnx.Param(
            nnx.initializers.normal(embed ** -0.5)(rngs.params(), (embed,)), **axes("embed"))
        self.time_in = nnx.Linear(time_embed_dim, embed, rngs=rngs,
                                  kernel_metadata=axes("in", "mlp"), bias_metadata=axes("mlp"))
        self.time_out = nnx.Linear(embed, embed, rngs=rngs,
                                   kernel_metadata=axes("mlp", "embed"), bias_metadata=axes("embed"))
        self.blocks = nnx.List([TransformerBlock(embed, heads, mlp_ratio * embed, rngs=rngs)
                                for _ in range(depth)])
        self.final_modulation = nnx.LinearGeneral(embed, (2, embed), rngs=rngs,
                                           kernel_metadata=axes(None, None, "embed"),
                                           bias_metadata=axes(None, "embed"))
        self.final_norm = nnx.LayerNorm(embed, use_scale=False, use_bias=False, rngs=rngs)
        self.readout = nnx.Linear(embed, 1, rngs=rngs, kernel_init=small_init,
                                  kernel_metadata=axes("embed", "out"), bias_metadata=axes("out"))

    def tokens(self, theta_t: jax.Array, x: jax.Array) -> jax.Array:
        """(B, dim_theta) and (B, dim_x) float32 -> (B, N, E) tokens, theta first."""
        values = jnp.concatenate([theta_t, x], axis=-1)  # (B, N)
        ids = jnp.arange(values.shape[1])
        is_condition = (ids >= self.dim_theta).astype(jnp.float32)
        return (values[..., None] * self.value_embed(ids) + self.token_embed(ids)
                + is_condition[:, None] * self.condition_flag[...])

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
        pa = self.partition_axis
        cond = jax.nn.silu(self.time_out(jax.nn.silu(self.time_in(
            time_embedding(t, self.time_embed_dim)))))  # (B, E)
        cond = constrain(cond, ("batch", "hidden"), pa)
        h = constrain(self.tokens(theta_t, x), _TOKENS, pa)
        for block in self.blocks:
            h = constrain(block(h, cond, pa), _TOKENS, pa)
        shift, scale = jnp.unstack(self.final_modulation(cond), axis=1)
        h = _modulate(self.final_norm(h[:, :self.dim_theta]), shift, scale)
        return self.readout(h)[..., 0]


@register_model("transformer", built_in=True)
def make_transformer(*, dim_theta: int, dim_x: int, rngs: nnx.Rngs, embed: int = TransformerConfig.embed,
                     depth: int = TransformerConfig.depth, heads: int = TransformerConfig.heads,
                     mlp_ratio: int = TransformerConfig.mlp_ratio,
                     time_embed_dim: int = TransformerConfig.time_embed_dim,
                     partition_axis: PartitionAxis | None = None) -> TransformerVelocity:
    """Build a token transformer velocity field.

    Parameters
    ----------
    dim_theta, dim_x : int
        Sizes of the parameter and observation vectors (one token per scalar).
    rngs : nnx.Rngs
        Needs a ``params`` stream.
    embed : int, default 64
        Token size (logical axis ``embed``); a multiple of 8 splits evenly under FSDP on 8.
    depth : int, default 2
        Number of transformer blocks.
    heads : int, default 8
        Attention heads (logical axis ``heads``); 8 splits evenly on a model axis of 2, 4 or 8.
    mlp_ratio : int, default 4
        MLP hidden size is ``mlp_ratio * embed`` (logical axis ``mlp``).
    time_embed_dim : int, default 32
        Number of sinusoidal time features (even).
    partition_axis : PartitionAxis, optional
        Activation layout under a mesh (``PartitionAxis.for_rule``); None: unconstrained.
        Settable later as ``model.partition_axis`` (before ``nnx.split``).

    Returns
    -------
    TransformerVelocity
    """
    dims = {k: positive_int(k, v) for k, v in dict(
        dim_theta=dim_theta, dim_x=dim_x, embed=embed, depth=depth, heads=heads,
        mlp_ratio=mlp_ratio, time_embed_dim=time_embed_dim).items()}
    if dims["embed"] % dims["heads"]:
        raise ValueError(f"embed={embed} must be a multiple of heads={heads}; "
                         f"pick heads among the divisors of {embed} or round embed up")
    if dims["time_embed_dim"] % 2:
        raise ValueError(f"time_embed_dim must be even (sines and cosines), got {time_embed_dim}; "
                         f"pass {time_embed_dim + 1}")
    return TransformerVelocity(rngs=rngs, partition_axis=partition_axis, **dims)

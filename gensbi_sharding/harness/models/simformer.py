"""GenSBI's Simformer as a harness velocity field ``v(theta_t, x, t)`` (``model=simformer``).

The network is GenSBI's own ``gensbi.models.simformer.model.Simformer`` built from its
``SimformerParams`` (imported, never copied; needs the ``gensbi`` extra:
``pip install -e ".[gensbi]"``), whose variables carry this package's logical axes.

Simformer (Gloeckler et al. 2024, "All-in-one simulation-based inference") models the
joint of parameters and observations as one token sequence; which tokens are given is
its condition mask. The harness asks for the posterior, so the wrapper calls GenSBI's
own ``JointWrapper.conditioned``: ``theta_t`` (B, dim_theta, 1) tokens followed by ``x``
(B, dim_x, 1) tokens, node ids from GenSBI's ``init_ids_joint``, the condition mask set
on the ``x`` tokens, and the velocity read off the ``theta`` tokens.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from gensbi_sharding import PartitionAxis, constrain
from gensbi_sharding.harness.models.common import (check_partition_axis, compute_dtype, gensbi_params, positive_int,
                                                   prepare_inputs)
from gensbi_sharding.harness.units import is_int
from gensbi_sharding.harness.factories import GENSBI, import_required, register_model

__all__ = ["SimformerVelocity", "make_simformer"]

_TOKENS = ("batch", None, None)  # GenSBI's blocks carry no activation constraints of their own


class SimformerVelocity(nnx.Module):
    """Posterior velocity field ``v(theta_t, x, t) -> (B, dim_theta)`` around a GenSBI ``Simformer``.

    Parameters
    ----------
    simformer : gensbi.models.simformer.model.Simformer
        Built with ``dim_joint = dim_theta + dim_x`` and ``in_channels = 1``.
    dim_theta : int
        How many of the joint tokens are parameters (the first ones); the rest are observations.
    partition_axis : PartitionAxis, optional
        Activation layout under a mesh: the input tokens and the output are constrained to
        split their batch rows; None: unconstrained.

    Raises
    ------
    ValueError
        If ``simformer`` is no GenSBI joint model (its ``SimformerParams``, a ``Flux1``), was built
        with ``guidance_embed=True`` (``Flux1Joint``), takes more than one channel per token, or
        ``dim_theta`` leaves no observation token.
    """

    def __init__(self, simformer, *, dim_theta: int, partition_axis: PartitionAxis | None = None):
        params = gensbi_params(simformer, "SimformerVelocity", "dim_joint")
        if params.in_channels != 1:
            raise ValueError(f"Simformer with in_channels={params.in_channels}: the harness passes "
                             "one scalar per token; build SimformerParams with in_channels=1")
        # A float, bool, string or None failed at the first call (a dtype error, or "theta_t must have shape (B, True)")
        if not is_int(dim_theta) or not 0 < dim_theta < params.dim_joint:
            raise ValueError(f"dim_theta={dim_theta!r} must be an integer in 1..{params.dim_joint - 1} "
                             f"(dim_joint={params.dim_joint} = dim_theta + dim_x)")
        dim_theta = int(dim_theta)
        self.simformer = simformer
        self.dim_theta, self.dim_x = dim_theta, params.dim_joint - dim_theta
        self.partition_axis = check_partition_axis(partition_axis)

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
        from gensbi.models import JointWrapper
        from gensbi_sharding.harness.agg_figure import import_matplotlib

        import_matplotlib()  # gensbi.recipes imports matplotlib, which raises on an MPLBACKEND it lacks
        from gensbi.recipes.utils import init_ids_joint

        theta_t, x, t = prepare_inputs(theta_t, x, t, self.dim_theta, self.dim_x)
        _, obs_ids, cond_ids = init_ids_joint(self.dim_theta, self.dim_x)
        obs = constrain(theta_t[..., None], _TOKENS, self.partition_axis)
        cond = constrain(x[..., None], _TOKENS, self.partition_axis)
        # A wrapper without variables of its own, so parameter paths stay simformer/...
        out = JointWrapper(self.simformer).conditioned(obs, obs_ids, cond, cond_ids, t)
        return constrain(out[..., 0].astype(jnp.float32), ("batch", None), self.partition_axis)


@register_model("simformer", requires=GENSBI, built_in=True)
def make_simformer(*, dim_theta: int, dim_x: int, rngs: nnx.Rngs, val_emb_dim: int = 40,
                   id_emb_dim: int = 40, cond_emb_dim: int = 10, num_heads: int = 4, depth: int = 8,
                   num_hidden_layers: int = 1, fourier_features: int = 128, mlp_ratio: int = 3,
                   qkv_features: int | None = 40, param_dtype: str = "float32", dtype: str = "float32",
                   partition_axis: PartitionAxis | None = None) -> SimformerVelocity:
    """Build GenSBI's ``Simformer`` from ``SimformerParams`` fields, wrapped for the posterior.

    Every keyword but ``partition_axis`` is the ``SimformerParams`` field of the same name,
    with GenSBI's default (``gensbi.recipes.simformer.get_default_simformer_params``) except
    ``dtype``: GenSBI computes in bfloat16 by default, the harness in float32. Token size is
    ``val_emb_dim + id_emb_dim + cond_emb_dim``; ``qkv_features=None`` uses that size.

    Parameters
    ----------
    dim_theta, dim_x : int
        Parameter and observation sizes: ``dim_joint = dim_theta + dim_x`` one-channel tokens.
    rngs : nnx.Rngs
        Needs a ``params`` stream.

    Returns
    -------
    SimformerVelocity

    Raises
    ------
    ModuleNotFoundError
        If GenSBI is not installed (the message names the ``gensbi`` extra).
    ValueError
        For a size that is not a positive integer, naming the ``model.<field>`` override.
    """
    # gensbi.models' import-time jnp (tarflow's _LOG2PI): concrete, not a tracer leaked from this trace
    with jax.ensure_compile_time_eval():
        model_mod = import_required("gensbi.models.simformer.model", "simformer", GENSBI)
    sizes = dict(dim_theta=dim_theta, dim_x=dim_x, val_emb_dim=val_emb_dim, id_emb_dim=id_emb_dim,
                 cond_emb_dim=cond_emb_dim, num_heads=num_heads, depth=depth,
                 num_hidden_layers=num_hidden_layers, fourier_features=fourier_features,
                 mlp_ratio=mlp_ratio)
    if qkv_features is not None:
        sizes["qkv_features"] = qkv_features
    dims = {k: positive_int(f"model.{k}", v) for k, v in sizes.items()}
    qkv = dims.get("qkv_features", val_emb_dim + id_emb_dim + cond_emb_dim)
    if qkv % dims["num_heads"]:
        raise ValueError(f"model.qkv_features={qkv} must be a multiple of model.num_heads={num_heads}; "
                         f"pick num_heads among the divisors of {qkv}")
    dim_theta, dim_x = dims.pop("dim_theta"), dims.pop("dim_x")
    params = model_mod.SimformerParams(
        rngs=rngs, in_channels=1, dim_joint=dim_theta + dim_x, qkv_features=dims.pop("qkv_features", None),
        param_dtype=compute_dtype("param_dtype", param_dtype), dtype=compute_dtype("dtype", dtype), **dims)
    return SimformerVelocity(model_mod.Simformer(params), dim_theta=dim_theta,
                             partition_axis=partition_axis)

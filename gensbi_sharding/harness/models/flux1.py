"""GenSBI's Flux1 as a harness velocity field ``v(theta_t, x, t)`` (``model=flux1``).

The network is GenSBI's own ``gensbi.models.flux1.model.Flux1`` built from its
``Flux1Params`` (imported, never copied; needs the ``gensbi`` extra:
``pip install -e ".[gensbi]"``). GenSBI already annotates every variable with this
package's logical axes (``embed``, ``mlp``, ``heads``, ``vocab``, ``in``, ``out``), so
every rule, sharded init, the dry run and checkpoints work on it unchanged.

The wrapper only adapts the calling convention, as GenSBI's ``ConditionalPipeline``
does: ``theta_t`` (B, dim_theta) becomes (B, dim_theta, 1) parameter tokens, ``x``
(B, dim_x) becomes (B, dim_x, 1) observation tokens, and the token ids come from
GenSBI's ``init_ids_1d`` (semantic id 0 for parameters, 1 for observations).

Flux1 (Black Forest Labs, 2024): double-stream blocks over parameter and observation
tokens, then single-stream blocks over their concatenation, adaLN time conditioning.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from omegaconf import OmegaConf

from gensbi_sharding import PartitionAxis, constrain
from gensbi_sharding.harness.units import is_int
from gensbi_sharding.harness.models.common import (check_partition_axis, compute_dtype, gensbi_params, positive_int,
                                                   prepare_inputs)
from gensbi_sharding.harness.factories import GENSBI, import_required, register_model
from gensbi_sharding.harness.model_sections import ID_STRATEGIES_1D, ROPE_ID_AXES, check_built_in

__all__ = ["Flux1Velocity", "make_flux1", "flux1_params", "ID_STRATEGIES_1D"]

# pos2d / rope2d need image-shaped data: the harness passes vectors (ID_STRATEGIES_1D).
# Activation names at the wrapper's boundary; GenSBI's blocks carry no constraints of their own.
_TOKENS = ("batch", None, None)


class Flux1Velocity(nnx.Module):
    """Velocity field ``v(theta_t, x, t) -> (B, dim_theta)`` around a GenSBI ``Flux1``.

    Parameters
    ----------
    flux : gensbi.models.flux1.model.Flux1
        Built with ``dim_obs = dim_theta``, ``dim_cond = dim_x``, ``in_channels = 1`` and
        ``context_in_dim = 1`` (one scalar per token) and a 1-D id strategy.
    partition_axis : PartitionAxis, optional
        Activation layout under a mesh: the input tokens and the output are constrained to
        split their batch rows; None: unconstrained.

    Raises
    ------
    ValueError
        If ``flux`` is no GenSBI ``Flux1`` (its ``Flux1Params``, a joint model), was built with
        ``guidance_embed=True``, takes more than one channel per token, a 2-D id strategy, or a
        rope id strategy with other than two ``axes_dim`` sizes.
    """

    def __init__(self, flux, *, partition_axis: PartitionAxis | None = None):
        params = gensbi_params(flux, "Flux1Velocity", "dim_obs")
        if params.in_channels != 1 or params.context_in_dim != 1:
            raise ValueError(f"Flux1 with in_channels={params.in_channels}, context_in_dim="
                             f"{params.context_in_dim}: the harness passes one scalar per token; "
                             "build Flux1Params with in_channels=1, context_in_dim=1")
        for stream, strategy in zip(("parameter", "observation"), params.id_embedding_strategy):
            if strategy not in ID_STRATEGIES_1D + ("rope",):
                raise ValueError(f"Flux1 {stream} id strategy {strategy!r} needs image-shaped data; "
                                 f"use one of {', '.join(ID_STRATEGIES_1D)}")
        axes_dim = list(params.axes_dim or ())
        if any(str(s).startswith("rope") for s in params.id_embedding_strategy) and len(axes_dim) != ROPE_ID_AXES:
            # Otherwise an IndexError (one size) or a shape error (three) inside GenSBI's rope, at the first call.
            raise ValueError(f"Flux1 with a rope id strategy and axes_dim={axes_dim}: the wrapper's 1-D token ids "
                             f"have {ROPE_ID_AXES} axes (position, then parameter or observation), one axes_dim size "
                             f"each; build Flux1Params with axes_dim=[{sum(axes_dim) + sum(axes_dim) % 2},0]")
        self.flux = flux
        self.dim_theta, self.dim_x = params.dim_obs, params.dim_cond
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
        from gensbi_sharding.harness.agg_figure import import_matplotlib

        import_matplotlib()  # gensbi.recipes imports matplotlib, which raises on an MPLBACKEND it lacks
        from gensbi.recipes.utils import init_ids_1d

        theta_t, x, t = prepare_inputs(theta_t, x, t, self.dim_theta, self.dim_x)
        obs_ids, _ = init_ids_1d(self.dim_theta, semantic_id=0)  # as ConditionalPipeline builds them
        cond_ids, _ = init_ids_1d(self.dim_x, semantic_id=1)
        obs = constrain(theta_t[..., None], _TOKENS, self.partition_axis)
        cond = constrain(x[..., None], _TOKENS, self.partition_axis)
        out = self.flux(t=t, obs=obs, obs_ids=obs_ids, cond=cond, cond_ids=cond_ids)
        return constrain(out[..., 0].astype(jnp.float32), ("batch", None), self.partition_axis)


@register_model("flux1", requires=GENSBI, built_in=True)
def make_flux1(*, dim_theta: int, dim_x: int, rngs: nnx.Rngs, mlp_ratio: float = 4.0,
               num_heads: int = 6, depth: int = 8, depth_single_blocks: int = 16,
               qkv_bias: bool = True, axes_dim=(6, 0), val_emb_dim: int | None = None,
               id_emb_dim: int | None = None, id_merge_mode: str = "sum", theta: int | None = None,
               id_embedding_strategy=("absolute", "absolute"), param_dtype: str = "float32",
               dtype: str = "float32", partition_axis: PartitionAxis | None = None) -> Flux1Velocity:
    """Build GenSBI's ``Flux1`` from ``Flux1Params`` fields and wrap it as a velocity field.

    Every keyword but ``partition_axis`` is the ``Flux1Params`` field of the same name (``flux1_params``
    builds them, with GenSBI's defaults but ``dtype``: float32 here, bfloat16 in GenSBI).

    Parameters
    ----------
    dim_theta, dim_x : int
        Parameter and observation sizes: ``dim_obs`` and ``dim_cond`` tokens of one channel.
    rngs : nnx.Rngs
        Needs a ``params`` stream.
    partition_axis : PartitionAxis, optional
        The activation layout under a mesh; None: unconstrained.

    Returns
    -------
    Flux1Velocity

    Raises
    ------
    ModuleNotFoundError
        If GenSBI is not installed (the message names the ``gensbi`` extra).
    ValueError
        For a value GenSBI rejects, naming the ``model.<field>`` override.
    """
    params = flux1_params(
        dim_theta=dim_theta, dim_x=dim_x, rngs=rngs, mlp_ratio=mlp_ratio, num_heads=num_heads, depth=depth,
        depth_single_blocks=depth_single_blocks, qkv_bias=qkv_bias, axes_dim=axes_dim, val_emb_dim=val_emb_dim,
        id_emb_dim=id_emb_dim, id_merge_mode=id_merge_mode, theta=theta, id_embedding_strategy=id_embedding_strategy,
        param_dtype=param_dtype, dtype=dtype)
    model_mod = import_required("gensbi.models.flux1.model", "flux1", GENSBI)  # imported by flux1_params
    return Flux1Velocity(model_mod.Flux1(params), partition_axis=partition_axis)


def flux1_params(*, dim_theta: int, dim_x: int, rngs: nnx.Rngs, mlp_ratio: float = 4.0, num_heads: int = 6,
                 depth: int = 8, depth_single_blocks: int = 16, qkv_bias: bool = True, axes_dim=(6, 0),
                 val_emb_dim: int | None = None, id_emb_dim: int | None = None, id_merge_mode: str = "sum",
                 theta: int | None = None, id_embedding_strategy=("absolute", "absolute"),
                 param_dtype: str = "float32", dtype: str = "float32"):
    """GenSBI's ``Flux1Params`` of ``model=flux1``'s fields: the one mapping of them (``make_flux1`` and
    ``benchmarks/gensbi_pipeline.py``, whose GenSBI side must build the very model the harness trains).

    Every keyword is the ``Flux1Params`` field of the same name, with GenSBI's default
    (``gensbi.recipes.flux1.get_default_flux1_params``) except ``dtype``: GenSBI computes in bfloat16 by
    default, the harness in float32 (pass ``dtype="bfloat16"`` for GenSBI's). The hidden size is
    ``sum(axes_dim) * num_heads`` ("sum" merge) or ``(val_emb_dim + id_emb_dim) * num_heads`` ("concat").
    The harness fixes the rest: one channel per token, no vector input, no guidance embedding.

    Parameters
    ----------
    dim_theta, dim_x : int
        Parameter and observation sizes: ``dim_obs`` and ``dim_cond`` tokens of one channel.
    rngs : nnx.Rngs
        Needs a ``params`` stream.

    Returns
    -------
    gensbi.models.Flux1Params

    Raises
    ------
    ModuleNotFoundError
        If GenSBI is not installed (the message names the ``gensbi`` extra).
    ValueError
        For a value GenSBI rejects, naming the ``model.<field>`` override.
    """
    with jax.ensure_compile_time_eval():  # gensbi.models' import-time jnp (tarflow's _LOG2PI): concrete, not
        model_mod = import_required("gensbi.models.flux1.model", "flux1", GENSBI)  # a tracer leaked from this trace
    strategies = tuple(id_embedding_strategy)
    if len(strategies) != 2 or any(s not in ID_STRATEGIES_1D for s in strategies):
        raise ValueError(f"model.id_embedding_strategy={list(strategies)}: give two of "
                         f"{', '.join(ID_STRATEGIES_1D)} (parameters, observations), "
                         "e.g. model.id_embedding_strategy=[absolute,absolute]")
    dims = {k: positive_int(f"model.{k}", v) for k, v in dict(
        dim_theta=dim_theta, dim_x=dim_x, num_heads=num_heads).items()}
    for key, blocks in (("depth", depth), ("depth_single_blocks", depth_single_blocks)):
        if not is_int(blocks) or blocks < 0:  # NumPy integers pass; bools, floats and strings do not
            raise ValueError(f"model.{key}={blocks!r} must be an integer >= 0; pass e.g. model.{key}=1")
    if depth + depth_single_blocks < 1:  # GenSBI builds it, but the parameter tokens never see x
        raise ValueError(f"model.depth=0 and model.depth_single_blocks=0: the velocity would ignore x; "
                         "set model.depth_single_blocks=1 or model.depth=1")
    dims["depth"] = int(depth)
    # The harness's own checks of a model=flux1 section (run before any simulation there), so a Python caller gets
    # the same one-line ValueError naming model.<field> rather than GenSBI's deep ZeroDivisionError (axes_dim=[0,0]),
    # TypeError (mlp_ratio=-1) or a model that outputs NaN (theta=0 with rope1d ids).
    # A Python caller's np.int64 is taken as its int, a np.dtype as itself (OmegaConf refused both: was an
    # UnsupportedValueType, where compute_dtype and GenSBI take them)
    section = {k: v.item() if isinstance(v, np.generic) else v for k, v in dict(
        name="flux1", init="eager", mlp_ratio=float(mlp_ratio), num_heads=dims["num_heads"], depth=dims["depth"],
        depth_single_blocks=int(depth_single_blocks), qkv_bias=bool(qkv_bias),
        axes_dim=None if axes_dim is None else [int(a) for a in axes_dim], val_emb_dim=val_emb_dim,
        id_emb_dim=id_emb_dim, id_merge_mode=id_merge_mode, theta=theta, id_embedding_strategy=list(strategies),
        param_dtype=param_dtype, dtype=dtype).items()}
    check_built_in(OmegaConf.create(section, flags={"allow_objects": True}), traced=False)
    fields = dict(
        in_channels=1, vec_in_dim=None, context_in_dim=1, mlp_ratio=float(mlp_ratio),
        num_heads=dims["num_heads"], depth=dims["depth"], depth_single_blocks=depth_single_blocks,
        qkv_bias=bool(qkv_bias), rngs=rngs, dim_obs=dims["dim_theta"], dim_cond=dims["dim_x"],
        axes_dim=None if axes_dim is None else [int(a) for a in axes_dim],
        val_emb_dim=val_emb_dim, id_emb_dim=id_emb_dim, id_merge_mode=id_merge_mode, theta=theta,
        id_embedding_strategy=strategies,
        param_dtype=compute_dtype("param_dtype", param_dtype), dtype=compute_dtype("dtype", dtype))
    # Flux1Params computes its hidden size with jnp and int(): evaluated at once even when the
    # factory is traced (init_sharded), so only the layers' initialisers are staged.
    with jax.ensure_compile_time_eval():
        try:
            params = model_mod.Flux1Params(**fields)
        except AssertionError as err:  # GenSBI checks some fields with assert
            raise ValueError(f"Flux1Params rejected model.* fields: {err}") from None
    return params

"""The smallest ``describe``, as a function of plain values (a seed, an input, two sizes): a smoke test of the
library callable from anywhere that passes numbers in and reads an array back."""

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from gensbi_sharding.report import describe
from gensbi_sharding.messages import shown

__all__ = ["mesh_init_simulate"]


def mesh_init_simulate(seed: Any, x: Any, features: Any, mesh_axes: Any) -> jax.Array:
    """Build ``nnx.Linear(x.shape[-1], features)`` and return float32 ``[features, mesh_axes, n_state_leaves]``, shape
    ``(3,)``: the smallest ``describe``. ``x`` of shape (5, 4), 3, 4 -> ``[3., 4., 2.]`` (kernel, bias).

    Parameters
    ----------
    seed, features, mesh_axes : int or anything ``int()`` accepts
        Seed of the layer's ``nnx.Rngs``; its output size (>= 1); a number echoed back.
    x : array_like, shape ``(..., d_in)``
        Only its shape is read.

    Returns
    -------
    jax.Array
        float32, shape ``(3,)``.

    Raises
    ------
    ValueError
        ``seed``, ``features`` or ``mesh_axes`` not castable with ``int`` (inf too), ``seed`` beyond 64 bits, ``x`` 0-d
        or no array (a mesh, a ragged list), or ``features`` < 1.
    """
    ints = {}
    for name, value in (("seed", seed), ("features", features), ("mesh_axes", mesh_axes)):
        try:
            ints[name] = int(value)
        except (TypeError, ValueError, OverflowError):  # OverflowError: int(float("inf"))
            raise ValueError(f"{name} must be castable to int, got {shown(value)}; pass e.g. {name}=3") from None
    if not -2**63 <= ints["seed"] < 2**63:  # nnx.Rngs' OverflowError named no argument
        raise ValueError(f"seed={ints['seed']} must fit in 64 bits (-2**63 <= seed < 2**63); pass e.g. seed=0")
    try:
        shape = np.shape(x)
    except ValueError:  # a ragged nest: NumPy's "inhomogeneous shape" named no argument
        shape = None
    if not (isinstance(shape, tuple) and all(isinstance(n, int) for n in shape)):  # a Mesh's shape is a dict: KeyError
        raise ValueError(f"x must be array-like (only its shape is read), got {type(x).__name__} {shown(x)}; pass "
                         "e.g. x of shape (batch, d_in)")
    if not shape:
        raise ValueError(f"x must have at least one axis (its last size is the layer's input size), "
                         f"got shape {shape}; pass e.g. x of shape (batch, d_in)")
    if ints["features"] < 1:
        raise ValueError(f"features must be a positive integer, got {ints['features']}; pass e.g. features=3")
    layer = nnx.Linear(shape[-1], ints["features"], rngs=nnx.Rngs(ints["seed"]))
    return jnp.asarray([ints["features"], ints["mesh_axes"], describe(layer, None).n_leaves], dtype=jnp.float32)

"""Annotating a model's variables with logical axes, and reading an annotation back (every key Flax has used).
Without JAX or Flax at import, as ``rules``: the harness's config checks read the package without them."""

from typing import TYPE_CHECKING

from gensbi_sharding.rules import ANNOTATION_KEYS, is_sequence
from gensbi_sharding.messages import shown

if TYPE_CHECKING:  # imported where used (the note above)
    from flax import nnx

__all__ = ["axes", "partitioned", "logical_axes_of", "raw_annotation"]


def axes(*names: str | None) -> dict:
    """``nnx.Variable`` keyword arguments (or a layer's ``*_metadata``) naming one logical axis per dimension, e.g.
    ``nnx.Param(value, **axes("embed", "mlp"))``; never placed at construction (``eager_sharding=False``).

    Parameters
    ----------
    *names : str or None
        One per dimension: a logical axis (``LOGICAL_AXES``) or None (never split); another entry is not refused
        here: a plan replicates that variable and names it in the fallback warning (the contract's behaviour).

    Returns
    -------
    dict
        ``{"out_sharding": names, "eager_sharding": False}``.
    """
    return {"out_sharding": names, "eager_sharding": False}


def partitioned(init, names: tuple[str | None, ...]):
    """``nnx.with_partitioning(init, names)`` without eager placement.

    Parameters
    ----------
    init : callable
        ``init(key, shape, dtype) -> jax.Array``.
    names : tuple of str or None

    Returns
    -------
    callable
        ``init`` wrapped by Flax: ``init(key, shape, dtype)`` returns an ``nnx.VariableMetadata`` (the array, its
        ``names``) that the ``nnx.Param`` a layer builds from it reads.

    Raises
    ------
    TypeError
        ``init`` not callable (e.g. ``3``, or the names passed first), named before any layer is built.
    """
    if not callable(init):  # Flax's "'int' object is not callable" came only when the layer was built
        raise TypeError(f"partitioned: init={shown(init)} must be an initializer, e.g. nnx.initializers.lecun_normal()")
    from flax import nnx  # not at the top (TYPE_CHECKING's note)
    return nnx.with_partitioning(init, names, eager_sharding=False)


def logical_axes_of(var: "nnx.Variable") -> tuple[str | None, ...] | None:
    """The logical axis names on ``var`` (``ANNOTATION_KEYS``), one per dimension (a bare str: one), or None if none.

    Parameters
    ----------
    var : nnx.Variable

    Returns
    -------
    tuple of (str or None), or None

    Raises
    ------
    TypeError
        ``var`` no variable (an array, ``var[...]``, holds no annotation).
    """
    if not callable(getattr(var, "get_metadata", None)):
        raise TypeError(f"logical_axes_of takes an nnx.Variable, e.g. model.up.kernel, got a {type(var).__name__}: "
                        "the annotation is the variable's metadata, not its value's")
    names = raw_annotation(var)
    return None if names is None else tuple(names) if is_sequence(names) else (names,)  # a bare 5: one odd entry


def raw_annotation(var: "nnx.Variable") -> object:
    """``var``'s annotation as stored (the first ``ANNOTATION_KEYS`` entry not None), or None: ``("embed")`` a str."""
    meta = var.get_metadata()
    return next((meta[key] for key in ANNOTATION_KEYS if meta.get(key) is not None), None)

"""Helpers every library module shares: ``node`` checks, "a/b/c" path keys, abstract states; int/array/mesh checks.

Every module that takes such arguments imports its checks from here.
They import nothing from the package, so every module may import them without a cycle.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np
from flax import nnx
from jax.sharding import Mesh

__all__ = ["is_int", "is_array", "path_name", "check_mesh", "is_node", "check_node", "abstract_state"]


def is_int(x: Any) -> bool:
    """Tell an integer from anything else: the one integer check of the package.

    Parameters
    ----------
    x : object

    Returns
    -------
    bool
        True for Python and NumPy integers; False for ``bool`` (an ``int`` subclass), floats and everything else.
    """
    return isinstance(x, (int, np.integer)) and not isinstance(x, bool)


def is_array(x: Any) -> bool:
    """Tell an array from a scalar or anything else.

    Parameters
    ----------
    x : object

    Returns
    -------
    bool
        True for ``jax.Array`` and ``numpy.ndarray`` only; False for Python or NumPy scalars.
    """
    return isinstance(x, (jax.Array, np.ndarray))


def path_name(path: Sequence[Any]) -> str:
    """Join a graph or state path into the key plans and reports use.

    Parameters
    ----------
    path : sequence
        Path parts as NNX gives them (attribute names, list indices), e.g. ``("up", "kernel")``.

    Returns
    -------
    str
        The parts' ``str`` joined by ``"/"``, e.g. ``"up/kernel"``.
    """
    return "/".join(str(part) for part in path)


def check_mesh(mesh: Any) -> None:
    """Check that ``mesh`` is a ``jax.sharding.Mesh``.

    Parameters
    ----------
    mesh : object

    Raises
    ------
    TypeError
        If it is not; the message points to ``make_mesh`` and ``resolve_mesh`` (e.g. for the spec ``"auto"``).
    """
    if not isinstance(mesh, Mesh):
        raise TypeError(f"mesh must be a jax.sharding.Mesh or None, got {mesh!r}; build one with "
                        "make_mesh(...) or resolve_mesh(spec)")


def is_node(node: Any) -> bool:
    """Tell whether ``node`` is something a plan can be made of.

    Parameters
    ----------
    node : object

    Returns
    -------
    bool
        True for an NNX graph node (Module, ``nnx.Optimizer``), an ``nnx.State``, or a non-empty tuple, list or
        dict of such (nested containers too).
    """
    if nnx.graph.is_graph_node(node) or isinstance(node, nnx.State):
        return True
    items = list(node.values() if isinstance(node, dict) else node if isinstance(node, (tuple, list)) else ())
    return bool(items) and all(is_node(item) for item in items)


def check_node(node: Any, caller: str, *, factory: bool = False) -> None:
    """Check that ``node`` passes ``is_node`` (or, with ``factory``, is callable).

    Parameters
    ----------
    node : object
    caller : str
        The public function checking, named in the message.
    factory : bool, default False
        Also accept a callable (a zero-argument factory that builds the node).

    Raises
    ------
    TypeError
        If ``node`` is neither; the message names ``caller``, the accepted kinds and ``node``'s type.
    """
    if is_node(node) or (factory and callable(node)):
        return
    also = ", or a zero-argument factory building one" if factory else ""
    raise TypeError(f"{caller} takes an NNX graph node (a Module, nnx.Optimizer, nnx.State, or a tuple or "
                    f"dict of them{also}), got {type(node).__name__} {node!r:.60}")


def abstract_state(node: Any, sharding_for: Callable[[str, Any], jax.sharding.Sharding | None]) -> nnx.State:
    """``nnx.state(node)`` with values replaced by ``jax.ShapeDtypeStruct`` where ``sharding_for`` gives a sharding.

    Parameters
    ----------
    node : NNX graph node
        Anything ``nnx.state`` takes; concrete or abstract.
    sharding_for : callable
        ``sharding_for("a/b/c", value)`` -> the sharding to give that leaf, or None to keep ``value`` as is.

    Returns
    -------
    nnx.State
        Same paths and variable types; each placed leaf a ``ShapeDtypeStruct(value.shape, value.dtype, sharding)``.
    """
    flat = []
    for path, var in nnx.to_flat_state(nnx.state(node)):
        value = var.get_value()
        sharding = sharding_for(path_name(path), value)
        flat.append((path, var.replace(value if sharding is None else
                                       jax.ShapeDtypeStruct(value.shape, value.dtype, sharding=sharding))))
    return nnx.from_flat_state(flat)

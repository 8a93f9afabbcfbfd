"""Batches on the mesh: the leading (batch) axis split over the data-parallel devices.

``shard_batch`` takes the *global* batch; each process's own rows go through ``host_input.host_to_global_array``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import jax
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from gensbi_sharding.rules import MODEL_AXIS
from gensbi_sharding.nodes import check_mesh, is_array, is_int

__all__ = ["batch_axes", "batch_size_divisor", "nearest_batch_sizes", "check_batch_divisible", "pad_for_mesh",
           "shard_batch", "shard_sample_init", "replicate"]


def batch_axes(mesh: Mesh) -> tuple[str, ...]:
    """Mesh axes a batch is split over: every axis but ``"model"`` (``MODEL_AXIS``), in mesh order.

    Parameters
    ----------
    mesh : jax.sharding.Mesh
        Any mesh; axes besides ``"data"`` and ``"model"`` (e.g. ``"pipe"``) are batch axes too.

    Returns
    -------
    tuple of str
        E.g. ``("data",)`` on ``make_mesh(model_axis=2)``; ``()`` on a mesh with a ``"model"`` axis only.

    Raises
    ------
    TypeError
        If ``mesh`` is not a ``jax.sharding.Mesh`` (None included).
    """
    check_mesh(mesh)
    return tuple(name for name in mesh.axis_names if name != MODEL_AXIS)


def batch_size_divisor(mesh: Mesh | None) -> int:
    """Data-parallel size: the product of the batch axes' sizes, what every batch size must be a multiple of.

    Parameters
    ----------
    mesh : jax.sharding.Mesh or None
        None: no mesh.

    Returns
    -------
    int
        Devices a batch is split over (e.g. 4 on a ``{"data": 4, "model": 2}`` mesh); 1 without a mesh or batch axes.

    Raises
    ------
    TypeError
        If ``mesh`` is neither None nor a ``jax.sharding.Mesh``.
    """
    if mesh is None:
        return 1
    return math.prod(mesh.shape[name] for name in batch_axes(mesh))


def nearest_batch_sizes(requested: int, multiple: int, at_most: int | None = None) -> tuple[int, ...]:
    """The valid batch sizes next to ``requested``, nearest first: the one rule every batch-size hint uses.

    Parameters
    ----------
    requested : int
        The batch size asked for (rows).
    multiple : int
        What a valid size is a multiple of (the data-parallel size, times the data shards in the harness).
    at_most : int, optional
        The largest usable size (for example the training pairs); no bound if None.

    Returns
    -------
    tuple of int
        The multiples of ``multiple`` just below and just above ``requested``, each clamped into
        ``[multiple, at_most]``, duplicates removed, nearest first (ties: the smaller first);
        ``(requested,)`` if it is valid, ``()`` if no multiple fits (``at_most < multiple``).

    Raises
    ------
    TypeError
        If ``requested``, ``multiple`` or ``at_most`` is not an integer (bools are not).
    ValueError
        If ``multiple < 1``.
    """
    for name, value in (("requested", requested), ("multiple", multiple), ("at_most", at_most)):
        if not is_int(value) and not (name == "at_most" and value is None):
            raise TypeError(f"nearest_batch_sizes: {name}={value!r} must be an integer (rows)")
    if multiple < 1:
        raise ValueError(f"nearest_batch_sizes: multiple={multiple} must be >= 1 (the data-parallel size)")
    requested, multiple = int(requested), int(multiple)
    at_most = None if at_most is None else int(at_most)
    largest = at_most // multiple * multiple if at_most is not None else max(requested, multiple) + multiple
    if largest < multiple:
        return ()
    clamp = lambda b: min(max(b, multiple), largest)  # noqa: E731
    candidates = {clamp(requested // multiple * multiple), clamp(-(-requested // multiple) * multiple)}
    return tuple(sorted(candidates, key=lambda b: (abs(b - requested), b)))


def check_batch_divisible(batch: Any, mesh: Mesh | None, what: str) -> None:
    """Check that the array leaves (``ndim > 0``) of ``batch`` split evenly over the data-parallel devices.

    Parameters
    ----------
    batch : pytree
        ``jax.Array`` / ``numpy.ndarray`` leaves with ``ndim > 0`` are checked (leading axis: rows); 0-d arrays,
        scalars and other leaves are ignored.
    mesh : jax.sharding.Mesh or None
        None: nothing to check.
    what : str
        The batch's name in the message, e.g. ``"train"`` or ``"validation"``.

    Raises
    ------
    ValueError
        If the checked leaves differ in leading size, or that size is not a multiple of ``batch_size_divisor(mesh)``;
        the message names ``what``, the size, the divisor, the batch axes and ``nearest_batch_sizes``.
    TypeError
        If ``mesh`` is neither None nor a ``jax.sharding.Mesh`` (checked only when ``batch`` has such leaves).
    """
    if mesh is None:
        return
    sizes = [leaf.shape[0] for leaf in jax.tree.leaves(batch) if is_array(leaf) and leaf.ndim > 0]
    if not sizes:
        return
    if len(set(sizes)) > 1:
        raise ValueError(f"{what} batch leaves have differing leading sizes {sizes}; "
                         "every leaf of a batch needs the same number of rows")
    size, divisor = sizes[0], batch_size_divisor(mesh)
    if size % divisor:
        nearest = " or ".join(map(str, sorted(nearest_batch_sizes(size, divisor))))
        raise ValueError(f"{what} batch size {size} is not divisible by the data-parallel size {divisor} "
                         f"(mesh axes {batch_axes(mesh)}); nearest valid batch sizes: {nearest}")


def pad_for_mesh(n: int, mesh: Mesh | None) -> tuple[int, int]:
    """Round a row count up to a multiple of the data-parallel size.

    Parameters
    ----------
    n : int
        Rows, ``>= 0`` (a Python or NumPy integer; not ``bool``).
    mesh : jax.sharding.Mesh or None
        None: no padding.

    Returns
    -------
    tuple of (int, int)
        ``(padded, n)``: the smallest multiple of ``batch_size_divisor(mesh)`` that is ``>= n``, and ``n`` (the rows
        to keep once the padded batch is processed); e.g. ``(12, 10)`` for a data-parallel size of 4.

    Raises
    ------
    ValueError
        If ``n`` is not an integer or is negative.
    TypeError
        If ``mesh`` is neither None nor a ``jax.sharding.Mesh``.
    """
    if not is_int(n) or n < 0:
        raise ValueError(f"pad_for_mesh needs a row count n >= 0 (an integer), got {n!r}")
    divisor = batch_size_divisor(mesh)
    return -(-n // divisor) * divisor, n


def shard_batch(batch: Any, mesh: Mesh | None) -> Any:
    """Split the leading (batch) axis of every array leaf over the batch axes of ``mesh``: data parallelism.

    The batch is *global*: every process passes all of it, the same values. For each process's own rows use
    ``host_to_global_array``.

    Parameters
    ----------
    batch : pytree
        ``jax.Array`` / ``numpy.ndarray`` leaves of shape ``(B, ...)`` are split along ``B`` (rows); 0-d arrays are
        replicated; other leaves (Python or NumPy scalars, None) are kept as they are.
    mesh : jax.sharding.Mesh or None
        None: ``batch`` itself is returned.

    Returns
    -------
    pytree
        ``batch``'s structure, array leaves as ``jax.Array`` at ``NamedSharding(mesh, P(batch_axes(mesh)))``
        (``P()`` for 0-d leaves); shapes kept, dtypes as ``jax.device_put`` makes them (float64 -> float32 unless
        ``jax_enable_x64``).

    Raises
    ------
    ValueError
        If a leaf's leading size is not a multiple of ``batch_size_divisor(mesh)`` (pad it with ``pad_for_mesh`` or
        pick one of ``nearest_batch_sizes``); nothing is placed then.
    TypeError
        If ``mesh`` is neither None nor a ``jax.sharding.Mesh``.
    """
    return _split_leading(batch, mesh, "batch")


def shard_sample_init(x_init: Any, mesh: Mesh | None) -> Any:
    """``shard_batch`` for a sampler's initial state: its leading (sample) axis split over the batch axes.

    Parameters
    ----------
    x_init : jax.Array or numpy.ndarray or pytree of them
        Shape ``(N, ...)`` for ``N`` samples, e.g. the ``(N, dim_theta)`` noise an ODE sampler starts from.
    mesh : jax.sharding.Mesh or None
        None: ``x_init`` itself is returned.

    Returns
    -------
    jax.Array or pytree
        As ``shard_batch`` returns it.

    Raises
    ------
    ValueError
        If ``N`` is not a multiple of ``batch_size_divisor(mesh)`` (``pad_for_mesh(N, mesh)`` gives a valid count).
    TypeError
        If ``mesh`` is neither None nor a ``jax.sharding.Mesh``.
    """
    return _split_leading(x_init, mesh, "sampler initial state")


def replicate(tree: Any, mesh: Mesh | None) -> Any:
    """Place every array leaf of ``tree`` whole on every device of ``mesh`` (``PartitionSpec()``).

    Parameters
    ----------
    tree : pytree
        ``jax.Array`` (also when committed to other devices) and ``numpy.ndarray`` leaves are moved; other leaves
        (Python scalars, None) are kept as they are.
    mesh : jax.sharding.Mesh or None
        None: ``tree`` itself is returned.

    Returns
    -------
    pytree
        ``tree``'s structure, array leaves as ``jax.Array`` at ``NamedSharding(mesh, P())``.

    Raises
    ------
    TypeError
        If ``mesh`` is neither None nor a ``jax.sharding.Mesh``.
    """
    return _put_leaves(tree, mesh, lambda leaf: P())


def _split_leading(tree: Any, mesh: Mesh | None, what: str) -> Any:
    def spec(leaf):
        divisor = batch_size_divisor(mesh)
        if leaf.ndim and leaf.shape[0] % divisor:
            raise ValueError(f"{what} leaf of shape {leaf.shape} has leading size {leaf.shape[0]}, not divisible "
                             f"by the data-parallel size {divisor}; pad it (pad_for_mesh) or pick a multiple")
        return P(batch_axes(mesh) or None) if leaf.ndim else P()

    return _put_leaves(tree, mesh, spec)


def _put_leaves(tree: Any, mesh: Mesh | None, spec: Callable[[Any], P]) -> Any:
    if mesh is None:
        return tree
    check_mesh(mesh)
    leaves, treedef = jax.tree.flatten(tree)
    index = [i for i, leaf in enumerate(leaves) if is_array(leaf)]
    # One batched device_put: a single dispatch for the whole tree, not one per leaf.
    placed = jax.device_put([leaves[i] for i in index], [NamedSharding(mesh, spec(leaves[i])) for i in index])
    for i, new in zip(index, placed):
        leaves[i] = new
    return jax.tree.unflatten(treedef, leaves)

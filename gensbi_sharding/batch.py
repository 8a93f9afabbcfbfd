"""Batches on the mesh: each array leaf's leading axis split over the data-parallel devices. ``shard_batch`` takes the
*global* batch (each process's own rows: ``host_to_global_array``); without a mesh, inputs come back as they are."""

import math
from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from gensbi_sharding.batch_sizes import nearest_batch_sizes
from gensbi_sharding.factory import INPUT_IN_FACTORY, UNDER_TRANSFORM, check_active_mesh, refuse_in_factory
from gensbi_sharding.leaf_checks import check_numeric_leaves, check_same_rows, host_view, row_count_fix, unstacked_rows
from gensbi_sharding.messages import shown
from gensbi_sharding.rules import MODEL_AXIS
from gensbi_sharding.nodes import is_array, is_int, leaf_name
from gensbi_sharding.specs import check_mesh

# The package's public names (gensbi_sharding.__init__), then what other modules import.
__all__ = ["batch_axes", "batch_size_divisor", "check_batch_divisible", "pad_for_mesh", "shard_batch",
           "shard_sample_init", "replicate", "batch_spec", "numpy_scalars_as_arrays"]


def batch_axes(mesh: Mesh) -> tuple[str, ...]:
    """Mesh axes a batch is split over: every axis but ``"model"``, in mesh order (a ``("dp",)`` mesh: ``("dp",)``).

    Parameters
    ----------
    mesh : jax.sharding.Mesh or jax.sharding.AbstractMesh

    Returns
    -------
    tuple of str

    Raises
    ------
    TypeError
        ``mesh`` None or not a Mesh/AbstractMesh.
    """
    check_mesh(mesh, abstract=True, optional=False)
    return tuple(name for name in mesh.axis_names if name != MODEL_AXIS)


def batch_spec(mesh: Mesh) -> P:
    """``P(batch_axes(mesh))``, a leading axis split over the batch axes; ``P(None)`` if the mesh has none."""
    return P(batch_axes(mesh) or None)


def batch_size_divisor(mesh: Mesh | None) -> int:
    """Data-parallel size, which batch sizes must divide by: the product of the batch axes' sizes.

    Parameters
    ----------
    mesh : jax.sharding.Mesh or jax.sharding.AbstractMesh or None

    Returns
    -------
    int
        Devices along ``batch_axes(mesh)``: 4 on a ``data=4 x model=2`` mesh of 8 devices (1 without a mesh).

    Raises
    ------
    TypeError
        ``mesh`` neither None nor a Mesh/AbstractMesh.
    """
    return 1 if mesh is None else math.prod(mesh.shape[name] for name in batch_axes(mesh))


def check_batch_divisible(batch: Any, mesh: Mesh | None, what: str) -> None:
    """Check that the array leaves of ``batch`` split evenly over the data-parallel devices.

    Parameters
    ----------
    batch : pytree
    mesh : jax.sharding.Mesh or None
    what : str
        The batch's name in the message, e.g. ``"train"``.

    Raises
    ------
    ValueError, TypeError
        Leading sizes differ or are not a multiple of ``batch_size_divisor(mesh)``; ``mesh`` or ``what`` of another
        type, or ``batch`` an int (a batch size: ``nearest_batch_sizes`` checks one).
    """
    if not isinstance(what, str):  # its whole repr would stand in the message
        raise TypeError(f"what={shown(what)} must be a str naming the batch in messages, e.g. what='train'")
    if is_int(batch):  # a batch size, not a batch: an int holds no rows, so nothing was checked (it passed)
        raise TypeError(f"check_batch_divisible takes the batch (a pytree of arrays), got the number {batch}; for a "
                        f"batch size, nearest_batch_sizes({batch}, batch_size_divisor(mesh)) lists the valid ones")
    size = check_same_rows(batch, f"{what} batch")
    if mesh is not None and size is not None and size % batch_size_divisor(mesh):
        raise _indivisible(batch, f"{what} batch", size, mesh, f"{what} batch size {size} is",
                           f" (mesh axes {batch_axes(mesh)})")


def pad_for_mesh(n: int, mesh: Mesh | None) -> tuple[int, int]:
    """Round ``n`` rows up to a multiple of the data-parallel size: ``(padded, n)``, e.g. ``(12, 10)`` for 4.

    Parameters
    ----------
    n : int, >= 0
    mesh : jax.sharding.Mesh or jax.sharding.AbstractMesh or None

    Returns
    -------
    tuple of (int, int)
        ``(padded, n)`` rows.

    Raises
    ------
    ValueError, TypeError
        ``n`` not a non-negative integer (``bool`` is not); ``mesh`` neither None nor a Mesh/AbstractMesh.
    """
    if not is_int(n) or n < 0:
        raise ValueError(f"pad_for_mesh needs a row count n >= 0 (an integer), got {row_count_fix(n)}")
    return (divisor := batch_size_divisor(mesh)) * -(-int(n) // divisor), int(n)  # np.int64 n: ints, as documented


def _indivisible(tree: Any, what: str, size: int, mesh: Mesh, said: str, axes: str = "", call: str = "{}"
                 ) -> ValueError:
    """The refusal of ``size`` rows (``said``: what holds them) the mesh cannot split, or ``unstacked_rows``'."""
    divisor = batch_size_divisor(mesh)
    fix = (f"use {' or '.join(map(str, sorted(nearest_batch_sizes(size, divisor))))} rows (pad_for_mesh({size}, "
           f"mesh) returns the rows to pad to and the real ones, {pad_for_mesh(size, mesh)}: mask the padding out of "
           "a mean)")  # "use 4 rows" alone misled where the leaves are a list of rows never stacked
    return ValueError(unstacked_rows(tree, what, f"each of {size} rows: {fix}", divisor, call)
                      or f"{said} not divisible by the data-parallel size {divisor}{axes}; {fix}")


def shard_batch(batch: Any, mesh: Mesh | None) -> Any:
    """Split the leading axis of every array leaf of ``batch`` over ``batch_axes(mesh)`` (0-d leaves: ``P()``), at
    ``jax.device_put``'s dtypes; in ``jax.jit`` by a sharding constraint. Nothing is placed if a check fails.

    Parameters
    ----------
    batch : pytree
        ``jax.Array``, ``numpy.ndarray`` or ``jax.ShapeDtypeStruct`` leaves of shape ``(B, ...)``; NumPy scalars
        placed as 0-d arrays (``P()``); others (Python scalars, ``str``, None, a list of numbers) kept unplaced.
    mesh : jax.sharding.Mesh or None

    Returns
    -------
    pytree
        ``batch``'s structure, each array leaf a ``jax.Array`` split ``P(batch_axes(mesh))`` (``batch`` without a mesh).

    Raises
    ------
    ValueError
        Leading sizes that differ or are no multiple of ``batch_size_divisor(mesh)``; a value beyond its placed dtype;
        a call inside ``jax.shard_map`` or ``init_sharded``'s constructor.
    TypeError
        ``mesh`` neither None nor a ``Mesh``; a leaf no JAX array holds; a Module (``shard_model``'s).
    """
    return _put_leaves(batch, mesh, "batch", "shard_batch", split=True)


def shard_sample_init(x_init: Any, mesh: Mesh | None) -> Any:
    """``shard_batch`` for a sampler's initial state, e.g. the ``(N, dim_theta)`` noise an ODE sampler starts from.

    Parameters
    ----------
    x_init : jax.Array or numpy.ndarray or pytree of them, shape ``(N, ...)``
    mesh : jax.sharding.Mesh or None

    Returns
    -------
    pytree
        As ``shard_batch``'s.

    Raises
    ------
    ValueError, TypeError
        As ``shard_batch`` (``N`` no multiple of ``batch_size_divisor(mesh)``: ``ValueError``).
    """
    return _put_leaves(x_init, mesh, "sampler initial state", "shard_sample_init", split=True)


def replicate(tree: Any, mesh: Mesh | None) -> Any:
    """Place every array leaf of ``tree`` whole on every device of ``mesh`` (``P()``); other leaves kept.

    Parameters
    ----------
    tree : pytree
        ``jax.Array`` (committed elsewhere too), ``numpy.ndarray`` (NumPy scalars too, as 0-d arrays) or
        ``jax.ShapeDtypeStruct`` leaves.
    mesh : jax.sharding.Mesh or None

    Returns
    -------
    pytree
        ``tree``'s structure, each array leaf a ``jax.Array`` placed ``P()`` (``tree`` without a mesh).

    Raises
    ------
    TypeError
        ``mesh`` neither None nor a ``Mesh``; a Module (``shard_model``'s); a leaf no JAX array holds.
    ValueError
        A value beyond its placed dtype (``int64`` beyond ``int32`` without x64); a call inside ``jax.shard_map``.
    """
    return _put_leaves(tree, mesh, "replicate", "replicate", split=False)


def numpy_scalars_as_arrays(tree: Any) -> Any:
    """``tree``, each NumPy scalar leaf (``np.float32(0.5)``) the 0-d array it is a value of, placed as one."""
    return jax.tree.map(lambda leaf: np.asarray(leaf) if isinstance(leaf, (np.number, np.bool_)) else leaf, tree)


def _put_leaves(tree: Any, mesh: Mesh | None, what: str, caller: str, split: bool) -> Any:
    """All checks (the mesh's, then the rows'), then the placing: leading axes ``split`` over the batch axes."""
    check_mesh(mesh)
    if mesh is not None:
        refuse_in_factory(caller, INPUT_IN_FACTORY)
    check_numeric_leaves(as_arrays := numpy_scalars_as_arrays(tree), what)  # before the rows; scalars as 0-d arrays
    if split:
        check_same_rows(tree, what)
    if mesh is None:  # kept as given, checked all the same
        return tree
    divisor, rows = batch_size_divisor(mesh), batch_spec(mesh)

    def sharding(path, leaf) -> NamedSharding:
        if split and leaf.ndim and leaf.shape[0] % divisor:
            raise _indivisible(tree, what, leaf.shape[0], mesh, f"{what} leaf {leaf_name(path)} (shape {leaf.shape}) "
                               f"has leading size {leaf.shape[0]},", call=f"{caller}({{}}, mesh)")
        return NamedSharding(mesh, rows if split and leaf.ndim else P())

    leaves, treedef = jax.tree_util.tree_flatten_with_path(as_arrays)
    arrays = [(path, leaf) for path, leaf in leaves if is_array(leaf)]
    # Outside jit one device_put; in jit reshard pins Explicit batch axes, a constraint Auto (each refuses the other's)
    explicit = set(mesh.explicit_axes)
    pin = jax.sharding.reshard if explicit and explicit >= set(batch_axes(mesh)) else jax.lax.with_sharding_constraint
    traced = any(isinstance(leaf, jax.core.Tracer) for _, leaf in arrays)
    _refuse_placing(arrays, mesh, what, caller, split, traced, pin is jax.sharding.reshard)
    placed = iter(_placed(arrays, [sharding(path, leaf) for path, leaf in arrays], pin, traced, caller))
    # An abstract leaf (a dry run's batch, for jax.jit(step).lower) takes the sharding too, or it lowers replicated.
    return jax.tree.unflatten(treedef, [
        next(placed) if is_array(leaf) else leaf.update(sharding=sharding(path, leaf))
        if isinstance(leaf, jax.ShapeDtypeStruct) else leaf for path, leaf in leaves])


def _refuse_placing(arrays: list, mesh: Mesh, what: str, caller: str, split: bool, traced: bool, reshard: bool) -> None:
    """``_put_leaves``'s refusals: in a shard_map, under another mesh, one process's arrays, Explicit axes unset."""
    active = jax.sharding.get_abstract_mesh()
    if arrays and active.manual_axes:  # a NumPy leaf too: no array there spans the mesh
        raise ValueError(f"{what} inside jax.shard_map: each array there is one device's block, already split over "
                         f"its manual axes {tuple(active.manual_axes)}; place the batch before the shard_map (in the "
                         "jitted step or outside it), or pin a block with constrain")
    if traced:  # not in a shard_map: refused above
        check_active_mesh(mesh, caller)
    elif jax.process_count() > 1 and (local := [p for p, leaf in arrays if isinstance(leaf, jax.Array) and (
            leaf.committed and leaf.is_fully_addressable and not NamedSharding(mesh, P()).is_fully_addressable)]):
        # JAX's error named neither the leaf nor a fix: "... a Sharding which represents addressable devices"
        raise ValueError(f"{caller}: leaf {leaf_name(local[0])} is a jax.Array on this process's devices only, and "
                         f"mesh {dict(mesh.shape)} spans {len({d.process_index for d in mesh.devices.flat})} processes;"
                         + (" pass each process's own rows to host_to_global_array(rows, partition='data', mesh=mesh)"
                            " on every process" if split else " pass the tree to host_to_global_array(tree, partition="
                            "'replicated', mesh=mesh) on every process (each process's copy, compared across them)"))
    if traced and active.empty and reshard:  # JAX's error, at compilation: "cannot reshape array"
        raise ValueError(f"{what} {UNDER_TRANSFORM} on a mesh with AxisType.Explicit axes {mesh.explicit_axes} needs "
                         "it active while the step is traced: call the step inside `with mesh_context(mesh):`, "
                         "or build the mesh with make_mesh(...) (Auto axes)")


def _placed(arrays: list, targets: list, pin: Any, traced: bool, caller: str) -> list:
    """``arrays``' leaves placed on ``targets``: pinned by ``pin`` in a trace, else one ``device_put``."""
    try:
        placed = ([pin(leaf, target) for (_, leaf), target in zip(arrays, targets)] if traced else
                  jax.device_put([host_view(leaf, target) for (_, leaf), target in zip(arrays, targets)], targets))
    except AssertionError:  # JAX's "... is not the same on each process" for a NumPy leaf, naming neither it nor a fix
        for (path, leaf), target in zip(arrays, targets):  # leaf by leaf, alike on every process: it failed on all
            try:
                jax.device_put(host_view(leaf, target), target)
            except AssertionError:
                raise ValueError(f"{caller}: leaf {leaf_name(path)} differs between the {jax.process_count()} "
                                 "processes (JAX takes a NumPy leaf to be alike on each); if each process holds its "
                                 "own rows, pass the tree to host_to_global_array(tree, partition='data', mesh=mesh) "
                                 "on every process, else the same value on every process") from None
        raise
    # A NumPy batch in jit comes back traced, and device_put there placed nothing on Auto axes: the batch stayed whole.
    if not traced and pin is not jax.sharding.reshard and any(isinstance(a, jax.core.Tracer) for a in placed):
        placed = [pin(a, target) for a, target in zip(placed, targets)]
    return placed

"""Batches on the mesh: the leading (batch) axis split over the data-parallel devices.

``shard_batch`` takes the *global* batch; ``host_to_global_array`` each process's own rows, checked
before any array is built (a ``ValueError``, not other processes left waiting in a collective).
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable
from typing import Any

import jax
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from gensbi_sharding.rules import MODEL_AXIS
from gensbi_sharding.sharding import check_mesh, is_array, is_int

__all__ = ["batch_axes", "batch_size_divisor", "nearest_batch_sizes", "check_batch_divisible", "pad_for_mesh", "shard_batch",
           "shard_sample_init", "replicate", "DataPartitionType", "input_partition_spec", "host_to_global_array"]


def batch_axes(mesh: Mesh) -> tuple[str, ...]:
    """Mesh axes a batch is split over: every axis but "model", in mesh order."""
    check_mesh(mesh)
    return tuple(name for name in mesh.axis_names if name != MODEL_AXIS)


def batch_size_divisor(mesh: Mesh | None) -> int:
    """Data-parallel size: product of the batch axes' sizes (1 without a mesh or batch axes)."""
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
    """
    largest = at_most // multiple * multiple if at_most is not None else max(requested, multiple) + multiple
    if largest < multiple:
        return ()
    clamp = lambda b: min(max(b, multiple), largest)  # noqa: E731
    candidates = {clamp(requested // multiple * multiple), clamp(-(-requested // multiple) * multiple)}
    return tuple(sorted(candidates, key=lambda b: (abs(b - requested), b)))


def check_batch_divisible(batch: Any, mesh: Mesh | None, what: str) -> None:
    """Check that the array leaves (``ndim > 0``) of ``batch`` split evenly over the data-parallel devices.

    Raises ``ValueError`` naming ``what``, the size, the divisor and the nearest valid sizes if they do not.
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
    """``(padded, n)``: ``n`` rounded up to a multiple of the data-parallel size."""
    if not is_int(n) or n < 0:
        raise ValueError(f"pad_for_mesh needs a row count n >= 0 (an integer), got {n!r}")
    divisor = batch_size_divisor(mesh)
    return -(-n // divisor) * divisor, n


def shard_batch(batch: Any, mesh: Mesh | None) -> Any:
    """Split the leading axis of every array leaf over the batch axes (0-d: replicated); ``ValueError`` if uneven."""
    return _split_leading(batch, mesh, "batch")


def shard_sample_init(x_init: Any, mesh: Mesh | None) -> Any:
    """``shard_batch`` for a sampler's initial state (an array or a pytree of arrays)."""
    return _split_leading(x_init, mesh, "sampler initial state")


def replicate(tree: Any, mesh: Mesh | None) -> Any:
    """Place every array leaf replicated on all devices of ``mesh`` (``P()``); others untouched."""
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


class DataPartitionType(str, enum.Enum):
    """How the leading axis of per-process input is split: ``FULL`` over all mesh axes (each device its
    own rows), ``DATA`` over the batch axes (as ``shard_batch``), ``REPLICATED`` (every device all of it)."""

    FULL = "full"
    DATA = "data"
    REPLICATED = "replicated"


def input_partition_spec(mesh: Mesh) -> P:
    """The PartitionSpec splitting the leading axis over all mesh axes, e.g. ``P(("data", "model"))``."""
    return P(tuple(mesh.axis_names))


def host_to_global_array(host_arrays: Any, *, partition: Any = DataPartitionType.FULL,
                         mesh: Mesh | None = None) -> Any:
    """This process's rows of a batch (NumPy or local JAX arrays) as global ``jax.Array``s (0-d leaves replicated).

    ``partition``: a ``DataPartitionType`` (or its value) or PartitionSpecs forming a prefix of ``host_arrays``;
    ``mesh``: default the active one. Raises ``ValueError`` without a concrete mesh, for a bad partition or
    spec tree, or a size along a split dimension that is not a multiple of the shards this process holds.
    """
    mesh = _concrete_mesh(mesh)
    flat, treedef = jax.tree_util.tree_flatten_with_path(host_arrays)
    leaves, targets = [leaf for _, leaf in flat], {}
    for i, ((keypath, leaf), spec) in enumerate(zip(flat, _specs(partition, host_arrays, mesh))):
        path = jax.tree_util.keystr(keypath)
        if not is_array(leaf):
            continue
        if isinstance(leaf, jax.Array) and not leaf.is_fully_addressable:
            raise ValueError(f"leaf {path or '<root>'} is already a global array spanning processes; "
                             "pass this process's rows as a numpy or local jax array")
        _check_local_shape(path, leaf.shape, spec, mesh)
        targets[i] = NamedSharding(mesh, spec)
    for i, sharding in targets.items():
        leaves[i] = jax.make_array_from_process_local_data(sharding, leaves[i])
    return jax.tree.unflatten(treedef, leaves)


def _concrete_mesh(mesh: Mesh | None) -> Mesh:
    if mesh is not None:
        if not isinstance(mesh, Mesh):
            raise ValueError(f"mesh must be a concrete jax.sharding.Mesh, got {type(mesh).__name__}")
        return mesh
    try:
        active = jax.sharding.get_mesh()
    except ValueError as err:  # inside jit: only the abstract mesh exists
        raise ValueError("host_to_global_array runs outside jax.jit; call it on host data "
                         "before the step function") from err
    if active.empty:
        what = ("only an abstract mesh is active (jax.sharding.use_abstract_mesh), which has "
                "no devices" if not jax.sharding.get_abstract_mesh().empty else "no mesh is active")
        raise ValueError(f"host_to_global_array needs a concrete mesh, but {what}; call it inside "
                         "`with mesh_context(mesh):` or pass mesh=")
    return active


def _specs(partition: Any, host_arrays: Any, mesh: Mesh) -> list[P]:
    """One PartitionSpec per leaf of ``host_arrays``."""
    if isinstance(partition, str):  # a DataPartitionType too
        try:
            kind = DataPartitionType(partition)
        except ValueError:
            raise ValueError(f"unknown partition {partition!r}; choose one of "
                             f"{[k.value for k in DataPartitionType]} or pass PartitionSpecs") from None
        split = input_partition_spec(mesh) if kind is DataPartitionType.FULL else P(batch_axes(mesh) or None)
        return [P() if not is_array(leaf) or leaf.ndim == 0 or kind is DataPartitionType.REPLICATED else split
                for leaf in jax.tree.leaves(host_arrays)]
    spec_leaves, spec_def = jax.tree.flatten(partition, is_leaf=lambda x: isinstance(x, P))
    bad = [s for s in spec_leaves if not isinstance(s, P)]
    if bad:
        raise ValueError(f"partition leaves must be PartitionSpecs, got {bad[0]!r}; or pass a "
                         f"DataPartitionType, one of {[k.value for k in DataPartitionType]}")
    try:
        subtrees = spec_def.flatten_up_to(host_arrays)
    except (ValueError, TypeError) as err:
        raise ValueError(f"partition tree {spec_def} does not match the host_arrays tree "
                         f"{jax.tree.structure(host_arrays)}; give one PartitionSpec per array (or per "
                         "subtree)") from err
    return [spec for spec, subtree in zip(spec_leaves, subtrees) for _ in jax.tree.leaves(subtree)]


def _check_local_shape(path: str, shape: tuple[int, ...], spec: P, mesh: Mesh) -> None:
    name = path or "<root>"
    if len(spec) > len(shape):
        raise ValueError(f"PartitionSpec {spec} for leaf {name} has {len(spec)} entries, but the "
                         f"leaf has rank {len(shape)} (shape {shape}); use at most {len(shape)}")
    for dim, entry in enumerate(spec):
        if entry is None:
            continue
        names = (entry,) if isinstance(entry, str) else tuple(entry)
        missing = [a for a in names if a not in mesh.shape]
        if missing:
            raise ValueError(f"PartitionSpec {spec} for leaf {name} names mesh axis {missing[0]!r}, "
                             f"absent from the mesh {tuple(mesh.axis_names)}")
        held = NamedSharding(mesh, P(names)).addressable_devices_indices_map((math.prod(mesh.shape[a] for a in names),))
        if not held:
            raise ValueError(f"process {jax.process_index()} holds no device of the mesh {dict(mesh.shape)}; "
                             "build the mesh over devices of every process (make_mesh() does)")
        divisor = len({index[0].start for index in held.values()})  # distinct slices this process holds
        if shape[dim] % divisor:
            what = "leading size" if dim == 0 else f"size of dim {dim}"
            raise ValueError(f"process {jax.process_index()} passes {what} {shape[dim]} for leaf {name} (shape "
                             f"{shape}), not a multiple of {divisor}, the number of shards it holds along mesh "
                             f"axes {names}; pass a multiple of {divisor} per process")

"""Batches on the mesh: the leading (batch) axis split over the data-parallel devices.

``shard_batch`` takes the *global* batch, which every process passes whole. Across hosts
each process loads only its own rows: ``host_to_global_array`` turns those per-process
arrays into global ``jax.Array``s with ``jax.make_array_from_process_local_data``. Every
check runs on the calling process before any array is built, so a bad batch raises
``ValueError`` instead of leaving the other processes waiting in a collective.
"""

from __future__ import annotations

import enum
import math
from typing import Any

import jax
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from gensbi_sharding.rules import MODEL_AXIS
from gensbi_sharding.sharding import check_mesh, is_array, is_int

__all__ = ["batch_axes", "batch_size_divisor", "check_batch_divisible", "pad_for_mesh", "shard_batch",
           "shard_sample_init", "replicate", "DataPartitionType", "input_partition_spec",
           "host_to_global_array"]


def batch_axes(mesh: Mesh) -> tuple[str, ...]:
    """Mesh axes a batch is split over: every axis but "model", in mesh order."""
    check_mesh(mesh)
    return tuple(name for name in mesh.axis_names if name != MODEL_AXIS)


def batch_size_divisor(mesh: Mesh | None) -> int:
    """Data-parallel size: product of the batch axes' sizes (1 without a mesh or batch axes)."""
    if mesh is None:
        return 1
    return math.prod(mesh.shape[name] for name in batch_axes(mesh))


def check_batch_divisible(batch: Any, mesh: Mesh | None, what: str) -> None:
    """Check that the array leaves (``ndim > 0``) of ``batch`` split evenly over the data-parallel devices.

    Raises
    ------
    ValueError
        If their leading sizes differ, or are not a multiple of ``batch_size_divisor(mesh)``;
        the message names ``what``, the size, the divisor, the batch axes and the nearest valid sizes.
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
        below, above = size // divisor * divisor, -(-size // divisor) * divisor
        nearest = f"{below} or {above}" if below else f"{above}"
        raise ValueError(
            f"{what} batch size {size} is not divisible by the data-parallel size {divisor} "
            f"(mesh axes {batch_axes(mesh)}); nearest valid batch sizes: {nearest}")


def pad_for_mesh(n: int, mesh: Mesh | None) -> tuple[int, int]:
    """``(padded, n)``: ``n`` rounded up to a multiple of the data-parallel size."""
    if not is_int(n) or n < 0:
        raise ValueError(f"pad_for_mesh needs a row count n >= 0 (an integer), got {n!r}")
    divisor = batch_size_divisor(mesh)
    return -(-n // divisor) * divisor, n


def shard_batch(batch: Any, mesh: Mesh | None) -> Any:
    """Split the leading axis of every array leaf over the mesh's batch axes (0-d leaves: replicated).

    Non-array leaves, and the whole batch without a mesh, are returned as they are.

    Raises
    ------
    ValueError
        If a leaf's leading size is not a multiple of the data-parallel size.
    """
    return _split_leading(batch, mesh, "batch")


def shard_sample_init(x_init: Any, mesh: Mesh | None) -> Any:
    """``shard_batch`` for a sampler's initial state (an array or a pytree of arrays)."""
    return _split_leading(x_init, mesh, "sampler initial state")


def replicate(tree: Any, mesh: Mesh | None) -> Any:
    """Place every array leaf replicated on all devices of ``mesh`` (``P()``); others untouched."""
    if mesh is None:
        return tree
    check_mesh(mesh)
    return _put_leaves(tree, lambda leaf: NamedSharding(mesh, P()))


def _split_leading(tree: Any, mesh: Mesh | None, what: str) -> Any:
    if mesh is None:
        return tree
    check_mesh(mesh)
    divisor = batch_size_divisor(mesh)
    split, whole = NamedSharding(mesh, P(batch_axes(mesh) or None)), NamedSharding(mesh, P())

    def target(leaf):
        if leaf.ndim == 0:
            return whole
        if leaf.shape[0] % divisor:
            raise ValueError(
                f"{what} leaf of shape {leaf.shape} has leading size {leaf.shape[0]}, not divisible "
                f"by the data-parallel size {divisor}; pad it (pad_for_mesh) or pick a multiple")
        return split

    return _put_leaves(tree, target)


def _put_leaves(tree: Any, target) -> Any:
    leaves, treedef = jax.tree.flatten(tree)
    index = [i for i, leaf in enumerate(leaves) if is_array(leaf)]
    # One batched device_put: a single dispatch for the whole tree, not one per leaf.
    placed = jax.device_put([leaves[i] for i in index], [target(leaves[i]) for i in index])
    for i, new in zip(index, placed):
        leaves[i] = new
    return jax.tree.unflatten(treedef, leaves)


class DataPartitionType(str, enum.Enum):
    """How the leading (batch) axis of per-process input is split over the mesh.

    ``FULL``: over *all* mesh axes (``input_partition_spec``); every device gets its
    own rows. ``DATA``: over the batch axes only (every axis but "model"), as
    ``shard_batch`` does; the devices of one model group share rows. ``REPLICATED``:
    every process passes the same full batch and every device gets all of it.
    """

    FULL = "full"
    DATA = "data"
    REPLICATED = "replicated"


def input_partition_spec(mesh: Mesh) -> P:
    """The PartitionSpec splitting the leading axis over all mesh axes, e.g. ``P(("data", "model"))``."""
    return P(tuple(mesh.axis_names))


def host_to_global_array(host_arrays: Any, *, partition: Any = DataPartitionType.FULL,
                         mesh: Mesh | None = None) -> Any:
    """Turn this process's rows of a batch into global ``jax.Array``s.

    Parameters
    ----------
    host_arrays : pytree
        This process's rows (numpy or fully addressable jax arrays), in process order;
        0-d leaves are replicated, non-array leaves returned untouched.
    partition : DataPartitionType, str or pytree of PartitionSpec
        A ``DataPartitionType`` (or its value), or PartitionSpecs forming ``host_arrays``'
        tree structure or a prefix of it.
    mesh : jax.sharding.Mesh, optional
        Default: the mesh made active by ``mesh_context``.

    Returns
    -------
    pytree
        Global arrays; a split leaf's leading size is the per-process size times the
        number of processes holding distinct rows.

    Raises
    ------
    ValueError
        Without a concrete mesh; for an unknown partition or a spec tree that does not
        match; for a spec naming an axis the mesh lacks or longer than its leaf's rank; or
        when a leaf's size along a split dimension is not a multiple of the shards this
        process holds there. All checks run before any array is built.
    """
    mesh = _concrete_mesh(mesh)
    kind = _partition_kind(partition)
    if kind is not None:
        leaves, treedef = jax.tree.flatten(host_arrays)
        specs = [_spec_for(kind, mesh, leaf) for leaf in leaves]
    else:
        spec_leaves, spec_def = jax.tree.flatten(partition, is_leaf=lambda x: isinstance(x, P))
        bad = [s for s in spec_leaves if not isinstance(s, P)]
        if bad:
            raise ValueError(f"partition leaves must be PartitionSpecs, got {bad[0]!r}; or pass a "
                             f"DataPartitionType, one of {[k.value for k in DataPartitionType]}")
        try:
            subtrees = spec_def.flatten_up_to(host_arrays)
        except (ValueError, TypeError) as err:
            raise ValueError(
                f"partition tree {spec_def} does not match the host_arrays tree "
                f"{jax.tree.structure(host_arrays)}; give one PartitionSpec per array (or per "
                f"subtree)") from err
        leaves, specs = [], []
        for spec, subtree in zip(spec_leaves, subtrees):
            sub_leaves = jax.tree.leaves(subtree)
            leaves += sub_leaves
            specs += [spec] * len(sub_leaves)
        treedef = jax.tree.structure(host_arrays)
    paths = [jax.tree_util.keystr(path) for path, _ in jax.tree_util.tree_flatten_with_path(host_arrays)[0]]

    targets = {}
    for i, (path, leaf, spec) in enumerate(zip(paths, leaves, specs)):
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


def _partition_kind(partition: Any) -> DataPartitionType | None:
    if isinstance(partition, P):
        return None
    if isinstance(partition, DataPartitionType):
        return partition
    if isinstance(partition, str):
        try:
            return DataPartitionType(partition)
        except ValueError:
            raise ValueError(f"unknown partition {partition!r}; choose one of "
                             f"{[k.value for k in DataPartitionType]} or pass PartitionSpecs") from None
    return None


def _spec_for(kind: DataPartitionType, mesh: Mesh, leaf: Any) -> P:
    if not is_array(leaf) or leaf.ndim == 0 or kind is DataPartitionType.REPLICATED:
        return P()
    if kind is DataPartitionType.FULL:
        return input_partition_spec(mesh)
    return P(batch_axes(mesh) or None)


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
        divisor = _local_shard_count(mesh, names)
        if shape[dim] % divisor:
            what = "leading size" if dim == 0 else f"size of dim {dim}"
            raise ValueError(
                f"process {jax.process_index()} passes {what} {shape[dim]} for leaf {name} "
                f"(shape {shape}), not a multiple of {divisor}, the number of shards it holds "
                f"along mesh axes {names}; pass a multiple of {divisor} per process")


def _local_shard_count(mesh: Mesh, names: tuple[str, ...]) -> int:
    """How many distinct slices of a dimension split over ``names`` this process holds."""
    total = math.prod(mesh.shape[a] for a in names)
    held = NamedSharding(mesh, P(names)).addressable_devices_indices_map((total,))
    if not held:
        raise ValueError(f"process {jax.process_index()} holds no device of the mesh {dict(mesh.shape)}; "
                         "build the mesh over devices of every process (make_mesh() does)")
    return len({index[0].start for index in held.values()})

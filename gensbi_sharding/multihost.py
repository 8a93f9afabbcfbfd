"""Per-process input becomes global arrays: the multi-host path of batch placement.

``shard_batch`` treats its input as the *global* batch, which every process must
pass whole. Across hosts each process loads only its own rows; this module turns
those per-process arrays into global ``jax.Array``s with
``jax.make_array_from_process_local_data`` (never ``device_put`` of local data as
if it were global). On one process both paths give the same arrays.

Every check here is local to the calling process and runs before any array is
built, so a bad batch raises ``ValueError`` instead of leaving the other processes
waiting in a collective.
"""

from __future__ import annotations

import enum
from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from gensbi_sharding.sharding import MODEL_AXIS, _is_array, batch_axes

__all__ = ["DataPartitionType", "input_partition_spec", "host_to_global_array",
           "check_model_groups_local"]


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
        Per-process arrays (numpy or fully addressable jax), each holding this
        process's rows of the global batch, in process order. 0-d leaves are
        replicated; non-array leaves are returned untouched.
    partition : DataPartitionType, str or pytree of PartitionSpec
        A ``DataPartitionType`` (or its value, ``"full"``/``"data"``/``"replicated"``),
        or PartitionSpecs forming ``host_arrays``' tree structure or a prefix of it.
    mesh : jax.sharding.Mesh, optional
        Default: the mesh made active by ``mesh_context`` (``jax.set_mesh``).

    Returns
    -------
    pytree
        Global arrays; the leading size of a split leaf is the per-process size
        times the number of processes holding distinct rows.

    Raises
    ------
    ValueError
        Without a concrete mesh; for an unknown partition or a spec tree that does
        not match ``host_arrays``; for a spec naming an axis the mesh lacks or
        longer than its leaf's rank; or when a leaf's size along a split dimension
        is not a multiple of the number of shards this process holds there (the
        message names the process index, the size and the divisor). All checks run
        before any array is built.
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
        if not _is_array(leaf):
            continue
        if isinstance(leaf, jax.Array) and not leaf.is_fully_addressable:
            raise ValueError(f"leaf {path or '<root>'} is already a global array spanning processes; "
                             "pass this process's rows as a numpy or local jax array")
        _check_local_shape(path, leaf.shape, spec, mesh)
        targets[i] = NamedSharding(mesh, spec)
    for i, sharding in targets.items():
        leaves[i] = jax.make_array_from_process_local_data(sharding, leaves[i])
    return jax.tree.unflatten(treedef, leaves)


def check_model_groups_local(mesh: Mesh) -> None:
    """Check that every "model" group of ``mesh`` lies inside one process.

    Tensor-parallel groups exchange activations at every layer; across hosts that
    traffic would cross the network. A mesh without a "model" axis passes.

    Raises
    ------
    ValueError
        If a group spans processes; the message names the group's device ids, their
        process indices, and the per-process device count that ``model_axis`` must divide.
    """
    if MODEL_AXIS not in mesh.axis_names:
        return
    devices = np.moveaxis(mesh.devices, mesh.axis_names.index(MODEL_AXIS), -1)
    for group in devices.reshape(-1, devices.shape[-1]):
        processes = [d.process_index for d in group]
        if len(set(processes)) > 1:
            local = len(mesh.local_devices)
            raise ValueError(
                f"model group of devices {[d.id for d in group]} spans processes {processes}: "
                f"tensor-parallel groups must stay inside one process. Choose a model_axis "
                f"(now {len(group)}) that divides this process's {local} devices, and order "
                f"devices by process (jax.devices() does)")


# ---------------------------------------------------------------------------- helpers

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
    if not _is_array(leaf) or leaf.ndim == 0 or kind is DataPartitionType.REPLICATED:
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
    """How many distinct slices along a dimension split over ``names`` this process holds."""
    if not names:
        return 1
    me = jax.process_index()
    positions = [mesh.axis_names.index(a) for a in names]
    sizes = [mesh.shape[a] for a in names]
    held = set()
    for coords in np.ndindex(mesh.devices.shape):
        if mesh.devices[coords].process_index != me:
            continue
        index = 0
        for pos, size in zip(positions, sizes):
            index = index * size + coords[pos]
        held.add(index)
    if not held:
        raise ValueError(f"process {me} holds no device of the mesh {dict(mesh.shape)}; build the "
                         f"mesh over devices of every process (make_mesh() does)")
    return len(held)


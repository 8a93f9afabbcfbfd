"""What a placement costs: leaves, scalars and bytes per device, read from the arrays' shards.

``describe(node, mesh)`` summarises any NNX graph node (a module, an optimizer,
or an abstract module from ``nnx.eval_shape`` whose values carry shardings);
``mesh_init_simulate`` is the smallest example of it. Built on the contract only;
never imports the harness. The compiled-program side lives in ``compiled``.
"""

from __future__ import annotations

import dataclasses
import math
from collections import defaultdict
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jax.sharding import Mesh, NamedSharding

from gensbi_sharding.sharding import _is_array, _path_str, batch_size_divisor

__all__ = ["bytes_per_device", "partition_specs", "MeshSummary", "VariablePlacement",
           "PlacementReport", "describe", "summarize_mesh", "mesh_init_simulate"]


def bytes_per_device(tree: Any) -> dict[int, int]:
    """Bytes held on each addressable device by the array leaves of ``tree``.

    ``tree`` may be any pytree or NNX graph node. Returns ``{device id: bytes}``;
    a replicated leaf counts fully on every device, a split leaf only its shard.
    NumPy leaves live on the host and count nowhere.
    """
    if isinstance(tree, (nnx.Module, nnx.Optimizer)) or hasattr(tree, "__nnx_repr__"):
        tree = nnx.state(tree)
    totals: dict[int, int] = defaultdict(int)
    for leaf in jax.tree.leaves(tree):
        if isinstance(leaf, jax.Array):
            for shard in leaf.addressable_shards:
                totals[shard.device.id] += shard.data.nbytes
    return dict(sorted(totals.items()))


def partition_specs(node: Any) -> dict[str, str]:
    """``{"a/b/c": "PartitionSpec(...)"}`` for every array state leaf of an NNX node."""
    out = {}
    for path, var in nnx.to_flat_state(nnx.state(node)):
        value = var.get_value()
        if _is_array(value):
            sharding = getattr(value, "sharding", None)
            out[_path_str(path)] = str(getattr(sharding, "spec", "host"))
    return out


@dataclasses.dataclass(frozen=True)
class MeshSummary:
    """Axis names and sizes, devices in all and on this process, data-parallel size."""

    axis_names: tuple[str, ...]
    axis_sizes: dict[str, int]
    n_devices: int
    devices_per_process: int
    n_processes: int
    data_parallel_size: int

    def __str__(self) -> str:
        axes = " x ".join(f"{name}={size}" for name, size in self.axis_sizes.items())
        return (f"mesh {axes}: {self.n_devices} devices, {self.devices_per_process} per process "
                f"({self.n_processes} process(es)), data-parallel size {self.data_parallel_size}")


@dataclasses.dataclass(frozen=True)
class VariablePlacement:
    """One array variable: its shape, dtype, placement and bytes (all and on its fullest device)."""

    path: str
    shape: tuple[int, ...]
    dtype: str
    placement: str  # "P('data', None)", or "single device" / "host" / "unplaced"
    nbytes: int
    max_device_bytes: int
    replicated: bool  # held whole by every device it lives on


@dataclasses.dataclass(frozen=True)
class PlacementReport:
    """What ``describe`` found; ``str(report)`` (or ``report.table()``) prints it as a table.

    ``n_leaves`` counts the array leaves of the node's state and ``n_scalars`` their
    elements (a ``Linear(4, 3)``: 2 and 15); bytes are the arrays' own sizes, per
    device from the shards each device holds. ``largest_replicated`` lists the
    biggest variables held whole by every device while another variable is split,
    the usual sign of a missing annotation (empty when nothing is split).
    """

    n_leaves: int
    n_scalars: int
    total_bytes: int
    bytes_per_device: dict[int, int]
    variables: tuple[VariablePlacement, ...]
    largest_replicated: tuple[tuple[str, int], ...]
    mesh: MeshSummary | None

    @property
    def max_bytes_per_device(self) -> int:
        return max(self.bytes_per_device.values(), default=0)

    @property
    def placements(self) -> dict[str, str]:
        return {v.path: v.placement for v in self.variables}

    def table(self) -> str:
        lines = [str(self.mesh) if self.mesh else "no mesh",
                 f"state: {self.n_leaves} leaves, {self.n_scalars:,} scalars, "
                 f"{_fmt_bytes(self.total_bytes)}; per device max "
                 f"{_fmt_bytes(self.max_bytes_per_device)}, min "
                 f"{_fmt_bytes(min(self.bytes_per_device.values(), default=0))}"]
        width = max([len(v.path) for v in self.variables] + [8])
        lines.append(f"{'variable':<{width}}  {'shape':<16} {'dtype':<9} {'placement':<24} "
                     f"{'per device':>11}")
        for v in self.variables:
            lines.append(f"{v.path:<{width}}  {str(v.shape):<16} {v.dtype:<9} {v.placement:<24} "
                         f"{_fmt_bytes(v.max_device_bytes):>11}")
        if self.largest_replicated:
            lines.append("largest replicated under a splitting rule (missing annotation?): " + ", ".join(
                f"{path} ({_fmt_bytes(size)})" for path, size in self.largest_replicated))
        return "\n".join(lines)

    __str__ = table


def summarize_mesh(mesh: Mesh) -> MeshSummary:
    """The ``MeshSummary`` of ``mesh``."""
    devices = list(mesh.devices.flat)
    here = jax.process_index()
    return MeshSummary(axis_names=tuple(mesh.axis_names), axis_sizes=dict(mesh.shape),
                       n_devices=len(devices),
                       devices_per_process=sum(d.process_index == here for d in devices),
                       n_processes=len({d.process_index for d in devices}),
                       data_parallel_size=batch_size_divisor(mesh))


def describe(node: Any, mesh: Mesh | None, *, top: int = 5) -> PlacementReport:
    """Count, size and locate every array variable of an NNX graph node.

    Parameters
    ----------
    node : NNX graph node
        Concrete (``jax.Array`` values: bytes from ``addressable_shards``), or
        abstract (``jax.ShapeDtypeStruct`` values: bytes from their sharding, if any).
    mesh : jax.sharding.Mesh or None
        Summarised in the report; its devices all appear in ``bytes_per_device``.
    top : int, default 5
        How many of the largest replicated variables to list.

    Raises
    ------
    ValueError
        If ``top`` is negative.
    """
    if isinstance(top, bool) or not isinstance(top, int) or top < 0:
        raise ValueError(f"top must be a non-negative integer, got {top!r}; pass e.g. top=5")
    _, state = nnx.split(node)
    leaves = [leaf for leaf in jax.tree_util.tree_leaves(state) if _is_leaf_array(leaf)]
    per_device: dict[int, int] = {d.id: 0 for d in mesh.devices.flat} if mesh is not None else {}
    variables = []
    for path, var in nnx.to_flat_state(state):
        value = var.get_value()
        if not _is_leaf_array(value):
            continue
        shards = _device_bytes(value)
        for device, size in shards.items():
            per_device[device] = per_device.get(device, 0) + size
        sharding = getattr(value, "sharding", None)
        variables.append(VariablePlacement(
            path=_path_str(path), shape=tuple(value.shape), dtype=str(value.dtype),
            placement=_placement(value, sharding), nbytes=_nbytes(value),
            max_device_bytes=max(shards.values(), default=0),
            replicated=sharding is not None and sharding.is_fully_replicated))
    splitting = any(v.placement.startswith("P(") and not v.replicated for v in variables)
    replicated = sorted((v for v in variables if splitting and v.replicated and v.shape),
                        key=lambda v: (-v.nbytes, v.path))
    return PlacementReport(
        n_leaves=len(leaves), n_scalars=sum(math.prod(leaf.shape) for leaf in leaves),
        total_bytes=sum(v.nbytes for v in variables), bytes_per_device=dict(sorted(per_device.items())),
        variables=tuple(variables), largest_replicated=tuple((v.path, v.nbytes) for v in replicated[:top]),
        mesh=summarize_mesh(mesh) if mesh is not None else None)


def mesh_init_simulate(seed: Any, x: Any, features: Any, mesh_axes: Any) -> jax.Array:
    """Configuration summary of a ``Linear`` layer, without running it or building a mesh.

    Casts ``seed``, ``features`` and ``mesh_axes`` to Python ints, builds
    ``nnx.Linear(x.shape[-1], features, rngs=nnx.Rngs(seed))`` (default initialisers,
    with bias) and counts the array leaves of its state with ``describe``
    (``jax.tree_util.tree_leaves`` of ``nnx.split``). ``mesh_axes`` is reported
    as given, whether or not it matches the devices.

    Parameters
    ----------
    seed, features, mesh_axes : int-like
    x : array, shape (..., d_in); only its last size is read

    Returns
    -------
    jax.Array, shape (3,), float32
        ``[features, mesh_axes, n_state_leaves]``; e.g. x of shape (5, 4),
        features 3, mesh_axes 4 -> ``[3., 4., 2.]``.

    Raises
    ------
    ValueError
        If an argument cannot be cast to int, ``x`` has no last axis, or
        ``features`` is not positive.
    """
    seed, features, mesh_axes = (_as_int(name, value) for name, value in
                                 (("seed", seed), ("features", features), ("mesh_axes", mesh_axes)))
    shape = np.shape(x)
    if not shape:
        raise ValueError(f"x must have at least one axis (its last size is the layer's input size), "
                         f"got shape {shape}; pass e.g. x of shape (batch, d_in)")
    if features < 1:
        raise ValueError(f"features must be a positive integer, got {features}; pass e.g. features=3")
    layer = nnx.Linear(shape[-1], features, rngs=nnx.Rngs(seed))
    return jnp.asarray([features, mesh_axes, describe(layer, None).n_leaves], dtype=jnp.float32)


def _as_int(name: str, value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be castable to int, got {value!r}; pass e.g. {name}=3") from None


def _is_leaf_array(value: Any) -> bool:
    return _is_array(value) or isinstance(value, jax.ShapeDtypeStruct)


def _nbytes(value: Any) -> int:
    return math.prod(value.shape) * value.dtype.itemsize


def _device_bytes(value: Any) -> dict[int, int]:
    if isinstance(value, jax.Array):
        out: dict[int, int] = defaultdict(int)
        for shard in value.addressable_shards:
            out[shard.device.id] += shard.data.nbytes
        return dict(out)
    sharding = getattr(value, "sharding", None)
    if sharding is None:  # NumPy (host) or unplaced abstract values
        return {}
    return {device.id: math.prod(len(range(*s.indices(n))) for s, n in zip(index, value.shape))
            * value.dtype.itemsize
            for device, index in sharding.addressable_devices_indices_map(value.shape).items()}


def _placement(value: Any, sharding: Any) -> str:
    if isinstance(sharding, NamedSharding):
        return "P(" + ", ".join(repr(e) for e in sharding.spec) + ")"
    if sharding is not None:
        return "single device" if len(sharding.device_set) == 1 else type(sharding).__name__
    return "host" if isinstance(value, np.ndarray) else "unplaced"


def _fmt_bytes(n: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"

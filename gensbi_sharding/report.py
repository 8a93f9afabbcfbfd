"""What a placement costs: bytes per device of a state, and memory and collectives of a compiled step.

Both work on abstract state (``abstract_sharded``): nothing is allocated.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections import Counter
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jax.sharding import Mesh, NamedSharding

from gensbi_sharding.batch import batch_size_divisor
from gensbi_sharding.sharding import check_mesh, check_node, is_array, is_int, path_name

__all__ = ["bytes_per_device", "partition_specs", "MeshSummary", "VariablePlacement", "PlacementReport",
           "describe", "summarize_mesh", "mesh_init_simulate", "COLLECTIVES", "compiled_report",
           "collectives_in_hlo", "hlo_shape_bytes"]


def bytes_per_device(tree: Any) -> dict[int, int]:
    """``{device id: bytes}`` held by the ``jax.Array`` leaves of a pytree or NNX node (NumPy: nowhere)."""
    totals: Counter[int] = Counter()
    for leaf in jax.tree.leaves(nnx.state(tree) if nnx.graph.is_graph_node(tree) else tree):
        if isinstance(leaf, jax.Array):
            totals.update(_device_bytes(leaf))
    return dict(sorted(totals.items()))


def partition_specs(node: Any) -> dict[str, str]:
    """``{"a/b/c": "PartitionSpec(...)"}`` for every array state leaf of an NNX node ("host" for NumPy)."""
    return {path_name(path): str(getattr(getattr(var.get_value(), "sharding", None), "spec", "host"))
            for path, var in nnx.to_flat_state(nnx.state(node)) if is_array(var.get_value())}


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
    """What ``describe`` found (a ``Linear(4, 3)``: 2 leaves, 15 scalars); ``str(report)`` is a table.

    ``largest_replicated``: the biggest variables whole on every device while another is split (a missing annotation?).
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
        width = max([len(v.path) for v in self.variables] + [8])
        lines = [str(self.mesh) if self.mesh else "no mesh",
                 f"state: {self.n_leaves} leaves, {self.n_scalars:,} scalars, {_fmt(self.total_bytes)}; per device "
                 f"max {_fmt(self.max_bytes_per_device)}, min {_fmt(min(self.bytes_per_device.values(), default=0))}",
                 f"{'variable':<{width}}  {'shape':<16} {'dtype':<9} {'placement':<24} {'per device':>11}"]
        lines += [f"{v.path:<{width}}  {str(v.shape):<16} {v.dtype:<9} {v.placement:<24} "
                  f"{_fmt(v.max_device_bytes):>11}" for v in self.variables]
        if self.largest_replicated:
            lines.append("largest replicated under a splitting rule (by the rule's table, or a missing annotation): "
                         + ", ".join(f"{path} ({_fmt(size)})" for path, size in self.largest_replicated))
        return "\n".join(lines)

    __str__ = table


def summarize_mesh(mesh: Mesh) -> MeshSummary:
    """The ``MeshSummary`` of ``mesh``."""
    processes = [d.process_index for d in mesh.devices.flat]
    return MeshSummary(axis_names=tuple(mesh.axis_names), axis_sizes=dict(mesh.shape), n_devices=len(processes),
                       devices_per_process=processes.count(jax.process_index()),
                       n_processes=len(set(processes)), data_parallel_size=batch_size_divisor(mesh))


def describe(node: Any, mesh: Mesh | None, *, top: int = 5) -> PlacementReport:
    """Count, size and locate every array variable of an NNX graph node (or tuple of nodes).

    Values: ``jax.Array``, NumPy (host) or ``jax.ShapeDtypeStruct`` (bytes from its sharding, if any). Raises
    ``ValueError`` if ``top`` is not a non-negative integer, ``TypeError`` for a non-node.
    """
    if not is_int(top) or top < 0:
        raise ValueError(f"top must be a non-negative integer, got {top!r}; pass e.g. top=5")
    check_node(node, "describe")
    if mesh is not None:
        check_mesh(mesh)
    per_device = Counter({d.id: 0 for d in mesh.devices.flat} if mesh is not None else {})
    variables = []
    for path, var in nnx.to_flat_state(nnx.state(node)):
        value = var.get_value()
        if not (is_array(value) or isinstance(value, jax.ShapeDtypeStruct)):
            continue
        shards, sharding = _device_bytes(value), getattr(value, "sharding", None)
        per_device.update(shards)
        variables.append(VariablePlacement(
            path=path_name(path), shape=tuple(value.shape), dtype=str(value.dtype),
            placement=_placement(value, sharding), nbytes=math.prod(value.shape) * value.dtype.itemsize,
            max_device_bytes=max(shards.values(), default=0),
            replicated=sharding is not None and sharding.is_fully_replicated))
    splitting = any(v.placement.startswith("P(") and not v.replicated for v in variables)
    replicated = sorted((v for v in variables if splitting and v.replicated and v.shape),
                        key=lambda v: (-v.nbytes, v.path))
    return PlacementReport(
        n_leaves=len(variables), n_scalars=sum(math.prod(v.shape) for v in variables), variables=tuple(variables),
        total_bytes=sum(v.nbytes for v in variables), bytes_per_device=dict(sorted(per_device.items())),
        largest_replicated=tuple((v.path, v.nbytes) for v in replicated[:top]),
        mesh=summarize_mesh(mesh) if mesh is not None else None)


def mesh_init_simulate(seed: Any, x: Any, features: Any, mesh_axes: Any) -> jax.Array:
    """``[features, mesh_axes, n_state_leaves]`` (shape (3,), float32) of ``nnx.Linear(x.shape[-1], features)``.

    ``x``: shape (..., d_in); the rest cast with ``int``. x of shape (5, 4), 3, 4 -> ``[3., 4., 2.]``. Raises
    ``ValueError`` if an argument cannot be cast, ``x`` is 0-d, or ``features`` < 1.
    """
    ints = {}
    for name, value in (("seed", seed), ("features", features), ("mesh_axes", mesh_axes)):
        try:
            ints[name] = int(value)
        except (TypeError, ValueError):
            raise ValueError(f"{name} must be castable to int, got {value!r}; pass e.g. {name}=3") from None
    shape = np.shape(x)
    if not shape:
        raise ValueError(f"x must have at least one axis (its last size is the layer's input size), "
                         f"got shape {shape}; pass e.g. x of shape (batch, d_in)")
    if ints["features"] < 1:
        raise ValueError(f"features must be a positive integer, got {ints['features']}; pass e.g. features=3")
    layer = nnx.Linear(shape[-1], ints["features"], rngs=nnx.Rngs(ints["seed"]))
    return jnp.asarray([ints["features"], ints["mesh_axes"], describe(layer, None).n_leaves], dtype=jnp.float32)


def _device_bytes(value: Any) -> dict[int, int]:
    """``{device id: bytes}`` of a ``jax.Array`` or ``jax.ShapeDtypeStruct`` from its sharding's index map."""
    sharding = getattr(value, "sharding", None)
    if sharding is None:  # NumPy (host) or unplaced abstract values
        return {}
    return {device.id: math.prod(len(range(*s.indices(n))) for s, n in zip(index, value.shape))
            * value.dtype.itemsize for device, index in sharding.addressable_devices_indices_map(value.shape).items()}


def _placement(value: Any, sharding: Any) -> str:
    if isinstance(sharding, NamedSharding):
        return "P(" + ", ".join(repr(e) for e in sharding.spec) + ")"
    if sharding is not None:
        return "single device" if len(sharding.device_set) == 1 else type(sharding).__name__
    return "host" if isinstance(value, np.ndarray) else "unplaced"


def _fmt(n: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


COLLECTIVES: tuple[str, ...] = ("all-gather", "all-reduce", "reduce-scatter", "all-to-all", "collective-permute")

# "%name = <result shape> <op>(" for each collective, synchronous or the "-done" half of an
# async pair ("-start" is skipped: its result tuple also holds the operands).
_OP = re.compile(r"=\s*(?P<shape>\S.*?)\s+(?P<op>" + "|".join(COLLECTIVES) + r")(?P<half>-start|-done)?\(")
_ARRAY = re.compile(r"\b(?P<dtype>pred|token|[a-z]+\d+[a-z0-9]*)\[(?P<dims>[\d,]*)\]")
_BITS = re.compile(r"^(?:bf|f|s|u|c)(\d+)")


def hlo_shape_bytes(shape: str) -> int:
    """Bytes of an HLO result shape (``f32[8,16]{1,0}`` or a tuple); ``ValueError`` for an unknown type."""
    total = 0
    for match in _ARRAY.finditer(shape):
        dtype, count = match["dtype"], math.prod(int(d) for d in match["dims"].split(",") if d)
        if dtype == "token":
            continue
        found = _BITS.match(dtype)  # f8e4m3fn and the like too: 8 bits
        if dtype != "pred" and found is None:
            raise ValueError(f"unknown HLO element type {dtype!r} in shape {shape!r}")
        total += -(-count * (8 if dtype == "pred" else int(found[1])) // 8)  # sub-byte types round up
    return total


def collectives_in_hlo(text: str) -> dict[str, dict[str, int]]:
    """``{op: {"count": n, "bytes": b}}`` of each collective in an HLO module's text (loop bodies once)."""
    out = {op: {"count": 0, "bytes": 0} for op in COLLECTIVES}
    for match in filter(None, map(_OP.search, text.splitlines())):
        if match["half"] != "-start":
            out[match["op"]]["count"] += 1
            out[match["op"]]["bytes"] += hlo_shape_bytes(match["shape"])
    return out


def compiled_report(compiled: Any) -> dict[str, Any]:
    """Per-device ``memory`` (``memory_analysis()``'s bytes; None if the backend has none) and collectives.

    ``total_bytes`` = argument + output + temp - alias. Raises ``ValueError`` if ``compiled`` has no ``as_text``.
    """
    if not callable(getattr(compiled, "as_text", None)):
        raise ValueError(f"expected a compiled program, got {type(compiled).__name__}; "
                         "pass jax.jit(f).lower(*args).compile()")
    collectives = collectives_in_hlo(compiled.as_text())
    try:
        stats = compiled.memory_analysis()
    except NotImplementedError:
        stats = None
    memory = None
    if stats is not None:
        memory = {f"{name}_bytes": int(getattr(stats, f"{name}_size_in_bytes"))
                  for name in ("argument", "output", "temp", "alias", "generated_code")}
        memory["total_bytes"] = (memory["argument_bytes"] + memory["output_bytes"] + memory["temp_bytes"]
                                 - memory["alias_bytes"])
    return {"memory": memory, "collectives": collectives,
            "collective_bytes": sum(c["bytes"] for c in collectives.values())}

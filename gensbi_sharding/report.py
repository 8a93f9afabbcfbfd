"""What a placement costs: bytes per device of a state (abstract too: nothing allocated), where each variable lives.
A compiled step's memory and collectives: ``gensbi_sharding.compiled``."""

import dataclasses
import math
from collections import Counter
from typing import Any

import jax
import numpy as np
from jax.sharding import AbstractMesh, Mesh, NamedSharding

from gensbi_sharding.batch import batch_size_divisor
from gensbi_sharding.factory import UNDER_TRANSFORM
from gensbi_sharding.leaf_checks import check_placeable
from gensbi_sharding.mesh import MeshSummary, mesh_label
from gensbi_sharding.messages import shown
from gensbi_sharding.nodes import (check_node, is_array, is_array_like, is_int, listing, named_leaves, path_key,
                                   stored_bytes)
from gensbi_sharding.specs import check_mesh

__all__ = ["bytes_per_device", "partition_specs", "MeshSummary", "VariablePlacement", "PlacementReport", "describe",
           "sharding_of"]


def bytes_per_device(tree: Any) -> dict[int, int]:
    """``{device id: bytes}`` (sorted) this process's devices hold of the arrays of ``tree``: replicated arrays whole on
    each device, abstract ones by their sharding, NumPy, unplaced and host-memory (``"pinned_host"``) leaves nowhere.

    Parameters
    ----------
    tree : pytree or NNX node

    Returns
    -------
    dict of int to int
        Bytes per device, by ``jax.Device.id``; ``{}`` where no leaf is a placed array (``3``, ``"x"``).

    Raises
    ------
    TypeError, ValueError, RuntimeError
        A traced leaf (in a jit) or ``jax.typeof``'s; a leaf on an AbstractMesh; a deleted (donated) array.
    """
    totals: Counter[int] = Counter()
    for name, leaf, first in _checked_leaves(tree):
        totals.update(_device_bytes(leaf, path=name) if first else {})
    return dict(sorted(totals.items()))


def sharding_of(node: Any) -> dict[str, jax.sharding.Sharding | None]:
    """``{"a/b/c": sharding}`` of every state leaf of ``node`` now (None if it has none), a pytree value by each array.
    It reads placed arrays, so it runs outside ``jax.jit``/``jax.grad`` (on the state a step takes or returns).

    Parameters
    ----------
    node : NNX node

    Returns
    -------
    dict of str to jax.sharding.Sharding or None

    Raises
    ------
    TypeError
        A non-node (a pytree of arrays: ``jax.tree.map(lambda a: a.sharding, tree)``), or a traced leaf (in a jit).
    """
    return {name: sharding for name, _, sharding in _leaf_shardings(node, "sharding_of")}


def partition_specs(node: Any) -> dict[str, str]:
    """``{"a/b/c": "P('data', None)"}`` of every array state leaf of ``node``, as ``describe`` shows it, but ``"host"``
    for NumPy and for a sharding without a spec (``describe``: ``"single device"``), ``"unplaced"`` for an abstract one.

    Parameters
    ----------
    node : NNX node

    Returns
    -------
    dict of str to str

    Raises
    ------
    TypeError
        A non-node (``np.ones(3)``), or a traced leaf: it reads placed arrays, so call it outside ``jax.jit``.
    """
    return {name: _spec_text(sharding.spec) if hasattr(sharding, "spec") else "host" if is_array(value) else
            "unplaced" for name, value, sharding in _leaf_shardings(node, "partition_specs") if is_array_like(value)}


def _spec_text(spec: jax.sharding.PartitionSpec) -> str:
    """``spec`` as shown, e.g. ``"P('data', None)"``, whatever JAX's ``repr``; all-None ``"P()"`` (not ``P(None)``)."""
    return "P(" + (", ".join(map(repr, spec)) if any(e is not None for e in spec) else "") + ")"


def _leaf_shardings(node: Any, caller: str) -> list[tuple[str, Any, jax.sharding.Sharding | None]]:
    """``(path, leaf, its sharding or None)`` of every state leaf of ``node``, a non-node or traced leaf refused."""
    check_node(node, caller)  # a traced leaf would read "host"
    return [(name, leaf, getattr(leaf, "sharding", None)) for name, leaf, _ in _checked_leaves(node)]


@dataclasses.dataclass(frozen=True)
class VariablePlacement:
    """One array variable of ``describe``. ``placement``: ``"P('data', None)"``, ``"single device"``, another sharding's
    class name (`` in pinned_host`` added for host memory), ``"host"`` or ``"unplaced"``; ``nbytes``: the whole array's,
    once; ``max_device_bytes``: its share on the fullest device; ``replicated``: whole on each of its devices."""

    path: str
    shape: tuple[int, ...]
    dtype: str
    placement: str
    nbytes: int
    max_device_bytes: int
    replicated: bool


@dataclasses.dataclass(frozen=True)
class PlacementReport:
    """What ``describe`` found about a node's array variables; ``str(report)`` is ``table()``. ``total_bytes``: each
    array once (its ``nbytes`` summed), not its copies on the devices; ``bytes_per_device`` lists every mesh device
    (a replicated array whole on each); ``largest_replicated``: ``(path, bytes)`` of at most ``top`` non-empty
    variables whole on every device while another is split, largest first (as MaxText's
    ``assert_params_sufficiently_sharded``); ``left_out``: ``"path (type)"`` of each leaf no array (a Python scalar,
    ``nnx.Variable(3.0)``), in no count."""

    n_leaves: int
    n_scalars: int
    total_bytes: int
    bytes_per_device: dict[int, int]
    variables: tuple[VariablePlacement, ...]
    largest_replicated: tuple[tuple[str, int], ...]
    mesh: MeshSummary | None
    left_out: tuple[str, ...] = ()

    @property
    def max_bytes_per_device(self) -> int:
        """int: Bytes on the fullest device (0 when no device holds anything)."""
        return max(self.bytes_per_device.values(), default=0)

    @property
    def placements(self) -> dict[str, str]:
        """dict of str to str: ``{path: placement}`` of every variable."""
        return {v.path: v.placement for v in self.variables}

    def table(self) -> str:
        """Render the report: mesh, totals, one row per variable, largest replicated (bytes in powers of 1000)."""
        rows = [(v.path, str(v.shape), v.dtype, v.placement, _fmt(v.max_device_bytes)) for v in self.variables]
        # Each column as wide as its widest cell (a long dtype, e.g. float8_e4m3fn, or shape).
        w = [max([len(row[i]) for row in rows] + [least]) for i, least in enumerate((8, 16, 9, 24, 11))]
        lines = [str(self.mesh) if self.mesh else "no mesh",
                 f"state: {self.n_leaves} leaves, {self.n_scalars:,} scalars, {_fmt(self.total_bytes)}; per device "
                 f"max {_fmt(self.max_bytes_per_device)}, min {_fmt(min(self.bytes_per_device.values(), default=0))}",
                 *(f"{a:<{w[0]}}  {b:<{w[1]}} {c:<{w[2]}} {d:<{w[3]}} {e:>{w[4]}}" for a, b, c, d, e in
                   [("variable", "shape", "dtype", "placement", "per device"), *rows])]
        if self.largest_replicated:
            lines.append("largest replicated under a splitting rule (by the rule's table, or a missing annotation): "
                         + ", ".join(f"{path} ({_fmt(size)})" for path, size in self.largest_replicated))
        if self.left_out:
            lines.append(f"left out, no array (on no device): {listing(self.left_out, 5)}")
        return "\n".join(lines)

    __str__ = table


def describe(node: Any, mesh: Mesh | None, *, top: int = 5) -> PlacementReport:
    """Count, size and locate every array variable of ``node``: a ``PlacementReport``. It reads placed arrays (or
    abstract ones), so it runs outside ``jax.jit``/``jax.grad``: on the state a step takes or returns.

    Parameters
    ----------
    node : NNX node
        Values: arrays, NumPy (host), ``jax.ShapeDtypeStruct`` (bytes by its sharding), or pytrees of them (a row each).
    mesh : jax.sharding.Mesh or None
        Every device of it (every process's) listed in ``bytes_per_device``; None: only devices holding bytes.
    top : int, default 5
        At most this many ``largest_replicated``.

    Returns
    -------
    PlacementReport
        Bytes are stored bytes (per device: the fullest device's share); ``str(report)`` is its table.

    Raises
    ------
    ValueError, TypeError
        ``top`` not a non-negative integer, or an array on a mesh other than ``mesh``; ``node`` or ``mesh`` of
        another type, or a traced leaf (in a jit).
    """
    if not is_int(top) or top < 0:
        raise ValueError(f"top must be a non-negative integer, got {shown(top)}; pass e.g. top=5")
    check_node(node, "describe")
    check_mesh(mesh)
    ids = {d.id for d in mesh.devices.flat} if mesh is not None else set()
    per_device, variables, outside, other, left_out = Counter(dict.fromkeys(ids, 0)), [], set(), {}, []
    for name, value, first in _checked_leaves(node):
        if not is_array_like(value):
            left_out.append(f"{name} ({type(value).__name__})")
            continue
        # Every process's devices, so none reads 0 B with several processes.
        sharding = getattr(value, "sharding", None)
        shards = _device_bytes(value, every=True, mesh=mesh, path=name)
        per_device.update(shards if first else {})
        if mesh is not None and isinstance(sharding, NamedSharding):  # placed (unplaced arrays may be anywhere)
            outside.update(set(shards) - ids)
            if not _same_layout(sharding.mesh, mesh):  # P('data') would read against the wrong axis sizes
                other.setdefault(mesh_label(sharding.mesh), name)
        variables.append(VariablePlacement(
            path=name, shape=tuple(value.shape), dtype=str(value.dtype),
            placement=_placement(value, sharding), nbytes=stored_bytes(math.prod(value.shape), value.dtype),
            max_device_bytes=max(shards.values(), default=0),
            replicated=sharding is not None and sharding.is_fully_replicated))
    if outside:  # the report would name one mesh and count the bytes of another
        raise ValueError(f"describe: the node's arrays are on devices {sorted(outside)}, outside the mesh given "
                         f"(devices {sorted(ids)}); pass the mesh they are on, or mesh=None")
    if other:  # same devices, other axes: the placements would be read against the given mesh's axis sizes
        raise ValueError(f"describe: the node's arrays are on another mesh than the one given ({mesh_label(mesh)}): "
                         + ", ".join(f"{path} on {label}" for label, path in other.items())
                         + "; pass the mesh they are on, or mesh=None")
    splitting = any(v.placement.startswith("P(") and not v.replicated for v in variables)
    replicated = sorted((v for v in variables if splitting and v.replicated and v.shape and v.max_device_bytes),
                        key=lambda v: (-v.nbytes, v.path))
    processes = [d.process_index for d in mesh.devices.flat] if mesh is not None else []
    return PlacementReport(
        n_leaves=len(variables), n_scalars=sum(math.prod(v.shape) for v in variables), variables=tuple(variables),
        total_bytes=sum(v.nbytes for v in variables), bytes_per_device=dict(sorted(per_device.items())),
        largest_replicated=tuple((v.path, v.nbytes) for v in replicated[:top]),
        mesh=MeshSummary(tuple(mesh.axis_names), dict(mesh.shape), len(processes), processes.count(jax.process_index()),
                         len(set(processes)), batch_size_divisor(mesh)) if mesh is not None else None,
        left_out=tuple(left_out))


def _device_bytes(value: Any, every: bool = False, mesh: Mesh | None = None, path: str = "") -> dict[int, int]:
    """``{device id: bytes}`` of an array by its sharding (``every``: all processes'); an AbstractMesh's on ``mesh``."""
    sharding = getattr(value, "sharding", None)
    if sharding is None or "host" in str(sharding.memory_kind):  # NumPy, unplaced, in host memory ("pinned_host")
        return {}
    if isinstance(getattr(sharding, "mesh", None), AbstractMesh):  # axes, no devices: JAX cannot list its shards
        if mesh is None or not _same_layout(sharding.mesh, mesh):
            raise ValueError(f"{path} is placed on an abstract {mesh_label(sharding.mesh)}, which has no devices to "
                             "count bytes on; pass its concrete mesh: describe(node, mesh) with a mesh of that layout")
        sharding = NamedSharding(mesh, sharding.spec, memory_kind=sharding.memory_kind)
    shard = stored_bytes(math.prod(sharding.shard_shape(value.shape)), value.dtype)  # every device's alike
    return {device.id: shard for device in (sharding.device_set if every else sharding.addressable_devices)}


def _checked_leaves(tree: Any) -> list[tuple[str, Any, bool]]:
    """``named_leaves(tree)``, each with whether its bytes count (a ``jax.Array`` held twice: once), refusing
    ``jax.typeof``'s values (no Auto axes), traced and deleted arrays."""
    named, seen = [], set()
    for path, value in named_leaves(tree):  # a shared variable is once in nnx.state; a shared array is not
        named.append((path, value, not (isinstance(value, jax.Array) and id(value) in seen)))
        seen.add(id(value))
        for keys, leaf in jax.tree_util.tree_leaves_with_path(value):
            name = path_key(keys, path)
            if isinstance(leaf, jax.core.Tracer):
                raise TypeError(f"{name} is a traced array {UNDER_TRANSFORM}, placed nowhere yet: describe, "
                                "bytes_per_device, sharding_of and partition_specs read placed arrays; call them "
                                "outside the transformed function, on the state it takes or returns")
            if isinstance(leaf, jax.core.ShapedArray):
                raise TypeError(f"{name} is {leaf} (jax.typeof's), whose sharding omits the mesh's Auto axes: pass "
                                "the arrays, or jax.ShapeDtypeStruct leaves (jax.eval_shape's, abstract_sharded's)")
            if isinstance(leaf, jax.Array):  # deleted (donated): its bytes were counted, freed on every device
                check_placeable(leaf, f"{name} (shape {leaf.shape})")
    return named


def _same_layout(a: Any, b: Mesh) -> bool:
    """Whether mesh ``a`` has ``b``'s axis names, sizes and device order (axis types aside)."""
    return dict(a.shape) == dict(b.shape) and tuple(a.axis_names) == tuple(b.axis_names) and (
        isinstance(a, AbstractMesh) or np.array_equal(a.device_ids, b.device_ids))  # an AbstractMesh has no devices


def _placement(value: Any, sharding: Any) -> str:
    if sharding is None:
        return "host" if isinstance(value, np.ndarray) else "unplaced"
    where = f" in {sharding.memory_kind}" if "host" in str(sharding.memory_kind) else ""  # offloaded: on no device
    if isinstance(sharding, NamedSharding):
        return _spec_text(sharding.spec) + where
    return ("single device" if len(sharding.device_set) == 1 else type(sharding).__name__) + where


def _fmt(n: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if round(n / scale, 1) >= 1:  # by the shown digit: 999,999 B is "1.0 MB", never "1000.0 KB"
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"

"""The sharding contract shared with GenSBI and heal_swin_nnx.

Models annotate their variables with *logical* axis names (``axes("embed", "mlp")``)
and never need a mesh to be built. Placement happens afterwards: ``shard_model``
maps the logical names onto the axes of a ``("data", "model")`` mesh through a
named rule and puts every variable on its devices.

The module reads top to bottom: constants, annotations, mesh, batch placement,
model placement, inspection. The vocabulary (``LOGICAL_AXES``, ``RULES``,
``MODEL_AXIS``, ``axes``, ``partitioned``) is pinned by a test against the
installed ``heal_swin_nnx.sharding``; everything else keeps its semantics and
mends the reference's known failures (duplicate mesh axes in one spec, mappings
other than ``dict``, 0-d leaves, a missing mesh).
"""

from __future__ import annotations

import contextlib
import math
import warnings
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import jax
import numpy as np
from flax import nnx
from jax.sharding import AxisType, Mesh, NamedSharding, PartitionSpec as P

__all__ = [
    "LOGICAL_AXES", "MODEL_AXIS", "RULES", "RuleTable",
    "ShardingFallbackWarning", "ExperimentalRuleWarning",
    "axes", "partitioned", "logical_axes_of",
    "make_mesh", "resolve_mesh", "mesh_context",
    "batch_axes", "batch_size_divisor", "check_batch_divisible", "pad_for_mesh",
    "shard_batch", "shard_sample_init", "replicate",
    "shard_model", "shard_model_by_table", "partition_spec_for", "plan_shardings", "sharding_of",
]

# ---------------------------------------------------------------------------- constants

LOGICAL_AXES: tuple[str, ...] = ("embed", "mlp", "heads", "vocab", "in", "out")
MODEL_AXIS = "model"

#: A rule table: logical axis name -> mesh axis name, a tuple of mesh axes
#: (the dimension is split over their product), or None (not split).
RuleTable = Mapping[str, "str | tuple[str, ...] | None"]

RULES: dict[str, tuple[tuple[str, str | None], ...]] = {
    "replicated": tuple((name, None) for name in LOGICAL_AXES),
    "fsdp": tuple((name, "data" if name == "embed" else None) for name in LOGICAL_AXES),
    "tensor": tuple(
        (name, MODEL_AXIS if name in ("mlp", "heads", "vocab") else None) for name in LOGICAL_AXES),
}

_MESH_SPEC_KEYS = ("devices", "model_axis")


class ShardingFallbackWarning(UserWarning):
    """Variables that could not be placed as annotated and were replicated instead."""


class ExperimentalRuleWarning(UserWarning):
    """A splitting rule is in force; the contract calls every such rule experimental."""


# ---------------------------------------------------------------------------- annotations

def axes(*names: str | None) -> dict:
    """Variable metadata naming one logical axis per array dimension.

    Returns ``{"out_sharding": names, "eager_sharding": False}``: keyword arguments
    for an ``nnx.Variable`` or the value of an NNX layer's ``*_metadata`` argument.
    ``eager_sharding=False`` keeps construction free of any mesh.
    """
    return {"out_sharding": names, "eager_sharding": False}


def partitioned(init, names: tuple[str | None, ...]):
    """Wrap an initialiser so its variable carries ``names``, without eager placement."""
    return nnx.with_partitioning(init, names, eager_sharding=False)


def logical_axes_of(var: nnx.Variable) -> tuple[str | None, ...] | None:
    """The logical axis names annotated on ``var``, or None when it has none.

    The one place that reads Flax's sharding metadata key, which was renamed
    twice (``sharding`` -> ``sharding_names`` -> ``out_sharding``).
    """
    metadata = var.get_metadata()
    for key in ("out_sharding", "sharding_names", "sharding"):
        names = metadata.get(key)
        if names is not None:
            return tuple(names)
    return None


# ---------------------------------------------------------------------------- mesh

def make_mesh(devices: Sequence[Any] | None = None, model_axis: int = 1) -> Mesh:
    """A ``("data", "model")`` mesh of shape ``(len(devices) // model_axis, model_axis)``.

    Parameters
    ----------
    devices : sequence of jax.Device, optional
        Devices in mesh order (row-major); default ``jax.devices()``. Across
        processes that order keeps each row (one "model" group) inside one process.
    model_axis : int
        Size of the "model" (tensor-parallel) axis; the "data" axis takes the rest.

    Raises
    ------
    ValueError
        If ``model_axis`` is not a positive integer dividing the device count.
    """
    devices = list(jax.devices() if devices is None else devices)
    if isinstance(model_axis, bool) or not isinstance(model_axis, (int, np.integer)) or model_axis < 1:
        raise ValueError(f"model_axis={model_axis!r} must be an integer >= 1 that divides the "
                         f"{len(devices)} devices: choose among {_divisors(len(devices))}")
    if not devices:
        raise ValueError("make_mesh got an empty device list; pass devices=None for all devices")
    bad = [d for d in devices if not isinstance(d, jax.Device)]
    if bad:
        raise ValueError(f"devices must be jax.Device objects (or ids, through resolve_mesh), got {bad[0]!r}")
    seen = set()
    for d in devices:
        if d.id in seen:
            raise ValueError(f"device {d.id} appears twice in the mesh's device list; list each device once")
        seen.add(d.id)
    if len(devices) % model_axis:
        raise ValueError(
            f"{len(devices)} devices are not divisible by model_axis={model_axis}: choose a "
            f"model_axis among {_divisors(len(devices))}")
    grid = np.empty(len(devices), dtype=object)
    grid[:] = devices
    mesh = Mesh(grid.reshape(len(devices) // model_axis, model_axis), ("data", MODEL_AXIS),
                axis_types=(AxisType.Auto, AxisType.Auto))
    if jax.process_count() > 1:
        from gensbi_sharding.multihost import check_model_groups_local  # multihost builds on this module

        check_model_groups_local(mesh)
    return mesh


def resolve_mesh(spec: Any) -> Mesh | None:
    """Turn a config's mesh spec into a mesh.

    ``None`` -> no mesh; a ``Mesh`` -> itself; ``"auto"`` -> ``make_mesh()``; any
    mapping (``dict``, OmegaConf ``DictConfig``) -> ``make_mesh(**spec)``. In a
    mapping, ``devices`` may hold ``jax.Device`` objects or integer device ids.

    Raises
    ------
    ValueError
        For any other spec, or a mapping with a key other than ``devices``/``model_axis``.
    """
    if spec is None or isinstance(spec, Mesh):
        return spec
    if isinstance(spec, str) and spec == "auto":
        return make_mesh()
    if isinstance(spec, Mapping):
        unknown = [k for k in spec if k not in _MESH_SPEC_KEYS]
        if unknown:
            raise ValueError(f"unknown mesh spec key {unknown[0]!r}; accepted keys: {_MESH_SPEC_KEYS}")
        kwargs = dict(spec)
        if kwargs.get("devices") is not None:
            kwargs["devices"] = _devices_from_ids(kwargs["devices"])
        return make_mesh(**kwargs)
    raise ValueError(
        f"invalid mesh spec {spec!r}; accepted forms: None (no mesh), a jax.sharding.Mesh, "
        f"'auto' (all devices, model_axis=1), or a mapping with keys {_MESH_SPEC_KEYS}")


@contextlib.contextmanager
def mesh_context(mesh: Mesh | None) -> Iterator[Mesh | None]:
    """Make ``mesh`` the active mesh (``jax.set_mesh``) inside the ``with`` block; None: no-op.

    The mesh becomes active when the block is entered, not when this is called.
    """
    if mesh is None:
        yield None
        return
    with jax.set_mesh(mesh):
        yield mesh


# ---------------------------------------------------------------------------- batches

def batch_axes(mesh: Mesh) -> tuple[str, ...]:
    """Mesh axes a batch is split over: every axis but "model", in mesh order."""
    _check_mesh(mesh)
    return tuple(name for name in mesh.axis_names if name != MODEL_AXIS)


def batch_size_divisor(mesh: Mesh | None) -> int:
    """Data-parallel size: product of the batch axes' sizes (1 without a mesh or batch axes)."""
    if mesh is None:
        return 1
    return math.prod(mesh.shape[name] for name in batch_axes(mesh))


def check_batch_divisible(batch: Any, mesh: Mesh | None, what: str) -> None:
    """Check that ``batch`` can be split evenly over the data-parallel devices.

    Looks at array leaves with ``ndim > 0``; returns when there are none or no mesh.

    Raises
    ------
    ValueError
        If the leaves' leading sizes differ, or the common size is not a multiple of
        ``batch_size_divisor(mesh)``; the message names ``what``, the size, the
        divisor, the batch axes and the nearest valid sizes.
    """
    if mesh is None:
        return
    sizes = [leaf.shape[0] for leaf in jax.tree.leaves(batch) if _is_array(leaf) and leaf.ndim > 0]
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
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise ValueError(f"pad_for_mesh needs a row count n >= 0 (an integer), got {n!r}")
    divisor = batch_size_divisor(mesh)
    return -(-n // divisor) * divisor, n


def shard_batch(batch: Any, mesh: Mesh | None) -> Any:
    """Split the leading axis of every array leaf over the mesh's batch axes.

    0-d array leaves have no leading axis and are replicated; non-array leaves are
    returned untouched; without a mesh the batch is returned as it is.

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
    _check_mesh(mesh)
    return _put_leaves(tree, lambda leaf: NamedSharding(mesh, P()))


def _split_leading(tree: Any, mesh: Mesh | None, what: str) -> Any:
    if mesh is None:
        return tree
    _check_mesh(mesh)
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
    index = [i for i, leaf in enumerate(leaves) if _is_array(leaf)]
    # One batched device_put: a single dispatch for the whole tree, not one per leaf.
    placed = jax.device_put([leaves[i] for i in index], [target(leaves[i]) for i in index])
    for i, new in zip(index, placed):
        leaves[i] = new
    return jax.tree.unflatten(treedef, leaves)


# ---------------------------------------------------------------------------- model placement

def shard_model(node: Any, mesh: Mesh | None, rule: str = "replicated") -> None:
    """Place every variable of an NNX graph node on ``mesh`` according to a named rule, in place.

    Works on any graph node (a Module, an ``nnx.Optimizer``, an EMA container).
    Idempotent: leaves already placed as asked are left as they are (same buffers);
    another mesh or rule re-places. Values are never changed.

    Under ``"replicated"`` annotations are ignored and everything is replicated.
    Under a splitting rule, a variable whose annotation names an unknown logical
    axis, has another rank than its array, maps two dimensions onto one mesh axis,
    maps onto an axis the mesh lacks, or has a dimension not divisible by its mesh
    axis, is replicated; so is an unannotated ``nnx.Param``. All of them are listed,
    with their "a/b/c" paths and reasons, in one ``ShardingFallbackWarning`` per call.
    A splitting rule also warns (``ExperimentalRuleWarning``) that it is experimental,
    and a mesh with an ``AxisType.Explicit`` axis warns that only Auto axes are supported.

    Raises
    ------
    ValueError
        If ``rule`` is not a key of ``RULES`` (checked even when ``mesh`` is None).
    """
    if not isinstance(rule, str) or rule not in RULES:
        raise ValueError(f"unknown sharding rule {rule!r}; choose one of {tuple(RULES)}")
    _check_node(node)
    if mesh is None:
        return
    _check_mesh(mesh)
    if rule != "replicated":
        warnings.warn(f"sharding rule {rule!r} is experimental: placements are checked, but the "
                      "contract gives no convergence guarantee", ExperimentalRuleWarning, stacklevel=2)
    _place(node, mesh, dict(RULES[rule]), honor_annotations=rule != "replicated",
           label=f"rule {rule!r}", stacklevel=3)


def shard_model_by_table(node: Any, mesh: Mesh | None, table: RuleTable) -> None:
    """``shard_model`` under an explicit rule table instead of a rule name.

    ``shard_model(node, mesh, name)`` places as ``shard_model_by_table(node, mesh,
    dict(RULES[name]))`` does (annotations honoured; logical names missing from
    ``table`` are not split), with the same single fallback warning.
    """
    _check_node(node)
    if mesh is None:
        return
    _check_mesh(mesh)
    _place(node, mesh, table, honor_annotations=True, label="custom rule table", stacklevel=3)


def partition_spec_for(names: Sequence[str | None] | None, shape: Sequence[int],
                       table: RuleTable, mesh: Mesh) -> tuple[P, str | None]:
    """The PartitionSpec a variable gets under ``table`` on ``mesh``, and why it fell back.

    Returns ``(spec, None)`` when the annotation can be honoured, else ``(P(), reason)``.
    ``names=None`` (no annotation) gives ``(P(), None)``: whether that is worth a
    warning depends on the variable's type, which the caller knows.
    """
    if names is None:
        return P(), None
    if len(names) != len(shape):
        return P(), f"annotation rank {len(names)} != array rank {len(shape)}"
    entries, owner = [], {}
    for name, dim in zip(names, shape):
        if name is None:
            entries.append(None)
            continue
        if name not in table and name not in LOGICAL_AXES:
            return P(), f"unknown logical axis {name!r} (known: {', '.join(LOGICAL_AXES)})"
        target = table.get(name)
        if target is None:
            entries.append(None)
            continue
        mesh_axes = (target,) if isinstance(target, str) else tuple(target)
        for axis in mesh_axes:
            if axis not in mesh.shape:
                return P(), (f"logical axis {name!r} maps to mesh axis {axis!r}, absent from the "
                             f"mesh {tuple(mesh.axis_names)}")
            if axis in owner:
                return P(), (f"logical axes {owner[axis]!r} and {name!r} both map to mesh axis "
                             f"{axis!r}")
            owner[axis] = name
        size = math.prod(mesh.shape[axis] for axis in mesh_axes)
        if dim % size:
            return P(), (f"dim {dim} of logical axis {name!r} is not divisible by mesh axis "
                         f"{target!r} of size {size}")
        entries.append(target if isinstance(target, str) else mesh_axes)
    return P(*entries), None


def plan_shardings(node: Any, mesh: Mesh, table: RuleTable, *, honor_annotations: bool = True
                   ) -> tuple[dict[str, P], dict[str, str]]:
    """Where ``shard_model_by_table`` would put each variable, without moving anything.

    Works on concrete and on abstract modules (``nnx.eval_shape``: values are
    ``jax.ShapeDtypeStruct``). Returns ``(specs, fallbacks)``: the PartitionSpec of
    every array variable by "a/b/c" path, and the reason for each one replicated
    against its annotation (or unannotated ``nnx.Param``).
    """
    specs, fallbacks = {}, {}
    for path, var, value in _array_variables(node):
        key, spec = _path_str(path), P()
        if honor_annotations:
            names = logical_axes_of(var)
            spec, reason = partition_spec_for(names, value.shape, table, mesh)
            if names is None and isinstance(var, nnx.Param):
                reason = "no annotation"
            if reason is not None:
                fallbacks[key] = reason
        specs[key] = spec
    return specs, fallbacks


def _array_variables(node: Any) -> Iterator[tuple[tuple, nnx.Variable, Any]]:
    for path, var in nnx.graph.iter_graph(node):
        if isinstance(var, nnx.Variable):
            value = var.get_value()
            if _is_array(value) or isinstance(value, jax.ShapeDtypeStruct):
                yield path, var, value


def _place(node: Any, mesh: Mesh, table: RuleTable, *, honor_annotations: bool,
           label: str, stacklevel: int) -> None:
    if any(t == AxisType.Explicit for t in getattr(mesh, "axis_types", ())):
        warnings.warn(f"mesh axes {tuple(mesh.axis_names)} include AxisType.Explicit; only Auto "
                      "axes are supported, placements follow the Auto semantics",
                      UserWarning, stacklevel=stacklevel)
    specs, fallbacks = plan_shardings(node, mesh, table, honor_annotations=honor_annotations)
    moves = []
    for path, var, value in _array_variables(node):
        sharding = NamedSharding(mesh, specs[_path_str(path)])
        # Already placed as asked: keep the very same buffers (idempotence without a copy).
        if isinstance(value, jax.Array) and value.sharding.is_equivalent_to(sharding, value.ndim):
            continue
        moves.append((var, value, sharding))
    if moves:
        placed = jax.device_put([m[1] for m in moves], [m[2] for m in moves])
        for (var, _, _), new in zip(moves, placed):
            var.set_value(new)
    if fallbacks:
        warnings.warn(
            f"{len(fallbacks)} variable(s) replicated instead of split under {label} on mesh "
            f"{dict(mesh.shape)}: " + "; ".join(f"{path} ({reason})" for path, reason in fallbacks.items()),
            ShardingFallbackWarning, stacklevel=stacklevel)


# ---------------------------------------------------------------------------- inspection

def sharding_of(node: Any) -> dict[str, jax.sharding.Sharding | None]:
    """``{"a/b/c": sharding}`` for every state leaf of ``node`` (None for non-JAX values)."""
    return {_path_str(path): getattr(var.get_value(), "sharding", None)
            for path, var in nnx.to_flat_state(nnx.state(node))}


def _check_mesh(mesh: Any) -> None:
    if not isinstance(mesh, Mesh):
        raise TypeError(f"mesh must be a jax.sharding.Mesh or None, got {mesh!r}; build one with "
                        "make_mesh(...) or resolve_mesh(spec)")


def _check_node(node: Any) -> None:
    if not nnx.graph.is_graph_node(node):
        raise TypeError(f"shard_model places NNX graph nodes (a Module, nnx.Optimizer, ...), got "
                        f"{type(node).__name__}; for a pytree of arrays use shard_batch or replicate")


def _is_array(x: Any) -> bool:
    """True for ``jax.Array`` and ``numpy.ndarray`` only (not Python or NumPy scalars)."""
    return isinstance(x, (jax.Array, np.ndarray))


def _path_str(path: Sequence[Any]) -> str:
    return "/".join(str(part) for part in path)


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _devices_from_ids(devices: Sequence[Any]) -> list[Any]:
    if isinstance(devices, (str, bytes)) or not isinstance(devices, Sequence) and not hasattr(devices, "__iter__"):
        raise ValueError(f"mesh spec devices must be a list of device ids or jax.Device objects, got {devices!r}")
    by_id = {d.id: d for d in jax.devices()}
    out = []
    for d in devices:
        if isinstance(d, (int, np.integer)) and not isinstance(d, bool):
            if d not in by_id:
                raise ValueError(f"mesh spec names device id {d}, but the device ids are {sorted(by_id)}")
            out.append(by_id[d])
        else:
            out.append(d)
    return out

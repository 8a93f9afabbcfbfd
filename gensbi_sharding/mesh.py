"""The ``("data", "model")`` mesh: built from one knob (``model_axis``), resolved from a config, activated; the mesh
a node's arrays are on (``model_mesh``), and a mesh in numbers (``MeshSummary``, ``describe``'s)."""

import contextlib
import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import jax
import numpy as np
from jax.sharding import AbstractMesh, AxisType, Mesh, NamedSharding, PartitionSpec as P

from gensbi_sharding.factory import UNDER_TRANSFORM, under_transform
from gensbi_sharding.messages import shown
from gensbi_sharding.rules import MODEL_AXIS, typo_of
from gensbi_sharding.nodes import is_array_like, is_int, named_leaves
from gensbi_sharding.specs import check_mesh

__all__ = ["make_mesh", "resolve_mesh", "mesh_context", "check_model_groups_local", "entered_mesh", "MeshSummary",
           "model_mesh"]

_MESH_SPEC_KEYS = ("devices", "model_axis")


def mesh_label(mesh: Any) -> str:
    """A mesh as messages name it: its axis sizes and, but for an ``AbstractMesh``, its devices' ids in mesh order."""
    ids = None if isinstance(mesh, AbstractMesh) else mesh.device_ids  # JAX raises for an AbstractMesh's device_ids
    return f"mesh {dict(mesh.shape)}" + ("" if ids is None else f" (devices {np.asarray(ids).flatten().tolist()})")


def make_mesh(devices: Sequence[Any] | None = None, model_axis: int = 1) -> Mesh:
    """Build the ``("data", "model")`` mesh, both Auto; a row (tensor-parallel group): ``model_axis`` devices in order.

    Parameters
    ----------
    devices : sequence of jax.Device, or None
        In mesh order (list, tuple or 1-d NumPy array); None: ``jax.devices()``, every process's.
    model_axis : int, default 1
        Devices per tensor-parallel group; must divide ``len(devices)`` (one knob, as Levanter's ``TrainerConfig``).

    Returns
    -------
    jax.sharding.Mesh
        Axes ``("data", "model")``, sizes ``(len(devices) // model_axis, model_axis)``.

    Raises
    ------
    TypeError, ValueError
        ``devices`` not None, a sequence or a NumPy array; ``devices`` empty, not 1-d, holding a non-``jax.Device`` or
        a device twice, ``model_axis`` not an integer >= 1 dividing their count, a ``"model"`` group spanning processes.
    """
    if devices is not None and (isinstance(devices, (str, bytes)) or not isinstance(devices, Sequence)
                                and not isinstance(devices, np.ndarray)):
        raise TypeError(f"devices={shown(devices)} must be a list of jax.Device objects (e.g. jax.devices()[:4]), "
                        "or None for all devices")
    if isinstance(devices, np.ndarray) and devices.ndim != 1:  # named by shape, with the fix
        two = devices.ndim == 2  # e.g. mesh_utils.create_device_mesh((4, 2)): data x model
        raise ValueError(f"devices is an array of shape {devices.shape}; make_mesh takes them flat, in mesh order, and "
                         "lays them out (len // model_axis, model_axis): pass list(devices.flat)" +
                         (f" with model_axis={devices.shape[1]}" if two else "") + ", or keep this layout: "
                         f"jax.sharding.Mesh(devices, {('data', MODEL_AXIS) if two else 'axis_names'})")
    devices = list(jax.devices() if devices is None else devices)
    divisors = [d for d in range(1, len(devices) + 1) if len(devices) % d == 0]
    if not is_int(model_axis) or model_axis < 1:
        raise ValueError(f"model_axis={shown(model_axis)} must be an integer >= 1 that divides the "
                         f"{len(devices)} device{'s' * (len(devices) != 1)}: choose among {divisors}")
    if not devices:
        raise ValueError("make_mesh got an empty device list; pass devices=None for all devices")
    if bad := [d for d in devices if not isinstance(d, jax.Device)]:
        raise ValueError(f"devices must be jax.Device objects (or ids, through resolve_mesh), got {shown(bad[0])}")
    ids = [d.id for d in devices]
    twice = next((i for i in ids if ids.count(i) > 1), None)
    if twice is not None:
        raise ValueError(f"device {twice} appears twice in the mesh's device list; list each device once")
    if len(devices) % model_axis:
        # A laptop's 1 device: simulating up to 1024 CPU devices (JAX starts that many in seconds), never 10**30
        simulate = len(devices) < model_axis <= 1024 and all(d.platform == "cpu" for d in devices)
        raise ValueError(f"{len(devices)} {'devices are' if len(devices) != 1 else 'device is'} not divisible by "
                         f"model_axis={model_axis}: choose a model_axis among {divisors}" + (
                             f", or simulate {model_axis} CPU devices: jax.config.update('jax_num_cpu_devices', "
                             f"{model_axis}) first thing, before JAX starts" if simulate else ""))
    mesh = Mesh(np.array(devices, dtype=object).reshape(-1, model_axis), ("data", MODEL_AXIS),
                axis_types=(AxisType.Auto, AxisType.Auto))
    check_model_groups_local(mesh)
    return mesh


def resolve_mesh(spec: Any) -> Mesh | None:
    """Turn a config's mesh spec into a mesh, or None for no mesh.

    Parameters
    ----------
    spec : None or jax.sharding.Mesh or str or Mapping
        None -> None; a ``Mesh`` -> itself; ``"auto"`` -> ``make_mesh()``; a mapping (``DictConfig`` too) with keys
        among ``devices`` (device ids or ``jax.Device`` objects) and ``model_axis`` -> ``make_mesh``.

    Returns
    -------
    jax.sharding.Mesh or None

    Raises
    ------
    ValueError
        Another form or key, ``devices`` a string, not iterable or naming an unknown id, or ``make_mesh`` refusing it.
    """
    if spec is None or isinstance(spec, Mesh):
        return spec
    if isinstance(spec, str) and spec == "auto":
        return make_mesh()
    if isinstance(spec, Mapping):
        unknown = [k for k in spec if k not in _MESH_SPEC_KEYS]
        if unknown:
            hint = _axis_sizes_hint(spec, unknown)  # axis sizes ({'model': 2}): that fix, not 'model_axis' as a typo
            typo = "" if hint else typo_of(unknown[0], _MESH_SPEC_KEYS)
            raise ValueError(f"unknown mesh spec key {unknown[0]!r}; {typo}accepted keys: {_MESH_SPEC_KEYS}{hint}")
        kwargs = dict(spec)
        if kwargs.get("devices") is not None:
            kwargs["devices"] = _devices_from_ids(kwargs["devices"], kwargs.get("model_axis"))
        return make_mesh(**kwargs)
    shaped = isinstance(spec, (tuple, list)) and len(spec) == 2 and all(map(is_int, spec))  # (8, 1): a mesh's shape
    sizes = {"data": spec[0], MODEL_AXIS: spec[1]} if shaped else {}  # the mapping it means, for the refusal to name
    shape = _axis_sizes_hint(sizes, list(sizes)).replace("the axes' sizes are not keys",
                                                         "a mesh's shape (data, model) is no spec") if shaped else ""
    typo = typo_of(spec, ("auto",), cutoff=0.7) if isinstance(spec, str) else ""  # 'Auto', 'atuo'; not 'automatic'
    raise ValueError(f"invalid mesh spec {shown(spec)}; {typo}accepted forms: None (no mesh), a jax.sharding.Mesh, "
                     f"'auto' (all devices, model_axis=1), or a mapping with keys {_MESH_SPEC_KEYS}{shape}")


def _axis_sizes_hint(spec: Mapping, unknown: list) -> str:
    """The model_axis (and devices) spec of a mesh given by axis sizes (``{'data': 2, 'model': 4}``), built; else ""."""
    if not set(unknown) <= {"data", MODEL_AXIS} or not all(is_int(spec[k]) and spec[k] > 0 for k in unknown):
        return ""
    given, model, count = spec.get("devices"), spec.get(MODEL_AXIS, spec.get("model_axis")), None
    try:  # a bad device list or model_axis is named once the keys are right
        devices = jax.devices() if given is None else _devices_from_ids(given)
        count = len(devices)
        data = spec.get("data", count // model if is_int(model) and model > 0 and count % model == 0 else None)
        model = count // data if model is None and count % data == 0 else model
        built = make_mesh(model_axis=model, devices=devices[:data * model])  # first: it refuses what is no device
        if dict(built.shape) != {"data": data, MODEL_AXIS: model}:
            raise ValueError(built.shape)
        fix = ({"model_axis": model} if given is None and data * model == count else
               {"devices": [d.id for d in built.devices.flat], "model_axis": model})
    except (TypeError, ValueError):
        return (" (the axes' sizes are not keys: a mesh spec gives model_axis, the data axis taking the rest of the "
                + (f"{count} devices)" if count else "devices)"))
    return f"; the axes' sizes are not keys: for data={data} x model={model} write {fix}"


@contextlib.contextmanager
def mesh_context(mesh: Mesh | None) -> Iterator[Mesh | None]:
    """Make ``mesh`` the active mesh (``jax.set_mesh``) inside a ``with`` block, yielding it; None: a no-op.

    Parameters
    ----------
    mesh : jax.sharding.Mesh or None

    Yields
    ------
    jax.sharding.Mesh or None

    Raises
    ------
    TypeError
        On entering, ``mesh`` of another type (a spec goes to ``resolve_mesh``).
    ValueError
        Entered under a JAX transformation (``jax.jit``, ``jax.grad``): ``jax.set_mesh`` works outside them only.
    """
    check_mesh(mesh)
    if mesh is not None and under_transform():  # JAX's words: "`set_mesh` can only be used outside of `jax.jit`"
        raise ValueError(f"mesh_context {UNDER_TRANSFORM}: JAX sets a mesh outside them only; enter it around the "
                         "call of the transformed function, `with mesh_context(mesh): step(...)`")
    with contextlib.nullcontext() if mesh is None else jax.set_mesh(mesh):
        yield mesh


def check_model_groups_local(mesh: Mesh) -> None:
    """Check every tensor-parallel (``"model"``) group of ``mesh`` is inside one process, keeping its traffic (every
    layer) off the network between hosts; a mesh without a ``"model"`` axis passes.

    Parameters
    ----------
    mesh : jax.sharding.Mesh

    Raises
    ------
    ValueError, TypeError
        A group's devices on more than one process; ``mesh`` not a ``jax.sharding.Mesh``.
    """
    check_mesh(mesh, optional=False)
    if MODEL_AXIS not in mesh.axis_names:
        return
    devices = np.moveaxis(mesh.devices, mesh.axis_names.index(MODEL_AXIS), -1)
    for group in devices.reshape(-1, devices.shape[-1]):
        processes = [d.process_index for d in group]
        n, local = len(group), len(mesh.local_devices)
        if len(set(processes)) > 1:  # a size that divides the local devices spans processes by the axes' order
            fix = (f"Choose a model_axis (now {n}) that divides this process's {local} device{'s' * (local != 1)}, "
                   "and order devices by process (jax.devices() does)" if local % n else f"The size {n} divides this "
                   f"process's {local} devices: make \"model\" the last mesh axis {tuple(mesh.axis_names)} (make_mesh "
                   "does)")
            raise ValueError(f"model group of devices {[d.id for d in group]} spans processes {processes}: "
                             f"tensor-parallel groups must stay inside one process. {fix}")


def _devices_from_ids(devices: Any, model_axis: Any = None) -> list[Any]:
    """A spec's device list, ids made ``jax.Device`` objects; ``ValueError`` for a bad list or id, naming a fit."""
    if isinstance(devices, (str, bytes)) or not hasattr(devices, "__iter__") or getattr(devices, "ndim", 1) == 0:
        raise ValueError(f"mesh spec devices must be a list of device ids or jax.Device objects, got "  # a 0-d array
                         f"{shown(devices)}")  # has __iter__ but iterating it raised NumPy's "iteration over a 0-d"
    if any(not isinstance(d, (str, bytes)) and np.ndim(d) > 0 for d in devices):  # rows of a layout, as a Mesh takes
        flat = [d.id if isinstance(d, jax.Device) else d.item() if hasattr(d, "item") else d
                for row in devices for d in (row if np.ndim(row) else [row])]
        rows = {np.size(row) for row in devices}
        axis = f", 'model_axis': {rows.pop()}" if len(rows) == 1 else ""
        raise ValueError(f"mesh spec devices must be a flat list in mesh order (the mesh is laid out (len // "
                         f"model_axis, model_axis)), got rows: {shown(devices)}; pass {{'devices': "
                         f"{shown(flat, 200)}{axis}}}")
    by_id = {d.id: d for d in jax.devices()}
    devices = [d.item() if np.ndim(d) == 0 and np.issubdtype(getattr(d, "dtype", object), np.integer) else d
               for d in devices]  # jnp.arange(4)'s ids are 0-d jax arrays: "devices must be ... (or ids)" refused them
    if unknown := [d for d in devices if is_int(d) and d not in by_id]:  # the fix: the ids it names that exist
        known = list(dict.fromkeys(d for d in devices if not (is_int(d) and d not in by_id)))  # each once
        n = model_axis if is_int(model_axis) and model_axis > 0 else 1  # [0, 1, 2] is refused for model_axis=2
        known = known[:len(known) - len(known) % n] or sorted(by_id)
        raise ValueError(f"mesh spec names device id {unknown[0]}, but the device ids are {sorted(by_id)}; name only "
                         f"those, e.g. {{'devices': {[d.id if hasattr(d, 'id') else d for d in known]}}}")
    return [by_id[d] if is_int(d) else d for d in devices]


def entered_mesh() -> Mesh | None:
    """The mesh a (deprecated) ``with mesh:`` block entered, unseen by ``get_abstract_mesh``, if no other is active."""
    if not jax.sharding.get_abstract_mesh().empty:  # an abstract one only: the probe below asserts
        return None
    try:
        with jax.ensure_compile_time_eval():  # evaluated here, in a trace too: ~15 us without a mesh, ~1 ms with
            return jax.lax.with_sharding_constraint(np.float32(0), P()).sharding.mesh
    except RuntimeError:  # "requires a non-empty mesh in context"
        return None


@dataclasses.dataclass(frozen=True)
class MeshSummary:
    """A mesh in numbers (``describe``'s); ``str()`` is one line. ``data_parallel_size``: ``batch_size_divisor``."""

    axis_names: tuple[str, ...]
    axis_sizes: dict[str, int]
    n_devices: int
    devices_per_process: int
    n_processes: int
    data_parallel_size: int

    def __str__(self) -> str:
        axes = " x ".join(f"{name}={size}" for name, size in self.axis_sizes.items())
        return (f"mesh {axes}: {self.n_devices} device{'s' * (self.n_devices != 1)}, {self.devices_per_process} per "
                f"process ({self.n_processes} process{'es' * (self.n_processes != 1)}), data-parallel size "
                f"{self.data_parallel_size}")


def model_mesh(model: Any) -> tuple[Mesh | None, bool]:
    """The one mesh ``model``'s arrays are on (or None) and whether it is abstract; else ``ValueError`` naming each."""
    where, abstract = {}, False
    for name, value in named_leaves(model):
        if is_array_like(value):
            sharding, abstract = getattr(value, "sharding", None), abstract or isinstance(value, jax.ShapeDtypeStruct)
            where.setdefault(sharding.mesh if isinstance(sharding, NamedSharding) else sharding, name)
    meshes = [m for m in where if isinstance(m, Mesh)]
    if len(where) > 1 and meshes:
        label = {m: mesh_label(m) if isinstance(m, Mesh) else "no device" if m is None else
                 f"{type(m).__name__} on {', '.join(map(str, m.device_set))}" for m in where}
        raise ValueError(f"the model's arrays are on {len(meshes)} mesh(es) and {len(where) - len(meshes)} other "
                         "placement(s): " + ", ".join(f"{path} on {label[m]}" for m, path in where.items()) +
                         "; place the whole model first (init_sharded or shard_model)")
    return (meshes[0] if meshes else None), abstract

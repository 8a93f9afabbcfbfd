"""Activation partition axes: where a model's *activations* live on the mesh (``constrain``). A ``PartitionAxis`` is
a static model attribute, never global state (not in ``jax.jit``'s cache key); its names: ``rules.ACTIVATION_NAMES``."""

import math
import warnings
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from gensbi_sharding.batch import batch_axes
from gensbi_sharding.factory import check_active_mesh, traced_mesh, under_transform
from gensbi_sharding.leaf_checks import check_placeable
from gensbi_sharding.mesh import entered_mesh
from gensbi_sharding.messages import shown
from gensbi_sharding.specs import check_mesh, mesh_axes_of
from gensbi_sharding.rules import (ABSENT_AXIS, ACTIVATION_NAMES, MODEL_AXIS, RULES, MeshAxes, Rule,
                                   ShardingFallbackWarning, check_activation_names, resolve_rule, typo_of)

__all__ = ["PartitionAxis", "ACTIVATION_NAMES", "activation_spec", "constrain"]

class _Fields(NamedTuple):
    """``PartitionAxis``'s fields and defaults (a NamedTuple's ``__new__`` cannot be written in its body)."""

    batch_axis: MeshAxes = "data"
    sequence_axis: MeshAxes = None
    query_sequence_axis: MeshAxes = None
    head_axis: MeshAxes = "model"
    key_sequence_axis: MeshAxes = None
    hidden_state_axis: MeshAxes = None
    attention_dim_axis: MeshAxes = None
    bias_head_sequence_axis: MeshAxes = None
    bias_key_sequence_axis: MeshAxes = None
    generation_query_sequence_axis: MeshAxes = None
    generation_head_axis: MeshAxes = "model"
    generation_key_sequence_axis: MeshAxes = None
    generation_attention_dim_axis: MeshAxes = None


def _check_fields(fields: Mapping[str, Any], caller: str, error: type[Exception]) -> None:
    if unknown := [name for name in fields if name not in _Fields._fields]:
        raise error(f"{caller} got an unexpected field {unknown[0]!r}; {typo_of(unknown[0], _Fields._fields)}"
                    f"its fields: {', '.join(_Fields._fields)}")


class PartitionAxis(_Fields):
    """Mesh axes (``MeshAxes``) for each kind of activation dimension; defaults fit ``make_mesh``. Field names are
    EasyDeL's (erfanzar/EasyDeL, ``easydel/etils/partition_module.py``); ``resolve(mesh)`` checks them.

    Parameters
    ----------
    batch_axis, head_axis, generation_head_axis : MeshAxes, default "data", "model", "model"
        For ``"batch"`` and ``"heads"`` dimensions.
    hidden_state_axis, attention_dim_axis : MeshAxes, default None
        ``"hidden"`` (the model width) and ``"head_dim"`` (each head's width) dimensions.
    sequence_axis, query_sequence_axis, key_sequence_axis, bias_*, generation_* : MeshAxes, default None
        The ``bias_*`` and ``generation_*`` fields (``generation_head_axis`` too) are validated only.
    """

    __slots__ = ()

    def __new__(cls, *args: MeshAxes, **fields: MeshAxes) -> "PartitionAxis":
        # Was Python's plain "unexpected keyword argument 'hiden_state_axis'": thirteen long names, no guess.
        _check_fields(fields, "PartitionAxis", TypeError)
        return super().__new__(cls, *args, **fields)

    def _replace(self, **fields: MeshAxes) -> "PartitionAxis":
        """A copy with ``fields`` changed (NamedTuple's); ``ValueError`` naming a misspelt field and the one meant."""
        _check_fields(fields, "PartitionAxis._replace", ValueError)  # names the fields (NamedTuple's error: none)
        return super()._replace(**fields)

    def __hash__(self) -> int:
        # Lists hashed as tuples: nnx.split hashes a Module's graphdef, which holds this
        return hash(tuple(tuple(v) if isinstance(v, list) else v for v in self))

    @classmethod
    def for_rule(cls, rule: str | Mapping[str, Any] | Rule, mesh: Mesh | None) -> "PartitionAxis | None":
        """Activations split where ``rule``'s weights are (Megatron-LM, arXiv:1909.08053): the batch over the batch
        axes of size > 1 (without ``"model"``: less the rule's tensor-parallel axes), heads where the rule puts
        ``"heads"``, hidden state where it puts ``"embed"``, less axes of size 1 and the batch's (``{"heads": ("data",
        "model")}`` gives ``head_axis="model"``); others None.

        Parameters
        ----------
        rule : str or RuleTable or Rule
        mesh : jax.sharding.Mesh or jax.sharding.AbstractMesh or None
            None or an empty mesh (none active): None, which ``constrain`` takes as no constraint (``rule`` checked).

        Returns
        -------
        PartitionAxis or None

        Warns
        -----
        ShardingFallbackWarning
            ``rule`` maps ``"heads"`` or ``"embed"`` to a mesh axis ``mesh`` lacks: that field None, as ``shard_model``
            replicates those weights.

        Raises
        ------
        ValueError, TypeError
            A bad ``rule``; ``mesh`` of another type.
        """
        rule = resolve_rule(rule)
        check_mesh(mesh, abstract=True)
        mesh = entered_mesh() if mesh is not None and mesh.empty else mesh  # none set: a `with mesh:` block's, if any
        if mesh is None:  # one device: constrain's no-op
            return None
        sizes = dict(mesh.shape)
        # No "model" axis: the rule's axes where "tensor" puts "model" stand in for it, off the batch; "data" stays it
        tp = () if MODEL_AXIS in sizes else [a for k, v in RULES["tensor"] if v for a in mesh_axes_of(rule.table.get(k))
                                             if a != "data"]
        batch = tuple(a for a in batch_axes(mesh) if sizes[a] > 1 and a not in tp)
        # Warned, not refused: shard_model warns and replicates those weights
        absent = {k: ABSENT_AXIS.format(name=k, axis=a, axes=tuple(sizes))
                  for k in ("heads", "embed") for a in mesh_axes_of(rule.table.get(k)) if a not in sizes}
        if absent:
            warnings.warn(f"PartitionAxis.for_rule: {rule.label} leaves activations' {' and '.join(absent)} unsplit on "
                          f"mesh {sizes}, as shard_model replicates those weights: {'; '.join(absent.values())}",
                          ShardingFallbackWarning, stacklevel=2)

        def follow(logical: str) -> MeshAxes:
            target = () if logical in absent else mesh_axes_of(rule.table.get(logical))  # []: unsplit, as in plans
            return _pack(tuple(a for a in target if sizes[a] > 1 and a not in batch))

        heads = follow("heads")
        return cls(batch_axis=_pack(batch), head_axis=heads, hidden_state_axis=follow("embed"),
                   generation_head_axis=heads)

    def resolve(self, mesh: Mesh) -> "PartitionAxis":
        """This strategy checked against ``mesh``, lists made tuples (hashable: a static model attribute).

        Parameters
        ----------
        mesh : jax.sharding.Mesh or jax.sharding.AbstractMesh

        Returns
        -------
        PartitionAxis

        Raises
        ------
        ValueError, TypeError
            The first field not a ``MeshAxes``, naming an axis twice or one ``mesh`` lacks; ``mesh`` of another type.
        """
        check_mesh(mesh, abstract=True, optional=False)
        resolved = self._formed()
        for name, value in resolved._asdict().items():
            for axis in mesh_axes_of(value):
                if axis not in mesh.shape:
                    raise ValueError(f"{name}={shown(getattr(self, name))} names mesh axis {axis!r}, but the mesh has "
                                     f"axes {tuple(mesh.axis_names)}; {typo_of(axis, mesh.axis_names)}use one of them, "
                                     "a tuple of them, or None")
        return resolved

    def _formed(self) -> "PartitionAxis":
        """``resolve``'s checks that need no mesh (each field a ``MeshAxes``, no axis twice), lists made tuples."""
        resolved = {}
        for name, value in self._asdict().items():
            if not (value is None or isinstance(value, str) or isinstance(value, Sequence) and value
                    and all(isinstance(v, str) for v in value)):
                raise ValueError(f"{name}={shown(value)} must be None, a mesh axis name or a non-empty sequence "
                                 "of mesh axis names, e.g. 'data' or ('data', 'model')")
            axes = mesh_axes_of(value)
            if len(set(axes)) != len(axes):
                raise ValueError(f"{name}={shown(value)} names a mesh axis twice; list each mesh axis once")
            resolved[name] = value if value is None or isinstance(value, str) else axes
        return PartitionAxis(**resolved)


def activation_spec(names: Sequence[str | None], shape: Sequence[int], partition_axis: PartitionAxis,
                    mesh: Mesh, manual: frozenset[str] = frozenset()) -> tuple[P, dict[str, str]]:
    """``constrain``'s PartitionSpec (as Flax's ``with_logical_constraint``) and ``{name: why}`` of dimensions left
    unsplit; ``manual`` (``shard_map``) axes left out. ``ValueError`` for bad ``names`` or ``partition_axis``."""
    check_activation_names(names, shape)
    pa = partition_axis.resolve(mesh)
    entries, used, unsplit = [], set(), {}
    for name, dim in zip(names, shape):
        target = None if name is None else getattr(pa, ACTIVATION_NAMES[name])
        # checked by resolve; inside shard_map x is one block, already split over its Manual axes
        axes = tuple(a for a in mesh_axes_of(target) if a not in manual)
        target = _pack(axes)
        size = math.prod(mesh.shape[a] for a in axes)
        if axes and used.intersection(axes):  # the fix: the axes left, where they split it
            free = tuple(a for a in axes if a not in used)
            field, fits = ACTIVATION_NAMES[name], free and dim % math.prod(mesh.shape[a] for a in free) == 0
            unsplit[name], target = (f"mesh axes {axes} already split an earlier dimension; "
                                     + (f"{field}={_pack(free)!r} splits it" if fits else
                                        f"{field}=None leaves it unsplit without this warning")), None
        elif dim % size:
            unsplit[name], target = f"size {dim} is not divisible by mesh axes {axes} of size {size}", None
        used.update(mesh_axes_of(target))
        entries.append(target)
    return P(*entries), unsplit


def constrain(x: jax.Array, names: Sequence[str | None], partition_axis: PartitionAxis | None,
              mesh: Mesh | None = None) -> jax.Array:
    """Pin activation ``x``'s layout (GSPMD's sharding constraint, arXiv:2105.04663; outside jit ``jax.device_put``,
    Explicit axes by ``jax.sharding.reshard``, ``shard_map``'s Manual axes left out); ``names`` checked even unplaced.

    Parameters
    ----------
    x : jax.Array or jax.ShapeDtypeStruct
        An abstract one (a dry run's) comes back with the sharding, as ``shard_batch`` gives one.
    names : sequence of str or None
        One ``ACTIVATION_NAMES`` key (or None) per dimension of ``x``, e.g. ``("batch", "sequence", "hidden")``.
    partition_axis : PartitionAxis or None
    mesh : jax.sharding.Mesh, optional
        Default: the active mesh (``mesh_context`` / ``jax.set_mesh``, or JAX's deprecated ``with mesh:``).

    Returns
    -------
    jax.Array or jax.ShapeDtypeStruct
        ``x``'s shape, dtype and values, laid out by ``partition_axis`` (``x`` itself without it or a mesh).

    Warns
    -----
    ShardingFallbackWarning
        One per call (per trace under ``jax.jit``) naming the dimensions left unsplit and why, or, traced without an
        active mesh, the mesh axes ``partition_axis`` names and the fix (``mesh=mesh`` or ``mesh_context(mesh)``).

    Raises
    ------
    ValueError, TypeError
        ``names`` not one known name (or None) per dimension, ``partition_axis`` malformed or not fitting the mesh,
        a NumPy ``x`` holding a value beyond its placed dtype; ``partition_axis``, ``mesh`` or ``x`` of another type.
    """
    if partition_axis is None:  # for_rule(rule, None)'s: names checked all the same
        check_activation_names(names, np.shape(x))
        return x
    if not isinstance(partition_axis, PartitionAxis):
        raise TypeError(f"partition_axis={shown(partition_axis)} must be a PartitionAxis or None; build it with "
                        "PartitionAxis.for_rule(rule, mesh)")
    check_mesh(mesh)
    if not (hasattr(x, "shape") and hasattr(x, "dtype")):  # a list; a Mesh (its shape a dict: str % int raised)
        raise TypeError(f"constrain takes an array, got {type(x).__name__} {shown(x, 40)}; pass jnp.asarray(x)")
    check_activation_names(names, x.shape)  # without a mesh too: a bad name fails on one device as on a mesh
    active = jax.sharding.get_abstract_mesh() if mesh is None else mesh
    if active.empty:  # no mesh set: a `with mesh:` block's, if any
        active = mesh = entered_mesh()
    if active is None:  # partition_axis's form checked all the same
        fields = partition_axis._formed()  # only the fields these names read: ("hidden",), hidden None, splits nothing
        read = [getattr(fields, ACTIVATION_NAMES[n]) for n in names if n]
        axes = tuple(dict.fromkeys(a for value in read for a in mesh_axes_of(value)))
        if axes and isinstance(x, jax.core.Tracer):  # was silent: in jit the output sat on one device, unseen
            warnings.warn(f"constrain: partition_axis splits over {axes} but no mesh is active, so activation "
                          f"{tuple(names)} is left unconstrained; pass mesh=mesh or call it inside "
                          "gs.mesh_context(mesh)", ShardingFallbackWarning, stacklevel=2)
        return x
    check_placeable(x, f"constrain: x (shape {x.shape})")  # a NumPy array outside jit: placed here
    manual = frozenset(jax.sharding.get_abstract_mesh().manual_axes)
    if manual:  # in shard_map: its mesh's Manual axis types, which a NamedSharding of `mesh` (Auto) would contradict
        active, mesh = jax.sharding.get_abstract_mesh(), None
    elif mesh is not None and isinstance(x, jax.core.Tracer):
        check_active_mesh(mesh, "constrain")
    elif isinstance(x, jax.core.Tracer):  # eager jax.grad/vmap/jvp: x's value sits on one device, which a constraint
        mesh = traced_mesh()  # the abstract mesh refused (JAX's "must be a NamedSharding"); the concrete one moves it
    spec, unsplit = activation_spec(names, x.shape, partition_axis, active, manual)
    if unsplit:
        warnings.warn(f"activation {tuple(names)} of shape {tuple(x.shape)} left unsplit on mesh "
                      f"{dict(active.shape)}: " + "; ".join(f"{n} ({r})" for n, r in unsplit.items()),
                      ShardingFallbackWarning, stacklevel=2)
    wrap = (lambda s: NamedSharding(mesh, s)) if isinstance(mesh, Mesh) else (lambda s: s)
    if isinstance(x, jax.ShapeDtypeStruct):  # as shard_batch places one (a dry run's); JAX: "not a valid JAX type"
        held = mesh if isinstance(mesh, Mesh) or under_transform() else jax.sharding.get_mesh()  # set_mesh's: concrete
        return x.update(sharding=NamedSharding(held, spec) if isinstance(held, Mesh) and not held.empty else spec)
    if not isinstance(x, jax.core.Tracer):  # one move, any axis types: on a mesh of both kinds the constraint
        x = jax.device_put(x, wrap(spec))  # below undid the reshard (P('data', None) came back P(None, None))
        if not isinstance(x, jax.core.Tracer):  # in jit a constant x came back traced, unplaced (P()): pinned below
            return x
    explicit, free = set(active.explicit_axes), set(active.axis_names) - manual
    if explicit:  # with_sharding_constraint refuses Explicit axes (or asserts on them): reshard moves those
        x = jax.sharding.reshard(x, wrap(_keep(spec, explicit)))
    if free - explicit:
        x = jax.lax.with_sharding_constraint(x, wrap(_keep(spec, free - explicit)))
    return x


def _keep(spec: P, names: set[str]) -> P:
    """``spec`` naming only the mesh axes in ``names`` (the others' dimensions None)."""
    return P(*(_pack(tuple(a for a in mesh_axes_of(entry) if a in names)) for entry in spec))


def _pack(axes: tuple[str, ...]) -> MeshAxes:
    return None if not axes else axes[0] if len(axes) == 1 else axes

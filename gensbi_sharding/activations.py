"""Activation partition axes: where the *activations* of a model live on the mesh.

Weights follow a rule table (``gensbi_sharding.sharding``); activations follow a
``PartitionAxis``: a mesh axis (or several, or none) per kind of activation dimension.
Models call ``constrain(x, ("batch", "sequence", "hidden"), partition_axis)`` at block
boundaries: ``jax.lax.with_sharding_constraint`` under the active mesh, a no-op without.

The ``PartitionAxis`` in force is an explicit argument, never global state: a model
holds it as a static attribute (``model.partition_axis``) that NNX keeps in the graph
definition, so a jitted step traces with the strategy of the model it was split from
and cannot go stale. (A context variable read at trace time is not in ``jax.jit``'s
cache key: a step compiled under one strategy would silently keep it under another.)
The mesh is JAX's own active mesh (``jax.set_mesh``, i.e. ``mesh_context``), which
``jax.jit`` does key on.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple, Union

import jax
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from gensbi_sharding.sharding import RULES, ShardingFallbackWarning, batch_axes

__all__ = ["AxisSpec", "PartitionAxis", "ACTIVATION_NAMES", "ACTIVATION_STRATEGIES",
           "activation_spec", "constrain", "partition_axis_from_config"]

#: What one ``PartitionAxis`` field holds: None (not split), a mesh axis name, or a
#: tuple of mesh axis names (split over the product of their sizes).
AxisSpec = Union[None, str, tuple[str, ...]]

#: Activation dimension name -> the ``PartitionAxis`` field that places it.
ACTIVATION_NAMES: dict[str, str] = {
    "batch": "batch_axis", "sequence": "sequence_axis", "query_sequence": "query_sequence_axis",
    "key_sequence": "key_sequence_axis", "heads": "head_axis", "hidden": "hidden_state_axis",
    "head_dim": "attention_dim_axis"}

#: ``partition_axis_from_config`` strategies: from the weight rule, the fixed defaults, or none.
ACTIVATION_STRATEGIES = ("rule", "fixed", "none")
_AUTO = "auto"  # a config field left to the strategy


class PartitionAxis(NamedTuple):
    """Mesh axes for each kind of activation dimension.

    Field names are EasyDeL's (erfanzar/EasyDeL, ``easydel/etils/partition_module.py``,
    ``PartitionAxis``), so strategies read the same across both code bases. EasyDeL's
    defaults name its ``("dp", "fsdp", "tp", "sp")`` mesh; ours are adapted to the
    ``("data", "model")`` mesh of ``make_mesh``: the batch over "data", attention heads
    over "model", every other dimension unsplit (there is no sequence-parallel axis).
    ``constrain`` reads the fields listed in ``ACTIVATION_NAMES``; the ``bias_*`` and
    ``generation_*`` fields (attention bias, autoregressive decoding) are carried and
    validated for compatibility but read by no model here.

    Each field is an ``AxisSpec``: None, a mesh axis name, or a tuple of mesh axis names.
    """

    batch_axis: AxisSpec = "data"
    sequence_axis: AxisSpec = None
    query_sequence_axis: AxisSpec = None
    head_axis: AxisSpec = "model"
    key_sequence_axis: AxisSpec = None
    hidden_state_axis: AxisSpec = None
    attention_dim_axis: AxisSpec = None
    bias_head_sequence_axis: AxisSpec = None
    bias_key_sequence_axis: AxisSpec = None
    generation_query_sequence_axis: AxisSpec = None
    generation_head_axis: AxisSpec = "model"
    generation_key_sequence_axis: AxisSpec = None
    generation_attention_dim_axis: AxisSpec = None

    @classmethod
    def for_rule(cls, rule: str | Mapping[str, Any], mesh: Mesh) -> PartitionAxis:
        """The activation strategy consistent with a weight rule on ``mesh``.

        The batch goes over the mesh's batch axes (``batch_axes``: all but "model"); heads
        go where the rule puts logical "heads", the hidden state where it puts "embed",
        so activations are split like the weights that make them. Axes the batch uses and
        axes of size 1 are left out: under "fsdp" ("embed" over "data") the hidden state
        stays whole; under "replicated", or on a "model" axis of size 1, heads are unsplit.
        Every other field is None.

        Parameters
        ----------
        rule : str or mapping
            A key of ``RULES`` or a rule table (logical axis -> mesh axis / tuple / None).
        mesh : jax.sharding.Mesh or AbstractMesh

        Raises
        ------
        ValueError
            For an unknown rule name, or "heads"/"embed" mapped to an axis ``mesh`` lacks.
        """
        if isinstance(rule, str):
            if rule not in RULES:
                raise ValueError(f"unknown sharding rule {rule!r}; choose one of {tuple(RULES)} "
                                 "or pass a rule table")
            rule = dict(RULES[rule])
        sizes = dict(mesh.shape)
        batch = tuple(a for a in batch_axes(mesh) if sizes[a] > 1)

        def follow(logical: str) -> AxisSpec:
            target = _as_axes(rule.get(logical), f"rule table entry {logical!r}")
            for axis in target:
                if axis not in sizes:
                    raise ValueError(f"rule table maps {logical!r} to mesh axis {axis!r}, absent "
                                     f"from the mesh {tuple(sizes)}; use one of them or None")
            return _pack(tuple(a for a in target if sizes[a] > 1 and a not in batch))

        heads = follow("heads")
        return cls(batch_axis=_pack(batch), head_axis=heads, hidden_state_axis=follow("embed"),
                   generation_head_axis=heads)

    def resolve(self, mesh: Mesh) -> PartitionAxis:
        """This strategy with every field normalised (lists -> tuples), checked against ``mesh``.

        Raises
        ------
        ValueError
            If a field is not None, a string or a sequence of strings, or names a mesh
            axis that ``mesh`` lacks; the message names the field, the axis and the
            mesh's axes.
        """
        resolved = {}
        for name, value in self._asdict().items():
            axes = _as_axes(value, name)
            if len(set(axes)) != len(axes):
                raise ValueError(f"{name}={value!r} names a mesh axis twice; list each mesh axis once")
            for axis in axes:
                if axis not in mesh.shape:
                    raise ValueError(
                        f"{name}={value!r} names mesh axis {axis!r}, but the mesh has axes "
                        f"{tuple(mesh.axis_names)}; use one of them, a tuple of them, or None")
            resolved[name] = value if value is None or isinstance(value, str) else axes
        return PartitionAxis(**resolved)


def activation_spec(names: Sequence[str | None], shape: Sequence[int], partition_axis: PartitionAxis,
                    mesh: Mesh) -> tuple[P, dict[str, str]]:
    """The PartitionSpec ``constrain`` gives an activation, and the dimensions it left unsplit.

    A dimension named None, or whose field is None, is unsplit. One whose mesh axes an
    earlier dimension already uses, or whose size does not divide by their product, is
    left unsplit too and listed in the returned ``{activation name: reason}``.

    Raises
    ------
    ValueError
        If ``names`` has another length than ``shape``, holds a name outside
        ``ACTIVATION_NAMES``, or ``partition_axis`` does not resolve on ``mesh``.
    """
    if len(names) != len(shape):
        raise ValueError(f"activation names {tuple(names)} have {len(names)} entries for an array "
                         f"of shape {tuple(shape)}; give one name (or None) per dimension")
    pa = partition_axis.resolve(mesh)
    entries, used, unsplit = [], set(), {}
    for name, dim in zip(names, shape):
        if name is not None and name not in ACTIVATION_NAMES:
            raise ValueError(f"unknown activation name {name!r}; known names: "
                             f"{', '.join(ACTIVATION_NAMES)} (or None for an unsplit dimension)")
        target = None if name is None else getattr(pa, ACTIVATION_NAMES[name])
        axes = _as_axes(target, name)
        size = math.prod(mesh.shape[a] for a in axes)
        if axes and used.intersection(axes):
            unsplit[name], target = f"mesh axes {axes} already split an earlier dimension", None
        elif dim % size:
            unsplit[name], target = f"dim {dim} is not divisible by mesh axes {axes} of size {size}", None
        used.update(_as_axes(target, name))
        entries.append(target)
    return P(*entries), unsplit


def constrain(x: jax.Array, names: Sequence[str | None], partition_axis: PartitionAxis | None,
              mesh: Mesh | None = None) -> jax.Array:
    """Pin the layout of activation ``x`` under the active mesh; a no-op without one.

    Parameters
    ----------
    x : jax.Array
        The activation, e.g. (B, N, E) tokens.
    names : sequence of str or None
        One ``ACTIVATION_NAMES`` key (or None) per dimension, e.g. ("batch", "sequence", "hidden").
    partition_axis : PartitionAxis or None
        The strategy in force; None: no constraint.
    mesh : Mesh, optional
        Default: the active mesh (``jax.set_mesh`` / ``mesh_context``); none: no constraint.

    Returns
    -------
    jax.Array
        ``jax.lax.with_sharding_constraint(x, activation_spec(...))``; dimensions left
        unsplit are reported in one ``ShardingFallbackWarning`` per trace.
    """
    if partition_axis is None:
        return x
    active = jax.sharding.get_abstract_mesh() if mesh is None else mesh
    if active.empty:
        return x
    spec, unsplit = activation_spec(names, x.shape, partition_axis, active)
    if unsplit:
        warnings.warn(f"activation {tuple(names)} of shape {tuple(x.shape)} left unsplit on mesh "
                      f"{dict(active.shape)}: " + "; ".join(f"{n} ({r})" for n, r in unsplit.items()),
                      ShardingFallbackWarning, stacklevel=2)
    target = NamedSharding(mesh, spec) if isinstance(mesh, Mesh) else spec
    return jax.lax.with_sharding_constraint(x, target)


def partition_axis_from_config(cfg: Mapping[str, Any], rule: str | Mapping[str, Any],
                               mesh: Mesh | None) -> PartitionAxis | None:
    """The strategy an ``activation`` config selects: ``strategy`` plus per-field overrides.

    ``strategy`` is "rule" (``PartitionAxis.for_rule(rule, mesh)``), "fixed"
    (``PartitionAxis()``) or "none" (no constraints: returns None). Every other key is
    a ``PartitionAxis`` field; a value other than "auto" (None, a mesh axis or a list
    of them) replaces what the strategy chose. Without a mesh, returns None.

    Raises
    ------
    ValueError
        For an unknown strategy or key, or a value that does not resolve on ``mesh``.
    """
    strategy = cfg.get("strategy", "rule")
    if strategy not in ACTIVATION_STRATEGIES:
        raise ValueError(f"activation strategy {strategy!r} is not one of "
                         f"{', '.join(ACTIVATION_STRATEGIES)}; e.g. activation.strategy=rule")
    fields = {k: v for k, v in cfg.items() if k != "strategy"}
    unknown = [k for k in fields if k not in PartitionAxis._fields]
    if unknown:
        raise ValueError(f"activation key {unknown[0]!r} is not a PartitionAxis field; valid keys: "
                         f"strategy, {', '.join(PartitionAxis._fields)}")
    if strategy == "none" or mesh is None:
        return None
    base = PartitionAxis.for_rule(rule, mesh) if strategy == "rule" else PartitionAxis()
    changes = {k: v for k, v in fields.items() if not (isinstance(v, str) and v == _AUTO)}
    return base._replace(**changes).resolve(mesh)


def _as_axes(value: Any, field: str) -> tuple[str, ...]:
    """A field value as a tuple of mesh axis names (``()`` for None)."""
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, Sequence) and value and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise ValueError(f"{field}={value!r} must be None, a mesh axis name or a non-empty sequence "
                     "of mesh axis names, e.g. 'data' or ('data', 'model')")


def _pack(axes: tuple[str, ...]) -> AxisSpec:
    """``()`` -> None, one axis -> its name, several -> the tuple."""
    return None if not axes else axes[0] if len(axes) == 1 else axes

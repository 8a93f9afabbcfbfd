"""The contract's vocabulary and rules: logical axes, the named rules, a rule resolved once.

``RULES`` and ``LOGICAL_AXES`` are pinned by a test against ``heal_swin_nnx.sharding``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Union

from jax.sharding import Mesh, PartitionSpec as P

__all__ = ["LOGICAL_AXES", "MODEL_AXIS", "MeshAxes", "RuleTable", "RULES", "Rule", "resolve_rule",
           "partition_spec_for"]

LOGICAL_AXES: tuple[str, ...] = ("embed", "mlp", "heads", "vocab", "in", "out")
MODEL_AXIS = "model"

#: Where one logical axis goes: a mesh axis, a tuple of them (split over their product), or None.
MeshAxes = Union[str, tuple[str, ...], None]
#: A rule table as users write it: logical axis -> ``MeshAxes``; logical axes left out are not split.
RuleTable = Mapping[str, MeshAxes]

RULES: dict[str, tuple[tuple[str, str | None], ...]] = {
    "replicated": tuple((name, None) for name in LOGICAL_AXES),
    "fsdp": tuple((name, "data" if name == "embed" else None) for name in LOGICAL_AXES),
    "tensor": tuple(
        (name, MODEL_AXIS if name in ("mlp", "heads", "vocab") else None) for name in LOGICAL_AXES),
}


@dataclasses.dataclass(frozen=True)
class Rule:
    """A rule resolved once (``resolve_rule``): a name and a table of logical -> mesh axes.

    ``builtin``: the contract's rules ("replicated" ignores annotations); a user's table honours them all.
    """

    name: str
    table: RuleTable
    builtin: bool = False

    @property
    def reads_annotations(self) -> bool:
        return not (self.builtin and self.name == "replicated")

    @property
    def label(self) -> str:
        return f"rule {self.name!r}" if self.builtin else "custom rule table"


def resolve_rule(rule: str | RuleTable | Rule) -> Rule:
    """A rule name (a key of ``RULES``), a rule table or a ``Rule``, as a ``Rule``; else ``ValueError``."""
    if isinstance(rule, Rule):
        return rule
    if isinstance(rule, Mapping):
        check_table(rule)
        return Rule("custom", dict(rule))
    if rule is None or isinstance(rule, str):
        if rule in RULES:
            return Rule(rule, dict(RULES[rule]), builtin=True)
        raise ValueError(f"unknown sharding rule {rule!r}; choose one of {tuple(RULES)} or pass a rule "
                         "table (logical axis -> mesh axis or None)")
    raise ValueError(f"rule must be a name in {tuple(RULES)} or a rule table mapping, got {rule!r}")


def check_table(table: Mapping) -> None:
    """``ValueError`` naming the entry unless every key is a logical axis and every value a mesh
    axis name, a list or tuple of them, or None (a mistyped key would silently split nothing)."""
    for key, value in table.items():
        if key not in LOGICAL_AXES:
            raise ValueError(f"rule table key {key!r} is not a logical axis; valid keys: {', '.join(LOGICAL_AXES)}")
        names = value if isinstance(value, (list, tuple)) else [value]
        if value is not None and not all(isinstance(v, str) for v in names):
            raise ValueError(f"rule table entry {{{key!r}: {value!r}}}: a value must be a mesh axis name "
                             f"(e.g. 'data' or 'model'), a list of them, or None")


def partition_spec_for(names: Sequence[str | None] | None, shape: Sequence[int],
                       table: RuleTable, mesh: Mesh) -> tuple[P, str | None]:
    """``(spec, None)`` for a variable whose annotation ``table`` can honour on ``mesh``, else ``(P(), reason)``.

    Reasons: an unknown logical axis, a wrong rank, a mesh axis used twice or absent, an indivisible dimension.
    """
    if names is None:
        return P(), None
    if len(names) != len(shape):
        return P(), f"annotation rank {len(names)} != array rank {len(shape)}"
    entries, owner = [], {}
    for name, dim in zip(names, shape):
        target = None if name is None else table.get(name)
        if name is not None and name not in table and name not in LOGICAL_AXES:
            return P(), f"unknown logical axis {name!r} (known: {', '.join(LOGICAL_AXES)})"
        if target is None:
            entries.append(None)
            continue
        mesh_axes = (target,) if isinstance(target, str) else tuple(target)
        for axis in mesh_axes:
            if axis not in mesh.shape:
                return P(), (f"logical axis {name!r} maps to mesh axis {axis!r}, absent from the "
                             f"mesh {tuple(mesh.axis_names)}")
            if axis in owner:
                return P(), f"logical axes {owner[axis]!r} and {name!r} both map to mesh axis {axis!r}"
            owner[axis] = name
        size = math.prod(mesh.shape[axis] for axis in mesh_axes)
        if dim % size:
            return P(), (f"dim {dim} of logical axis {name!r} is not divisible by mesh axis "
                         f"{target!r} of size {size}")
        entries.append(target if isinstance(target, str) else mesh_axes)
    return P(*entries), None

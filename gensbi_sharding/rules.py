"""The contract's vocabulary and rules: logical axes, annotations, the named rules, a rule resolved once.

``RULES`` and ``LOGICAL_AXES`` are pinned by a test against ``heal_swin_nnx.sharding``. A rule table (logical axis ->
mesh axes) is Flax's logical axis rules (``flax.linen.partitioning``, ``nnx.with_partitioning``) and MaxText's
``logical_axis_rules``; the placements it yields are GSPMD's (Xu et al. 2021, arXiv:2105.04663).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any, Union

from flax import nnx
from jax.sharding import Mesh, PartitionSpec as P

from gensbi_sharding.nodes import check_mesh

__all__ = ["LOGICAL_AXES", "MODEL_AXIS", "MeshAxes", "RuleTable", "RULES", "Rule", "resolve_rule",
           "partition_spec_for", "axes", "partitioned", "logical_axes_of", "ShardingFallbackWarning",
           "ExperimentalRuleWarning"]

#: The logical axis names a model may give a variable's dimensions: the contract's vocabulary.
LOGICAL_AXES: tuple[str, ...] = ("embed", "mlp", "heads", "vocab", "in", "out")
#: The tensor-parallel mesh axis (``make_mesh``'s second axis; the first is ``"data"``).
MODEL_AXIS = "model"

#: Where one logical axis goes: a mesh axis, a tuple of them (split over their product), or None (not split).
MeshAxes = Union[str, tuple[str, ...], None]
#: A rule table as users write it: logical axis -> ``MeshAxes``; logical axes left out are not split.
RuleTable = Mapping[str, MeshAxes]


class ShardingFallbackWarning(UserWarning):
    """Variables (``Plan.warn``: one per placement) or activation dimensions (``constrain``) left unsplit, and why."""


class ExperimentalRuleWarning(UserWarning):
    """A built-in splitting rule ("fsdp", "tensor") is in force; the contract calls it experimental."""


def axes(*names: str | None) -> dict:
    """``nnx.Variable`` keyword arguments (or a layer's ``*_metadata``) naming one logical axis per dimension.

    E.g. ``nnx.Param(value, **axes("embed", "mlp"))``. ``eager_sharding=False``: building the variable never
    places it, even under an active mesh.

    Parameters
    ----------
    *names : str or None
        One per dimension: a logical axis (``LOGICAL_AXES``) or None (never split).
    """
    return {"out_sharding": names, "eager_sharding": False}


def partitioned(init, names: tuple[str | None, ...]):
    """Wrap an initialiser so its variable carries ``names``, without eager placement (``nnx.with_partitioning``).

    Parameters
    ----------
    init : callable
        ``init(key, shape, dtype) -> jax.Array``.
    names : tuple of str or None
        One logical axis (or None) per dimension.
    """
    return nnx.with_partitioning(init, names, eager_sharding=False)


def logical_axes_of(var: nnx.Variable) -> tuple[str | None, ...] | None:
    """The logical axis names on ``var`` (one per dimension), or None when it carries no annotation.

    The one reader of Flax's metadata key, renamed twice: ``out_sharding``, then ``sharding_names``, ``sharding``.
    A bare string (``out_sharding="embed"``) names one dimension, ``("embed",)``, not one per character.

    Parameters
    ----------
    var : nnx.Variable
    """
    metadata = var.get_metadata()
    for key in ("out_sharding", "sharding_names", "sharding"):
        names = metadata.get(key)
        if names is not None:
            return (names,) if isinstance(names, str) else tuple(names)
    return None


#: The named rules, each ``(logical axis, mesh axis or None)`` for every logical axis. "replicated" splits nothing;
#: "fsdp" splits ``embed`` over ``"data"`` (FSDP / ZeRO-3 parameter sharding, Rajbhandari et al. 2020,
#: arXiv:1910.02054); "tensor" splits ``mlp``, ``heads``, ``vocab`` over ``"model"`` (Megatron-LM tensor
#: parallelism, Shoeybi et al. 2019, arXiv:1909.08053).
RULES: dict[str, tuple[tuple[str, str | None], ...]] = {
    "replicated": tuple((name, None) for name in LOGICAL_AXES),
    "fsdp": tuple((name, "data" if name == "embed" else None) for name in LOGICAL_AXES),
    "tensor": tuple(
        (name, MODEL_AXIS if name in ("mlp", "heads", "vocab") else None) for name in LOGICAL_AXES),
}


@dataclasses.dataclass(frozen=True)
class Rule:
    """A rule resolved once (``resolve_rule``): a name and a table of logical -> mesh axes.

    Parameters
    ----------
    name : str
        A key of ``RULES``, or ``"custom"`` for a user's table.
    table : RuleTable
        Copied into a dict, a sequence value (a Hydra ``ListConfig`` too) as a list.
    builtin : bool, default False
        True for the contract's rules ("replicated" then ignores annotations).

    Raises
    ------
    ValueError
        If ``table`` is not a mapping, or ``check_table`` rejects it (a key not in ``LOGICAL_AXES`` mapped to a
        mesh axis, a bad value).
    """

    name: str
    table: RuleTable
    builtin: bool = False

    def __post_init__(self) -> None:
        # Checked however a Rule is made: built directly, a mistyped key would silently split nothing.
        if not isinstance(self.table, Mapping):
            raise ValueError(f"Rule table={self.table!r:.60} must be a mapping of logical axis -> mesh axes, "
                             "e.g. {'embed': 'data'}")
        # A Hydra DictConfig's lists (ListConfig) as lists: every reader of the table (plans, PartitionAxis) takes them.
        object.__setattr__(self, "table", {key: _plain(value) for key, value in self.table.items()})
        check_table(self.table)

    @property
    def reads_annotations(self) -> bool:
        """Whether a plan reads the variables' logical axes: False only for the built-in "replicated"."""
        return not (self.builtin and self.name == "replicated")

    @property
    def label(self) -> str:
        """The rule as messages name it: ``"rule 'fsdp'"`` for a built-in rule or a named table (the
        harness's ``rule=fsdp_tensor``); a built-in's name on an edited table says so; else
        ``"custom rule table"``."""
        if self.builtin or (self.name != "custom" and self.name not in RULES):
            return f"rule {self.name!r}"  # a user who chose rule=fsdp_tensor looks for that name
        if self.name in RULES:  # rule=fsdp rule.embed=model: not what "fsdp" means
            return f"rule {self.name!r} with an edited table"
        return "custom rule table"


def resolve_rule(rule: str | RuleTable | Rule) -> Rule:
    """Resolve a rule name, a rule table or a ``Rule`` into a ``Rule``: the one form every reader of a plan takes.

    Parameters
    ----------
    rule : str or RuleTable or Rule, or sequence of (str, MeshAxes) pairs
        A key of ``RULES``; a table (logical axis -> mesh axis name, list or tuple of them, or None), copied; the
        same as ``(logical axis, mesh axes)`` pairs, the form ``RULES`` holds (and Flax's ``logical_axis_rules``),
        each logical axis once; or a ``Rule``, returned as is. Mesh axes are checked later, against a mesh, by
        ``partition_spec_for``.

    Raises
    ------
    ValueError
        If ``rule`` is an unknown name or None, a table with a key not in ``LOGICAL_AXES`` (but for a name mapped to
        None, e.g. a stacked-layer axis) or a bad value (one naming a mesh axis twice too), pairs naming a logical
        axis twice, or of any other type.
    """
    if isinstance(rule, Rule):
        return rule
    if isinstance(rule, Mapping):  # a Hydra DictConfig too
        return Rule("custom", rule)  # copied and checked by Rule
    if _is_pairs(rule):  # RULES["tensor"] itself: the contract's form was refused as "not a mapping"
        rule = [(name, _plain(value)) for name, value in rule]  # OmegaConf's ListConfig pairs too
        names = [name for name, _ in rule]
        twice = next((name for name in names if names.count(name) > 1), None)
        if twice is not None:  # Flax's rules take the first pair whose mesh axes are free; a table has one each
            first = dict(pair for i, pair in enumerate(rule) if pair[0] not in names[:i])
            raise ValueError(f"rule pairs name logical axis {twice!r} {names.count(twice)} times; give each logical "
                             f"axis once, e.g. keep the first: {first!r}")
        return Rule("custom", dict(rule))
    if rule is None or isinstance(rule, str):
        if rule in RULES:
            return Rule(rule, dict(RULES[rule]), builtin=True)
        raise ValueError(f"unknown sharding rule {rule!r}; choose one of {tuple(RULES)} or pass a rule "
                         "table (logical axis -> mesh axis or None)")
    raise ValueError(f"rule must be a name in {tuple(RULES)}, a rule table mapping or (logical axis, mesh axes) "
                     f"pairs, got {rule!r:.120}; e.g. {{'embed': 'data'}} or RULES['fsdp']")


def _is_sequence(value: Any) -> bool:
    """A list, tuple or other sequence but a string: OmegaConf's ``ListConfig`` (a Hydra config's lists) too."""
    return isinstance(value, Sequence) and not isinstance(value, (str, bytes))


def _plain(value: Any) -> Any:
    """A rule table's value with a non-list sequence (``ListConfig``) as a list: read as lists are, and printable."""
    return list(value) if _is_sequence(value) and not isinstance(value, (list, tuple)) else value


def _is_pairs(rule: Any) -> bool:
    """Whether ``rule`` is a non-empty sequence (``ListConfig`` too) of ``(str, value)`` pairs, each a sequence."""
    return _is_sequence(rule) and bool(rule) and all(
        _is_sequence(pair) and len(pair) == 2 and isinstance(pair[0], str) for pair in rule)


def check_table(table: Mapping) -> None:
    """Check a user's rule table: a mistyped key would otherwise silently split nothing.

    ``ValueError`` naming the entry for a key not in ``LOGICAL_AXES`` unless a str mapped to None (declared unsplit),
    a value not a mesh axis name, list or None, or a value naming one mesh axis twice.
    """
    for key, value in table.items():
        # Another name a model gives a dimension (Flax's stacked-layer axis, transform_metadata={nnx.PARTITION_NAME:
        # "layers"}) may be declared unsplit; only a split needs the vocabulary, where a typo would split nothing.
        # Unsplit is None or no mesh axes at all ((), []), for these names as for the vocabulary's.
        unsplit = value is None or (_is_sequence(value) and not len(value))
        if key not in LOGICAL_AXES and (not unsplit or not isinstance(key, str)):
            other = (f"another name, e.g. a stacked-layer axis, can only be left unsplit: {{{key!r}: None}}"
                     if isinstance(key, str) else f"a key is a logical axis name, a str: got {type(key).__name__}")
            raise ValueError(f"rule table key {key!r} is not a logical axis; valid keys: {', '.join(LOGICAL_AXES)} "
                             f"({other})")
        names = list(value) if _is_sequence(value) else [value]
        if value is not None and not all(isinstance(v, str) for v in names):
            raise ValueError(f"rule table entry {{{key!r}: {value!r}}}: a value must be a mesh axis name "
                             f"(e.g. 'data' or 'model'), a list of them, or None")
        twice = next((v for v in names if names.count(v) > 1), None) if value is not None else None
        once = tuple(dict.fromkeys(names))
        if twice is not None:  # one dimension cannot be split over a mesh axis twice, on any mesh
            raise ValueError(f"rule table entry {{{key!r}: {value!r}}} names mesh axis {twice!r} twice; list "
                             f"each once: {{{key!r}: {once[0] if len(once) == 1 else once!r}}}")


def partition_spec_for(names: Sequence[str | None] | None, shape: Sequence[int],
                       table: RuleTable, mesh: Mesh) -> tuple[P, str | None]:
    """The PartitionSpec of one variable under ``table`` on ``mesh``, or why it must be replicated instead.

    Flax's ``logical_to_mesh_axes`` plus checks, pure: an annotation that cannot be honoured is returned as a
    reason (a plan fallback), never raised nor left for ``jax.device_put`` to reject.

    Parameters
    ----------
    names : sequence of str or None, or None
        The variable's logical axis per dimension (``logical_axes_of``); None: not annotated.
    shape : sequence of int
    table : RuleTable
    mesh : jax.sharding.Mesh

    Returns
    -------
    spec : jax.sharding.PartitionSpec
        ``P()`` when ``names`` is None or a reason is given.
    reason : str or None
        None if the annotation can be honoured; else an unknown logical axis, a rank other than ``len(shape)``,
        a mesh axis absent from ``mesh`` or used twice, or a dimension its mesh axes' sizes do not divide.

    Raises
    ------
    TypeError
        If ``mesh`` is not a ``jax.sharding.Mesh``.
    """
    check_mesh(mesh, optional=False)
    if names is None:
        return P(), None
    if len(names) != len(shape):
        return P(), f"annotation rank {len(names)} != array rank {len(shape)}"
    entries, owner = [], {}
    for name, dim in zip(names, shape):
        target = None if name is None else table.get(name)
        if name is not None and name not in table and name not in LOGICAL_AXES:
            return P(), (f"unknown logical axis {name!r} (known: {', '.join(LOGICAL_AXES)}); to split the other "
                         f"dimensions, leave it unsplit: a rule table with {{{name!r}: None}}")
        if target is None:
            entries.append(None)
            continue
        mesh_axes = (target,) if isinstance(target, str) else tuple(target)
        for axis in mesh_axes:
            if axis not in mesh.shape:
                return P(), (f"logical axis {name!r} maps to mesh axis {axis!r}, absent from the mesh "
                             f"{tuple(mesh.axis_names)}; build the mesh with make_mesh (axes 'data', 'model') or map "
                             f"{name!r} to one of its axes in a rule table")
            if axis in owner:
                return P(), f"logical axes {owner[axis]!r} and {name!r} both map to mesh axis {axis!r}"
            owner[axis] = name
        size = math.prod(mesh.shape[axis] for axis in mesh_axes)
        if dim % size:
            return P(), (f"size {dim} of logical axis {name!r} is not divisible by mesh axis "
                         f"{target!r} of size {size}")
        entries.append(target if isinstance(target, str) else mesh_axes)
    return P(*entries), None

"""The contract's vocabulary (``RULES``, ``LOGICAL_AXES``: pinned against ``heal_swin_nnx.sharding``), a rule resolved
once (a table: Flax's and MaxText's ``logical_axis_rules``), and the activation names ``constrain`` takes."""

import dataclasses
import difflib
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Union

from gensbi_sharding.messages import shown

__all__ = ["LOGICAL_AXES", "MODEL_AXIS", "MeshAxes", "RuleTable", "RULES", "Rule", "resolve_rule",
           "ShardingFallbackWarning", "ExperimentalRuleWarning"]

#: Activation dimension name -> the ``PartitionAxis`` field that places it.
ACTIVATION_NAMES: dict[str, str] = {
    "batch": "batch_axis", "sequence": "sequence_axis", "query_sequence": "query_sequence_axis", "heads": "head_axis",
    "key_sequence": "key_sequence_axis", "hidden": "hidden_state_axis", "head_dim": "attention_dim_axis"}
#: The logical axis names a model may give a variable's dimensions: the contract's vocabulary.
LOGICAL_AXES: tuple[str, ...] = ("embed", "mlp", "heads", "vocab", "in", "out")
#: The tensor-parallel mesh axis (``make_mesh``'s second axis; the first is ``"data"``).
MODEL_AXIS = "model"
#: The metadata keys an annotation is read from, the first set first: every key Flax has used.
ANNOTATION_KEYS = ("out_sharding", "sharding_names", "sharding")

#: Where one logical axis goes: a mesh axis, a tuple of them (split over their product), or None (not split).
MeshAxes = Union[str, tuple[str, ...], None]
#: A rule table as users write it: logical axis -> ``MeshAxes``; logical axes left out are not split.
RuleTable = Mapping[str, MeshAxes]


class ShardingFallbackWarning(UserWarning):
    """Variables (``Plan.warn``: one per placement) or activation dimensions (``constrain``) left unsplit, and why."""


class ExperimentalRuleWarning(UserWarning):
    """A built-in splitting rule ("fsdp", "tensor") is in force; the contract calls it experimental."""


#: The named rules, a (logical axis, mesh axis or None) pair each. "replicated" splits nothing; "fsdp" splits ``embed``
#: over ``"data"`` (FSDP / ZeRO-3, Rajbhandari et al. 2020, arXiv:1910.02054); "tensor" splits ``mlp``, ``heads``,
#: ``vocab`` over ``"model"`` (Megatron-LM tensor parallelism, Shoeybi et al. 2019, arXiv:1909.08053).
RULES: dict[str, tuple[tuple[str, str | None], ...]] = {
    "replicated": tuple((name, None) for name in LOGICAL_AXES),
    "fsdp": tuple((name, "data" if name == "embed" else None) for name in LOGICAL_AXES),
    "tensor": tuple((name, MODEL_AXIS if name in ("mlp", "heads", "vocab") else None) for name in LOGICAL_AXES),
}
#: Why a logical axis is unsplit (``.format(name=, axis=, axes=)``) by plans and ``PartitionAxis.for_rule`` alike.
ABSENT_AXIS = ("logical axis {name!r} maps to mesh axis {axis!r}, absent from the mesh {axes}; build the mesh with "
               "make_mesh (axes 'data', 'model') or map {name!r} to one of its axes in a rule table")
#: Said with an unknown rule name: the harness's rule files are tables, not names.
RULE_FILES = ("a harness rule file, conf/rule/<name>.yaml, is a rule table once its name: key is dropped, e.g. {k: v "
              "for k, v in OmegaConf.load('conf/rule/fsdp_tensor.yaml').items() if k != 'name'}")


@dataclasses.dataclass(frozen=True)
class Rule:
    """A rule resolved once (``resolve_rule``): a name and a table of logical -> mesh axes (copied, sequences as lists).

    Parameters
    ----------
    name : str
        A key of ``RULES`` (with another table: that rule edited, named so in messages), ``"custom"`` or any name.
    table : RuleTable
    builtin : bool, default False
        Derived, whatever is passed: True for a key of ``RULES`` with its own table, the contract's rules ("replicated"
        then ignores annotations). Passing True for another rule is refused.

    Raises
    ------
    ValueError
        ``table`` no mapping or rejected by ``check_table``; ``name`` no str; ``builtin`` True but not ``RULES[name]``.
    """

    name: str
    table: RuleTable
    builtin: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.table, Mapping):  # checked however a Rule is made: a mistyped key would split nothing
            raise ValueError(f"Rule table={shown(self.table)} must be a mapping of logical axis -> mesh "
                             "axes, e.g. {'embed': 'data'}")
        object.__setattr__(self, "table", {key: _plain(value) for key, value in self.table.items()})
        check_table(self.table)
        if not isinstance(self.name, str) or self.builtin not in (False, True) or (  # builtin="no" is truthy
                self.builtin and self.table != dict(RULES.get(self.name, ()))):
            raise ValueError(f"Rule(name={shown(self.name)}, builtin={shown(self.builtin)}): name is a str, and "
                             "builtin=True marks a contract rule with RULES' own table: build those with "
                             "resolve_rule(name)")
        if self.name in RULES and self.table == dict(RULES[self.name]):  # not labelled "with an edited table",
            object.__setattr__(self, "builtin", True)  # and not warned as experimental

    @property
    def reads_annotations(self) -> bool:
        """Whether a plan reads the variables' logical axes: False only for the built-in "replicated"."""
        return not (self.builtin and self.name == "replicated")

    @property
    def label(self) -> str:
        """How messages name it: ``"rule 'fsdp'"`` (built-in, named), ``"... with an edited table"``, or custom."""
        if self.builtin or (self.name != "custom" and self.name not in RULES):
            return f"rule {self.name!r}"  # a user who chose rule=fsdp_tensor looks for that name
        return f"rule {self.name!r} with an edited table" if self.name in RULES else "custom rule table"


def unknown_rule(rule: Any, then: str, files: str | None = "") -> ValueError:
    """The refusal of ``rule``, no name in ``RULES``: ``then`` (as each caller takes rules) after the names, then the
    name meant or ``RULE_FILES`` and ``files`` (None: neither)."""
    # 'fsdpp' -> "did you mean 'fsdp'?" alone; 'my_rule' -> no guess: a far name is more likely a rule file's
    fix = "" if files is None else typo_of(str(rule), RULES, cutoff=0.8, then="") or RULE_FILES + files
    return ValueError(f"unknown sharding rule {shown(rule)}; choose one of {tuple(RULES)}{then}{fix}")


def resolve_rule(rule: str | RuleTable | Rule) -> Rule:
    """Resolve a rule name, table or ``Rule`` into a ``Rule``: the one form every reader of a plan takes.

    Parameters
    ----------
    rule : str or RuleTable or Rule, or sequence of (str, MeshAxes) pairs
        A key of ``RULES``; a table, or its pairs (as Flax's ``logical_axis_rules``); a ``Rule``. Mesh axes: later.

    Returns
    -------
    Rule
        Its ``table`` a dict, logical axis -> mesh axes (T5X/MaxText's ``logical_axis_rules``, as a mapping).

    Raises
    ------
    ValueError
        An unknown name or None, a table ``check_table`` rejects, pairs naming a logical axis twice, another type.
    """
    if isinstance(rule, Rule):
        return rule
    if isinstance(rule, Mapping):  # a Hydra DictConfig too
        return Rule("custom", rule)  # copied and checked by Rule
    if is_sequence(rule) and rule and all(  # (str, value) pairs: RULES' own form
            is_sequence(pair) and len(pair) == 2 and isinstance(pair[0], str) for pair in rule):
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
            return Rule(rule, dict(RULES[rule]))  # builtin: Rule derives it
        raise unknown_rule(rule, " or pass a rule table (logical axis -> mesh axis or None); ")
    raise ValueError(f"rule must be a name in {tuple(RULES)}, a rule table mapping or (logical axis, mesh axes) "
                     f"pairs, got {shown(rule, 120)}; e.g. {{'embed': 'data'}} or RULES['fsdp']")


def is_sequence(value: Any) -> bool:  # but a str; a ListConfig too, and a PartitionSpec (Flax takes one; no Sequence)
    spec = getattr(sys.modules.get("jax.sharding"), "PartitionSpec", ())  # none exists before JAX is imported
    return isinstance(value, (Sequence, spec)) and not isinstance(value, (str, bytes))


def _plain(value: Any) -> Any:  # a table value with a non-list sequence (ListConfig) as a list
    return list(value) if is_sequence(value) and not isinstance(value, (list, tuple)) else value


def check_table(table: Mapping, repeats: bool = True) -> None:
    """``ValueError`` naming the entry unless keys are logical axes (others: unsplit only), values mesh axes or None
    (``repeats``: each once; ``partition_spec_for`` replicates the variables of an entry naming one twice)."""
    for key, value in table.items():
        names = [] if value is None else list(value) if is_sequence(value) else [value]
        if key not in LOGICAL_AXES and (names or not isinstance(key, str)):
            other = (f"a key is a logical axis name, a str: got {type(key).__name__}" if not isinstance(key, str) else
                     f"{key!r} names a rule: this is a table of rules (RULES itself?); pass one rule, e.g. {key!r} "
                     f"or RULES[{key!r}]" if key in RULES else  # {'replicated': None} below would fix nothing
                     "'name' names a harness rule file's table (conf/rule/*.yaml): drop it" if key == "name" else
                     f"annotations name logical axes, which a rule maps onto mesh axes: annotate with one mapped onto "
                     f"{key!r} ({mapped_onto(table, key)})" if key in names else  # {'model': 'model'}: Flax guide's
                     f"{typo_of(key)}another name, e.g. a stacked-layer axis, can only be left unsplit: "
                     f"{{{key!r}: None}}")
            raise ValueError(f"rule table key {key!r} is not a logical axis; valid keys: {', '.join(LOGICAL_AXES)} "
                             f"({other})")
        if not all(isinstance(v, str) and v for v in names):  # "" (Hydra's rule.embed=) is no axis: None is unsplit
            raise ValueError(f"rule table entry {{{key!r}: {shown(value)}}}: a value must be a mesh axis name "
                             f"(e.g. 'data' or 'model'), a list of them, or None")
        if repeats and (twice := next((v for v in names if names.count(v) > 1), None)) is not None:  # one split each
            once = tuple(dict.fromkeys(names))
            raise ValueError(f"rule table entry {{{key!r}: {value!r}}} names mesh axis {twice!r} twice; list "
                             f"each once: {{{key!r}: {once[0] if len(once) == 1 else once!r}}}")


def typo_of(name: Any, known: Iterable[str] = LOGICAL_AXES, cutoff: float = 0.6, then: str = " if not, ") -> str:
    """``"did you mean 'mlp'? if not, "`` for a name close to one of ``known`` ('mpl', 'embedd'), else ``""``."""
    # Only str names (difflib takes len() of each). Every name within 0.1 of the closest is said: 'q_sequence' is
    # 'sequence' (0.89) as likely as 'query_sequence' (0.83); one guess alone could mislead.
    scores = sorted(((difflib.SequenceMatcher(None, name, k).ratio(), k) for k in dict.fromkeys(known)
                     if isinstance(k, str)), key=lambda p: -p[0]) if isinstance(name, str) else []
    near = [repr(k) for score, k in scores if score >= max(cutoff, scores[0][0] - 0.1)]
    return f"did you mean {' or '.join(filter(None, (', '.join(near[:-1]), near[-1])))}?{then}" if near else ""


def mapped_onto(table: Mapping, axis: str) -> str:
    """The logical axes ``table`` maps onto mesh axis ``axis``, else one a built-in rule maps there: for a message."""
    mapped = [k for k, v in table.items() if k in LOGICAL_AXES and axis in ((v,) if isinstance(v, str) else v or ())]
    return ", ".join(mapped) or next((f"none; rule {r!r} maps {k!r} onto it" for r, pairs in RULES.items()
                                      for k, v in pairs if v == axis), "none")


def check_activation_names(names: Sequence[str | None], shape: Sequence[int]) -> None:
    """``ValueError`` unless ``names`` is one ``ACTIVATION_NAMES`` key (or None) per dimension of ``shape``."""
    if isinstance(names, str) or not isinstance(names, Sequence):  # None, a number: len() would raise TypeError
        example = (names,) if isinstance(names, str) else ("batch",) + (None,) * (len(shape) - 1)
        raise ValueError(f"activation names {shown(names)} must be a sequence, one per dimension: e.g. {example!r}")
    if len(names) != len(shape):
        raise ValueError(f"activation names {shown(tuple(names))} have {len(names)} entries for an array "
                         f"of shape {tuple(shape)}; give one name (or None) per dimension")
    odd = next((n for n in names if not (n is None or isinstance(n, str) and n in ACTIVATION_NAMES)), None)  # a list
    if odd is not None:
        raise ValueError(f"unknown activation name {shown(odd)}; {typo_of(odd, ACTIVATION_NAMES)}known names: "
                         f"{', '.join(ACTIVATION_NAMES)} (or None for an unsplit dimension)")

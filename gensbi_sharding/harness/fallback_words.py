"""A plan's fallback reasons in the harness's words: the fix a rule table takes, said as the caller's setting.

The library's reasons speak to a library user, who holds a rule table: "map 'vocab' to None", "or a rule table with
{'heads': None}". A harness user sets the rule by its overrides (``rule.vocab=null``) or, under ``run(cfg)`` from
Python, by ``cfg``'s settings (``cfg.rule.vocab=None``: ``python_words``). ``harness_plan`` gives the plan with its
reasons so worded, for every reader of it in a run (the console's warning, ``strict=true``'s refusal, metrics.json's
``fallbacks``, launch.log); the library's own text stays the library user's. Pure Python: no JAX.
"""

from __future__ import annotations

import dataclasses
import math
import re
from itertools import combinations
from typing import TYPE_CHECKING

from gensbi_sharding.harness.python_words import said_as, setting
from gensbi_sharding.rules import LOGICAL_AXES

if TYPE_CHECKING:  # annotations only: this module needs no JAX
    from gensbi_sharding.sharding import Plan

__all__ = ["harness_plan", "harness_reason"]

# The library's fixes of a rule table (gensbi_sharding/specs.py), each with the logical axis it names; a test pins
# that each still matches the library's text, so a rewording there fails here rather than passing through unsaid.
_TO_NONE = re.compile(r"map '(?P<name>\w+)' to None(?: or to mesh axes of total size (?P<sizes>\d+(?: or \d+)*))?")
_ONCE = re.compile(r"map it onto '(?P<axis>\w+)' once in the rule table")
_TABLE_WITH = re.compile(r"a rule table with (?P<table>\{'\w+': None(?:, '\w+': None)*\})")
_STACKED = re.compile(r"with a rule table mapping it, e\.g\. \{\*\*dict\(gs\.RULES\['\w+'\]\), '(?P<name>\w+)': None\}")


def _unsplit(name: str) -> str:
    """The setting that leaves logical axis ``name`` unsplit: ``rule.vocab=null`` (``cfg.rule.vocab=None``); a name no
    rule file holds (a model's own, ``layers``) is added: ``+rule.layers=null`` (``cfg.rule.layers=None``, in
    ``omegaconf.open_dict(cfg.rule)``, as the composed config takes no new key otherwise)."""
    if name in LOGICAL_AXES:
        return setting(f"rule.{name}", None, f"rule.{name}=null")
    return said_as(f"+rule.{name}=null", f"{setting(f'rule.{name}', None)} in omegaconf.open_dict(cfg.rule)")


def _onto(name: str, axes: tuple[str, ...]) -> str:
    """The setting that maps ``name`` onto mesh ``axes``: ``rule.vocab=data``, ``rule.vocab=[data,model]``."""
    value = axes[0] if len(axes) == 1 else list(axes)
    return setting(f"rule.{name}", value, f"rule.{name}={axes[0]}" if len(axes) == 1 else
                   f"rule.{name}=[{','.join(axes)}]")


def harness_reason(reason: str, mesh_shape: dict[str, int]) -> str:
    """``reason``, one fallback's (``Plan.fallbacks``), with the rule table's fixes said as the caller's settings.

    Parameters
    ----------
    reason : str
        The library's reason, e.g. "size 8 of logical axis 'vocab' is not divisible by mesh axis 'model' of size 3;
        map 'vocab' to None or to mesh axes of total size 2, or annotate this dimension None".
    mesh_shape : dict of str to int
        The plan's mesh axes and sizes (``dict(plan.mesh.shape)``): the mesh axes of each total size named.

    Returns
    -------
    str
        E.g. "...; set rule.vocab=null or map it onto mesh axes of total size 2 (rule.vocab=data), or annotate
        this dimension None" (from Python: ``cfg.rule.vocab=None``, ``cfg.rule.vocab='data'``); a reason naming no
        rule table's fix, unchanged.
    """
    def to_none(match: re.Match) -> str:
        name, sizes = match["name"], match["sizes"]
        said = f"set {_unsplit(name)}"
        if sizes:
            made = [axes for k in range(1, len(mesh_shape) + 1) for axes in combinations(mesh_shape, k)]
            fits = [_onto(name, axes) for size in map(int, sizes.split(" or ")) for axes in made
                    if math.prod(mesh_shape[a] for a in axes) == size]
            said += f" or map it onto mesh axes of total size {sizes}" + f" ({' or '.join(fits)})" * bool(fits)
        return said

    reason = _TO_NONE.sub(to_none, reason)
    name = re.search(r"logical axis '(\w+)' maps to mesh axis", reason)
    if name is not None:
        reason = _ONCE.sub(lambda m: f"map it onto {m['axis']!r} once: {_onto(name[1], (m['axis'],))}", reason)
    reason = _STACKED.sub(lambda m: f"with the rule mapping it, e.g. {_unsplit(m['name'])}", reason)
    return _TABLE_WITH.sub(lambda m: "set " + " and ".join(map(_unsplit, re.findall(r"'(\w+)': None", m["table"]))),
                           reason)


def harness_plan(plan: Plan | None) -> Plan | None:
    """``plan`` (a ``Plan``) with each fallback reason in the harness's words (``harness_reason``); its specs, mesh,
    rule and shapes as they are. None stays None.

    Returns
    -------
    Plan or None
    """
    if plan is None or not plan.fallbacks:
        return plan
    shape = dict(plan.mesh.shape)
    return dataclasses.replace(plan, fallbacks={path: harness_reason(reason, shape)
                                                for path, reason in plan.fallbacks.items()})

"""launch.py's check of the list values on the command line: ``list_override_problem``.

A scalar where the schema wants a list (Hydra's "int is not a ListConfig", no fix), a quoted list (one string), or
a list with an element of another type (Hydra's "could not be converted to Integer"). The command line as
``override_grammar.parse`` reads it, before Hydra composes anything. Pure Python: no JAX.
"""

from __future__ import annotations

import math
import typing
from collections.abc import Sequence

from hydra.core.override_parser.types import OverrideType, ValueType
from omegaconf import ListConfig, ValidationError

from gensbi_sharding.harness.command_defaults import command_default
from gensbi_sharding.harness.config import Config
from gensbi_sharding.harness.hints import override_literal
from gensbi_sharding.harness.model_checks import ID_STRATEGIES_1D
from gensbi_sharding.harness.model_choice import chosen_models
from gensbi_sharding.harness.override_grammar import SWEEPS, CommandLine, parse
from gensbi_sharding.harness.override_keys import list_fields, schema_name, sections, settings
from gensbi_sharding.harness.refusal import Refusal

__all__ = ["list_override_problem"]


def _scalar(value) -> bool:
    """A value Hydra would assign to a list key as is: not a list, dict, null or interpolation.

    A quoted ``"[a]"`` is one string (a scalar); one spelling a list of the right type is ``_quoted_list``'s.
    """
    return not (value is None or isinstance(value, (list, dict)) or (isinstance(value, str) and "${" in value))


def _quoted_list(value, element: type) -> str | None:
    """The list a quoted value spells (``"[3]"`` -> ``[3]``): quotes make it one string, which no list key takes.

    None when the text is no list of ``element`` values (``"[a]"`` for ints): showing it as the fix would be refused.
    """
    if not isinstance(value, str) or "${" in value or not value.strip().startswith("["):
        return None
    try:
        ListConfig(parse([f"key={value.strip()}"]).overrides[0].hydra.value(),
                   element_type=typing.Any if element is object else element)
    except Exception:  # not a list Hydra could read, or not of the element type
        return None
    return value.strip()


def _element_problem(o, field, typed: str, owner: str) -> str | None:
    """``eval.observations=[1.5]`` (``[a]``, ``[true]``, also one list of a sweep): the element no list of the key
    takes, and the list with it replaced (a whole number rounded; else the key's example). Was Hydra's "Value
    '1.5' of type 'float' could not be converted to Integer", naming no fix."""
    lists = [v for v in (o.values() if o.sweep else [o.hydra.value()]) if isinstance(v, list)]
    kind = typing.Any if field.element is object else field.element
    for value in lists:
        try:
            ListConfig(value, element_type=kind)
            continue
        except ValidationError:
            pass
        bad, fixed, example = next(v for v in value if _refused(v, kind)), [], field.example.split(",")[0]
        for v in value:  # an example not in the list already: [1,a] -> [1,2], not the duplicate [1,1]
            if _refused(v, kind) and field.element is int:
                taken = [x for x in value + fixed if not _refused(x, kind)]
                v = round(v) if isinstance(v, float) and math.isfinite(v) else next(
                    n for n in range(int(example), int(example) + len(value) + 1) if n not in taken)
            fixed.append(example if _refused(v, kind) else v)
        written = "[" + ",".join(map(str, fixed)) + "]"
        shown = ",".join(written if v is value else _as_list(v) for v in o.values()) if o.sweep else written
        return Refusal(f"{o.typed}={o.raw}:{owner} {field.element.__name__} values are expected and "
                       f"'{override_literal(bad)}' is not one", f"{typed}={shown}", how="; write e.g. ")
    return None


def _refused(value, kind) -> bool:
    """Whether OmegaConf refuses ``value`` as an element of a list of ``kind`` (``"3"`` is an int, 1.5 is not)."""
    try:
        ListConfig([value], element_type=kind)
        return False
    except ValidationError:
        return True


def _as_list(value) -> str:
    """A swept value written as the list a job should get: ``3`` -> ``[3]``, ``[1,2]`` -> ``[1,2]``."""
    inner = value if isinstance(value, list) else [value]
    return "[" + ",".join(map(str, inner)) + "]"


def _list_example(command: CommandLine, o, fallback: str) -> str:
    """The list the command's groups compose for ``o``'s key, as typed (``[4,0]``); ``[fallback]`` where it is
    none (a model of one's own, an empty list)."""
    section, _, name = o.key.rpartition(".")
    models = choice.models if (choice := chosen_models(command)) else []
    schemas = [s for s in sections()[section] if name in settings(s)] if section else [Config]
    schema = next((s for s in schemas if schema_name(s) in models), schemas[0] if schemas else None)
    default = command_default(command, o, schema, o.key) if schema is not None else None
    return override_literal(default) if isinstance(default, list) and default else f"[{fallback}]"


def _item_problem(command: CommandLine, o, fields: dict) -> str | None:
    """``eval.observations.0=3``: an item of a list setting, set by its index, which Hydra sets only where the list the
    command composes has it; said here in one line, where OmegaConf's traceback ("Unexpected type for root: NoneType")
    would follow for a null list, Hydra's multi-line "IndexError ... list index out of range" past a list's end."""
    held, _, index = o.key.rpartition(".")
    if held not in fields or not index.isdigit() or o.hydra.type == OverrideType.DEL or o.sweep or any(
            other.key == held for other in command.parsed):  # the list typed too: Hydra's to apply in order
        return None
    if fields[held].models and not {command.model} & fields[held].models:
        return None  # another model's list (model_key_problem names the model), or a swept model's
    section, _, name = held.rpartition(".")
    models = choice.models if (choice := chosen_models(command)) else []
    schemas = [s for s in sections()[section] if name in settings(s)] if section else [Config]
    schema = next((s for s in schemas if schema_name(s) in models), schemas[0] if schemas else None)
    composed = command_default(command, o, schema, held) if schema is not None else None
    items = list(composed) if isinstance(composed, (list, tuple)) else []
    if int(index) < len(items):
        return None
    if int(index) > len(items):
        return (f"{o.arg}: {held} is {override_literal(composed)} here, which has no item {index}; set the whole list "
                f"instead, every item written out ({held}=[...])")
    return (f"{o.arg}: {held} is {override_literal(composed)} here, which has no item {index}; set the whole list, "
            f"e.g. {held}=[{','.join([*map(override_literal, items), o.raw])}]")


def list_override_problem(args: Sequence[str] | CommandLine) -> str | None:
    """The one-line refusal of the first override giving a list-typed key a scalar; None when there is none.

    Refused: a plain, ``+`` or ``++`` assignment of one scalar (``eval.observations=3``,
    ``++eval.observations=3``, ``...=bogus``; the fix keeps a ``++``, drops a ``+``) and a sweep
    any of whose values is a scalar (``-m eval.observations=3,4``, ``choice(3,4)``,
    ``range(1,3)``: every job would get a scalar), and a quoted list (``'eval.observations="[3]"'``:
    the quotes make it one string; the fix is the list unquoted), and a list (also swept) with an element of another
    type (``eval.observations=[1.5]``). Other lists, ``null``, interpolations, sweeps
    of lists (``[1],[2]``), ``~`` overrides, ``hydra.*`` keys, flags and anything Hydra's
    grammar rejects are left to Hydra and the config checks. A model key is left alone when
    ``model=<name>`` picks a model whose schema lacks it (Hydra names the missing key); with
    no ``model=`` given, the message names the model whose key it is.

    Parameters
    ----------
    args : sequence of str or CommandLine
        The command line after the program name (``sys.argv[1:]``).

    Returns
    -------
    str or None
        ``"eval.observations=3: a list is expected; write eval.observations=[3]"``.
    """
    fields, command = list_fields(), parse(args)
    chosen = {command.model} if command.model else set()  # a swept model: each job's, Hydra's to name
    for o in command.parsed:  # typed: the key to write, with its ++ (a + is refused on a key that exists)
        if (item := _item_problem(command, o, fields)) is not None:
            return item
        override, raw, key, head = o.hydra, o.raw, o.key, f"{o.typed}={o.raw}"
        typed = o.typed[1:] if override.type == OverrideType.ADD else o.typed
        if (key not in fields or override.type == OverrideType.DEL or override.package is not None
                or override.value_type not in (ValueType.ELEMENT, *SWEEPS)):
            continue
        field = fields[key]
        if field.models and chosen and not chosen & field.models:  # e.g. model=mlp model.axes_dim=8
            continue
        # with no model= given the default model may lack the key: name the model it belongs to
        owner = (f" a key of model={'/'.join(sorted(field.models))} (add model={sorted(field.models)[0]} "
                 "unless your experiment picks it);" if field.models and not chosen else "")
        if (bad := _element_problem(o, field, typed, owner)) is not None:  # [1.5], [a]: Hydra named no fix
            return bad
        if dicts := [v for v in (o.values() if o.sweep else [override.value()]) if isinstance(v, dict)]:
            # one line, not Hydra's several-line "Error merging override" (mesh.devices={a:1}, {} too)
            example = _list_example(command, o, field.example)  # a sweep's other values kept
            shown = ",".join(dict.fromkeys(example if isinstance(v, dict) else _as_list(v) for v in o.values())) \
                if o.sweep else example
            return Refusal(f"{head}:{owner} a list is expected, not a dict", f"{typed}={shown}", how="; write e.g. ")
        if o.sweep:
            values = o.values()
            quoted = [_quoted_list(v, field.element) for v in values]
            if any(quoted):  # -m 'eval.observations="[1]","[2]"': every job would get a string
                each = ",".join(q or _as_list(v) for q, v in zip(quoted, values))
                return (f"{head}:{owner} the quotes make {next(filter(None, quoted))} a string, and a list "
                        f"is expected; write {typed}={each} (quote the whole override for the shell: "
                        f"'{typed}={each}')")
            if any(map(_scalar, values)):  # every job would be given that scalar
                each = ",".join(_as_list(v) for v in values)
                flat = _as_list([x for v in values for x in (v if isinstance(v, list) else [v])])
                return (f"{head}:{owner} a sweep of {key} gives each job one value, and a list is "
                        f"expected; write {typed}={each} (one job per value) or {typed}={flat} (one job, one list)")
            continue
        value = override.value()
        if (listed := _quoted_list(value, field.element)) is not None:  # 'eval.observations="[3]"'
            return (f"{head}:{owner} the quotes make {listed} a string, and a list is expected; write "
                    f"{typed}={listed} (quote the whole override for the shell: '{typed}={listed}')")
        if not _scalar(value):
            continue
        shown = value if isinstance(value, str) and raw.strip()[:1] in "'\"" else raw  # "3": [3], not ["3"]
        if key == "model.id_embedding_strategy":
            example = f"[{value},{value}]" if value in ID_STRATEGIES_1D else \
                _list_example(command, o, "absolute,absolute")
            return Refusal(f"{head}:{owner} a list is expected: give two of {', '.join(ID_STRATEGIES_1D)} "
                           "(parameters, observations)", f"{typed}={example}", how=", e.g. ")
        try:  # OmegaConf's own conversion: "3" is an int, true and 1.5 are not (any value is an object)
            ListConfig([value], element_type=typing.Any if field.element is object else field.element)
        except ValidationError:  # [true] would be refused in turn: show a value of the element type
            name = field.element.__name__
            return Refusal(f"{head}:{owner} a list of {name} values is expected and {raw!r} is not one",
                           f"{typed}={_list_example(command, o, field.example)}", how="; write e.g. ")
        return Refusal(f"{head}:{owner} a list is expected", f"{typed}=[{shown}]", how="; write ")
    return None

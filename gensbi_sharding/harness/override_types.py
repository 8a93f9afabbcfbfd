"""launch.py's checks of the values on the command line: ``override_problem`` and ``list_override_problem``.

``override_problem``: a command-line override Hydra refuses without naming the override to type.
Hydra's own messages for these name the key but no fix, or the wrong one: ``train.steps=1.5`` ("could not be
converted to Integer"), ``train.step=5`` ("To append to your config use +train.step=5", which the config check
then refuses), ``model=mlpp`` (the options, no nearest one), and the ``+``/``++``/``~`` overrides of
``override_prefixes`` (``~train.steps``: "does not support deletion"); in a sweep one such value stopped every
job, leaving a sweep folder with only ``multirun.yaml``. The command line as ``override_grammar.parse`` reads it, each key as
``override_keys`` resolves it, before Hydra composes anything. ``list_override_problem``: a scalar where the
schema wants a list (Hydra's "int is not a ListConfig", no fix). Pure Python: no JAX.
"""

from __future__ import annotations

import functools
import math
import typing
from collections.abc import Sequence

from hydra.core.override_parser.types import OverrideType, ValueType
from omegaconf import ListConfig, OmegaConf, ValidationError

from gensbi_sharding.harness.command_defaults import command_default
from gensbi_sharding.harness.config import Config
from gensbi_sharding.harness.hints import closest_name, override_literal
from gensbi_sharding.harness.model_checks import ID_STRATEGIES_1D
from gensbi_sharding.harness.model_choice import chosen_models
from gensbi_sharding.harness.override_prefixes import prefix_problem
from gensbi_sharding.harness.override_grammar import SWEEPS, CommandLine, parse
from gensbi_sharding.harness.override_keys import (group_keys, list_fields, option_groups, options, schema_default,
                                                   schema_name, sections, settings)

__all__ = ["override_problem", "list_override_problem"]


def _value_problem(schema: type, name: str, key: str, value, suggest=None) -> tuple[str, str] | None:
    """Why ``value`` cannot be assigned to field ``name`` of ``schema`` (OmegaConf's reason), and a value to type:
    ``suggest()``'s (the command's composed default), else the schema's default."""
    try:
        OmegaConf.structured(schema)[name] = value
        return None
    except ValidationError as err:
        reason = str(err).strip().splitlines()[0]
    example = override_literal(suggest() if suggest else schema_default(schema, name)[1])
    if value is None:
        return f"{key} cannot be null ({reason})", example
    if isinstance(value, str) and not value.strip():
        return f"{key} cannot be empty ({reason})", example
    if isinstance(value, (list, dict)):
        many = ",".join(map(str, value)) if isinstance(value, list) else ""
        return (f"{key} takes one value, not a {type(value).__name__} ({reason})"
                + (f"; for one job per value, sweep them: -m {key}={many}" if many else ""), example)
    kind = typing.get_type_hints(schema)[name]
    if int in (kind, *typing.get_args(kind)) and isinstance(value, float) and math.isfinite(value):
        return f"{key} takes a whole number ({reason})", str(round(value) or example)
    return f"{key}: {reason}", example


def override_problem(args: Sequence[str] | CommandLine, *, sweeps_need_m: bool = True) -> str | None:
    """The one-line refusal of the first override Hydra would refuse naming no fix (or a wrong one); else None.

    Refused, each naming the override and the one to type: a value a scalar setting cannot take (``1.5``,
    ``null``, an empty string or a list where a whole number is expected; in a sweep, the value that is);
    a misspelled setting written without ``+`` (``train.step=5``: the nearest setting, not Hydra's
    ``+train.step=5``); every ``+``, ``++`` and ``~`` override ``override_prefixes.prefix_problem`` refuses
    (``+train.steps=5``, ``~train.steps``, ``~model``, ``+experiment=quick``); an option no group has
    (``model=mlpp``, also in a sweep: the nearest option). Left to the other checks: list settings
    (``list_override_problem``), interpolations (resolved once composed), ``hydra.*``.

    Parameters
    ----------
    args : sequence of str or CommandLine
        The command line after the program name (``sys.argv[1:]``).
    sweeps_need_m : bool, optional
        True (launch.py): a sweep (``train.steps=1,2``) without ``-m`` is refused naming ``-m`` (Hydra's
        "Ambiguous value" offered a list or a quoted string, which a scalar setting refuses); False for a
        caller that refuses sweeps its own way (the sbibm runner's extra overrides).

    Returns
    -------
    str or None
        E.g. ``"train.steps=1.5: it takes a whole number (Value '1.5' of type 'float' could not be converted to
        Integer); e.g. train.steps=2"``.
    """
    command, typed, lists, groups = parse(args), sections(), list_fields(), option_groups()
    if problem := prefix_problem(command):  # +, ++ and ~ overrides, which launch.py's checks reach first here
        return problem
    choice = chosen_models(command)  # the models this command may run; None where its experiment= is unknown
    chosen = set(choice.models) if choice else None
    for o in command.parsed:
        override, key, arg = o.hydra, o.key, o.arg
        swept = o.sweep or override.value_type == ValueType.GLOB_CHOICE_SWEEP  # glob(...): the group's options
        strings = (list(override.sweep_string_iterator()) if o.sweep
                   else override.value().filter(options(key, command.search_paths) or []) if swept else [])
        shows = [a for a in command.args if a.split("=", 1)[0] in ("-c", "--cfg", "-i", "--info", "-h", "--help")]
        if swept and sweeps_need_m and not key.startswith("hydra") and shows:  # Hydra composes one config for
            # them (with -m or a preset's multirun too): its "Ambiguous value", a traceback under --help
            return (f"{arg}: Hydra composes one job's config for {shows[0]}, and several values are a sweep; give "
                    f"{key} one value" + (f", e.g. {key}={strings[0]}" if strings else "") + f", or leave out {shows[0]}")
        if swept and sweeps_need_m and not command.multirun and not key.startswith("hydra"):
            # Hydra's "Ambiguous value" offered a list and a quoted string too, which a scalar setting refuses.
            listed = (f", or one list for this run: {key}=[{','.join(strings)}]"
                      if o.sweep and (key in lists or key.split(".", 1)[0] in ("rule", "activation")) else "")
            return (f"{arg}: several values are a sweep, one job per value, which needs -m: python launch.py -m "
                    f"... {arg}{listed}")
        if key.startswith("hydra") or override.package is not None or key in lists:
            continue
        section, _, name = key.partition(".")
        if override.type not in (OverrideType.CHANGE, OverrideType.FORCE_ADD):  # + and ~: prefix_problem's
            continue
        if section in groups and not name:
            if (problem := _option_problem(o, section, options(section, command.search_paths))) is not None:
                return problem
            continue
        top = not name and section not in groups  # a top-level setting: seed, strict, dry_run, ...
        if top:
            section, name = "", section
        elif section not in typed or "." in name:
            continue
        schemas = [Config] if top else [s for s in typed[section] if section != "model" or (
            chosen is not None and schema_name(s) in chosen)]
        fields = sorted(group_keys([section] if section else [], None))  # another model's: model_key_problem's
        if name not in fields:  # listed and matched against the model(s) it sets, as unknown_key_problem does
            fields = sorted(group_keys([section] if section else [], chosen))
            near = closest_name(name, fields)
            of = f" of {choice.label}" if section == "model" and choice else f" of {section}" if section else ""
            dotted = f"{section}.{near}" if section else near
            return (f"{arg}: {key} is not a setting{of}" + (f" (did you mean {dotted}?)" if near else "")
                    + f"; its settings: {', '.join(f for f in fields if f != 'name' or section != 'model')}"
                    + (f"; write {dotted}={o.raw}" if near else ""))
        strings = list(override.sweep_string_iterator()) if override.value_type == ValueType.SIMPLE_CHOICE_SWEEP \
            else None
        candidates = [s for s in schemas if name in settings(s)]
        if section == "model" and chosen is None:  # a swept experiment= (each job its model): Hydra's multi-line
            having = [s for s in typed["model"] if name in settings(s)]  # error composing the sweep, no fix named
            plain = [v for v in o.values() if not (isinstance(v, str) and "${" in v)]
            if having and any(all(_value_problem(s, name, key, v) for s in having) for v in plain):
                candidates = having[:1]  # a value no model's field takes
        for schema in candidates:
            for i, value in enumerate(o.values()):
                if isinstance(value, str) and "${" in value:  # resolved once composed: its own check
                    continue
                # the value the command's own groups compose (experiment=quick: train.steps=20), not the schema's
                suggest = functools.partial(command_default, command, o, schema, key)
                if (problem := _value_problem(schema, name, key, value, suggest)) is not None:
                    why, fix = problem
                    of = f" (model={schema_name(schema)})" if section == "model" and chosen is not None else ""
                    if strings:  # the sweep with that one value replaced
                        shown = f"the swept value {strings[i]}: "
                        fix = ",".join(fix if j == i else text for j, text in enumerate(strings))
                    else:
                        shown = ""
                    return f"{arg}: {shown}{why.replace(key, key + of, 1)}; e.g. {key}={fix}"
    return None


def _option_problem(o, group: str, choices: list[str] | None) -> str | None:
    """``model=mlpp`` (also one value of a sweep): the group's options and the nearest one; None where every
    value is an option, an interpolation, or ``choices`` is None (a ``pkg://`` search path: Hydra's to list)."""
    for value in o.values() if choices is not None else ():
        if isinstance(value, str) and "${" not in value and value not in choices:
            near = closest_name(value, choices)
            return (f"{o.arg}: Could not find '{group}/{value}' ({group} options: {', '.join(choices)})"
                    + (f"; did you mean {group}={near}?" if near else f"; pick one, e.g. {group}={choices[0]}"))
    return None


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
        ListConfig(parse([f"key={value.strip()}"]).overrides[0].hydra.value(), element_type=typing.Any if element is object else element)
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
        return (f"{o.typed}={o.raw}:{owner} {field.element.__name__} values are expected and "
                f"'{override_literal(bad)}' is not one; write e.g. {typed}={shown}")
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
            example = f"[{value},{value}]" if value in ID_STRATEGIES_1D else _list_example(command, o, "absolute,absolute")
            return (f"{head}:{owner} a list is expected: give two of {', '.join(ID_STRATEGIES_1D)} "
                    f"(parameters, observations), e.g. {typed}={example}")
        try:  # OmegaConf's own conversion: "3" is an int, true and 1.5 are not (any value is an object)
            ListConfig([value], element_type=typing.Any if field.element is object else field.element)
        except ValidationError:  # [true] would be refused in turn: show a value of the element type
            name = field.element.__name__
            return (f"{head}:{owner} a list of {name} values is expected and {raw!r} is not one; "
                    f"write e.g. {typed}={_list_example(command, o, field.example)}")
        return f"{head}:{owner} a list is expected; write {typed}=[{shown}]"
    return None

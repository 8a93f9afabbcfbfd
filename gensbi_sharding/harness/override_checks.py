"""launch.py's checks of the keys on the command line against the typed config, before Hydra composes it.

``unknown_key_problem``: a mistyped key (``mesh.modle_axis=2``), named with the key it likely meant (Hydra's
"Key 'modle_axis' not in 'MeshConfig'" listed no key, and advised ``+mesh.modle_axis=2``, which
``config_checks`` refuses in turn). ``model_key_problem``: a ``model.<field>`` the model(s) it would be applied
to lack (a sweep over models: Hydra composes its first config with the default model and stopped there, or
stopped at a later job's composition after the ones before it ran). ``list_override_problem``: a scalar where
the schema wants a list (Hydra's "int is not a ListConfig", no fix). Each reads the command line as
``override_grammar.parse`` reads it and the keys as ``config_schema`` resolves them. Pure Python: no JAX.
"""

from __future__ import annotations

import typing
from collections.abc import Sequence

from hydra.core.override_parser.types import OverrideType, ValueType
from omegaconf import ListConfig, ValidationError

from gensbi_sharding.harness.config_schema import (default_model, experiment_model, group_keys, list_fields,
                                                   model_fields)
from gensbi_sharding.harness.hints import closest_name
from gensbi_sharding.harness.model_checks import ID_STRATEGIES_1D
from gensbi_sharding.harness.override_grammar import SWEEPS, CommandLine, parse

__all__ = ["unknown_key_problem", "model_key_problem", "list_override_problem"]


def unknown_key_problem(args: Sequence[str] | CommandLine) -> str | None:
    """The one-line refusal of the first override of a key its group lacks; None when there is none.

    Checked: plain and swept assignments of a dotted key under a group with a schema (``mesh.modle_axis=2``,
    ``-m train.stpes=10,20``); a ``model.*`` key against the model ``model=`` picks (else every model's).
    Left to Hydra: ``+``/``++``/``~`` overrides (adding or deleting a key is asked for), ``hydra.*``, the rule
    table (any logical axis may be set), group choices and flags.

    Parameters
    ----------
    args : sequence of str or CommandLine
        The command line after the program name (``sys.argv[1:]``).

    Returns
    -------
    str or None
        E.g. ``"mesh.modle_axis is not a setting of mesh (did you mean mesh.model_axis?); its settings: spec,
        model_axis, devices; set mesh.model_axis=2"``.
    """
    command = parse(args)
    chosen = command.model_override.raw if command.model_override else None  # a sweep's: every model's keys
    for o in command.overrides:
        key, value, parts = o.typed, o.raw, o.typed.split(".")
        if key.startswith(("+", "~")) or "=" not in o.arg or len(parts) < 2 or parts[0] == "hydra" or "/" in key:
            continue
        keys = group_keys(parts[:-1], chosen)
        if keys is None or parts[-1] in keys:
            continue
        group = ".".join(parts[:-1])
        shown = ", ".join(k for k in keys if not (parts[0] == "model" and k == "name"))  # model=: the registry's
        if parts[0] == "model" and chosen and len(parts) == 2:  # another model's key: name that model
            owners = sorted(name for name, fields in model_fields().items() if parts[-1] in fields)
            if owners:
                return (f"{key} is a setting of model={' or model='.join(owners)}, not of model={chosen}; its "
                        f"settings: {shown}")
        of = f"model={chosen}" if parts[0] == "model" and chosen else group
        near = closest_name(parts[-1], keys)
        return (f"{key} is not a setting of {of}" + (f" (did you mean {group}.{near}?)" if near else "")
                + f"; its settings: {shown}"
                + (f"; set {group}.{near}={value}" if near else ""))
    return None


def model_key_problem(args: Sequence[str] | CommandLine) -> str | None:
    """The one-line refusal of the first ``model.<field>`` override the chosen model(s) lack; None when none does.

    The models are those ``model=`` names (each swept one), else the default model when no
    ``experiment=`` (which may pick another) is given. A field no model has is a typo that
    Hydra names; a model this harness does not know (a preset of one's own) is not checked.

    Parameters
    ----------
    args : sequence of str or CommandLine
        The command line after the program name (``sys.argv[1:]``).

    Returns
    -------
    str or None
        ``"model.num_heads=2: ... write 'model.num_heads=choice(2)' ..."``.
    """
    command = parse(args)
    fields = model_fields()
    experiments = [o for o in command.parsed if o.key == "experiment" and o.hydra.type != OverrideType.DEL]
    if any(o.hydra.is_sweep_override() for o in experiments):
        return None  # each job's experiment may pick another model
    picked = experiment_model(str(experiments[-1].hydra.value())) if experiments else None
    base = None if picked == "?" else picked or default_model()  # the model of the config before model= is applied
    swept = command.models if command.model is None else []
    if command.models:
        chosen, given = command.models, True
    elif base is None:
        return None  # an experiment this check cannot read may pick the model
    else:
        chosen, given = [base], picked is not None
    for o in command.parsed:
        key, typed, raw = o.key, o.typed, o.raw
        if not key.startswith("model.") or o.hydra.type == OverrideType.DEL or o.hydra.package is not None:
            continue
        field = key.split(".")[1]
        owners = sorted(m for m, f in fields.items() if field in f)
        lacking = [m for m in chosen if m in fields and field not in fields[m]]
        if not owners:
            return None  # a typo: Hydra names the key
        if lacking and not swept:
            fix = (f"set model={owners[0]} for it, or drop {typed}={raw}" if given else
                   f"add model={owners[0]}, whose section it then sets")
            return (f"{typed}={raw}: model={lacking[0]}{'' if given else ' (the default)'} has no field {field}; "
                    f"model={', model='.join(owners)} {'has' if len(owners) == 1 else 'have'} it: {fix}")
        if lacking:
            having = [m for m in swept if m not in lacking]
            fix = (f"sweep model={','.join(having)} with it and model={','.join(lacking)} in a sweep of its own"
                   if having else f"drop {typed}={raw}, or sweep model={','.join(owners)}")
            return (f"{typed}={raw}: model={', model='.join(lacking)} of this sweep "
                    f"{'has' if len(lacking) == 1 else 'have'} no field {field} (a field "
                    f"of model={', model='.join(owners)}), so its jobs would stop at composition after the others "
                    f"ran; {fix}")
        if swept and base in fields and field not in fields[base] and not o.hydra.is_sweep_override():
            return (f"{typed}={raw}: Hydra composes a sweep's first config with the default model (model={base}), "
                    f"which has no field {field}, before each job loads model={','.join(swept)}; sweep it as one "
                    f"value, which only the jobs get: '{typed}=choice({raw})'")
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


def _as_list(value) -> str:
    """A swept value written as the list a job should get: ``3`` -> ``[3]``, ``[1,2]`` -> ``[1,2]``."""
    inner = value if isinstance(value, list) else [value]
    return "[" + ",".join(map(str, inner)) + "]"


def list_override_problem(args: Sequence[str] | CommandLine) -> str | None:
    """The one-line refusal of the first override giving a list-typed key a scalar; None when there is none.

    Refused: a plain, ``+`` or ``++`` assignment of one scalar (``eval.observations=3``,
    ``++eval.observations=3``, ``...=bogus``; the fix keeps the prefix typed) and a sweep
    any of whose values is a scalar (``-m eval.observations=3,4``, ``choice(3,4)``,
    ``range(1,3)``: every job would get a scalar), and a quoted list (``'eval.observations="[3]"'``:
    the quotes make it one string; the fix is the list unquoted). Lists, ``null``, interpolations, sweeps
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
    for o in command.parsed:  # typed: the key as written, with its + or ++
        override, typed, raw, key = o.hydra, o.typed, o.raw, o.key
        if (key not in fields or override.type == OverrideType.DEL or override.package is not None
                or override.value_type not in (ValueType.ELEMENT, *SWEEPS)):
            continue
        field = fields[key]
        if field.models and chosen and not chosen & field.models:  # e.g. model=mlp model.axes_dim=8
            continue
        # with no model= given the default model may lack the key: name the model it belongs to
        owner = (f" a key of model={'/'.join(sorted(field.models))} (add model={sorted(field.models)[0]} "
                 "unless your experiment picks it);" if field.models and not chosen else "")
        if o.sweep:
            values = o.values()
            quoted = [_quoted_list(v, field.element) for v in values]
            if any(quoted):  # -m 'eval.observations="[1]","[2]"': every job would get a string
                each = ",".join(q or _as_list(v) for q, v in zip(quoted, values))
                return (f"{typed}={raw}:{owner} the quotes make {next(filter(None, quoted))} a string, and a list "
                        f"is expected; write {typed}={each} (quote the whole override for the shell: "
                        f"'{typed}={each}')")
            if any(map(_scalar, values)):  # every job would be given that scalar
                each = ",".join(_as_list(v) for v in values)
                flat = _as_list([x for v in values for x in (v if isinstance(v, list) else [v])])
                return (f"{typed}={raw}:{owner} a sweep of {key} gives each job one value, and a list is "
                        f"expected; write {typed}={each} (one job per value) or {typed}={flat} (one job, one list)")
            continue
        value = override.value()
        if (listed := _quoted_list(value, field.element)) is not None:  # 'eval.observations="[3]"'
            return (f"{typed}={raw}:{owner} the quotes make {listed} a string, and a list is expected; write "
                    f"{typed}={listed} (quote the whole override for the shell: '{typed}={listed}')")
        if not _scalar(value):
            continue
        shown = value if isinstance(value, str) and raw.strip()[:1] in "'\"" else raw  # "3": [3], not ["3"]
        if key == "model.id_embedding_strategy":
            strategy = value if value in ID_STRATEGIES_1D else "absolute"
            return (f"{typed}={raw}:{owner} a list is expected: give two of {', '.join(ID_STRATEGIES_1D)} "
                    f"(parameters, observations), e.g. {typed}=[{strategy},{strategy}]")
        try:  # OmegaConf's own conversion: "3" is an int, true and 1.5 are not (any value is an object)
            ListConfig([value], element_type=typing.Any if field.element is object else field.element)
        except ValidationError:  # [true] would be refused in turn: show a value of the element type
            name = field.element.__name__
            return (f"{typed}={raw}:{owner} a list of {name} values is expected and {raw!r} is not one; "
                    f"write e.g. {typed}=[{field.example}]")
        return f"{typed}={raw}:{owner} a list is expected; write {typed}=[{shown}]"
    return None


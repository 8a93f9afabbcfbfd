"""Where a command-line key lands in the config before Hydra composes it, and launch.py's checks of the keys.

The one walk of ``harness/config.py``'s typed dataclasses (every model schema: the model is picked at compose time)
and of ``conf/``'s option files (and ``hydra.searchpath``'s ``file://`` folders), shared by every override check and
``config_values``: a new field or option is covered as it is added. ``unknown_key_problem``: a mistyped key
(``mesh.modle_axis=2``) named with the key it likely meant (Hydra listed none, and advised ``+mesh.modle_axis=2``,
which ``config_checks`` refuses); ``model_key_problem``: a ``model.<field>`` the model(s) it is applied to lack (a
sweep's Hydra stopped at the first config, or at a later job's after the ones before ran). Pure Python: no JAX.
"""

from __future__ import annotations

import dataclasses
import functools
import typing
from collections.abc import Sequence
from pathlib import Path

from hydra.core.override_parser.types import OverrideType
from omegaconf import OmegaConf

from gensbi_sharding.harness.config import Config, ModelConfig, model_schema_classes, type_hints
from gensbi_sharding.harness.groups import CONF, group_options
from gensbi_sharding.harness.hints import closest_name
from gensbi_sharding.harness.key_paths import data_axis_hint, nearest_setting, setting_path_problem, unknown_part
from gensbi_sharding.harness.model_choice import chosen_models, default_model, experiment_model
from gensbi_sharding.harness.override_grammar import CommandLine, parse
from gensbi_sharding.harness.refusal import Refusal
from gensbi_sharding.harness.rule_config import other_name_problem
from gensbi_sharding.rules import LOGICAL_AXES

__all__ = ["OPTIONAL_GROUPS", "ListField", "schema_name", "model_schemas", "sections", "settings", "option_groups",
           "group_keys", "schema_default", "list_fields", "model_fields", "options", "unknown_key_problem",
           "model_key_problem"]

#: Groups a run may leave unchosen (``- optional ...`` in conf/config.yaml): removing one is Hydra's to judge.
OPTIONAL_GROUPS = ("experiment", "sweep")


class ListField(typing.NamedTuple):
    """A list-typed key: its element type, a value of it to show, and the model names whose schema has it."""

    element: type
    example: str
    models: frozenset


def schema_name(schema: type) -> str | None:
    """The model a schema builds, its ``name`` default (``MLPConfig`` -> "mlp"); None where it has none."""
    name = next((f.default for f in dataclasses.fields(schema) if f.name == "name"), None)
    return name if isinstance(name, str) and name not in ("???", "") else None


def model_schemas() -> dict[str, type]:
    """Every model schema by the model it builds (``config.model_schema_classes``): ``{"mlp": MLPConfig, ...}``, the
    last defined first (the order the checks take their examples in: ``e.g. model.depth=2``, simformer's)."""
    return {name: schema for schema in reversed(model_schema_classes()) if (name := schema_name(schema)) is not None}


def sections() -> dict[str, list[type]]:
    """Each typed section's schemas: ``{"train": [TrainConfig], "model": [every model schema], ...}``."""
    hints = type_hints(Config)  # config.py's annotations are strings (postponed evaluation)
    return {f.name: list(model_schemas().values()) if hints[f.name] is ModelConfig else [hints[f.name]]
            for f in dataclasses.fields(Config) if dataclasses.is_dataclass(hints[f.name])}


def settings(schema: type) -> list[str]:
    """A schema's settings, as declared: its fields that are no group of their own (a section, the rule table);
    ``settings(Config)``: debug, dry_run, seed, ... (top-level)."""
    hints = type_hints(schema)  # config.py's annotations are strings (postponed evaluation)
    return [f.name for f in dataclasses.fields(schema)
            if not dataclasses.is_dataclass(hints[f.name]) and typing.get_origin(hints[f.name]) is not dict]


def model_fields() -> dict[str, set[str]]:
    """Each model's settings, by the model's name: ``{"mlp": {"name", "init", "width", ...}, "flux1": ...}``."""
    return {name: set(settings(schema)) for name, schema in model_schemas().items()}


def option_groups() -> list[str]:
    """The groups with options in ``conf/`` a command line picks from (``model``, ..., ``experiment``, ``sweep``)."""
    return [g for g in [f.name for f in dataclasses.fields(Config)] + list(OPTIONAL_GROUPS) if group_options(g)]


def group_keys(path: Sequence[str], model: str | Sequence[str] | None) -> tuple[str, ...] | None:
    """The keys the group at ``path`` holds (``["mesh"]`` -> spec, model_axis, devices, as declared; ``["rule"]`` ->
    name and the logical axes); None where the path is no group (unknown: Hydra names it; a scalar).

    Under ``model`` (a model's name, or several: ``chosen_models``) the keys of that model (as declared) or
    those models (sorted); else every model's, sorted.
    """
    schemas: list[type] = [Config]
    for i, part in enumerate(path):
        hints = type_hints(schemas[0])
        if part not in hints:
            return None
        if typing.get_origin(hints[part]) is dict:  # the rule table: its label and the logical axes
            return ("name", *LOGICAL_AXES) if i == len(path) - 1 else None
        if hints[part] is ModelConfig:
            named, picked = model_schemas(), [model] if isinstance(model, str) else list(model or ())
            schemas = [named[m] for m in picked] if picked and set(picked) <= set(named) else list(named.values())
        elif dataclasses.is_dataclass(hints[part]):
            schemas = [hints[part]]
        else:
            return None
    if len(schemas) == 1:
        return tuple(settings(schemas[0]))
    return tuple(sorted({name for schema in schemas for name in settings(schema)}))


def schema_default(schema: type, name: str) -> tuple[bool, typing.Any]:
    """The default of field ``name`` of the typed schema ``schema``: the one place a check reads it, to name it as
    the value to type (``override_literal`` writes it: ``null``, ``true``, ``[8,0]``).

    Parameters
    ----------
    schema : type
        A dataclass of ``harness/config.py`` (``TrainConfig``, ``Flux1Config``, ``Config`` for top-level settings).
    name : str
        One of its fields.

    Returns
    -------
    tuple of (bool, Any)
        ``(True, default)`` (a ``default_factory``'s value for a list); ``(False, None)`` where there is none:
        ``schema`` is no dataclass or lacks ``name``, or the field is required (``???``).
    """
    f = {f.name: f for f in dataclasses.fields(schema)}.get(name) if dataclasses.is_dataclass(schema) else None
    value = dataclasses.MISSING if f is None else f.default if f.default_factory is dataclasses.MISSING \
        else f.default_factory()
    if value is dataclasses.MISSING or isinstance(value, str) and value == "???":  # ???: OmegaConf's required
        return False, None
    return True, value


def _list_element(hint) -> type | None:
    """The element type of ``List[T]`` or ``Optional[List[T]]`` (``Any`` as ``object``); None for other types."""
    options = typing.get_args(hint) if typing.get_origin(hint) is typing.Union else (hint,)
    for option in options:
        if typing.get_origin(option) is list:
            element = (typing.get_args(option) or (object,))[0]
            return element if isinstance(element, type) else object
    return None


def list_fields() -> dict[str, ListField]:
    """The dotted keys whose schema type is a list (``List[T]``, ``Optional[List[T]]``).

    Returns
    -------
    dict of str to ListField
        ``{"eval.observations": ListField(int, "1", frozenset()), "model.axes_dim": ListField(int, "8,0",
        frozenset({"flux1"})), ...}``: the example is the schema's default (else 1 or x); the model names are empty
        outside the model group. A new dict each call; the walk is made once per set of model schemas.
    """
    return dict(_list_fields(tuple(model_schema_classes())))


@functools.cache  # the checks ask for it per override and per check (was ~5 % of their CPU)
def _list_fields(classes: tuple[type, ...]) -> dict[str, ListField]:
    found: dict[str, ListField] = {}
    for section, schemas in [("", [Config]), *sections().items()]:
        for schema in schemas:
            hints = type_hints(schema)
            names = frozenset({schema_name(schema)}) if section == "model" else frozenset()
            for f in dataclasses.fields(schema):
                if (element := _list_element(hints[f.name])) is None:
                    continue
                key, default = f"{section}.{f.name}" if section else f.name, schema_default(schema, f.name)[1]
                example = ",".join(map(str, default)) if default else {int: "1", float: "1.0"}.get(element, "x")
                found[key] = ListField(element, example, names | (found[key].models if key in found else frozenset()))
    return found


def options(group: str, search_paths: Sequence[str] = ()) -> list[str] | None:
    """The options of ``group``, sorted: ``conf/``'s and those in the ``file://`` folders of ``hydra.searchpath``
    (a preset of one's own, ``model=my_flux1``); None where a search path is not a folder (``pkg://``: Hydra's)."""
    found = set(group_options(group))
    for entry in search_paths:
        if not entry.startswith("file://"):
            return None
        found |= {p.stem for p in (Path(entry[len("file://"):]) / group).glob("*.yaml")}
    return sorted(found)


def unknown_key_problem(args: Sequence[str] | CommandLine) -> str | None:
    """The one-line refusal of the first override of a key its group lacks; None when there is none.

    Checked: plain and swept assignments of a dotted key under a group with a schema (``mesh.modle_axis=2``,
    ``-m train.stpes=10,20``); a ``model.*`` key against the model(s) it sets (``chosen_models``: ``model=``'s,
    else the experiment's or the default's), whose settings are listed and the nearest named; another model's
    setting names that model where ``model=`` is typed (else ``model_key_problem`` names it); a part deeper in
    (``mesh.shape.model=2``, ``train.steps.x=1``: ``key_paths``). Left to others: ``+``/``++``/``~`` overrides
    (``override_prefixes``), ``hydra.*``, group choices and flags. The rule table's keys are its ``name`` and the
    logical axes (``rule.embedd=data``: Hydra advised ``+rule.embedd=data``, refused by the config check in turn).

    Parameters
    ----------
    args : sequence of str or CommandLine
        The command line after the program name (``sys.argv[1:]``).

    Returns
    -------
    str or None
        E.g. ``"mesh.modle_axis is not a setting of mesh (did you mean mesh.model_axis?); ...; set mesh.model_axis=2"``.
    """
    command, fields = parse(args), model_fields()
    choice = chosen_models(command)
    known = choice is not None and set(choice.models) <= set(fields)  # a preset of one's own: any model's keys
    for o in command.overrides:
        key, value, parts = o.typed, o.raw, o.typed.split(".")
        if key.startswith(("+", "~")) or "=" not in o.arg or len(parts) < 2 or parts[0] == "hydra" or "/" in key:
            continue
        keys, below, typed = group_keys(parts[:-1], models := choice.models if known else None), [], ""
        if keys is None and (found := unknown_part(parts, lambda path: group_keys(path, models), list_fields())):  # mesh.shape.x
            if (keys := found[1]) is None:  # train.steps.x=1
                return setting_path_problem(o.arg, parts[:found[0] + 1], value, list_fields())
            below, parts, typed, key = parts[found[0] + 1:], parts[:found[0] + 1], f"{o.arg}: ", ".".join(parts[:found[0] + 1])
        if keys is None or parts[-1] in keys:
            continue
        group, of_model = ".".join(parts[:-1]), parts[0] == "model" and len(parts) == 2 and known
        shown = ", ".join(k for k in keys if not (parts[0] == "model" and k == "name"))  # model=: the registry's
        if of_model and (owners := sorted(m for m, f in fields.items() if parts[-1] in f)):
            if not choice.given:
                continue  # model_key_problem names the model to add (an experiment's file may hold its own keys)
            return f"{typed}{key} is a setting of model={' or model='.join(owners)}, not of {choice.label}; its settings: {shown}"
        if parts[0] == "rule" and len(parts) == 2 and not below and o.hydra is not None and o.values() and all(
                other_name_problem(parts[1], v) is None for v in o.values()):  # as the library's tables take it
            return f"{key} is no key of the rule table ({shown}); add another name declared unsplit: +{key}={value}"
        meant = f" (did you mean {group}.{near}?)" if (near := nearest_setting(parts[-1], below, keys)) else ""
        if of_model and not near and (near := closest_name(parts[-1], sorted(set().union(*fields.values())))):
            meant = (f" (did you mean {group}.{near}, a setting of model="
                     f"{' or model='.join(sorted(m for m, f in fields.items() if near in f))}?)")
            near = None  # that model's, not this one's: no override to set here
        hint = data_axis_hint(parts[-1], value, command) if key.startswith("mesh.") and not below else None
        said = f"{typed}{key} is not a setting of {choice.label if of_model else group}{meant}; its settings: {shown}"
        return said + hint if hint is not None else Refusal(said, f"{group}.{near}={value}" if near else None)
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
    base = None if picked == "?" else picked or default_model(command.args)  # the model of the config before model= is applied
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
            plain = f" (and write {key}={raw}: + is refused on a key that exists)" if o.hydra.type == OverrideType.ADD \
                else ""
            fix = (f"set model={owners[0]} for it{plain}, or drop {typed}={raw}" if given else
                   f"add model={owners[0]}, whose section it then sets{plain}")
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

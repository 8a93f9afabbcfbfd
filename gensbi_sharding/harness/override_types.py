"""``override_problem(args)``: a command-line override Hydra refuses without naming the override to type.

Hydra's own messages for these name the key but no fix, or the wrong one: ``train.steps=1.5`` ("could not be
converted to Integer"), ``train.step=5`` ("To append to your config use +train.step=5", which the config check
then refuses), ``~train.steps`` ("does not support deletion"), ``~model`` (an interpolation error),
``model=mlpp`` (the options, no nearest one); in a sweep one such value stopped every job, leaving a sweep
folder with only ``multirun.yaml``. Read from the typed dataclasses of ``harness/config.py`` (every model
schema) and the option files of ``conf/``, before Hydra composes anything. Pure Python: no JAX.
"""

from __future__ import annotations

import dataclasses
import math
import typing
from collections.abc import Sequence
from pathlib import Path

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import OverrideType, QuotedString, ValueType
from omegaconf import OmegaConf, ValidationError

from gensbi_sharding.harness.config import Config, ModelConfig
from gensbi_sharding.harness.groups import CONF, group_options
from gensbi_sharding.harness.hints import closest_name
from gensbi_sharding.harness.override_checks import list_fields

__all__ = ["override_problem"]

#: Groups a run may leave unchosen (``- optional ...`` in conf/config.yaml): removing one is Hydra's to judge.
OPTIONAL_GROUPS = ("experiment", "sweep")
_SWEEPS = (ValueType.SIMPLE_CHOICE_SWEEP, ValueType.CHOICE_SWEEP, ValueType.RANGE_SWEEP)


def _sections() -> dict[str, list[type]]:
    """Each typed section's schemas: ``{"train": [TrainConfig], "model": [MLPConfig, ...], ...}``."""
    hints = typing.get_type_hints(Config)
    found = {}
    for f in dataclasses.fields(Config):
        if dataclasses.is_dataclass(hints[f.name]):
            schema = hints[f.name]
            subclasses, todo = [], [schema]
            while todo:  # the model group: every model's own schema
                subclasses.append(todo.pop())
                todo.extend(subclasses[-1].__subclasses__())
            found[f.name] = [s for s in subclasses if s is not ModelConfig or len(subclasses) == 1]
    return found


def _default(schema: type, name: str) -> str:
    """The schema's default of ``name`` as an override writes it (``null``, ``true``, ``[8,0]``)."""
    f = next(f for f in dataclasses.fields(schema) if f.name == name)
    value = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
    return OmegaConf.to_yaml({"v": value}).strip()[3:].replace(", ", ",").replace("'", "") if value is not None \
        else "null"


def _value_problem(schema: type, name: str, key: str, value) -> tuple[str, str] | None:
    """Why ``value`` cannot be assigned to field ``name`` of ``schema`` (OmegaConf's reason), and a value to type."""
    try:
        OmegaConf.structured(schema)[name] = value
        return None
    except ValidationError as err:
        reason = str(err).strip().splitlines()[0]
    example, kind = _default(schema, name), typing.get_type_hints(schema)[name]
    if value is None:
        return f"{key} cannot be null ({reason})", example
    if isinstance(value, str) and not value.strip():
        return f"{key} cannot be empty ({reason})", example
    if isinstance(value, (list, dict)):
        many = ",".join(map(str, value)) if isinstance(value, list) else ""
        return (f"{key} takes one value, not a {type(value).__name__} ({reason})"
                + (f"; for one job per value, sweep them: -m {key}={many}" if many else ""), example)
    if int in (kind, *typing.get_args(kind)) and isinstance(value, float) and math.isfinite(value):
        return f"{key} takes a whole number ({reason})", str(round(value) or example)
    return f"{key}: {reason}", example


def _text(value):
    return value.text if isinstance(value, QuotedString) else value


def override_problem(args: Sequence[str], *, sweeps_need_m: bool = True) -> str | None:
    """The one-line refusal of the first override Hydra would refuse naming no fix (or a wrong one); else None.

    Refused, each naming the override and the one to type: a value a scalar setting cannot take (``1.5``,
    ``null``, an empty string or a list where a whole number is expected; in a sweep, the value that is);
    a misspelled setting written without ``+`` (``train.step=5``: the nearest setting, not Hydra's
    ``+train.step=5``); ``~`` removing a setting or a group every run needs (``~train.steps``, ``~model``,
    ``~rule.embed``: what to set instead); an option no group has (``model=mlpp``, also in a sweep: the
    nearest option). Left to the other checks: list settings (``list_override_problem``), ``+``/``++``
    additions (the config check names them), interpolations (resolved once composed), ``hydra.*``.

    Parameters
    ----------
    args : sequence of str
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
    sections, lists, parser = _sections(), list_fields(), OverridesParser.create()
    groups = [g for g in [f.name for f in dataclasses.fields(Config)] + list(OPTIONAL_GROUPS) if group_options(g)]
    overrides = []
    for arg in args:
        if "=" not in arg and not arg.startswith("~") or arg.startswith("-"):  # flags and their values
            continue
        try:
            overrides.append((parser.parse_override(arg), arg))
        except Exception:  # not Hydra's grammar: grammar_problem or Hydra names it
            continue
    chosen = _chosen_models(overrides)
    # -m, or a preset that turns multirun on itself (sweep=..., experiment=sbibm: Hydra's to read)
    multirun = any(a in ("-m", "--multirun") or a.startswith(("hydra.mode=", "sweep=", "experiment=")) for a in args)
    for override, arg in overrides:
        key = override.key_or_group
        if override.value_type in _SWEEPS and sweeps_need_m and not multirun and not key.startswith("hydra"):
            # Hydra's "Ambiguous value" offered a list and a quoted string too, which a scalar setting refuses.
            listed = (f", or one list for this run: {key}=[{','.join(override.sweep_string_iterator())}]"
                      if key in lists or section_of(key) in ("rule", "activation") else "")
            return (f"{arg}: several values are a sweep, one job per value, which needs -m: python launch.py -m "
                    f"... {arg}{listed}")
        if key.startswith("hydra") or override.package is not None or key in lists:
            continue
        section, _, name = key.partition(".")
        if override.type == OverrideType.DEL:
            if problem := _deletion_problem(arg, section, name, sections, groups):
                return problem
            continue
        if override.type == OverrideType.ADD and not name and section in groups and section not in OPTIONAL_GROUPS:
            # Hydra: "Multiple values for model. To override a value use 'override model: transformer'" (YAML)
            return (f"{arg}: every run has a {section} already (conf/config.yaml picks one), so + adds a second; "
                    f"to pick this one, write {arg.lstrip('+')}")
        if override.type not in (OverrideType.CHANGE, OverrideType.FORCE_ADD):  # +: the config check names a key
            continue
        values = ([_text(v) for v in override.sweep_iterator()] if override.value_type in _SWEEPS
                  else [override.value()] if override.value_type == ValueType.ELEMENT else [])
        if section in groups and not name:
            searched = _searched_options(overrides, section)
            if searched is None:  # a pkg:// search path: its options are Hydra's to list
                continue
            options = sorted(set(group_options(section)) | searched)
            for value in values:
                if isinstance(value, str) and "${" not in value and value not in options:
                    near = closest_name(value, options)
                    return (f"{arg}: Could not find '{section}/{value}' ({section} options: {', '.join(options)})"
                            + (f"; did you mean {section}={near}?" if near else f"; pick one, e.g. "
                               f"{section}={options[0]}"))
            continue
        if not name and section not in groups:  # a top-level setting: seed, strict, dry_run, ...
            section, name, top = "", section, True
        else:
            top = False
        if not top and (section not in sections or "." in name):
            continue
        schemas = [Config] if top else [s for s in sections[section] if section != "model" or (
            chosen is not None and _model_name(s) in chosen)]
        fields = sorted({f.name for s in ([Config] if top else sections[section]) for f in dataclasses.fields(s)
                         if top or not dataclasses.is_dataclass(typing.get_type_hints(s)[f.name])})
        if top:
            fields = [f for f in fields if f not in sections and f != "rule"]
        if name not in fields and override.type == OverrideType.FORCE_ADD:  # ++: the config check names it
            continue
        if name not in fields:
            near, of = closest_name(name, fields), f" of {section}" if section else ""
            dotted = f"{section}.{near}" if section else near
            return (f"{arg}: {key} is not a setting{of}" + (f" (did you mean {dotted}?)" if near else "")
                    + f"; its settings: {', '.join(f for f in fields if f != 'name')}"
                    + (f"; write {dotted}={arg.split('=', 1)[1]}" if near else ""))
        strings = list(override.sweep_string_iterator()) if override.value_type == ValueType.SIMPLE_CHOICE_SWEEP \
            else None
        for schema in (s for s in schemas if name in {f.name for f in dataclasses.fields(s)}):
            for i, value in enumerate(values):
                if isinstance(value, str) and "${" in value:  # resolved once composed: its own check
                    continue
                if (problem := _value_problem(schema, name, key, value)) is not None:
                    why, fix = problem
                    of = f" (model={_model_name(schema)})" if section == "model" else ""
                    if strings:  # the sweep with that one value replaced
                        shown = f"the swept value {strings[i]}: "
                        fix = ",".join(fix if j == i else text for j, text in enumerate(strings))
                    else:
                        shown = ""
                    return f"{arg}: {shown}{why.replace(key, key + of, 1)}; e.g. {key}={fix}"
    return None


def _searched_options(overrides: list, group: str) -> set[str] | None:
    """The options of ``group`` in the folders ``hydra.searchpath=[file://...]`` adds (a preset of one's own,
    ``model=my_flux1``, is no misspelling); None where a search path is not a folder (``pkg://``)."""
    found = set()
    for override, _ in overrides:
        if override.key_or_group == "hydra.searchpath":
            for entry in override.value() if isinstance(override.value(), list) else [override.value()]:
                if not str(entry).startswith("file://"):
                    return None
                found |= {p.stem for p in (Path(str(entry)[len("file://"):]) / group).glob("*.yaml")}
    return found


def section_of(key: str) -> str:
    return key.split(".", 1)[0]


def _chosen_models(overrides) -> set | None:
    """The models this command may run: ``model=`` (a sweep's every value), else conf/config.yaml's default;
    None when an ``experiment=`` may pick another (its file's choice is Hydra's to read)."""
    picked = set()
    for o, _ in overrides:
        if o.key_or_group == "experiment" and o.type != OverrideType.DEL:
            return None
        if o.key_or_group == "model" and o.type == OverrideType.CHANGE:
            picked |= {_text(v) for v in o.sweep_iterator()} if o.value_type in _SWEEPS else {o.value()}
    if picked:
        return picked
    defaults = OmegaConf.load(CONF / "config.yaml").defaults
    return {d["model"] for d in defaults if OmegaConf.is_dict(d) and "model" in d}


def _model_name(schema: type) -> str | None:
    return next((f.default for f in dataclasses.fields(schema) if f.name == "name"), None)


def _deletion_problem(arg: str, section: str, name: str, sections: dict, groups: list[str]) -> str | None:
    """``~<group>`` or ``~<setting>``: what to set instead (a typed setting cannot be removed)."""
    top = [f.name for f in dataclasses.fields(Config) if f.name not in groups + list(sections) + ["rule"]]
    if section in top and not name:  # ~seed, ~strict
        return f"{arg}: a setting cannot be removed (every run reads it); set it instead, e.g. {section}=" \
               + _default(Config, section)
    if section in OPTIONAL_GROUPS or section not in groups + list(sections) + ["rule"]:
        return None
    if not name:
        options = group_options(section)
        extra = " (mesh=none: no mesh)" if section == "mesh" else ""
        return (f"{arg}: the {section} group cannot be removed, every run needs one{extra}; pick an option instead: "
                + ", ".join(f"{section}={o}" for o in options))
    if section == "rule":
        return f"{arg}: a rule's axis cannot be removed; set {section}.{name}=null to leave it unsplit"
    schema = next((s for s in sections[section] if name in {f.name for f in dataclasses.fields(s)}), None)
    if schema is None:
        return None  # not a setting: Hydra names it
    return (f"{arg}: a setting cannot be removed (every run reads it); set it instead, e.g. "
            f"{section}.{name}={_default(schema, name)}")

"""``check_schema(cfg)``: a config loaded untyped (a run's ``.hydra/config.yaml``) and edited, checked against the
typed schema before any check reads it.

Hydra composes a config onto the schema (``harness/config.py``), so a wrong type or a missing key is refused as it is
typed; ``OmegaConf.load`` of a run's own ``.hydra/config.yaml`` gives an untyped one, and ``run(cfg)`` of it, edited,
ended in Python's words: ``train.steps='abc'`` a TypeError ('>=' not supported), ``del cfg.eval['plot']``
ConfigAttributeError "Missing key plot", ``eval.observations=[1,'x']`` a TypeError. Here each is one line naming the
key, the value and the override that fixes it, as the command line's checks say it (``override_types.value_problem``).
"""

from __future__ import annotations

import dataclasses
import typing
from typing import Any

from omegaconf import DictConfig, OmegaConf

from gensbi_sharding.harness.config import Config, ConfigError, assignment_reason, model_schema_classes, type_hints
from gensbi_sharding.harness.hints import override_literal
from gensbi_sharding.harness.override_keys import schema_default
from gensbi_sharding.harness.refusal import Refusal

__all__ = ["check_schema", "schema_problem"]


def schema_problem(cfg: DictConfig) -> str | None:
    """The refusal of the first setting of ``cfg`` the typed schema refuses (a wrong type, or a key missing); None
    where every one fits.

    Parameters
    ----------
    cfg : DictConfig
        The run's config, typed (composed by Hydra) or not (``OmegaConf.load``).

    Returns
    -------
    str or None
        E.g. ``"train.steps='abc': train.steps: Value 'abc' of type 'str' could not be converted to Integer; e.g.
        train.steps=3000"``.
    """
    if (problem := _model_name_problem(cfg)) is not None:
        return problem
    for section, schema, names in _sections(cfg):
        node = cfg if section is None else cfg[section]
        if OmegaConf.get_type(node) not in (dict, None):  # typed (Hydra composed it onto its schema, another
            # model's too: the name checks say which): it refuses a wrong value as it is set
            continue
        for name in names:
            key = name if section is None else f"{section}.{name}"
            if name not in node and (section != "model" or set(node) <= set(names)):
                # a key deleted: every check and the run read it (model.name naming another model than the fields
                # loaded, model=mlp model.name=transformer, is the name checks' to say)
                found, default = schema_default(schema, name)
                return Refusal(f"{key} is missing from the config", f"{key}={override_literal(default)}" if found
                               else None, how="; set ", after=" (its default), or put the key back")
            problem = _type_problem(schema, name, key, node) if name in node else None
            if problem is not None:
                return problem
    return None


def check_schema(cfg: DictConfig) -> None:
    """``ConfigError`` of ``schema_problem(cfg)``, where it finds one.

    Parameters
    ----------
    cfg : DictConfig

    Raises
    ------
    ConfigError
        Naming the key, its value and the override that fixes it.
    """
    if (problem := schema_problem(cfg)) is not None:
        raise ConfigError(problem)


def _model_name_problem(cfg: DictConfig) -> str | None:
    """``model.name`` naming another model than the one whose settings an untyped config holds (a typed one's is the
    name checks' to say, by its schema): the model those settings fit, to name instead."""
    model = cfg.get("model")
    if not isinstance(model, DictConfig) or OmegaConf.get_type(model) is not dict:
        return None
    fields = {c.name: {f.name for f in dataclasses.fields(c)} for c in model_schema_classes()}
    name = model.get("name")
    if name not in fields or set(model) <= fields[name]:
        return None
    fit = next((other for other, names in fields.items() if set(model) <= names), None)
    return None if fit is None else Refusal(f"model.name={name} does not fit the model settings in the config (those "
                                            f"of {fit})", f"model.name={fit}", after=f", or the settings of {name}")


def _sections(cfg: DictConfig) -> list[tuple[str | None, type, list[str]]]:
    """(section, dataclass, its fields) of every typed section of ``cfg`` (None: the top-level settings, seed ...);
    ``model``'s by its name (a model no schema names is the name checks'); ``rule`` is a table of any keys."""
    hints = type_hints(Config)
    top = [f.name for f in dataclasses.fields(Config) if f.name not in ("rule", "model")
           and not dataclasses.is_dataclass(hints[f.name])]
    found: list[tuple[str | None, type, list[str]]] = [(None, Config, top)]
    for field in dataclasses.fields(Config):
        kind = hints[field.name]
        if dataclasses.is_dataclass(kind) and isinstance(cfg.get(field.name), DictConfig):
            found.append((field.name, kind, [f.name for f in dataclasses.fields(kind)]))
    model = cfg.get("model")
    name = model.get("name") if isinstance(model, DictConfig) else None
    schema = next((c for c in model_schema_classes() if c.name == name), None)
    return found + ([("model", schema, [f.name for f in dataclasses.fields(schema)])] if schema is not None else [])


def _type_problem(schema: type, name: str, key: str, node: DictConfig) -> str | None:
    from gensbi_sharding.harness.override_types import value_problem  # imports the command-line checks: on need

    if OmegaConf.is_missing(node, name) or OmegaConf.is_interpolation(node, name):
        return None  # interpolation_problem's and the missing check's to say
    value = node[name]
    value = OmegaConf.to_container(value, resolve=True) if OmegaConf.is_config(value) else value
    if isinstance(value, list) and typing.get_origin(_unwrapped(type_hints(schema)[name])) is list:
        # a list setting: its items' type (value_problem judges a list given to a scalar setting)
        if (reason := assignment_reason(schema, name, value)) is None:
            return None
        found, default = schema_default(schema, name)
        return Refusal(f"{key}={override_literal(value)}: {reason}", f"{key}={override_literal(default)}",
                       how="; e.g. ")
    found = value_problem(schema, name, key, value)
    if found is None:
        return None
    reason, fix = found
    return Refusal(f"{key}={override_literal(value)}: {reason.removeprefix(f'{key}: ')}", f"{key}={fix}",
                   how="; e.g. ")


def _unwrapped(kind: Any) -> Any:
    """``Optional[X]`` -> ``X``; any other type as it is."""
    args = [a for a in typing.get_args(kind) if a is not type(None)]
    return args[0] if typing.get_origin(kind) is typing.Union and len(args) == 1 else kind

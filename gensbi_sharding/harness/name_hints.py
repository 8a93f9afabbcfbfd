"""Errors for a model, data set or rule name that nothing registers: the names, then an override that works.

Each message names the value, the registered names and an override that passes with
the settings already composed; how to register a new one comes second.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from gensbi_sharding.harness.hints import closest_name, override_literal
from gensbi_sharding.harness.refusal import Refusal

__all__ = ["unknown_name_problem", "registered_name_problem"]


def unknown_name_problem(key: str, value: str, *, kind: str, registered: Sequence[str], fix: str,
                         group: str, register: str, chosen: str | None = None, note: str = "") -> str:
    """The message for ``key=value`` naming nothing registered: the names, the override, then how to add one.

    ``fix`` is the value to give ``key`` that works with the settings already composed (the
    model whose fields ``model=<name>`` loaded); ``group=<name>`` is the other way, once
    ``key=value`` is dropped (a group override cannot replace a key override: Hydra applies
    the key's after the group's). ``chosen``: the option of ``group`` composed; when it is
    ``value`` the name came from that file (``model=tiny``, a file of the user's own saying
    ``name: tiny``), so the message names ``group=value``, the override typed, and ``fix`` as
    the option to choose instead. ``note`` follows the override in the parentheses (what the name is, where known).
    """
    names, typed = ", ".join(sorted(registered)), override_literal(value)  # '' as typed: there is no data.name= to drop
    adding = f"; to add {value!r}, {register}" if value else ""  # no file nor factory is named ''
    if chosen == value:  # there is no key=value to drop: the user typed group=value
        return Refusal(f"unknown {kind} {value!r} ({group}={typed}, whose file sets name: {typed}{note}); registered: "
                       f"{names}", f"{group}={fix}", how=f"; choose one with {group}=<name> (e.g. ",
                       after=f") instead of {group}={typed}{adding}")
    return Refusal(f"unknown {kind} {value!r} ({key}={typed}{note}); registered: {names}", f"{key}={fix}",
                   after=f", or drop {key}={typed} and choose one with {group}=<name>{adding}")


def _schema_name(section: Any) -> str | None:
    """The ``name`` default of the typed schema a config section was merged onto (``MLPConfig`` -> "mlp")."""
    from omegaconf import OmegaConf

    from gensbi_sharding.harness.override_keys import schema_name

    schema = OmegaConf.get_type(section)
    return schema_name(schema) if dataclasses.is_dataclass(schema) else None


def _schema_class(section: Any) -> str:
    """The class name of the typed schema a config section was merged onto (``MLPConfig``)."""
    from omegaconf import OmegaConf

    return OmegaConf.get_type(section).__name__


def _new_model_steps(name: str) -> str:
    """What adding model ``name`` to the harness takes: the harness imports only its own model modules."""
    return (f"register its factory with @register_model({name!r}) in a module that "
            f"gensbi_sharding/harness/models/__init__.py imports, give it a schema in gensbi_sharding/harness/"
            f"config.py stored as {name}_schema, and add conf/model/{name}.yaml listing /{name}_schema "
            f"(README: A model of your own in the harness)")


def registered_name_problem(cfg: Any, choices: Mapping[str, str] | None = None) -> str | None:
    """What is wrong with the registry-backed names of ``cfg`` (``model.name``, ``data.name``, ``rule.name``).

    ``choices`` are the options Hydra chose per group (``{"rule": "replicated", ...}``;
    ``groups.chosen_options()``); without them the rule's name is not checked (only Hydra
    knows which file loaded the table). Every message names the value, the registered names
    and an override that then passes; registering a new one comes second.
    """
    from gensbi_sharding import RULES
    from gensbi_sharding.harness import registry
    from gensbi_sharding.harness.groups import group_options

    choices = dict(choices or {})
    loaded = _schema_name(cfg.model)  # the model whose fields the config holds
    if not registry.is_registered("model", cfg.model.name):
        models = registry.model_names()
        fix = loaded if loaded in models else closest_name(cfg.model.name, models) or "mlp"
        return unknown_name_problem("model.name", cfg.model.name, kind="model", registered=models, fix=fix,
                                    group="model", register=_new_model_steps(cfg.model.name),
                                    chosen=choices.get("model"))
    chosen = choices.get("model")
    if loaded is not None and loaded != cfg.model.name and chosen == cfg.model.name:
        # The user's own registered model whose file borrows another model's schema: model=<it> was chosen,
        # so "choose the model with model=<it>" (below) would send them round in a circle.
        return (f"model={chosen} holds the fields of {loaded} (its defaults name /{loaded}_schema); a model of "
                f"your own needs a schema of its own: a dataclass in gensbi_sharding/harness/config.py (as "
                f"{_schema_class(cfg.model)} is {loaded}'s) stored as {chosen}_schema by register_configs, listed in "
                f"conf/model/{chosen}.yaml's defaults (README: A model of your own in the harness); or set name: "
                f"{loaded} in that file to build {loaded}")
    if loaded is not None and loaded != cfg.model.name and chosen not in (None, loaded):
        # A preset of the user's own (README: A preset of your own) naming one model and the schema of another.
        return Refusal(f"model={chosen} holds the fields of {loaded} (its defaults name /{loaded}_schema) but names "
                       f"model {cfg.model.name}", f"model.name={loaded}", how=f"; set name: {loaded} in that file (or ",
                       after=f"), or list /{cfg.model.name}_schema in its defaults to build {cfg.model.name}")
    if loaded is not None and loaded != cfg.model.name:
        return Refusal(f"model.name={cfg.model.name} does not fit the settings model={loaded} loaded (the fields of "
                       f"{loaded})", f"model.name={loaded}", after=f", or drop model.name={cfg.model.name} and choose "
                       f"the model with model={cfg.model.name}, which loads its own")
    if not registry.is_registered("data", cfg.data.name):
        tasks = registry.data_names()
        chosen = choices.get("data")
        # In another case too (Gaussian_Random_Field): else offered its nearest registered task as a typo's fix
        from gensbi_sharding.harness.tasks import SBIBM_JAX_OTHER_TASKS  # deferred: tasks imports NumPy

        shipped = next((t for t in SBIBM_JAX_OTHER_TASKS if t == str(cfg.data.name).casefold()), None)
        fix = (None if shipped else closest_name(cfg.data.name, tasks)) or (chosen if chosen in tasks else "two_moons")
        note = ("" if shipped is None else "; a task of sbibm_jax that the harness does not register"
                if shipped == cfg.data.name else f"; sbibm_jax's task {shipped}, which the harness does not register")
        return unknown_name_problem("data.name", cfg.data.name, kind="data", registered=tasks, fix=fix, note=note,
                                    group="data", chosen=chosen, register=f"register its factory, returning a "
                                    f"SimulationData (harness/simulation_data.py), with "
                                    f"@register_data({cfg.data.name!r}) in gensbi_sharding/harness/data.py or a "
                                    f"module it imports, and add "
                                    f"conf/data/{cfg.data.name}.yaml; with no sbibm reference posterior it trains "
                                    f"with eval.enabled=false")
    return _rule_name_problem(cfg.rule, choices.get("rule"), sorted(set(RULES) | set(group_options("rule"))))


def _rule_name_problem(rule: Mapping[str, Any] | str, choice: str | None, rules: list[str]) -> str | None:
    """``rule.name`` only labels a table: refuse a label that looks like choosing a rule but is not one."""
    from gensbi_sharding import RULES

    name = rule.get("name") if hasattr(rule, "get") else None
    if choice is None or name is None or name == choice:
        return None
    if name in RULES and choice not in RULES and any(rule.get(k) != v for k, v in dict(RULES[name]).items()):
        # name: fsdp in one's own rule file of another table: rule=fsdp would drop that table, so relabel it
        return Refusal(f"rule.name={name} labels the table rule={choice} loaded, which is not the {name} rule's: "
                       f"the run would be reported as {name}", f"rule.name={choice}", how="; name it otherwise: ",
                       after=f" (or name: {choice} in its file), or choose the {name} rule with rule={name}")
    if name in rules:  # rule.name=fsdp on replicated's table: the user meant rule=fsdp
        return Refusal(f"rule.name={name} only labels the rule table, which rule={choice} loaded; to use the {name} "
                       "rule, choose it", f"rule={name}", how=" with ", after=f" (rule.name={name} may stay)")
    untouched = choice in RULES and all(rule.get(k) == v for k, v in dict(RULES[choice]).items())
    if untouched:  # a new label on a preset's unchanged table: not a rule of its own
        return (unknown_name_problem("rule.name", name, kind="rule", registered=rules, fix=choice, group="rule",
                                     register=f"write conf/rule/{name}.yaml (README: Writing your own rule), or "
                                     f"change entries of this table ({_changed_entry(rule)} rule.name={name})"))
    return None


def _changed_entry(rule: Mapping[str, Any]) -> str:
    """An override that changes an entry of the preset table ``rule``: one it already holds (rule.embed=data,
    fsdp's own value) changes nothing, so suggesting it would be refused again as a label on an unchanged table)."""
    for key, value in (("embed", "data"), ("mlp", "model")):
        if rule.get(key) != value:
            return f"rule.{key}={value}"
    return "rule.embed=null"  # embed is data here

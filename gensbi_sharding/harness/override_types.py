"""launch.py's check of the scalar values on the command line: ``override_problem`` (lists: ``override_lists``).

``override_problem``: a command-line override Hydra refuses without naming the override to type.
Hydra's own messages for these name the key but no fix, or the wrong one: ``train.steps=1.5`` ("could not be
converted to Integer"), ``train.step=5`` ("To append to your config use +train.step=5", which the config check
then refuses), ``model=mlpp`` (the options, no nearest one), and the ``+``/``++``/``~`` overrides of
``override_prefixes`` (``~train.steps``: "does not support deletion"); in a sweep one such value stopped every
job, leaving a sweep folder with only ``multirun.yaml``. The command line as ``override_grammar.parse`` reads it, each
key as ``override_keys`` resolves it, before Hydra composes anything. Pure Python: no JAX.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
import shlex
import typing
from collections.abc import Sequence

from hydra.core.override_parser.types import OverrideType, ValueType

from gensbi_sharding.harness.command_defaults import command_default
from gensbi_sharding.harness.config import ActivationConfig, Config, MeshAxesField, assignment_reason, type_hints
from gensbi_sharding.harness.config_files import resumed_search_path, unsearched_file
from gensbi_sharding.harness.hints import closest_name, override_literal
from gensbi_sharding.harness.groups import chosen_default
from gensbi_sharding.harness.group_values import option_value_problem
from gensbi_sharding.harness.model_choice import chosen_models
from gensbi_sharding.harness.model_files import model_file_problem
from gensbi_sharding.harness.override_prefixes import prefix_problem
from gensbi_sharding.harness.override_grammar import CommandLine, parse
from gensbi_sharding.harness.paste_command import command_for
from gensbi_sharding.harness.refusal import Refusal
from gensbi_sharding.harness.override_keys import (group_keys, list_fields, option_groups,
                                                   options, schema_default, schema_name, sections, settings)

__all__ = ["override_problem", "value_problem"]


def value_problem(schema: type, name: str, key: str, value, suggest=None) -> tuple[str, str] | None:
    """Why ``value`` cannot be assigned to field ``name`` of ``schema`` (OmegaConf's reason), and a value to type:
    ``suggest()``'s (the command's composition, ~0.3 s of CPU: made for a refused value only), else the schema's.

    Parameters
    ----------
    schema : type
        A dataclass of ``harness/config.py``.
    name : str
        Its field.
    key : str
        The dotted key said, e.g. ``"train.steps"``.
    value : Any
        The value as set.
    suggest : callable, optional
        ``suggest()``: the value to offer.

    Returns
    -------
    tuple of (str, str) or None
        The reason (``"train.steps takes a whole number (...)"``) and the value to type as the override writes it.
    """
    example = lambda: override_literal(suggest() if suggest else schema_default(schema, name)[1])  # noqa: E731
    kind = type_hints(schema)[name]
    if isinstance(value, bool) and str in (kind, *typing.get_args(kind)):  # OmegaConf took it as the text 'True'
        # (so train.resume=true would look for a folder named True, mesh.spec=true be named as mesh.spec=True)
        optional = type(None) in typing.get_args(kind)  # false: off, where null is (no mesh, no resume)
        word = str(value).lower()  # a folder or name that is the word itself: quoted, Hydra reads it as text
        return (f"{key} takes a name, and {word} is a yes/no (it would read the text '{value}'; the word itself, "
                f"quoted: \"{key}='{word}'\")",
                "auto" if value and key == "train.resume" else "null" if optional and not value else example())
    if bool in (kind, *typing.get_args(kind)) and isinstance(value, (int, float)) and value not in (0, 1):
        # OmegaConf reads any number as a bool (verbose=2: on) where it refuses eval.plot=maybe: 0 and 1 only
        return f"{key} is a yes/no: true or false (or 1 or 0), not {value}", "true" if value > 0 else example()
    if bool in (kind, *typing.get_args(kind)) and isinstance(value, str) and value.lower() not in ("true", "false") \
            and "${" not in value and value != "???" and assignment_reason(schema, name, value) is None:
        # OmegaConf reads yes/on/y/n/off (and '1') as bools, where it refuses maybe: model.qkv_bias=n ran, off
        # (??? is left to the check that names it missing)
        return (f"{key} is a yes/no: true or false (or 1 or 0), not {value!r}",
                "true" if value.strip().lower() in ("y", "yes", "on", "1") else "false")
    if (reason := assignment_reason(schema, name, value)) is None:
        return None
    if value is None:
        return f"{key} cannot be null ({reason})", example()
    if isinstance(value, str) and not value.strip():
        return f"{key} cannot be empty ({reason})", example()
    if isinstance(value, (list, dict)):
        many = ",".join(map(override_literal, value)) if isinstance(value, list) else ""  # true, [8,0]: as typed
        return (f"{key} takes one value, not a {type(value).__name__} ({reason})"
                + (f"; for one job per value, sweep them: -m {key}={many}" if many else ""), example())
    if int in (kind, *typing.get_args(kind)) and isinstance(value, float) and math.isfinite(value):
        # A value below 1 rounds to one the range checks may refuse next (train.steps=-1e3: -1000): the default
        return f"{key} takes a whole number ({reason})", str(round(value)) if round(value) >= 1 else example()
    short = re.fullmatch(r"(\d+(?:\.\d+)?)([kKmM])", value.strip()) if isinstance(value, str) else None
    if short and int in (kind, *typing.get_args(kind)):  # 10k: its own value as the fix, not the preset's
        whole = float(short[1]) * (1_000 if short[2] in "kK" else 1_000_000)
        if whole == round(whole):
            return f"{key} takes a whole number written out, not {value} ({reason})", str(round(whole))
    power = re.fullmatch(r"([+-]?(?:\d+\.?\d*|\.\d+)[eE][+-]?\d+)\.0*", value.strip()) if isinstance(value, str) \
        else None
    if power and ((real := float in (kind, *typing.get_args(kind))) or float(power[1]).is_integer()):  # 1e-3.0: the
        number = float(power[1]) if real else round(float(power[1]))  # value meant as the fix, not the default
        return f"{key} takes a whole exponent, with no decimal point, not {value} ({reason})", override_literal(number)
    return f"{key}: {reason}", example()


def _takes_axes(key: str) -> bool:
    # A rule's logical axes and activation's axis fields take several mesh axes (a list); rule.name,
    # activation.strategy and the groups themselves (rule=fsdp,tensor) one value, which a list is refused as
    section, _, name = key.partition(".")
    if section == "rule":
        return bool(name) and name != "name"
    return section == "activation" and type_hints(ActivationConfig).get(name) is MeshAxesField


def override_problem(args: Sequence[str] | CommandLine, *, sweeps_need_m: bool = True) -> str | None:
    """The one-line refusal of the first override Hydra would refuse naming no fix (or a wrong one); else None.

    Refused, each naming the override and the one to type: a value a scalar setting cannot take (``1.5``,
    ``null``, an empty string or a list where a whole number is expected; in a sweep, the value that is);
    a misspelled setting written without ``+`` (``train.step=5``: the nearest setting, not Hydra's
    ``+train.step=5``), also under no section (``trian.steps=5``, GenSBI's ``training.nsteps=100``) or near a
    group (``modle=flux1``); every ``+``, ``++`` and ``~`` override ``override_prefixes.prefix_problem`` refuses
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
    if problem := prefix_problem(command) or next(filter(None, (  # +, ++ and ~ overrides; a group given null
            option_value_problem(o, command.search_paths, command.multirun, command.run_mode_args)
            for o in command.parsed)), None):
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
                    f"{key} one value" + (f", e.g. {key}={strings[0]}" if strings else "")
                    + f", or leave out {shows[0]}")
        # a preset that turns multirun on (sweep=, experiment=sbibm) does so once Hydra has picked it: swept itself,
        # only -m does (sweep=glob(*), experiment=quick,sbibm: Hydra's "requires --multirun" once jobs would start)
        multirun = command.multirun if key not in ("sweep", "experiment") else bool(command.multirun_typed)
        if swept and sweeps_need_m and not multirun and not key.startswith("hydra"):
            # Hydra's "Ambiguous value" offered a list and a quoted string too, which a scalar setting refuses
            listed = (f", or one list for this run: {key}=[{','.join(strings)}]"
                      if o.sweep and (key in lists or _takes_axes(key)) else "")
            return (f"{arg}: several values are a sweep, one job per value, which needs -m: {command_for()} -m "
                    f"... {shlex.quote(arg)}{command.run_mode_dropped}{listed}")
        if key.startswith("hydra") or override.package is not None or key in lists:
            continue
        section, _, name = key.partition(".")
        if override.type not in (OverrideType.CHANGE, OverrideType.FORCE_ADD):  # + and ~: prefix_problem's
            continue
        if section in groups and not name:
            if (problem := _option_problem(o, section, options(section, command.search_paths), command)
                    or model_file_problem(o, section, command.search_paths)) is not None:
                return problem
            continue
        if name and (problem := _section_problem(o, section, name, chosen)) is not None:
            return problem
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
            if top and near is None and (group := closest_name(name, groups)):  # modle=flux1, sharding_rule=fsdp
                choices = options(group, command.search_paths) or []
                said = (f"{arg}: {key} is not a setting or group (did you mean {group}=?); its settings: "
                        f"{', '.join(fields)}; its groups: {', '.join(groups)}")
                if choices and all(v in choices for v in o.values()):
                    return Refusal(said, f"{group}={o.raw}", how="; write ")
                return said + (f"; {group} options: {', '.join(choices)}" if choices else "")
            of = f" of {choice.label}" if section == "model" and choice else f" of {section}" if section else ""
            dotted = f"{section}.{near}" if section else near
            return Refusal(f"{arg}: {key} is not a setting{of}" + (f" (did you mean {dotted}?)" if near else "")
                           + f"; its settings: {', '.join(f for f in fields if f != 'name' or section != 'model')}",
                           f"{dotted}={o.raw}" if near else None, how="; write ")
        strings = list(override.sweep_string_iterator()) if override.value_type == ValueType.SIMPLE_CHOICE_SWEEP \
            else None
        candidates = [s for s in schemas if name in settings(s)]
        if section == "model" and chosen is None:  # a swept experiment= (each job its model): Hydra's multi-line
            having = [s for s in typed["model"] if name in settings(s)]  # error composing the sweep, no fix named
            plain = [v for v in o.values() if not (isinstance(v, str) and "${" in v)]
            if having and any(all(value_problem(s, name, key, v) for s in having) for v in plain):
                candidates = having[:1]  # a value no model's field takes
        for schema in candidates:
            for i, value in enumerate(o.values()):
                if isinstance(value, str) and "${" in value:  # resolved once composed: its own check
                    continue
                # the value the command's own groups compose (experiment=quick: train.steps=20), not the schema's
                suggest = functools.partial(command_default, command, o, schema, key)
                if (problem := value_problem(schema, name, key, value, suggest)) is not None:
                    why, fix = problem
                    of = f" (model={schema_name(schema)})" if section == "model" and chosen is not None else ""
                    if strings:  # the sweep with that one value replaced
                        shown = f"the swept value {str(value).lower() if isinstance(value, bool) else strings[i]}: "
                        fix = ",".join(fix if j == i else p[1] if not (isinstance(v, str) and "${" in v) and (  # each
                            p := value_problem(schema, name, key, v, suggest)) else text  # (on,off -> true,false)
                            for j, (v, text) in enumerate(zip(o.values(), strings)))
                    else:
                        shown = ""
                    return Refusal(f"{arg}: {shown}{why.replace(key, key + of, 1)}", f"{key}={fix}", how="; e.g. ")
    return None


def _section_problem(o, section: str, name: str, chosen) -> str | None:
    """``training.nsteps=100`` (GenSBI's section) or ``trian.steps=5``: a dotted key under no section of the config,
    where Hydra advised ``+training.nsteps=100``, which the config check refused in turn. The nearest section, and
    in it the nearest setting; None for a key under a section (or a group: ``experiment.x`` is Hydra's to name)."""
    top = [f.name for f in dataclasses.fields(Config)]
    if section in top:
        return None
    if section in option_groups():  # experiment.quick=1: a group of presets holds no settings (Hydra's multi-line
        choices = options(section)  # "Key 'experiment' not in 'Config'" advises +experiment.quick=1, which fails too)
        near = closest_name(name.split(".")[0], choices) or closest_name(o.raw, choices)
        owner = next((t for t in top if name in (group_keys([t], chosen) or ())), None)  # experiment.steps=5
        said = (f"{o.arg}: {section} is a group of presets, not a section of settings; its options: "
                f"{', '.join(choices)}; pick one with {section}=<option>")
        if owner:  # experiment.steps=5: the setting it meant, said last
            return Refusal(said + (f", e.g. {section}={near}" if near else ""), f"{owner}.{name}={o.raw}",
                           how="; or set ")
        return Refusal(said, f"{section}={near}" if near else None, how=", e.g. ")
    near = closest_name(section, [t for t in top if t not in settings(Config)])
    inner = name if near is None or "." in name or name in (keys := group_keys([near], chosen) or ()) \
        else closest_name(name, keys)
    return Refusal(f"{o.arg}: {section} is not a section of the config" + (f" (did you mean {near}?)" if near else "")
                   + f"; its sections: {', '.join(t for t in top if t not in settings(Config))}",
                   f"{near}.{inner}={o.raw}" if near and inner else None, how="; write ")


def _option_problem(o, group: str, choices: list[str] | None, command: CommandLine | None = None) -> str | None:
    """``model=mlpp`` (also one value of a sweep): the group's options and the nearest one; None where every
    value is an option, an interpolation, or ``choices`` is None (a ``pkg://`` search path: Hydra's to list).
    A preset of one's own that the run ``train.resume`` names was launched with: its search path, to add."""
    for value in o.values() if choices is not None else ():
        if isinstance(value, str) and "${" not in value and value not in choices:
            if command is not None and (searched := resumed_search_path(command, group, value)) is not None:
                return (f"{o.arg}: Could not find '{group}/{value}' in this command's config folders; the run it "
                        f"resumes was launched with {searched}, whose folder holds it: add {searched}")
            # a task sbibm_jax has but the harness does not register is no typo (gaussian_random_field is
            # no misspelt gaussian_mixture): said so, the default offered, as data.name= says it
            from gensbi_sharding.harness.tasks import SBIBM_JAX_OTHER_TASKS  # deferred: tasks imports NumPy

            shipped = group == "data" and value in SBIBM_JAX_OTHER_TASKS
            near = None if shipped else closest_name(value, choices)
            said = f"{o.arg}: Could not find '{group}/{value}' ({group} options: {', '.join(choices)})" + (
                f"; {value} is a task of sbibm_jax that the harness does not register (to add it: @register_data"
                f"({value!r}) and conf/data/{value}.yaml, docs/gensbi_models.md)" if shipped else "")
            if command is not None and (here := unsearched_file(group, value, command.search_paths, near)):
                return f"{said}; {here}"
            # the option carried as the fix, so a list of refusals goes on past it, a sweep's in that value's place
            # (-m model=xyzzy,mlp seed=-1 -> model=flux1,mlp seed=0: mlp's jobs kept)
            other = chosen_default(group) if shipped and chosen_default(group) in choices else choices[0]
            put = ",".join(dict.fromkeys(near or other if v == value else str(v) for v in o.values()))
            return Refusal(said, f"{o.arg.split('=', 1)[0]}={put}", how="; did you mean " if near else
                           "; pick one, e.g. ", after="?" if near else "")
    return None

"""launch.py's checks of a command line's keys, each a one-line refusal naming the key to type.

``unknown_key_problem``: a mistyped key (``mesh.modle_axis=2``) named with the key it likely meant (Hydra listed none,
and advised ``+mesh.modle_axis=2``, which ``config_checks`` refuses); ``model_key_problem``: a ``model.<field>`` the
model(s) it is applied to lack (a sweep's Hydra stopped at the first config, or at a later job's after the ones before
ran). Pure Python: no JAX.
"""

from __future__ import annotations

from collections.abc import Sequence

from hydra.core.override_parser.types import OverrideType

from gensbi_sharding.harness.hints import closest_name
from gensbi_sharding.harness.key_paths import data_axis_hint, nearest_setting, setting_path_problem, unknown_part
from gensbi_sharding.harness.model_choice import chosen_models, default_model, experiment_model
from gensbi_sharding.harness.override_grammar import CommandLine, parse
from gensbi_sharding.harness.override_keys import gensbi_name, group_keys, list_fields, meant_name, model_fields
from gensbi_sharding.harness.refusal import Refusal
from gensbi_sharding.harness.rule_config import other_name_problem

__all__ = ["unknown_key_problem", "model_key_problem"]


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
        # a key below a setting or a section (mesh.shape.x)
        if keys is None and (found := unknown_part(parts, lambda path: group_keys(path, models), list_fields())):
            if (keys := found[1]) is None:  # train.steps.x=1
                return setting_path_problem(o.arg, parts[:found[0] + 1], value, list_fields())
            below, parts, typed = parts[found[0] + 1:], parts[:found[0] + 1], f"{o.arg}: "
            key = ".".join(parts)
        if keys is None or parts[-1] in keys:
            continue
        group, of_model = ".".join(parts[:-1]), parts[0] == "model" and len(parts) == 2 and known
        shown = ", ".join(k for k in keys if not (parts[0] == "model" and k == "name"))  # model=: the registry's
        if of_model and (owners := sorted(m for m, f in fields.items() if parts[-1] in f)):
            if not choice.given:
                continue  # model_key_problem names the model to add (an experiment's file may hold its own keys)
            return (f"{typed}{key} is a setting of model={' or model='.join(owners)}, not of {choice.label}; its "
                    f"settings: {shown}")
        if parts[0] == "rule" and len(parts) == 2 and not below and o.hydra is not None and o.values() and all(
                other_name_problem(parts[1], v) is None for v in o.values()):  # as the library's tables take it
            return f"{key} is no key of the rule table ({shown}); add another name declared unsplit: +{key}={value}"
        if of_model and not below and (named := gensbi_name(choice.models, parts[-1])) in keys:
            return Refusal(f"{key} is GenSBI's config-file name for model.{named} (gensbi.recipes reads it so); the "
                           f"settings of {choice.label}: {shown}", f"model.{named}={value}")
        meant = f" (did you mean {group}.{near}?)" if (near := nearest_setting(parts[-1], below, keys)) else ""
        if of_model and not below and (named := meant_name(choice.models, parts[-1])) is not None:
            # a name from elsewhere: what it means here, not the nearest spelling (num_layers -> num_heads)
            near = named if named in keys else None
            meant = f" (did you mean {group}.{near}?)" if near else f" ({named})" if named else ""
        elif of_model and not near and (near := closest_name(parts[-1], sorted(set().union(*fields.values())))):
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
    # the model of the config before model= is applied
    base = None if picked == "?" else picked or default_model(command.args)
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
            if (own := meant_name(lacking[:1], field)) in fields[lacking[0]]:  # num_heads: the transformer's heads
                fix = f"set model.{own}={raw}, model={lacking[0]}'s own, or {fix.removeprefix('set ')}"
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

"""``model_key_problem(args)``: a ``model.<field>`` override the model(s) it would be applied to lack.

Hydra applies ``model.num_heads=2`` to the model section it composed and, when that schema
lacks the field, stops with "Key 'num_heads' not in 'MLPConfig'" and a suggestion that
fails as well (``+model.num_heads=2``: the schemas are closed). Two cases name no fix at all:

* a sweep over models (``-m model=flux1,simformer model.num_heads=2``): Hydra composes a
  multirun's first config with the *default* model (``conf/config.yaml``'s ``model: mlp``),
  the swept group left out, and applies every plain override to it, so the sweep stops
  although each swept model has the field. A swept override is applied per job only, so
  ``'model.num_heads=choice(2)'`` runs;
* a field that only some of the swept models have would stop the sweep at the first job
  of a model without it, after the jobs before it ran.

Pure Python: the fields are read from the schemas in ``harness/config.py``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import OverrideType
from omegaconf import OmegaConf

from gensbi_sharding.harness.config import ModelConfig
from gensbi_sharding.harness.groups import CONF, group_options

__all__ = ["model_fields", "default_model", "model_key_problem"]


def model_fields() -> dict[str, frozenset]:
    """``{"mlp": frozenset({"name", "init", "width", ...}), "flux1": ...}``: each model schema's fields, by name."""
    found, todo = {}, [ModelConfig]
    while todo:
        schema = todo.pop()
        todo.extend(schema.__subclasses__())
        fields = dataclasses.fields(schema)
        name = next((f.default for f in fields if f.name == "name"), None)
        if isinstance(name, str) and name not in ("???", ""):
            found[name] = frozenset(f.name for f in fields)
    return found


def default_model() -> str | None:
    """The model ``conf/config.yaml``'s defaults list picks (``mlp``); None if it picks none."""
    for entry in OmegaConf.load(CONF / "config.yaml").get("defaults", []):
        if not isinstance(entry, str) and "model" in entry:
            return entry["model"]
    return None


def _experiment_model(name: str) -> str | None:
    """The model ``conf/experiment/<name>.yaml`` picks (``override /model: transformer``), None if it picks none;
    "?" for an experiment not in ``conf/`` (a search path's), which may pick one."""
    path = CONF / "experiment" / f"{name}.yaml"
    if not path.is_file():
        return "?"
    for entry in OmegaConf.load(path).get("defaults", []):
        if not isinstance(entry, str) and "override /model" in entry:
            return entry["override /model"]
    return None


def _swept_models(override) -> list[str]:
    """The options of a swept ``model=`` override (``flux1,simformer``, ``choice(...)``, ``glob(...)``)."""
    value = override.value()
    if hasattr(value, "filter"):  # glob(*former): the matching options of the group
        return value.filter(group_options("model"))
    return [str(v) for v in override.sweep_iterator()]


def model_key_problem(args: Sequence[str]) -> str | None:
    """The one-line refusal of the first ``model.<field>`` override the chosen model(s) lack; None when none does.

    The models are those ``model=`` names (each swept one), else the default model when no
    ``experiment=`` (which may pick another) is given. A field no model has is a typo that
    Hydra names; a model this harness does not know (a preset of one's own) is not checked.

    Parameters
    ----------
    args : sequence of str
        The command line after the program name (``sys.argv[1:]``).

    Returns
    -------
    str or None
        ``"model.num_heads=2: ... write 'model.num_heads=choice(2)' ..."``.
    """
    parser, fields, default = OverridesParser.create(), model_fields(), default_model()
    overrides = []
    for arg in args:
        if "=" not in arg or arg.startswith("-"):
            continue
        try:
            overrides.append((parser.parse_override(arg), *arg.split("=", 1)))
        except Exception:  # not Hydra's grammar: Hydra names it
            continue
    group = [o for o, _, _ in overrides if o.key_or_group == "model" and o.package is None]
    swept = [m for o in group if o.is_sweep_override() for m in _swept_models(o)]
    experiments = [o for o, _, _ in overrides if o.key_or_group == "experiment"]
    if any(o.is_sweep_override() for o in experiments):
        return None  # each job's experiment may pick another model
    picked = _experiment_model(str(experiments[-1].value())) if experiments else None
    base = None if picked == "?" else picked or default  # the model of the config before model= is applied
    if swept or group:
        chosen, given = swept or [str(group[-1].value())], True
    elif base is None:
        return None  # an experiment this check cannot read may pick the model
    else:
        chosen, given = [base], picked is not None
    for override, typed, raw in overrides:
        key = override.key_or_group
        if not key.startswith("model.") or override.type == OverrideType.DEL or override.package is not None:
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
        if swept and base in fields and field not in fields[base] and not override.is_sweep_override():
            return (f"{typed}={raw}: Hydra composes a sweep's first config with the default model (model={base}), "
                    f"which has no field {field}, before each job loads model={','.join(swept)}; sweep it as one "
                    f"value, which only the jobs get: '{typed}=choice({raw})'")
    return None

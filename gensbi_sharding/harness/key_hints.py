"""``unknown_key_problem(args)``: a mistyped key (``mesh.modle_axis=2``), named with the key it likely meant.

Hydra refuses it only while merging: "Could not override 'mesh.modle_axis'. To append to your config
use +mesh.modle_axis=2 ... Key 'modle_axis' not in 'MeshConfig'", whose advice (append it) is refused
in turn (``config_checks``' ``+`` check, worded as here), and which lists no key. The keys are read from the structured-config
dataclasses of ``harness/config.py`` (for ``model.*`` every model schema's, or the chosen model's), so a
new field is covered as it is added. ``mode_flags_problem(args)``: two of Hydra's modes at once (``-m ...
--cfg job``), which Hydra refused with a ``ValueError`` traceback. Pure Python: no JAX.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Sequence

from gensbi_sharding.harness.config import Config, ModelConfig
from gensbi_sharding.harness.hints import closest_name

__all__ = ["mode_flags_problem", "unknown_key_problem"]

#: Hydra's mode flags (its ``--help``): at most one may be given.
_MODES = {"-r": "--run", "--run": "--run", "-m": "-m", "--multirun": "-m", "-c": "--cfg", "--cfg": "--cfg",
          "-i": "--info", "--info": "--info", "-sc": "--shell-completion", "--shell-completion": "--shell-completion"}


def mode_flags_problem(args: Sequence[str]) -> str | None:
    """The one-line refusal of two of Hydra's modes on one command line (``-m`` with ``--cfg job``); else None.

    Parameters
    ----------
    args : sequence of str
        The command line after the program name (``sys.argv[1:]``).

    Returns
    -------
    str or None
        E.g. ``"-m and --cfg cannot be combined (Hydra runs one mode); to see a job's composed config, leave
        out -m and give each swept key one value: python launch.py <overrides> --cfg job"``.
    """
    given = list(dict.fromkeys(_MODES[a.split("=", 1)[0]] for a in args if a.split("=", 1)[0] in _MODES))
    if len(given) < 2:
        return None
    fix = ("to see a job's composed config, leave out -m and give each swept key one value: python launch.py "
           "<overrides> --cfg job") if "-m" in given and "--cfg" in given else f"keep one of {', '.join(given)}"
    return f"{' and '.join(given)} cannot be combined (Hydra runs one mode); {fix}"


def _model_schemas(chosen: str | None) -> list[type]:
    """The model schemas a ``model.*`` key is checked against: the chosen model's, else every model's."""
    found, todo = [], list(ModelConfig.__subclasses__())
    while todo:
        found.append(todo.pop())
        todo.extend(found[-1].__subclasses__())
    named = [s for s in found if next((f.default for f in dataclasses.fields(s) if f.name == "name"), None) == chosen]
    return named or found


def _keys(parts: list[str], chosen_model: str | None) -> tuple[str, ...] | None:
    """The keys the group ``parts`` holds (as declared; every model's, sorted); None where the schema is free (``rule``)."""
    schemas: list[type] = [Config]
    for part in parts:
        hints = typing.get_type_hints(schemas[0])
        if part not in hints:
            return None  # the group itself is unknown: Hydra's message names it
        if hints[part] is ModelConfig:
            schemas = _model_schemas(chosen_model)
        elif dataclasses.is_dataclass(hints[part]):
            schemas = [hints[part]]
        else:
            return None  # a free mapping (the rule table) or a scalar
    if len(schemas) == 1:
        return tuple(f.name for f in dataclasses.fields(schemas[0]))
    return tuple(sorted({f.name for schema in schemas for f in dataclasses.fields(schema)}))  # every model's


def unknown_key_problem(args: Sequence[str]) -> str | None:
    """The one-line refusal of the first override of a key its group lacks; None when there is none.

    Checked: plain and swept assignments of a dotted key under a group with a schema (``mesh.modle_axis=2``,
    ``-m train.stpes=10,20``). Left to Hydra: ``+``/``++``/``~`` overrides (adding or deleting a key is
    asked for), ``hydra.*``, the rule table (any logical axis may be set), group choices and flags.

    Parameters
    ----------
    args : sequence of str
        The command line after the program name (``sys.argv[1:]``).

    Returns
    -------
    str or None
        E.g. ``"mesh.modle_axis is not a setting of mesh (did you mean mesh.model_axis?); its settings: spec,
        model_axis, devices; set mesh.model_axis=2"``.
    """
    chosen = next((a.split("=", 1)[1] for a in args if a.startswith("model=")), None)
    for arg in args:
        if arg.startswith(("-", "+", "~")) or "=" not in arg:
            continue
        key, value = arg.split("=", 1)
        parts = key.split(".")
        if len(parts) < 2 or parts[0] == "hydra" or "/" in key:
            continue
        keys = _keys(parts[:-1], chosen)
        if keys is None or parts[-1] in keys:
            continue
        group = ".".join(parts[:-1])
        shown = ", ".join(k for k in keys if not (parts[0] == "model" and k == "name"))  # model=: the registry's
        if parts[0] == "model" and chosen and len(parts) == 2:  # another model's key: name that model
            owners = sorted(s.name for s in _model_schemas(None) if parts[-1] in {f.name for f in dataclasses.fields(s)})
            if owners:
                return (f"{key} is a setting of model={' or model='.join(owners)}, not of model={chosen}; its "
                        f"settings: {shown}")
        of = f"model={chosen}" if parts[0] == "model" and chosen else group
        near = closest_name(parts[-1], keys)
        return (f"{key} is not a setting of {of}" + (f" (did you mean {group}.{near}?)" if near else "")
                + f"; its settings: {shown}"
                + (f"; set {group}.{near}={value}" if near else ""))
    return None

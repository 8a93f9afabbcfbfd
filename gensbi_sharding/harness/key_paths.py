"""A dotted key that goes below the config's settings: ``mesh.shape.model=2`` (a part its group lacks) or
``train.steps.x=1`` (a part under a setting, which holds no keys).

Hydra's multi-line "Could not override 'mesh.shape.model'. To append to your config use +mesh.shape.model=2 ...
Key 'shape' not in 'MeshConfig'" (advice the config check refuses in turn), or "Value '{}' of type 'dict' could not
be converted to Integer", named no fix; ``key_checks.unknown_key_problem`` names the part and the setting likely
meant, as it does for a typo one level deep. Pure Python: no JAX.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence

from gensbi_sharding.harness.hints import closest_name
from gensbi_sharding.harness.mesh_sizes import mesh_sizes_hint
from gensbi_sharding.harness.refusal import Refusal

__all__ = ["unknown_part", "nearest_setting", "setting_path_problem", "hydra_key_problem", "hydra_list_problem",
           "hydra_missing_problem"]


def unknown_part(parts: Sequence[str], keys_of: Callable,
                 lists: Collection[str] = ()) -> tuple[int, tuple | None] | None:
    """Where the dotted key ``parts`` leaves the config, as ``keys_of(path)`` (``override_keys.group_keys``) reads it.

    ``(i, keys)``: ``parts[i]`` is no key of the group ``parts[:i]``, whose keys are ``keys`` (``mesh.shape.model``:
    ``(1, mesh's)``); ``(i, None)``: ``parts[i]`` is a setting, and more parts follow it (``train.steps.x``: ``(1,
    None)``); None where each part but the last is a group (the last is the caller's to check), ``parts[0]`` is
    neither a section nor a setting (``override_types`` names it), or an item of a list setting of ``lists`` is set
    (``model.axes_dim.0=4``: Hydra sets it).
    """
    for i in range(1, len(parts)):
        keys = keys_of(parts[:i])
        if keys is None and ".".join(parts[:i]) in lists and parts[i].isdigit():
            return None
        if keys is None:
            return (i - 1, None) if i > 1 or parts[0] in (keys_of([]) or ()) else None
        if parts[i] not in keys:
            return (i, keys) if i < len(parts) - 1 else None
    return None


def nearest_setting(part: str, below: Sequence[str], keys: Sequence[str]) -> str | None:
    """The key of ``keys`` that ``part`` and the parts ``below`` it likely meant: ``c2st`` + ``folds`` -> c2st_folds
    (joined), ``shape`` + ``model`` -> model_axis (the last part's nearest), else the nearest to ``part``; or None."""
    for name in ("_".join([part, *below]), *below[-1:], part):
        if (near := closest_name(name, keys)) is not None:
            return near
    return None


def data_axis_hint(part: str, value: str, command) -> str | None:
    """For ``mesh.data_axis=3`` (a data axis size, which no setting takes): the mesh that size means, as
    ``mesh_sizes.mesh_sizes_hint`` names it (with a ``mesh.model_axis``/``mesh.model`` typed too), each
    suggestion one the mesh checks accept; None for another key. (Not "set mesh.model_axis=3", which 8 devices
    refuse, and which would not make a data axis of 3 anyway); "" for a size that is none (``0``, ``abc``)."""
    def size(text):
        return int(text) if str(text).isdigit() else None
    if not part.startswith("data"):
        return None
    models = [size(o.raw) for o in command.overrides if o.typed in ("mesh.model_axis", "mesh.model")]
    return mesh_sizes_hint({"data": size(value), "model": models[-1] if models else None})


def setting_path_problem(arg: str, held: Sequence[str], value: str | None, lists: Collection[str] = ()) -> str:
    """The refusal of the override ``arg`` whose part ``held[-1]`` is a setting with keys under it
    (``train.steps.x=1``; ``value`` None: a removal, ``~train.steps.x``); a setting of ``lists`` is set as a list
    (``model.axes_dim.x=4``: ``model.axes_dim=[4]``, which the list check takes)."""
    setting = ".".join(held)
    value = f"[{value}]" if setting in lists and value is not None and not value.startswith("[") else value
    said = f"{arg}: {setting} is a setting, which holds no keys"
    return Refusal(said, f"{setting}={value}", how="; set ") if value is not None else f"{said}; drop {arg}"


def hydra_key_problem(args) -> str | None:
    """The one-line refusal of the first ``hydra.*`` override of a key Hydra's own config (``hydra.conf.HydraConf``)
    lacks: ``hydra.run.dirr=runs/a`` (Hydra's is multi-line, "Could not override 'hydra.run.dirr'. To append to your
    config use +hydra.run.dirr=runs/a ... Key 'dirr' not in 'RunDir'"); None when there is none. Keys under a part of
    no fixed schema (``hydra.launcher.*``, ``hydra.job.env_set.*``), and ``+``/``++``/``~`` ones, are Hydra's."""
    import dataclasses

    from hydra.conf import HydraConf

    from gensbi_sharding.harness.config import type_hints
    from gensbi_sharding.harness.override_grammar import parse

    for o in parse(args).overrides:
        if not o.typed.startswith("hydra.") or "=" not in o.arg:
            continue
        schema, parts = HydraConf, o.typed.split(".")[1:]
        for i, part in enumerate(parts):
            hints = {k: v for k, v in type_hints(schema).items() if k != "defaults"}
            if part not in hints:
                group, near = ".".join(["hydra", *parts[:i]]), nearest_setting(part, parts[i + 1:], list(hints))
                return Refusal(f"{o.arg}: {group}.{part} is not a setting of {group}" + (
                    f" (did you mean {group}.{near}?)" if near else "") + f"; its settings: {', '.join(hints)}",
                    f"{group}.{near}={o.raw}" if near else None)
            if not dataclasses.is_dataclass(hints[part]):
                break  # a value, or a part of no fixed schema (the launcher's, a dict): Hydra's to judge
            schema = hints[part]
    return None


def hydra_list_problem(args) -> str | None:
    """The one-line refusal of a ``hydra.*`` list setting given one word or null (``hydra.searchpath=file://x``:
    Hydra's "must be a list of strings" comes in several lines, after every check has passed, the checks before it
    reading the word as a folder), or a list holding an entry that is no text (``hydra.searchpath=[1,[2]]``: Hydra's
    "must be a list of strings. Got: [1, [2]]"; a list or dict in any list of text: no entry a text holds); None
    when there is none. Checked before any check composes (Hydra warns of the folder). A yes/no entry is
    ``hydra_text_problem``'s."""
    import typing

    from gensbi_sharding.harness.hydra_entries import hydra_type
    from gensbi_sharding.harness.override_grammar import hydra_value, parse

    for o in parse(args).parsed:
        key = o.typed.lstrip("+")  # ++hydra.searchpath=file://x: Hydra's "str is not a ListConfig" alike
        if not key.startswith("hydra.") or "=" not in o.arg or o.sweep:
            continue
        if typing.get_origin(hydra_type(key)) is not list:  # List[str] only: an Optional one takes null, a dict
            continue  # another form
        if isinstance(value := o.hydra.value(), str):
            return Refusal(f"{o.arg}: {key} takes a list, even of one entry", f"{o.typed}=[{hydra_value(value)}]",
                           how="; write ")
        # hydra.searchpath=null is override_prefixes' (it knows a primary config's own search path, which [] drops)
        if value is None and key != "hydra.searchpath":  # Hydra: "Field ... is not Optional", as late
            return Refusal(f"{o.arg}: {key} takes a list, not null", f"{o.typed}=[]", how="; write ",
                           after=" (none), or leave it out")
        if isinstance(value, list) and (problem := _entries_problem(o, key, value)) is not None:
            return problem
    return None


def _entries_problem(o, key: str, value: list) -> str | None:
    """A list of text given a list or dict as an entry (no text it stands for); a search path given any entry that is
    no text (Hydra's "must be a list of strings": a number, a yes/no, null too)."""
    strict = key == "hydra.searchpath"
    bad = next((v for v in value if isinstance(v, list | dict) or strict and not isinstance(v, str)), ...)
    if bad is ...:
        return None
    return (f"{o.arg}: {key} takes a list of " + ("folders (a path, file://<path>) or packages (pkg://<name>)" if strict
                                                else "text entries")
            + f", and {_written(bad)} is not one; give each entry as one word" + (
                ", the folder's path for a folder" if strict else ""))


def _written(value) -> str:
    """One entry of a list as Hydra's grammar writes it: ``[2]``, ``{a:1}``, ``null``, a string as Hydra reads it."""
    from gensbi_sharding.harness.hints import override_literal
    from gensbi_sharding.harness.override_grammar import hydra_value

    if isinstance(value, str):
        return hydra_value(value)
    if isinstance(value, list):
        return f"[{','.join(map(_written, value))}]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{k}:{_written(v)}" for k, v in value.items()) + "}"
    return override_literal(value)


def hydra_missing_problem(args) -> str | None:
    """The one-line refusal of a ``hydra.*`` setting given OmegaConf's ``???`` (a value still to be given) that Hydra
    reads as it starts (``hydra.output_subdir=???``, ``hydra.job.chdir=???``: was Hydra's MissingMandatoryValue
    traceback, a run folder's launch.log and .run.lock left; ``hydra.verbose=???`` alike, before it; the sweep job's
    folder ``hydra.sweep.subdir=???`` was ``None``); None when there is none. A ``???`` Hydra fills itself
    (``hydra.job.name``, ``hydra.runtime.*``, ``hydra.mode``) runs; the output folders are
    ``folder_interpolation_problem``'s."""
    import typing

    from hydra.conf import HydraConf
    from omegaconf import MISSING, DictConfig, OmegaConf

    from gensbi_sharding.harness.config_values import MISSING_MARK
    from gensbi_sharding.harness.hints import override_literal
    from gensbi_sharding.harness.hydra_entries import in_hydra_dict
    from gensbi_sharding.harness.override_grammar import hydra_value, parse

    schema = OmegaConf.structured(HydraConf)
    for o in parse(args).parsed:
        key = o.typed.lstrip("+")  # ~key=??? deletes the key where it holds ???: nothing Hydra reads
        if not key.startswith("hydra.") or "=" not in o.arg or o.sweep or o.hydra.value() != MISSING:
            continue
        if in_hydra_dict(key):  # an entry Hydra reads as it starts (env_set's, a logging config's): else its
            return f"{o.arg}: {MISSING_MARK} or leave it out"  # traceback (MissingMandatoryValue, an AttributeError)
        parent, _, name = key.removeprefix("hydra.").rpartition(".")
        node = OmegaConf.select(schema, parent, default=None) if parent else schema
        if not isinstance(node, DictConfig) or name not in node.keys():  # no such key: hydra_key_problem's
            continue
        filled = OmegaConf.is_missing(node, name)
        if key == "hydra.mode" or filled and parent in ("job", "runtime"):  # Hydra sets these as it starts
            continue
        if key in ("hydra.run.dir", "hydra.sweep.dir"):  # the folder's: folder_interpolation_problem names runs/a
            continue
        default: typing.Any = {} if filled else node.get(name)
        if default is not None and not isinstance(default, str | bool | int):  # a dict's or list's: no word to show
            return f"{o.arg}: {MISSING_MARK} or leave it out"
        shown = hydra_value(default) if isinstance(default, str) else override_literal(default)
        return Refusal(f"{o.arg}: {MISSING_MARK}", f"{key}={shown}", how=", e.g. ",
                       after=" (Hydra's default), or leave it out")
    return None

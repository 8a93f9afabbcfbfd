"""Where a command-line key lands in the config before Hydra composes it: the schemas' and option files' keys.

The one walk of ``harness/config.py``'s typed dataclasses (every model schema: the model is picked at compose time)
and of ``conf/``'s option files (and ``hydra.searchpath``'s ``file://`` folders), shared by every override check
(``key_checks``: launch.py's checks of the keys) and ``config_values``: a new field or option is covered as it is
added. Pure Python: no JAX.
"""

from __future__ import annotations

import dataclasses
import functools
import typing
from collections.abc import Sequence
from pathlib import Path

from gensbi_sharding.harness.config import Config, ModelConfig, model_schema_classes, type_hints
from gensbi_sharding.harness.groups import group_options
from gensbi_sharding.rules import LOGICAL_AXES

__all__ = ["OPTIONAL_GROUPS", "ListField", "schema_name", "model_schemas", "GENSBI_NAMES", "gensbi_name", "MEANT_NAMES",
           "meant_name", "sections",
           "settings", "option_groups", "group_keys", "schema_default", "list_fields", "model_fields", "options"]

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


#: GenSBI's config-file names of a model's settings (``gensbi.recipes.simformer.parse_simformer_params`` reads
#: ``num_layers`` as ``depth`` and ``widening_factor`` as ``mlp_ratio``): a GenSBI user types them, and the nearest
#: setting by spelling (``num_hidden_layers``) is another one.
GENSBI_NAMES = {"simformer": {"num_layers": "depth", "widening_factor": "mlp_ratio"}}


def gensbi_name(models: Sequence[str] | None, key: str) -> str | None:
    """The setting ``key`` is GenSBI's config-file name for in every one of ``models`` (``"depth"`` for
    ``num_layers`` under ``["simformer"]``); None where it is no such name in one of them."""
    named = {GENSBI_NAMES.get(m, {}).get(key) for m in models or [None]}
    return named.pop() if len(named) == 1 and None not in named else None


_LAYERS = ("num_layers", "n_layers", "layers", "num_blocks", "n_blocks", "blocks")
_WIDTHS = ("hidden", "hidden_dim", "hidden_size", "dim", "d_model", "embed_dim", "emb_dim")
_FLUX1_LAYERS = ("Flux1 counts its layers in two settings: model.depth, its double-stream blocks, and "
                 "model.depth_single_blocks, its single-stream ones")
# GenSBI's Flux1 sizes a head by the id merge mode: the rope axes' sum for sum, the two embeddings' for concat
_FLUX1_HEAD = "sum(model.axes_dim), or under model.id_merge_mode=concat model.val_emb_dim + model.id_emb_dim"

#: Names a user brings to a model from elsewhere (Flux's FluxParams, which GenSBI's Flux1 recipe reads with the
#: harness's names; Simformer's GenSBI names on another model; the usual MLP and transformer names), by what they
#: mean there: the model's setting that means the same, or, where none does, a note of what sets that quantity. Read
#: before the nearest setting by spelling, which for these is another kind of setting (flux1's num_layers ->
#: num_heads, double_blocks -> depth_single_blocks, hidden_dim -> id_emb_dim; transformer's embed_dim ->
#: time_embed_dim): a hint that changes what the model is, where no hint is better.
MEANT_NAMES: dict[str, dict[str, str]] = {
    "flux1": {**dict.fromkeys(_LAYERS, _FLUX1_LAYERS),
              **dict.fromkeys(("depth_double", "depth_double_blocks", "double_blocks", "num_double_blocks"), "depth"),
              **dict.fromkeys(("depth_single", "single_blocks", "num_single_blocks"), "depth_single_blocks"),
              "widening_factor": "mlp_ratio", "head_dim": f"a head's width is {_FLUX1_HEAD}",
              **dict.fromkeys(_WIDTHS, f"Flux1's width is model.num_heads times a head's: {_FLUX1_HEAD}")},
    "simformer": {**dict.fromkeys(_LAYERS, "depth"), "qkv_dim": "qkv_features", **dict.fromkeys(
        _WIDTHS, "a token's width is model.val_emb_dim + model.id_emb_dim + model.cond_emb_dim")},
    "mlp": {**dict.fromkeys(_LAYERS, "depth"), **dict.fromkeys(_WIDTHS, "width"), "widening_factor": "mlp_ratio"},
    "transformer": {**dict.fromkeys(_LAYERS, "depth"), **dict.fromkeys(_WIDTHS, "embed"),
                    "widening_factor": "mlp_ratio", **dict.fromkeys(("n_heads", "num_heads"), "heads")},
}


def meant_name(models: Sequence[str] | None, key: str) -> str | None:
    """What ``key``, no setting of ``models``, means in each of them (``MEANT_NAMES``): the setting (``"depth"`` for
    ``num_blocks`` under ``["mlp"]``) or a note (``num_layers`` under ``["flux1"]``: its two depths); ``""`` where
    the models mean different things by it (no hint: the nearest spelling misleads one of them); None where it is
    none of their names (the nearest spelling is the hint)."""
    meant = {MEANT_NAMES.get(m, {}).get(key) for m in models or [None]}
    return None if meant == {None} else meant.pop() if len(meant) == 1 else ""


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


@functools.cache  # the checks ask for it per override and per check (uncached, ~5 % of their CPU)
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

"""The default of a setting as the user's composition gives it: the command's presets and config groups
(``experiment=quick``, ``model=transformer``), without the command's own values.

``conf/model/mlp.yaml`` says ``width: 128`` but ``experiment=quick`` composes 32: a message naming "its default"
names the composed one (not "model.width=100000 (at its default 128 ...)" under ``experiment=quick``).
``override_keys.schema_default`` stays the reader of the schema's own default, used where no command composed the
config (``run(cfg)`` called directly) or a key the composition lacks. ``suggested_default`` is the value a refusal
offers to type ("e.g. train.steps=20"): the composed default, never the value refused.
"""

from __future__ import annotations

import functools
from typing import Any

from omegaconf import OmegaConf

from gensbi_sharding.harness.override_keys import schema_default

__all__ = ["composed_default", "composed_section", "suggested_default"]

_ABSENT = object()


def composed_default(cfg: Any, path: str) -> tuple[bool, Any]:
    """``(True, default)`` of the dotted key ``path`` (``model.width``) under the running command's composition.

    Parameters
    ----------
    cfg : DictConfig
        The run's config: the schema its section was merged onto is the fallback's (the chosen model's own).
    path : str
        A dotted key of ``cfg`` (``train.steps``; a top-level one: ``seed``).

    Returns
    -------
    tuple of (bool, Any)
        The value the command's config groups and presets give ``path`` with none of the command's values
        (``key=value`` overrides of a dotted key) applied; outside a Hydra app, or where that composition fails
        or lacks the key, ``schema_default`` of the key's schema; ``(False, None)`` where neither has one.
    """
    composed = _composed(cfg)
    if composed is not None:
        node = OmegaConf.select(composed, path, default=None, throw_on_resolution_failure=False)
        if node is not None:
            return True, OmegaConf.to_container(node, resolve=True) if OmegaConf.is_config(node) else node
    return _schema_default(cfg, path)


def composed_section(cfg: Any, section: str) -> dict[str, Any]:
    """``{key: default}`` of every key of ``cfg[section]`` that has one (``composed_default``).

    Parameters
    ----------
    cfg : DictConfig
        The run's config.
    section : str
        A top-level section (``model``).

    Returns
    -------
    dict of str to Any
    """
    found = {k: composed_default(cfg, f"{section}.{k}") for k in cfg[section]}
    return {k: value for k, (has, value) in found.items() if has}


def suggested_default(cfg: Any, path: str) -> tuple[bool, Any]:
    """``(True, value)`` a refusal of ``path`` offers to type: ``composed_default``, or the schema's default where
    the composed one is the value ``cfg`` holds (the refused one: a preset of one's own may compose it).

    Parameters
    ----------
    cfg : DictConfig
        The refused config.
    path : str
        The refused dotted key (``data.batch_size``).

    Returns
    -------
    tuple of (bool, Any)
        ``(False, None)`` where both are the refused value, there is none, or ``path`` is a list's item
        (``model.axes_dim[0]``: no override sets one item).
    """
    if "[" in path:
        return False, None
    refused = _held(cfg, path)
    for found, default in (composed_default(cfg, path), _schema_default(cfg, path)):
        # 1 == True in Python: a bool default is no suggestion for an int refused, nor the other way round
        if found and not (default == refused and isinstance(default, bool) == isinstance(refused, bool)):
            return True, default
    return False, None


def _held(cfg: Any, path: str) -> Any:
    """The resolved value of ``path`` in ``cfg``; ``_ABSENT`` where it is missing or cannot be resolved."""
    try:
        node = OmegaConf.select(cfg, path, default=_ABSENT)
        return OmegaConf.to_container(node, resolve=True) if OmegaConf.is_config(node) else node
    except Exception:  # an unresolvable ${...}: no default equals it
        return _ABSENT


def _schema_default(cfg: Any, path: str) -> tuple[bool, Any]:
    from gensbi_sharding.harness.config import Config

    parent, _, key = path.rpartition(".")
    try:
        schema = OmegaConf.get_type(OmegaConf.select(cfg, parent, throw_on_resolution_failure=False)) if parent \
            else Config
    except ValueError:  # not a config node
        return False, None
    if schema is dict:  # an untyped section (OmegaConf.load of a run's .hydra/config.yaml, a dict): its place says
        schema = _untyped_schema(cfg, parent)  # (dict has no default: no fix)
    return schema_default(schema, key)


def _untyped_schema(cfg: Any, parent: str) -> type | None:
    """The dataclass the section at the dotted ``parent`` has in ``Config``, as Hydra would type it (``model``'s by
    ``model.name``); None where none does."""
    import dataclasses

    from gensbi_sharding.harness.config import Config, model_schema_classes, type_hints

    schema: Any = Config
    for depth, part in enumerate(parent.split(".")):
        if depth == 0 and part == "model":
            name = OmegaConf.select(cfg, "model.name", default=None, throw_on_resolution_failure=False)
            schema = next((c for c in model_schema_classes() if c.name == name), None)
        else:
            schema = type_hints(schema).get(part) if dataclasses.is_dataclass(schema) else None
        if not dataclasses.is_dataclass(schema):
            return None
    return schema


def _composed(cfg: Any) -> Any:
    """The running command's config composed from its group choices alone (its ``hydra.searchpath`` kept);
    None outside a Hydra app or where it cannot be composed. The Hydra section is ``cfg``'s own where it holds
    one (Hydra's callbacks get it before ``HydraConfig`` is set: the folder callback's refusals), else
    ``HydraConfig``'s."""
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.hydra_config import HydraConfig

    hydra = OmegaConf.select(cfg, "hydra", default=None) if OmegaConf.is_config(cfg) else None
    if hydra is None and HydraConfig.initialized():
        hydra = HydraConfig.get()
    if hydra is None or not GlobalHydra.instance().is_initialized():
        return None
    try:
        # As typed: an override's ${...} (train.steps=${data.nope}) is text here, not to resolve
        task, given = (tuple(map(str, OmegaConf.to_container(hydra.overrides[k], resolve=False)))
                       for k in ("task", "hydra"))
        searched = tuple(o for o in given if o.startswith("hydra.searchpath="))
        name = hydra.job.config_name
    except Exception:  # a Hydra section without them (a test's own): the schema's default is said instead
        return None
    try:
        groups = set(GlobalHydra.instance().config_loader().list_groups(""))
    except Exception:  # a message's default is worth no failure: the schema's is said instead
        return None
    # experiment=quick, model=mlp, +rule=fsdp choose groups: kept; model.width=100000, seed=3 are the user's values.
    # Cached by the choices alone: a sweep's refused jobs that differ only in values share one composition.
    chosen = tuple(o for o in task if o.split("=", 1)[0].lstrip("+~").split("@", 1)[0] in groups)
    return _compose(name, searched, chosen)


@functools.lru_cache(maxsize=4)
def _compose(config_name: str, searched: tuple[str, ...], chosen: tuple[str, ...]) -> Any:
    from hydra import compose

    try:
        return compose(config_name=config_name, overrides=[*searched, *chosen])
    except Exception:  # a message's default is worth no failure: the schema's is said instead
        return None

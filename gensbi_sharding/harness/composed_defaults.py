"""The default of a setting as the user's composition gives it: the command's presets and config groups
(``experiment=quick``, ``model=transformer``), without the command's own values.

``conf/model/mlp.yaml`` says ``width: 128`` but ``experiment=quick`` composes 32: a message naming "its default"
names the composed one (was: "model.width=100000 (at its default 128 ...)" under ``experiment=quick``).
``override_keys.schema_default`` stays the reader of the schema's own default, used where no command composed the
config (``run(cfg)`` called directly) or a key the composition lacks.
"""

from __future__ import annotations

import functools
from typing import Any

from omegaconf import OmegaConf

from gensbi_sharding.harness.override_keys import schema_default

__all__ = ["composed_default", "composed_section"]


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
    composed = _composed()
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


def _schema_default(cfg: Any, path: str) -> tuple[bool, Any]:
    from gensbi_sharding.harness.config import Config

    parent, _, key = path.rpartition(".")
    try:
        schema = OmegaConf.get_type(OmegaConf.select(cfg, parent, throw_on_resolution_failure=False)) if parent \
            else Config
    except ValueError:  # not a config node
        return False, None
    return schema_default(schema, key)


def _composed() -> Any:
    """The running command's config composed from its group choices alone (its ``hydra.searchpath`` kept);
    None outside a Hydra app or where it cannot be composed."""
    from hydra.core.hydra_config import HydraConfig

    if not HydraConfig.initialized():
        return None
    hydra = HydraConfig.get()
    searched = [o for o in hydra.overrides.hydra if o.startswith("hydra.searchpath=")]
    return _compose(hydra.job.config_name, tuple(searched), tuple(hydra.overrides.task))


@functools.lru_cache(maxsize=4)
def _compose(config_name: str, searched: tuple[str, ...], task: tuple[str, ...]) -> Any:
    from hydra import compose
    from hydra.core.global_hydra import GlobalHydra

    try:
        groups = set(GlobalHydra.instance().config_loader().list_groups(""))
        # experiment=quick, model=mlp, +rule=fsdp choose groups: kept; model.width=100000, seed=3 are the user's values
        chosen = [o for o in task if o.split("=", 1)[0].lstrip("+~").split("@", 1)[0] in groups]
        return compose(config_name=config_name, overrides=[*searched, *chosen])
    except Exception:  # a message's default is worth no failure: the schema's is said instead
        return None

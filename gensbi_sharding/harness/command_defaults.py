"""The value a command-line check suggests ("e.g. train.steps=20"), as the command's own composition gives it.

launch.py's checks run before Hydra composes (``command_checks``); a refusal that offers a value to type offered
the schema's default, ``train.steps=4000``, where the command's ``experiment=quick`` composes 20 (was: ``python
launch.py experiment=quick train.steps=abc`` said "e.g. train.steps=4000"). Here the command's group choices
(``experiment=``, ``model=``, ``data=``, ... and its ``hydra.searchpath``), as typed and without the override
refused, are composed once; the schema's default is said only where that composition fails (a swept group, an
option that does not exist) or lacks the key. Once composed, ``composed_defaults`` says the same for a run's
config. Pure Python: no JAX.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from gensbi_sharding.harness.groups import CONF, hydra_flag_values
from gensbi_sharding.harness.override_grammar import CommandLine, Override
from gensbi_sharding.harness.override_keys import option_groups, schema_default, schema_name

__all__ = ["command_default"]

_ABSENT = object()


def command_default(command: CommandLine, without: Override | None, schema: type, key: str) -> Any:
    """The default of the dotted setting ``key`` under the composition of ``command``'s group choices.

    Parameters
    ----------
    command : CommandLine
        The command line as ``override_grammar.parse`` reads it.
    without : Override or None
        The refused override, left out of the composition (a refused ``model=mlpp`` is no choice to compose).
    schema : type
        The typed schema of ``key``'s section (``TrainConfig``; ``Config`` for a top-level key): its default is the
        fallback, and under ``model`` the composed model must be the one it builds (a swept experiment's jobs differ).
    key : str
        ``train.steps``, ``model.width``, ``seed``.

    Returns
    -------
    Any
        The composed value; where the composition fails or lacks ``key``, ``override_keys.schema_default``'s.
    """
    section, _, name = key.rpartition(".")
    composed = _composition(command, without)
    if composed is not None and (section != "model" or OmegaConf.select(composed, "model.name") == schema_name(schema)):
        node = OmegaConf.select(composed, key, default=_ABSENT, throw_on_resolution_failure=False)
        if node is not _ABSENT:  # null too: a preset may compose null where the schema has a value
            return OmegaConf.to_container(node, resolve=True) if OmegaConf.is_config(node) else node
    return schema_default(schema, name or key)[1]


def _composition(command: CommandLine, without: Override | None) -> Any:
    """The config ``command``'s group choices and search path compose (no other value of the command's); None where
    a choice is swept (no one config) or the composition fails."""
    groups = set(option_groups())
    chosen = []
    for o in command.parsed:
        if o is without or o.hydra.package is not None or o.key == "hydra.searchpath":
            continue
        if o.key in groups:
            if o.sweep or not o.values():  # a sweep or a glob: each job composes its own
                return None
            chosen.append(o.arg)
    # --config-name's config, from the folder that holds it (Hydra finds no primary config through a searchpath
    # override), beside conf/ and hydra.searchpath's and --config-dir's/--config-path's folders, one override
    names = [n.removesuffix(".yaml") for n in hydra_flag_values(command.args, "-cn", "--config-name")] or ["config"]
    folders = [CONF, *(Path(p[len("file://"):]) for p in command.search_paths if p.startswith("file://"))]
    home = next((f for f in folders if (f / f"{names[-1]}.yaml").is_file()), CONF)
    if paths := [f"file://{f}" for f in folders if f != home] + [p for p in command.search_paths if "://" in p
                                                                   and not p.startswith("file://")]:
        chosen.append(f"hydra.searchpath=[{','.join(paths)}]")
    return _compose(tuple(chosen), str(home), names[-1])


@functools.lru_cache(maxsize=8)
def _compose(overrides: tuple[str, ...], config_dir: str, config_name: str) -> Any:
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from gensbi_sharding.harness.config import register_configs

    register_configs()  # conf/model/*.yaml pull in the schemas it stores
    try:
        if GlobalHydra.instance().is_initialized():  # inside Hydra's app (sweep_check's refused job): its conf/
            return compose(config_name=config_name, overrides=list(overrides))
        with initialize_config_dir(config_dir=config_dir, version_base="1.3"):
            return compose(config_name=config_name, overrides=list(overrides))
    except Exception:  # a suggestion is worth no failure: the schema's default is said instead
        return None

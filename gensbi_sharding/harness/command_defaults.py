"""The value a command-line check suggests ("e.g. train.steps=20"), as the command's own composition gives it.

launch.py's checks run before Hydra composes (``command_checks``); a refusal that offers a value to type would offer
the schema's default, ``train.steps=3000``, where the command's ``experiment=quick`` composes 20 (``python
launch.py experiment=quick train.steps=abc``: "e.g. train.steps=3000"). Here the command's group choices
(``experiment=``, ``model=``, ``data=``, ... and its ``hydra.searchpath``), as typed and without the override
refused, are composed once per job their swept groups make; the schema's default is said only where the jobs
compose other values (``experiment=quick,sbibm``), a composition fails (an option that does not exist, a glob) or
lacks the key. Once composed, ``composed_defaults`` says the same for a run's config. Pure Python: no JAX.
"""

from __future__ import annotations

import functools
import itertools
import math
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from gensbi_sharding.harness.groups import CONF
from gensbi_sharding.harness.override_grammar import CommandLine, Override
from gensbi_sharding.harness.override_keys import option_groups, schema_default, schema_name
from gensbi_sharding.harness.search_path import hydra_flag_values

__all__ = ["command_default", "command_jobs", "composed"]

_ABSENT = object()
MAX_JOBS = 8  # the jobs of a sweep whose group choices are composed to find a value all of them share


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
    found = set()
    for composed in _compositions(command, without):
        if composed is None:  # a job whose value is unknown: no value said to be every job's
            return schema_default(schema, name or key)[1]
        if section == "model" and OmegaConf.select(composed, "model.name") != schema_name(schema):
            continue  # another model's job (model=flux1,transformer): its settings are another schema's
        node = OmegaConf.select(composed, key, default=_ABSENT, throw_on_resolution_failure=False)
        if node is _ABSENT:
            return schema_default(schema, name or key)[1]
        # null too: a preset may compose null where the schema has a value
        value = OmegaConf.to_container(node, resolve=True) if OmegaConf.is_config(node) else node
        found.add(repr(value))
        if len(found) > 1:  # the swept groups compose other values (experiment=quick,sbibm: 20, 20000)
            return schema_default(schema, name or key)[1]
    return value if len(found) == 1 else schema_default(schema, name or key)[1]


def _compositions(command: CommandLine, without: Override | None) -> Iterator[Any]:
    """The configs ``command``'s group choices and search path compose (no other value of the command's), one per
    job its swept groups make (``model=mlp,transformer``: two), composed as asked for; None for a job whose
    composition fails, or for all where a choice is a glob or the jobs are too many to compose each.

    Was one composition, None for any swept group: ``-m experiment=quick model=mlp,transformer train.steps=abc``
    suggested the schema's train.steps (3000), where both jobs compose 20.
    """
    jobs = command_jobs(command, without)
    if jobs is None:
        yield None
        return
    for chosen, home, name in jobs:
        yield _compose(chosen, home, name)


def command_jobs(command: CommandLine, without: Override | None = None
                 ) -> list[tuple[tuple[str, ...], str, str]] | None:
    """Per job of ``command`` (in Hydra's order): its group choices and search path as overrides, the folder of its
    primary config and that config's name, for ``hydra.compose``; None where a choice is a glob or the jobs number
    more than ``MAX_JOBS``."""
    groups = set(option_groups())
    choices: list[list[str]] = []
    for o in command.parsed:
        if o is without or o.hydra.package is not None or o.key == "hydra.searchpath":
            continue
        if o.key in groups:
            if not o.values():  # a glob: its options are the group's, matched
                return None
            choices.append([f"{o.typed}={v}" for v in o.values()] if o.sweep else [o.arg])
    # --config-name's config, from the folder that holds it (Hydra finds no primary config through a searchpath
    # override), beside conf/ and hydra.searchpath's and --config-dir's/--config-path's folders, one override
    names = [n.removesuffix(".yaml") for n in hydra_flag_values(command.args, "-cn", "--config-name")] or ["config"]
    folders = [CONF, *(Path(p[len("file://"):]) for p in command.search_paths if p.startswith("file://"))]
    home = next((f for f in folders if (f / f"{names[-1]}.yaml").is_file()), CONF)
    searched = []
    if paths := [f"file://{f}" for f in folders if f != home] + [p for p in command.search_paths if "://" in p
                                                                   and not p.startswith("file://")]:
        searched.append(f"hydra.searchpath=[{','.join(paths)}]")
    if math.prod(len(c) for c in choices) > MAX_JOBS:  # composed ~0.1 s each: a suggestion is worth no wait
        return None
    return [((*chosen, *searched), str(home), names[-1]) for chosen in itertools.product(*choices)]  # Hydra's order


def _compose(overrides: tuple[str, ...], config_dir: str, config_name: str) -> Any:
    return composed(overrides, config_dir, config_name)[0]  # a suggestion is worth no failure: None, the schema's


# a multirun's command line is checked job by job for each fix in turn: every job of a few commands kept (a refusal
# of 8 jobs composes them 36 times, 25 of them distinct)
@functools.lru_cache(maxsize=4 * MAX_JOBS)
def composed(overrides: tuple[str, ...], config_dir: str, config_name: str) -> tuple[Any, Exception | None]:
    """Hydra's composition of one of ``command_jobs``' jobs, and None; or None and the error composing it."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from gensbi_sharding.harness.config import register_configs

    register_configs()  # conf/model/*.yaml pull in the schemas it stores
    # A check's composition says nothing itself: Hydra's "path=x is not available" for a search path folder that is
    # not there would print above the refusal (twice: the command, then its fix checked), as a warning and its line
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        try:
            if GlobalHydra.instance().is_initialized():  # inside Hydra's app (sweep_check's refused job): its conf/
                return compose(config_name=config_name, overrides=list(overrides)), None
            with initialize_config_dir(config_dir=config_dir, version_base="1.3"):
                return compose(config_name=config_name, overrides=list(overrides)), None
        except Exception as err:
            return None, err

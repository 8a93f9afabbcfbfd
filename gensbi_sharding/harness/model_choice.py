"""Which model(s) a command line's ``model.<field>`` keys apply to, before Hydra composes anything.

``model=`` picks it (the last one typed, each swept or glob-matched one); else ``experiment=``'s file
(``override /model: transformer``); else the primary config's default (``conf/config.yaml``'s ``mlp``, or
``--config-name``'s). The key checks (``override_keys``, ``override_types``, ``override_prefixes``) read the model
here, so a hint names the fields of the model the run would build, not every model's. Pure Python: no JAX.
"""

from __future__ import annotations

import functools
import typing
from collections.abc import Sequence
from pathlib import Path

from hydra.core.override_parser.types import OverrideType
from omegaconf import OmegaConf

from gensbi_sharding.harness.groups import CONF
from gensbi_sharding.harness.override_grammar import CommandLine, parse
from gensbi_sharding.harness.search_path import config_folders, hydra_flag_values

__all__ = ["ModelChoice", "chosen_models", "default_model", "experiment_model"]


class ModelChoice(typing.NamedTuple):
    """The models a command's ``model.*`` keys apply to (``models``), as a message names them (``label``:
    ``the default model=mlp``, ``experiment=quick's model=mlp``, ``model=mlp,flux1``), and whether ``model=`` was
    typed (``given``)."""

    models: list[str]
    label: str
    given: bool


def _picked(defaults: list, entry: str) -> str | None:
    """The option a defaults list's ``entry`` picks (``model: mlp``, ``override /model: transformer``), or None."""
    return next((e[entry] for e in defaults if not isinstance(e, str) and entry in e), None)


def _defaults(path: Path) -> list:
    """The defaults list of the config file ``path`` as it is now on disk.

    A command's checks look the model up about ten times, each reading conf/config.yaml (~25 ms): that was over
    half of a refused command's time. Read again whenever the file's modification time or size changes."""
    stat = path.stat()
    return _read_defaults(path, stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=32)
def _read_defaults(path: Path, mtime_ns: int, size: int) -> list:
    return OmegaConf.load(path).get("defaults", [])


def default_model(args: Sequence[str] = ()) -> str | None:
    """The model the primary config's defaults list picks (``mlp``); None if it picks none or cannot be read.

    The primary config is ``conf/config.yaml``, or the one ``--config-name`` names (in ``conf/`` or a
    ``--config-dir``): a user's own, which may include ``config`` and ``override model: transformer`` (so its
    ``model.heads=2`` is not refused as "model=mlp (the default) has no field heads").
    """
    names = hydra_flag_values(args, "-cn", "--config-name")
    folders = [CONF] + [Path(e[len("file://"):]) for e in config_folders(args)]
    return _primary_model(names[-1].removesuffix(".yaml") if names else "config", folders, 3)


def _primary_model(name: str, folders: list[Path], depth: int) -> str | None:
    """The model config ``name`` (found in ``folders``) picks: its own ``override model``/``model`` entry, else that
    of a config its defaults list includes (``- config``), ``depth`` levels down at most."""
    path = next((f / f"{name}.yaml" for f in folders if (f / f"{name}.yaml").is_file()), None)
    if path is None or depth == 0:
        return None
    defaults = _defaults(path)
    for entry in ("override model", "override /model", "model", "/model"):
        if (picked := _picked(defaults, entry)) is not None:
            return picked
    included = [e for e in defaults if isinstance(e, str) and e != "_self_"]
    return next(filter(None, (_primary_model(e.lstrip("/"), folders, depth - 1) for e in included)), None)


def experiment_model(name: str) -> str | None:
    """The model ``conf/experiment/<name>.yaml`` picks (``override /model: transformer``), None if it picks none;
    "?" for an experiment not in ``conf/`` (a search path's), which may pick one."""
    path = CONF / "experiment" / f"{name}.yaml"
    return _picked(_defaults(path), "override /model") if path.is_file() else "?"


def chosen_models(args: Sequence[str] | CommandLine) -> ModelChoice | None:
    """The model(s) whose fields a command line's ``model.<field>`` keys set.

    Parameters
    ----------
    args : sequence of str or CommandLine
        The command line after the program name (``sys.argv[1:]``).

    Returns
    -------
    ModelChoice or None
        ``ModelChoice(["mlp"], "the default model=mlp", False)`` without ``model=`` or ``experiment=``;
        None where the model cannot be read before Hydra composes (a swept ``experiment=``, one from a
        search path).
    """
    command = parse(args)
    if command.models:
        return ModelChoice(list(command.models), f"model={command.model_override.raw}", True)
    experiments = [o for o in command.parsed if o.key == "experiment" and o.hydra.type != OverrideType.DEL]
    if any(o.hydra.is_sweep_override() for o in experiments):
        return None  # each job's experiment may pick another model
    name = str(experiments[-1].hydra.value()) if experiments else None
    picked = experiment_model(name) if name else None
    if picked == "?" or (model := picked or default_model(command.args)) is None:
        return None
    return ModelChoice([model], f"{f'experiment={name}' + chr(39) + 's' if picked else 'the default'} model={model}",
                       False)

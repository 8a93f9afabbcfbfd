"""Checks of every value of a composed config: it resolves, is finite, fits int32, and a list key holds a list.

Each names the key, its value and the override that fixes it, as ``ConfigError`` (``check_*``) or as one
line (``interpolation_problem``, which the folder callback and ``run`` print before anything is written).
"""

from __future__ import annotations

import math

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import (GrammarParseError, InterpolationResolutionError, InterpolationToMissingValueError,
                              MissingMandatoryValue)

from gensbi_sharding.harness.composed_defaults import suggested_default
from gensbi_sharding.harness.config import ConfigError
from gensbi_sharding.harness.hints import override_literal
from gensbi_sharding.harness.override_keys import list_fields
from gensbi_sharding.harness.paste_command import command_for
from gensbi_sharding.harness.refusal import Refusal
from gensbi_sharding.harness.units import is_int

__all__ = ["INT32_MAX", "check_lists", "check_numbers", "interpolation_problem", "folder_interpolation_problem"]


def interpolation_problem(cfg: DictConfig) -> str | None:
    """The one-line refusal of the first setting whose ``${...}`` cannot be resolved; None when all resolve.

    ``train.steps=${data.nope}`` (a key that does not exist), ``${oc.env:UNSET}`` or ``${data.val_fraction}``
    for an int ended in a traceback from the first code that read the config (the folder callback, then
    ``run``), naming the interpolation but not what to type.

    Parameters
    ----------
    cfg : DictConfig
        The composed config (its ``hydra`` section is left alone: Hydra resolves its own).

    Returns
    -------
    str or None
        ``"train.steps=${data.nope} cannot be resolved (Interpolation key 'data.nope' not found); give a value,
        e.g. train.steps=3000, or point the ${...} at an existing key of the right type (...)"``.
    """
    for key in (k for k in cfg.keys() if k != "hydra"):
        try:
            OmegaConf.to_container(cfg[key], resolve=True, throw_on_missing=True) if OmegaConf.is_config(cfg[key]) \
                else cfg[key]
        except MissingMandatoryValue as err:  # one line naming the key, before any folder is made
            # (OmegaConf's own text is multi-line)
            return _missing_problem(cfg, str(getattr(err, "full_key", None) or key))
        except (InterpolationResolutionError, GrammarParseError) as err:
            path = str(getattr(err, "full_key", None) or key)
            raw = OmegaConf.to_container(cfg, resolve=False)
            for part in path.replace("[", ".").replace("]", "").split("."):  # the value as typed: ${...}
                raw = raw[int(part)] if isinstance(raw, list) else raw[part]
            reason = str(err).strip().splitlines()[0]
            found, default = suggested_default(cfg, path)
            said = f"{path}={raw} cannot be resolved ({reason}); give a value"
            after = (f", or point the ${{...}} at an existing key of the right type ({command_for()} --cfg job lists "
                     "the keys)")
            return Refusal(said, f"{path}={override_literal(default)}", how=", e.g. ", after=after) if found \
                else said + after
    return None


MISSING_MARK = "??? is OmegaConf's mark of a value still to be given, which no run can read; give a value"


def _missing_problem(cfg: DictConfig, path: str) -> str:
    """The refusal of OmegaConf's ``???`` (a value still to be given) at ``path``, named as typed: the whole list
    where it is a list's item (``eval.observations=[1,???]``: no override sets one item)."""
    path = path.split("[", 1)[0]
    raw = _typed(cfg, path)
    found, default = suggested_default(cfg, path)
    said = f"{path}={override_literal(raw)}: {MISSING_MARK}"
    return Refusal(said, f"{path}={override_literal(default)}", how=", e.g. ") if found else said


def folder_interpolation_problem(cfg: DictConfig) -> str | None:
    """The one-line refusal of a ``hydra.*`` value whose ``${...}`` cannot be resolved: the output folder,
    ``hydra.run.dir`` of a run, ``hydra.sweep.dir`` of a multirun (``hydra.run.dir=runs/${oc.env:UNSET}``), and any
    other ``hydra.*`` key the command sets (``hydra.job.name=${oc.env:UNSET}``); None when they resolve.

    ``interpolation_problem`` leaves the ``hydra`` section to Hydra, which resolves these only once the folder
    callback reads them: was that callback's traceback (after a warning calling it a fault of gensbi_sharding's own),
    or Hydra's, a folder already made. ``hydra.sweep.subdir`` resolves per job: ``sweep_subdirs``' to check.
    """
    multirun = str(OmegaConf.select(cfg, "hydra.mode", default="")).endswith("MULTIRUN")
    given = OmegaConf.select(cfg, "hydra.overrides.hydra", default=None)  # as typed: read resolved, each would raise
    typed = [o.split("=", 1)[0].lstrip("+") for o in (OmegaConf.to_container(given) if given is not None else [])
             if "${" in o]  # the hydra.* overrides of the command line that interpolate
    other = ("hydra.run.", "hydra.sweep.subdir") if multirun else ("hydra.sweep.",)  # read by the other mode or later
    paths = ["hydra.sweep.dir" if multirun else "hydra.run.dir"] + [k for k in typed if not k.startswith(other)]
    for path in dict.fromkeys(paths):
        try:
            OmegaConf.select(cfg, path, throw_on_resolution_failure=True, throw_on_missing=True)
        except MissingMandatoryValue:  # refused: else a run's outputs in a folder named None
            return Refusal(f"{path}=???: {MISSING_MARK}", f"{path}=runs/a", how=", e.g. ")
        except (InterpolationResolutionError, GrammarParseError) as err:
            if isinstance(err, InterpolationToMissingValueError) and (cause := interpolation_problem(cfg)):
                return f"{path}={_typed(cfg, path)} cannot be resolved because {cause}"  # its ${...} names a ??? key
            what, plain, default = ("a folder", "path", "runs/a") if path.endswith(".dir") else ("a value", "one", "x")
            return (f"{path}={_typed(cfg, path)} cannot be resolved ({str(err).strip().splitlines()[0]}); give {what} "
                    f"whose ${{...}} resolves (an environment variable set, or a default: ${{oc.env:NAME,{default}}}), "
                    f"or a plain {plain}")
    return None


def _typed(cfg: DictConfig, path: str):
    """The value at dotted ``path`` as typed, its ``${...}`` unresolved."""
    raw = OmegaConf.to_container(cfg, resolve=False)
    for part in path.split("."):
        raw = raw[part]
    return raw


def check_lists(cfg: DictConfig) -> None:
    """``ConfigError`` unless every list-typed key holds a list (or null) once resolved.

    A list-typed key must hold a list (or null) once resolved: OmegaConf does not check what an
    interpolation (``eval.observations=${data.num_observation}``) resolves to, and a scalar there
    ended the run in a TypeError naming no key."""
    for key in list_fields():
        parent, leaf = key.rsplit(".", 1)
        section = OmegaConf.select(cfg, parent)
        if not isinstance(section, DictConfig) or leaf not in section:  # another model's key
            continue
        value = OmegaConf.select(cfg, key)
        if value is None or OmegaConf.is_list(value):
            continue
        typed = OmegaConf.to_container(section, resolve=False)[leaf]
        raise ConfigError(Refusal(f"{key}={typed} resolves to {value!r}, not a list", f"{key}=[{typed}]"))


#: The largest whole number a setting may hold: JAX (x64 off) holds a Python int as int32, so a larger count
#: (data.num_simulations, eval.ode_steps) raised OverflowError inside the simulator or the sampler, naming no key.
INT32_MAX = 2**31 - 1


def _leaves(cfg: DictConfig):
    """``(dotted path, value)`` for every resolved leaf outside ``hydra`` (a list's items as ``key[i]``)."""
    def walk(node, path):
        if isinstance(node, dict):
            for key, value in node.items():
                yield from walk(value, f"{path}.{key}" if path else str(key))
        elif isinstance(node, list):
            for i, value in enumerate(node):
                yield from walk(value, f"{path}[{i}]")
        else:
            yield path, node

    yield from walk({k: v for k, v in OmegaConf.to_container(cfg, resolve=True).items() if k != "hydra"}, "")


def _schema_fix(cfg: DictConfig, path: str, ok) -> str | None:
    """"<path>=<default>" when the command's default (``suggested_default``: ``experiment=quick``'s
    train.steps=20, not the schema's 3000) is a number ``ok`` accepts; else None."""
    found, default = suggested_default(cfg, path)
    number = found and isinstance(default, (int, float)) and not isinstance(default, bool)
    return f"{path}={default}" if number and ok(default) else None


def check_numbers(cfg: DictConfig) -> None:
    """``ConfigError`` naming the first setting that is inf or nan, or a whole number beyond int32.

    ``train.learning_rate=inf`` passed every range check, trained, and ended at
    the first checkpoint (the config it stores must be JSON), naming no key. No whole number may pass int32:
    ``data.num_simulations=3000000000`` ended in the simulator, ``eval.ode_steps=3000000000`` after training."""
    for path, value in _leaves(cfg):
        if isinstance(value, float) and not math.isfinite(value):
            fix = _schema_fix(cfg, path, math.isfinite)
            raise ConfigError(Refusal(f"{path}={value} is not a finite number", fix, how="; e.g. "))
        if is_int(value) and abs(value) > INT32_MAX:
            fix = _schema_fix(cfg, path, lambda d: not isinstance(d, bool) and abs(d) <= INT32_MAX)
            raise ConfigError(Refusal(f"{path}={value} is beyond the largest whole number a run can use "
                                      f"({INT32_MAX:,}: JAX holds counts and seeds as 32-bit integers)",
                                      fix or f"{path}=1", how="; e.g. "))

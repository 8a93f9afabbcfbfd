"""An entry of one of Hydra's dict settings typed bare (``hydra.job.env_set.N=1``, ``hydra.callbacks={a:1}``) that
Hydra's config does not hold yet: refused in one line naming ``++``, which adds or overrides it.

Hydra overrides a key it holds and adds one only with ``+``: these passed every check, then Hydra's several-line
"Could not override 'hydra.job.env_set.N'. To append to your config use +hydra.job.env_set.N=1 / Key 'N' is not in
struct / full_key / reference_type". Whether it holds the entry is its composition's to say (``conf/config.yaml``
sets three callbacks; a preset may set more), composed only for a command holding such an override. Also the one walk
of Hydra's schema (``hydra_type``). Pure Python: no JAX.
"""

from __future__ import annotations

import dataclasses
import typing
import warnings
from collections.abc import Sequence

from omegaconf import DictConfig, OmegaConf

from gensbi_sharding.harness.override_grammar import CommandLine, hydra_value, parse
from gensbi_sharding.harness.refusal import Refusal

__all__ = ["hydra_type", "in_hydra_dict", "hydra_entry_problem", "hydra_merge_problem", "removable_entry",
           "entry_removal_problem", "hydra_written", "as_hydra_text", "text_kind"]


def hydra_type(key: str) -> typing.Any:
    """The type Hydra's schema (``hydra.conf.HydraConf``) gives the dotted ``key`` (``hydra.job.env_set``:
    ``Dict[str, str]``); an entry of a dict setting is the dict's value type (``hydra.job.env_set.N``: ``str``), as
    Hydra's composition converts it; None where the schema says nothing (a plugin's settings, below a callback).

    Parameters
    ----------
    key : str
        A key below ``hydra``, e.g. ``hydra.job.chdir`` (a leading ``+``/``~`` already dropped).

    Returns
    -------
    type or None
        E.g. ``bool`` for ``hydra.job.chdir``, ``typing.List[str]`` for ``hydra.searchpath``.
    """
    from hydra.conf import HydraConf

    from gensbi_sharding.harness.config import type_hints

    kind: typing.Any = HydraConf
    for part in key.split(".")[1:]:
        if typing.get_origin(kind) is dict:  # a mapping's entry (env_set's: str)
            kind = typing.get_args(kind)[1]
        elif dataclasses.is_dataclass(kind):
            kind = {k: v for k, v in type_hints(kind).items() if k != "defaults"}.get(part)
        else:
            return None
    return kind


def in_hydra_dict(key: str) -> bool:
    """Whether the dotted ``key`` lies in one of Hydra's dict settings (``hydra.job.env_set``, ``hydra.callbacks``,
    ``hydra.job_logging``): an entry, a key under one, or the setting itself.

    Parameters
    ----------
    key : str
        E.g. ``hydra.job_logging.root.level`` (a leading ``+``/``~`` already dropped).

    Returns
    -------
    bool
        True for that one; False for ``hydra.run.dir``.
    """
    parts = key.split(".")
    return any(typing.get_origin(hydra_type(".".join(parts[:i]))) is dict for i in range(2, len(parts) + 1))


def removable_entry(key: str) -> bool:
    """Whether ``key`` is an entry of one of Hydra's dict settings or of the sweeper's params, which ``~`` removes
    (a field of Hydra's schema, ``hydra.run.dir``, Hydra refuses to delete)."""
    parent = key.rsplit(".", 1)[0]
    return parent.startswith("hydra.sweeper.params") or parent != "hydra" and in_hydra_dict(parent)


def entry_removal_problem(o: typing.Any, command: CommandLine) -> Refusal | None:
    """``~`` of an entry (``removable_entry``) the config does not hold as the command composes it (with its other
    ``hydra.*`` overrides, ``+hydra.job.env_set.A=1 ~hydra.job.env_set.A`` too): Hydra's several-line "Could not
    delete from config" then; None where Hydra removes it."""
    typed = [x.arg for x in command.parsed if x.key.startswith("hydra.") and not x.sweep]
    if not isinstance(_hydra_config(command, typed), Exception):
        return None
    held = OmegaConf.select(_hydra_config(command), o.key.rsplit(".", 1)[0].removeprefix("hydra."), default=None)
    entries = f" (it holds {', '.join(map(str, held))})" if isinstance(held, DictConfig) and len(held) else ""
    return Refusal(f"{o.arg}: Hydra's config holds no {o.key} to remove{entries}; leave {o.arg} out", None)


def _hydra_config(command: CommandLine, extra: Sequence[str] = ()):
    """Hydra's config (``hydra:``) as the command's first job composes it, its own overrides left out but ``extra``;
    None where it does not compose (another check's to name), or with ``extra``, Hydra's error."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from gensbi_sharding.harness.command_defaults import command_jobs
    from gensbi_sharding.harness.config import register_configs

    register_configs()  # conf/model/*.yaml pull in the schemas it stores
    if not (jobs := command_jobs(command)):
        return None
    chosen, home, name = jobs[0]
    # Hydra's own groups as typed (hydra/job_logging=none holds no root to override)
    overrides = [*chosen, *(o.arg for o in command.parsed if o.key.startswith("hydra/") and o.typed == o.key
                            and not o.sweep), *extra]
    with warnings.catch_warnings():  # a check's composition says nothing itself (command_defaults.composed)
        warnings.simplefilter("ignore", UserWarning)
        try:
            if GlobalHydra.instance().is_initialized():  # inside Hydra's app (sweep_check's refused job)
                return compose(config_name=name, overrides=overrides, return_hydra_config=True).hydra
            with initialize_config_dir(config_dir=home, version_base="1.3"):
                return compose(config_name=name, overrides=overrides, return_hydra_config=True).hydra
        except Exception as err:  # noqa: BLE001 (a choice that does not compose: its own check names it)
            return err if extra else None


def _missing(node, parts: list[str], value: typing.Any) -> str | None:
    """The first key of ``parts`` (then of ``value``, a dict set whole) that Hydra's config ``node`` lacks, dotted
    from the first part; None where it holds every one."""
    from omegaconf import DictConfig
    from omegaconf.errors import InterpolationResolutionError

    for i, part in enumerate(parts):
        if node is None and i:  # below a null (hydra/job_logging=none's root): Hydra holds no key there
            return ".".join(parts[:i + 1])
        if not isinstance(node, DictConfig):
            return None  # below a value: hydra_key_problem's, or the value's type Hydra's to judge
        if part not in node:
            return ".".join(parts[:i + 1])
        try:
            node = node[part]
        except InterpolationResolutionError:  # e.g. ${hydra.runtime.output_dir}: set only once Hydra runs the job
            return None  # the key is there; its value is Hydra's to resolve
    if isinstance(value, dict) and isinstance(node, DictConfig):
        return next((".".join([*parts, str(k)]) for k in value if str(k) not in node), None)
    return None


def hydra_entry_problem(args: Sequence[str] | CommandLine) -> str | None:
    """The one-line refusal of the first bare override of a key in one of Hydra's dict settings that Hydra's config
    lacks (see the module); None when there is none.

    Parameters
    ----------
    args : sequence of str or CommandLine
        The command line after the program name (``sys.argv[1:]``).

    Returns
    -------
    str or None
        E.g. ``"hydra.job.env_set.N=1: Hydra's config holds no hydra.job.env_set.N to override, and a key typed
        without + must be there; to add it, write ++hydra.job.env_set.N=1"``.
    """
    from gensbi_sharding.harness.paste_command import pasted

    command, hydra = parse(args), None
    for o in command.parsed:  # a sweep is hydra_sweep_problem's, the plugins' settings hydra_plugins'
        params = o.key.startswith("hydra.sweeper.params.")  # a preset's sweep params: a dict too
        if o.typed != o.key or "=" not in o.arg or o.sweep or not o.key.startswith("hydra.") or not params and (
                o.key.startswith(("hydra.launcher.", "hydra.sweeper.")) or not in_hydra_dict(o.key)):
            continue
        if hydra is None and (hydra := _hydra_config(command)) is None:
            return None
        if (lacked := _missing(hydra, o.key.split(".")[1:], o.hydra.value())) is not None:
            fix = f"++{o.arg}"  # ++ adds it, or overrides it where a preset of another job sets it
            return Refusal(f"{o.arg}: Hydra's config holds no hydra.{lacked} to override, and a key typed without + "
                           "must be there", fix, how="; to add it, write ", shown=pasted([fix])[1])
    return None


def hydra_merge_problem(args: Sequence[str] | CommandLine) -> str | None:
    """The one-line refusal of a ``hydra.*`` override Hydra cannot merge into its config as the command composes it:
    a plugin's setting given a value of another type (``hydra/launcher=slurm hydra.launcher.timeout_min=true``), a
    preset's sweeper params given a list (``sweep=rules_x_model_axis hydra.sweeper.params.rule=[a]``); was Hydra's
    several-line "Error merging override" with the full key and object type, after every check had passed. None when
    there is none; composed only for a command holding a ``hydra.*`` setting no fixed schema types.

    Parameters
    ----------
    args : sequence of str or CommandLine
        The command line after the program name (``sys.argv[1:]``).

    Returns
    -------
    str or None
        E.g. ``"hydra.launcher.timeout_min=true: Hydra cannot set it (Value 'True' of type 'bool' could not be converted
        to Integer); give it a value it takes, e.g. hydra.launcher.timeout_min=60 (its default), or leave it out"``.
    """
    from omegaconf import OmegaConf

    from gensbi_sharding.harness.paste_command import pasted

    command = parse(args)
    typed = [o for o in command.parsed if o.key.startswith("hydra.") and "=" in o.arg and not o.sweep
             and hydra_type(o.key) is None]  # a fixed schema's value: hydra_type_problem's
    if not typed or not isinstance(err := _hydra_config(command, [o.arg for o in typed]), Exception):
        return None
    o = next((o for o in typed if str(err).startswith(f"Error merging override {o.arg}")), None)
    if o is None:
        return None
    cause = err.__cause__ or err
    reason = (str(cause).strip().splitlines() or [type(cause).__name__])[0]
    said = f"{o.arg}: Hydra cannot set it ({reason})"
    hydra = _hydra_config(command)
    default = OmegaConf.select(hydra, o.key.removeprefix("hydra."), default=None) if hydra is not None else None
    if isinstance(default, bool | int | float | str) and str(default) not in ("", "???"):
        # text as Hydra's grammar reads it back (a preset's sweep 'a,b' quoted: one value, not a sweep)
        fix = f"{o.typed}={hydra_value(default) if isinstance(default, str) else hydra_written(o.key, default)}"
        return Refusal(said, fix, how="; give it a value it takes, e.g. ", after=" (its default), or leave it out",
                       shown=pasted([fix])[1])
    return f"{said}; give it a value it takes, or leave it out"


def hydra_written(key: str, value: object) -> str:
    """``value`` for Hydra's setting ``key`` as a command line writes it back: a yes/no as its word (``true``),
    quoted where the setting takes text (``'true'``), None as ``null``, text as Hydra's grammar reads it.

    Parameters
    ----------
    key : str
        The setting, e.g. ``hydra.job.env_set.MY_FLAG`` (a leading ``+``/``~`` already dropped).
    value : object
        One value Hydra's grammar read from an override.

    Returns
    -------
    str
        E.g. ``"'true'"`` for ``hydra.job.env_set.MY_FLAG`` and True, ``"true"`` for ``hydra.job.chdir``.
    """
    text = text_kind(hydra_type(key))
    if value is None or isinstance(value, bool):
        return as_hydra_text(value) if text else str(value).lower() if value is not None else "null"
    return hydra_value(str(value)) if text else str(value)


def as_hydra_text(value: object) -> str:
    """``value`` (one of an override's) written for the fix: a yes/no as its quoted word, the rest as Hydra reads
    them back (a sweep's other values kept)."""
    if isinstance(value, bool):
        return f"'{str(value).lower()}'"
    if isinstance(value, list):
        return f"[{','.join(map(as_hydra_text, value))}]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{k}:{as_hydra_text(v)}" for k, v in value.items()) + "}"
    return "null" if value is None else hydra_value(value) if isinstance(value, str) else str(value)


def text_kind(kind: object) -> bool:
    """Whether ``kind`` is text (``str`` or ``Optional[str]``)."""
    return kind is str or (typing.get_origin(kind) is typing.Union and str in typing.get_args(kind)
                           and bool not in typing.get_args(kind))

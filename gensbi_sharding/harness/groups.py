"""The config groups a user picks options from (``model=mlp``), and what Hydra chose for this job.

``conf/<group>/<option>.yaml`` makes an option; a few groups are the harness's own plumbing
(``INTERNAL_GROUPS``: ``experiment_model``, which ``conf/config.yaml`` selects by itself from
``experiment`` and ``model``) and are no user option, so ``--help`` leaves them out as it
leaves out the typed schemas (those are stored outside every group).
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Sequence
from pathlib import Path

from gensbi_sharding.harness.paste_command import command_for

__all__ = ["INTERNAL_GROUPS", "CONF", "hydra_flag_values", "config_folders", "primary_search_path",
           "config_flag_problem", "flag_use_problem", "group_options", "option_groups_text", "chosen_options",
           "preset_is_multirun", "option_value_problem"]

#: Groups no user picks from (not listed by ``--help``).
INTERNAL_GROUPS = ("experiment_model",)
#: The repository's config folder (launch.py's ``config_path``), read when Hydra is not running.
CONF = Path(__file__).resolve().parents[2] / "conf"


def _loader():
    """Hydra's config loader of the running app (its whole search path), or None outside Hydra."""
    from hydra.core.global_hydra import GlobalHydra

    return GlobalHydra.instance().config_loader() if GlobalHydra.instance().is_initialized() else None


def group_options(group: str) -> list[str]:
    """The options of ``group`` (``model`` -> ``["flux1", "mlp", ...]``), sorted; [] for no such group."""
    loader = _loader()
    if loader is not None:
        from hydra.core.object_type import ObjectType

        return sorted(loader.get_group_options(group, ObjectType.CONFIG))
    folder = CONF / group
    try:
        changed = folder.stat().st_mtime_ns  # a file made, removed or renamed there changes it
    except OSError:
        return []
    if time.time_ns() - changed < 2 * 10**9:  # changed just now: a second change may keep its coarse time, read it
        return sorted(p.stem for p in folder.glob("*.yaml"))
    return list(_yaml_stems(folder, changed))


@functools.lru_cache(maxsize=64)
def _yaml_stems(folder: Path, changed: int) -> tuple[str, ...]:
    """The ``*.yaml`` names in ``folder`` as it was at modification time ``changed``, sorted: read once per
    version (the command checks ask thousands of times in a test session, ~0.3 ms a read)."""
    return tuple(sorted(p.stem for p in folder.glob("*.yaml")))


def hydra_flag_values(args: Sequence[str], short: str, long: str) -> list[str]:
    """The values a command line gives one of Hydra's flags, in its order (Hydra's argparse keeps the last): ``-cd x``,
    ``--config-dir x``, ``--config-dir=x`` or ``-cd=x`` (was: unread, its folder's options refused)."""
    return [b if a in (short, long) else a.split("=", 1)[1] for a, b in zip(args, [*args[1:], None])
            if a in (short, long) and b is not None or a.startswith((f"{short}=", f"{long}="))]


def config_folders(args: Sequence[str], primary: bool = False) -> list[str]:
    """The config folders Hydra's ``--config-dir`` (from the launch folder) and ``--config-path`` (from
    launch.py's folder) add to its search path, as ``file://`` search path entries; ``primary``: first the primary
    config's ``hydra.searchpath`` entries (``primary_search_path``: where no ``hydra.searchpath=`` is typed)."""
    folders = [os.path.abspath(d) for d in hydra_flag_values(args, "-cd", "--config-dir")]
    folders += [os.path.join(CONF.parent, p) for p in hydra_flag_values(args, "-cp", "--config-path")
                if not p.startswith("pkg://")]
    return [*(primary_search_path(args) if primary else []), *(f"file://{f}" for f in folders)]


def search_path_entries(typed: object, args: Sequence[str]) -> list[str]:
    """Hydra's search path beside ``conf/``: ``typed`` (the first ``hydra.searchpath=``'s value; None: none typed, or
    null, where Hydra reads the primary config's: was a search path 'None'), then ``config_folders``'s."""
    entries = [*map(str, [] if typed is None else typed if isinstance(typed, list) else [typed]),
               *config_folders(args, typed is None)]
    return [e if "://" in e or not e else f"file://{e}" for e in entries]  # Hydra reads a path 'a' as file://a


def primary_search_path(args: Sequence[str]) -> list[str]:
    """The ``hydra.searchpath`` entries the primary config sets (``--config-name``'s file, default ``config``), which
    Hydra searches where no ``hydra.searchpath=`` override replaces them: ``--config-dir my_conf --config-name
    my_main`` with ``hydra: {searchpath: [file://...]}`` in my_main.yaml (was: unseen by every check before Hydra, a
    group added there refused or unchecked). Its file as Hydra finds it: ``--config-path``'s folder (else ``conf/``),
    then ``--config-dir``'s; [] where none sets any, or the file cannot be read (Hydra's own error names it)."""
    name = ([n.removesuffix(".yaml") for n in hydra_flag_values(args, "-cn", "--config-name")] or ["config"])[-1]
    main = hydra_flag_values(args, "-cp", "--config-path")[-1:] or [str(CONF)]  # a pkg:// one: not read here
    folders = [*(Path(CONF.parent, p) for p in main if not p.startswith("pkg://")),
               *(Path(os.path.abspath(d)) for d in hydra_flag_values(args, "-cd", "--config-dir")[-1:])]
    for file in (f / f"{name}.yaml" for f in folders):
        if file.is_file():
            stat = file.stat()
            return list(_searchpath_in(str(file), stat.st_mtime_ns, stat.st_size))
    return []


@functools.lru_cache(maxsize=16)
def _searchpath_in(file: str, *stamp: int) -> tuple[str, ...]:
    """``hydra.searchpath`` of config ``file``, read once while it is unchanged (``stamp``: each check reads it)."""
    from omegaconf import OmegaConf

    try:
        found = OmegaConf.select(OmegaConf.load(file), "hydra.searchpath", default=None)
        return tuple(str(e) for e in found) if OmegaConf.is_list(found) else ()
    except Exception:  # unreadable, or an interpolation: Hydra's own error names it
        return ()


def config_flag_problem(args: Sequence[str]) -> str | None:
    """The one-line refusal of a ``--config-dir`` that is no folder or a ``--config-name`` no config folder holds
    (was Hydra's "Cannot find primary config 'confg'" and its search path, naming no config there); else None."""
    from gensbi_sharding.harness.hints import closest_name

    args = list(getattr(args, "args", args))  # a CommandLine (command_checks') or its words
    for given in hydra_flag_values(args, "-cd", "--config-dir"):
        if not os.path.isdir(given):
            return (f"--config-dir {given}: {os.path.abspath(given)} is no folder; give the folder that holds your "
                    "config files (relative to where you launch), or leave --config-dir out")
    folders = [CONF] + [Path(e[len("file://"):]) for e in config_folders(args)]
    names = [n.removesuffix(".yaml") for n in hydra_flag_values(args, "-cn", "--config-name")]
    from hydra.core.config_store import ConfigStore

    from gensbi_sharding.harness.config import register_configs

    register_configs()  # its schemas are primary configs too (-cn base_config)
    stored = {n.removesuffix(".yaml") for n in ConfigStore.instance().list("") if n.endswith(".yaml")}
    found = sorted({p.stem for f in folders for p in f.glob("*.yaml")})  # the files: a schema is no one's config
    packaged = any(p.startswith("pkg://") for p in hydra_flag_values(args, "-cp", "--config-path"))  # Hydra's
    if names and names[-1] not in {*found, *stored} and not packaged and all(f.is_dir() for f in folders):
        near = closest_name(names[-1], found)
        return (f"--config-name {names[-1]}: no {names[-1]}.yaml in {', '.join(map(str, folders))}; its configs: "
                f"{', '.join(found)}" + (f"; did you mean --config-name {near}?" if near else
                                         "; add --config-dir <the folder that holds it>"))
    return None


#: What Hydra's ``--info`` shows, the word after it (bare ``--info``: all).
INFO_CHOICES = ("all", "config", "defaults", "defaults-tree", "plugins", "searchpath")


def flag_use_problem(args: Sequence[str]) -> str | None:
    """The one-line refusal of one of Hydra's flags used as Hydra cannot: ``--info`` read with an override as its
    value, ``--shell-completion`` without its subcommand, ``--hydra-help`` beside overrides, ``--resolve`` without
    ``--cfg`` or ``--help``, ``--experimental-rerun`` of no file; else None.

    Was: ``--info experiment=quick`` (as ``--cfg job experiment=quick`` is typed) ended in Hydra's whole usage text,
    "invalid choice: 'experiment=quick'"; ``--shell-completion`` alone, ``--hydra-help seed=1`` (Hydra's help config
    has no ``seed``: "To append to your config use +seed=1"), ``--resolve`` alone and ``--experimental-rerun <no file>``
    in a traceback.

    Parameters
    ----------
    args : sequence of str
        The command line after the program name (or a ``CommandLine``).

    Returns
    -------
    str or None
        E.g. ``"--info experiment=quick: ...; name what to show first: python launch.py --info all experiment=quick"``.
    """
    import shlex

    args = list(getattr(args, "args", args))
    for i, word in enumerate(args):
        if word in ("-i", "--info") and i + 1 < len(args) and not args[i + 1].startswith("-") and (
                args[i + 1] not in INFO_CHOICES):
            words = [*args[:i + 1], "all", *args[i + 1:]]
            overrides = [not w.startswith("-") and ("=" in w or w.startswith("~")) for w in words]  # flags first
            fix = shlex.join([w for w, o in zip(words, overrides) if not o] + [w for w, o in zip(words, overrides)
                                                                                   if o])
            return (f"{word} {args[i + 1]}: Hydra reads the word after {word} as what to show "
                    f"({', '.join(INFO_CHOICES)}), not as an override; name it first: {command_for()} {fix}")
    if any(w in ("-sc", "--shell-completion") for w in args) and not any(
            w.split("=", 1)[0] in ("install", "uninstall", "query") for w in args):
        return (f"--shell-completion needs what to do: {command_for()} --shell-completion install=bash (or "
                "install=zsh, install=fish; uninstall=bash; query=<the words>), without other overrides")
    overrides = [w for w in args if not w.startswith("-") and ("=" in w or w.startswith("~"))]
    if "--hydra-help" in args and overrides:
        return (f"--hydra-help {shlex.join(overrides)}: --hydra-help shows Hydra's own help, which takes no overrides; "
                f"run {command_for()} --hydra-help, or see a job's config with {command_for()} --cfg job "
                f"{shlex.join(overrides)}")
    if "--resolve" in args and not any(w in ("--cfg", "-c", "--help", "-h") or w.startswith("--cfg=") for w in args):
        return ("--resolve only changes what --cfg or --help print (interpolations resolved): add one, e.g. "
                f"{command_for()} --cfg job --resolve {shlex.join(overrides)}".rstrip())
    rerun = hydra_flag_values(args, "--experimental-rerun", "--experimental-rerun")
    if missing := [f for f in rerun if not os.path.isfile(f)]:
        return (f"--experimental-rerun {missing[0]}: no such file; it takes a job's .hydra/config.pickle, which Hydra "
                "writes only under hydra.callbacks.save_job_info (its PickleJobInfoCallback); to run a job again, give "
                "its overrides (<its folder>/.hydra/overrides.yaml) and a new hydra.run.dir")
    return None


def option_value_problem(override, search_paths: Sequence[str], multirun: bool):
    """``model=null``, ``mesh=null`` or ``model=[mlp,transformer]``: a group given null or a list, not an option's
    name (was Hydra's traceback, "Config group override must be a string or a list. Got NoneType", or its
    "Error resolving interpolation '${experiment}/${model}'": a list merges every option listed into one config).
    Hydra's own groups too (``hydra/launcher=null``). ``override``: as ``override_grammar.parse`` reads it (``.arg``,
    ``.values()``: a sweep's several), ``search_paths``: the command's ``hydra.searchpath`` entries. A refusal naming
    the override to type; None where every value is a name, or the key is no group.
    """
    from gensbi_sharding.harness.override_keys import option_groups, options
    from gensbi_sharding.harness.refusal import Refusal

    group, arg, values = override.key, override.arg, override.values()
    if override.hydra.is_delete() or not (group in option_groups() or group.startswith("hydra/")):
        return None
    choices = [] if group.startswith("hydra/") else options(group, search_paths) or []  # Hydra's: its package's too
    if all(isinstance(v, str) for v in values) or any(isinstance(v, dict) for v in values):  # a dict: its settings,
        return None  # override_dicts' to check
    key, named = arg.split("=", 1)[0], [str(v) for v in values if isinstance(v, str)]
    listed = [str(e) for v in values if isinstance(v, (list, tuple)) for e in v]
    if listed:  # each listed option its own job, as a sweep writes them (Hydra's groups: one for every job)
        options = list(dict.fromkeys(named + listed))[:1 if group.startswith("hydra/") else None]
        put = f"{key}={','.join(options)}"
        reason = f"{arg}: {group} takes one option per job, not a list (Hydra would merge them into one config)"
        return (Refusal(reason, put, how="; write " if len(options) == 1 else "; sweep them: ")
                if multirun or len(options) == 1 else
                f"{reason}; for one job per option, sweep them: {command_for()} -m ... {put}")
    empty = any(isinstance(v, (list, tuple)) for v in values)  # model=[]
    listing = f" ({', '.join(choices)})" if choices else ""
    reason = f"{arg}: {group} takes one of its options{listing}, not {'a list' if empty else 'null'}"
    if "none" in choices and not named and not empty:  # mesh=null meant no mesh
        return Refusal(reason, f"{key}=none", how="; for none, write ")
    if named:  # a sweep's other values
        return Refusal(reason, f"{key}={','.join(named)}", how="; drop it: ")
    if (default := chosen_default(group)) is None:  # experiment=null: a group a run may leave unset
        unset = "Hydra's default" if group.startswith("hydra/") else f"no {group}"
        return f"{reason}; for {unset}, leave {arg} out"
    return Refusal(reason, f"{key}={default}", how="; pick one, e.g. ")


def chosen_default(group: str) -> str | None:
    """The option ``conf/config.yaml``'s defaults list picks for ``group`` (``model`` -> ``mlp``); None for none."""
    from omegaconf import OmegaConf

    entries = OmegaConf.to_container(OmegaConf.load(CONF / "config.yaml")).get("defaults", [])
    return next((str(e[group]) for e in entries if isinstance(e, dict) and e.get(group) is not None), None)


def preset_is_multirun(group: str, option: str, search_paths: Sequence[str] = ()) -> bool:
    """Whether the preset ``group=option`` (``experiment=sbibm``) turns multirun on itself (its file sets
    ``hydra.mode: MULTIRUN``, as ``conf/experiment/sbibm.yaml`` does); True where its file cannot be read (not
    found, a ``pkg://`` search path, a defaults list naming another preset), so a check that relies on it stays
    on the safe side.
    """
    from omegaconf import OmegaConf

    folders = [CONF] + [Path(e[len("file://"):]) for e in search_paths if e.startswith("file://")]
    files = [f / group / f"{option}.yaml" for f in folders if (f / group / f"{option}.yaml").is_file()]
    if not files or len(folders) <= len(search_paths):  # not found, or a pkg:// path may hold it
        return True
    preset = OmegaConf.load(files[-1])  # a later search path's file wins, as Hydra reads them
    entries = [next(iter(d)) if OmegaConf.is_dict(d) else str(d) for d in OmegaConf.select(preset, "defaults") or []]
    nested = [e for e in entries if e != "_self_" and (not e.startswith("override /")  # another preset's file
                                                       or e.split("/", 1)[1].startswith(("sweep", "experiment", "hydra")))]
    return nested != [] or str(OmegaConf.select(preset, "hydra.mode", default="")).upper() == "MULTIRUN"


def _groups(parent: str = "") -> list[str]:
    """Every group with options under ``parent``, nested ones as ``a/b`` (as Hydra's help walks them)."""
    loader = _loader()
    if loader is None:
        base = CONF / parent
        children = sorted(p.name for p in base.iterdir() if p.is_dir()) if base.is_dir() else []
    else:
        children = loader.list_groups(parent)
    found = []
    for child in children:
        name = f"{parent}/{child}" if parent else child
        if group_options(name):
            found.append(name)
        found += _groups(name)
    return found


def option_groups_text() -> str:
    """``--help``'s list of groups, ``group: option, option`` a line, without Hydra's and the internal ones.

    Hydra's ``$APP_CONFIG_GROUPS`` lists every group, so ``conf/config.yaml``'s help template
    uses this instead (as the OmegaConf resolver ``gensbi_option_groups``).
    """
    def internal(group: str) -> bool:
        top = group.split("/")[0]
        return top == "hydra" or top in INTERNAL_GROUPS

    return "".join(f"{g}: {', '.join(group_options(g))}\n" for g in sorted(_groups()) if not internal(g))


def chosen_options() -> dict[str, str]:
    """The option Hydra chose for each group of this job (``{"model": "mlp", ...}``); {} outside Hydra."""
    from hydra.core.hydra_config import HydraConfig

    if not HydraConfig.initialized():
        return {}
    return {group: option for group, option in HydraConfig.get().runtime.choices.items() if option is not None}

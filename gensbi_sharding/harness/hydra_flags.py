"""Hydra's flags used as Hydra cannot use them (``--config-name`` of no file, ``--info <override>``, two modes,
overrides on both sides of a flag), each refused in one line that names the command to type."""

from __future__ import annotations

import os
import shlex
from collections.abc import Sequence
from pathlib import Path

from gensbi_sharding.harness.groups import CONF
from gensbi_sharding.harness.override_grammar import CommandLine, parse
from gensbi_sharding.harness.paste_command import command_for
from gensbi_sharding.harness.search_path import config_folders, hydra_flag_values

__all__ = ["config_flag_problem", "flag_use_problem", "mode_flags_problem", "flag_order_problem"]


def config_flag_problem(args: Sequence[str]) -> str | None:
    """The one-line refusal of a ``--config-dir`` that is no folder or a ``--config-name`` no config folder holds
    (Hydra's "Cannot find primary config 'confg'" and its search path name no config there); else None."""
    from gensbi_sharding.harness.hints import closest_name

    args = list(getattr(args, "args", args))  # a CommandLine (command_checks') or its words
    for given in hydra_flag_values(args, "-cd", "--config-dir"):
        if not given.strip():  # '' names no folder (not the launch folder)
            return ("--config-dir '': no folder named; give the folder that holds your config files (relative to where "
                    "you launch), or leave --config-dir out")
        if not os.path.isdir(given):
            return (f"--config-dir {given}: {os.path.abspath(given)} is no folder; give the folder that holds your "
                    "config files (relative to where you launch), or leave --config-dir out")
    folders = [CONF] + [Path(e[len("file://"):]) for e in config_folders(args)]
    names = [n.removesuffix(".yaml") for n in hydra_flag_values(args, "-cn", "--config-name")]
    if (problem := _config_path_problem(args, (names or ["config"])[-1])) is not None:
        return problem
    from hydra.core.config_store import ConfigStore

    from gensbi_sharding.harness.config import register_configs

    register_configs()  # its schemas are primary configs too (-cn base_config)
    stored = {n.removesuffix(".yaml") for n in ConfigStore.instance().list("") if n.endswith(".yaml")}
    found = sorted({p.stem for f in folders for p in f.glob("*.yaml")})  # the files: a schema is no one's config
    packaged = any(p.startswith("pkg://") for p in hydra_flag_values(args, "-cp", "--config-path"))  # Hydra's
    if names and not names[-1].strip():  # '' names no config: conf/'s listed
        return (f"--config-name {shlex.quote(names[-1])}: no config named; its configs: {', '.join(found)}; leave "
                "--config-name out (launch.py's is config)")
    if names and names[-1] not in {*found, *stored} and not packaged and all(f.is_dir() for f in folders):
        near = closest_name(names[-1], found)
        return (f"--config-name {names[-1]}: no {names[-1]}.yaml in {', '.join(map(str, folders))}; its configs: "
                f"{', '.join(found)}" + (f"; did you mean --config-name {near}?" if near else
                                         "; add --config-dir <the folder that holds it>"))
    return None


def _config_path_problem(args: list[str], name: str) -> str | None:
    """A ``--config-path`` (read from launch.py's folder) that is no folder, or whose folder (nor ``--config-dir``'s)
    holds no primary config ``name``: was Hydra's "Primary config directory not found" or "Cannot find primary config
    'config'" and its search path, in several lines (``-cp ''``: launch.py's own folder, which holds none)."""
    from hydra.core.config_store import ConfigStore

    given = hydra_flag_values(args, "-cp", "--config-path")[-1:]
    if not given:
        return None
    fix = f"give the folder that holds your {name}.yaml, or leave --config-path out (launch.py reads its own {CONF})"
    if given[0].startswith("pkg://"):  # a package's files (Hydra says "Cannot find primary config" too)
        package = given[0][len("pkg://"):]
        folder, said = _package_folder(package), f"--config-path {given[0]}: the package {shlex.quote(package)}"
        if folder is None:
            return f"{said} is not installed here; {fix}"
    else:
        folder = (CONF.parent / given[0]).resolve()
        said = (f"--config-path {shlex.quote(given[0])}: Hydra reads it from launch.py's folder ({CONF.parent}), "
                f"and {folder}")
        if not folder.is_dir():
            return f"{said} is no folder; {fix}"
    dirs = [folder, *map(Path, hydra_flag_values(args, "-cd", "--config-dir"))]
    if any((d / f"{name}.yaml").is_file() for d in dirs) or f"{name}.yaml" in ConfigStore.instance().list(""):
        return None
    return f"{said} holds no {name}.yaml; {fix}"


def _package_folder(package: str):
    """The files of the installed ``package`` (``hydra.conf``), as ``importlib.resources`` reads them; None where no
    such package is installed."""
    from importlib.resources import files

    try:
        return files(package)
    except (ImportError, TypeError, ValueError):  # not installed, or no package (a module, an empty name)
        return None


#: What Hydra's ``--info`` shows, the word after it (bare ``--info``: all).
INFO_CHOICES = ("all", "config", "defaults", "defaults-tree", "plugins", "searchpath")


def flag_use_problem(args: Sequence[str]) -> str | None:
    """The one-line refusal of one of Hydra's flags used as Hydra cannot: ``--info`` read with an override as its
    value, ``--shell-completion`` without its subcommand, ``--hydra-help`` beside overrides, ``--resolve`` without
    ``--cfg`` or ``--help``, ``--experimental-rerun`` of no file; else None.

    Hydra's own: ``--info experiment=quick`` (as ``--cfg job experiment=quick`` is typed) ends in its whole usage
    text, "invalid choice: 'experiment=quick'"; ``--shell-completion`` alone, ``--hydra-help seed=1`` (Hydra's help
    config has no ``seed``: "To append to your config use +seed=1"), ``--resolve`` alone and ``--experimental-rerun
    <no file>`` in a traceback.

    Parameters
    ----------
    args : sequence of str
        The command line after the program name (or a ``CommandLine``).

    Returns
    -------
    str or None
        E.g. ``"--info experiment=quick: ...; name what to show first: python launch.py --info all experiment=quick"``.
    """
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


#: Hydra's mode flags (its ``--help``): at most one may be given.
_MODES = {"-r": "--run", "--run": "--run", "-m": "-m", "--multirun": "-m", "-c": "--cfg", "--cfg": "--cfg",
          "-i": "--info", "--info": "--info", "-sc": "--shell-completion", "--shell-completion": "--shell-completion"}


def mode_flags_problem(args: Sequence[str] | CommandLine) -> str | None:
    """The one-line refusal of two of Hydra's modes on one command line (``-m`` with ``--cfg job``); else None.

    Hydra refused them with a ``ValueError`` traceback.

    Parameters
    ----------
    args : sequence of str or CommandLine
        The command line after the program name (``sys.argv[1:]``).

    Returns
    -------
    str or None
        E.g. ``"-m and --cfg cannot be combined (Hydra runs one mode); to see a job's composed config, leave
        out -m and give each swept key one value: python launch.py <overrides> --cfg job"``.
    """
    given = list(dict.fromkeys(_MODES[a.split("=", 1)[0]] for a in parse(args).args if a.split("=", 1)[0] in _MODES))
    if len(given) < 2:
        return None
    fix = ("to see a job's composed config, leave out -m and give each swept key one value: "
           f"{command_for()} <overrides> --cfg job") if "-m" in given and "--cfg" in given else \
        f"keep one of {', '.join(given)}"
    return f"{' and '.join(given)} cannot be combined (Hydra runs one mode); {fix}"


def flag_order_problem(args: Sequence[str] | CommandLine) -> str | None:
    """The one-line refusal of overrides on both sides of a flag (``experiment=quick -m train.steps=1,2``); else None.

    Hydra's argument parser reads the overrides as one run of words: those after a flag that follows an override
    were refused as "unrecognized arguments", as if the keys were unknown, with its whole usage text.

    Parameters
    ----------
    args : sequence of str or CommandLine
        The command line after the program name (``sys.argv[1:]``).

    Returns
    -------
    str or None
        E.g. ``"train.steps=1,2 comes after -m, which follows the override experiment=quick: Hydra reads the
        overrides as one run of words (it refused the rest as 'unrecognized arguments'); put the flags first:
        python launch.py -m experiment=quick train.steps=1,2"``.
    """
    words = parse(args).args
    is_override = [not w.startswith("-") and ("=" in w or w.startswith("~")) for w in words]
    for i, word in enumerate(words):
        flag = next((j for j in range(i) if words[j].startswith("-") and any(is_override[:j])), None)
        if not is_override[i] or flag is None:
            continue
        first = words[is_override.index(True)]
        flags = [w for w, o in zip(words, is_override) if not o]
        overrides = [w for w, o in zip(words, is_override) if o]
        return (f"{word} comes after {words[flag]}, which follows the override {first}: Hydra reads the overrides "
                "as one run of words (it refused the rest as 'unrecognized arguments'); put the flags first: "
                f"{command_for()} {shlex.join(flags + overrides)}")
    return None

"""Hydra's launcher and sweeper, as users copy them from Hydra's docs: an option not installed here, a setting the
chosen one lacks. Refused in one line naming the fix, before Hydra composes (Hydra's is multi-line "Could not find
'hydra/launcher/joblib'" and its search path, or "Could not override 'hydra.launcher.n_jobs'. To append to your config
use +hydra.launcher.n_jobs=2", which, typed, ends in a TypeError from the basic launcher). Pure Python: no JAX.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from gensbi_sharding.harness.refusal import Refusal

__all__ = ["PLUGIN_PACKAGES", "plugin_options", "plugin_settings", "picked_in_configs", "hydra_plugin_problem"]

#: Hydra's own plugins for options users copy from its docs: the option -> the package that adds it.
PLUGIN_PACKAGES = {"launcher": {"joblib": "hydra-joblib-launcher", "ray": "hydra-ray-launcher",
                                "rq": "hydra-rq-launcher"},
                   "sweeper": {"optuna": "hydra-optuna-sweeper", "ax": "hydra-ax-sweeper",
                               "nevergrad": "hydra-nevergrad-sweeper"}}
#: What the default option does, said where a setting of another plugin is given to it.
DEFAULTS = {"launcher": "runs the jobs one after another in this process",
            "sweeper": "runs every combination of the -m values"}


def plugin_options(part: str, search_paths: Sequence[str] = ()) -> list[str] | None:
    """The options of ``hydra/<part>`` (``launcher``, ``sweeper``): the installed plugins' (Hydra's config store)
    and ``conf/``'s files, sorted; None where a search path is no folder (``pkg://``: Hydra's to list)."""
    from hydra.core.config_store import ConfigStore
    from hydra.core.plugins import Plugins

    from gensbi_sharding.harness.override_keys import options

    Plugins.instance()  # imports the installed hydra_plugins, which store their options' configs
    files = options(f"hydra/{part}", search_paths)
    stored = [name.removesuffix(".yaml") for name in ConfigStore.instance().list(f"hydra/{part}")]
    return None if files is None else sorted({*files, *stored})


def plugin_settings(part: str, option: str, search_paths: Sequence[str] = ()) -> list[str] | None:
    """The settings of ``hydra/<part>=<option>`` (``hydra.launcher.<setting>``): its stored config's keys and, for a
    file of ``conf/`` (``slurm``), the file's and those of the stored configs its defaults list; None if unknown."""
    from hydra.core.config_store import ConfigStore
    from hydra.core.plugins import Plugins
    from omegaconf import OmegaConf

    from gensbi_sharding.harness.groups import CONF

    Plugins.instance()  # the plugins' configs, the basic launcher's too, are stored as Hydra imports them
    store, keys, found = ConfigStore.instance(), [], False
    folders = [CONF] + [Path(s[len("file://"):]) for s in search_paths if s.startswith("file://")]
    names = [option]
    for folder in folders:
        path = folder / "hydra" / part / f"{option}.yaml"
        if path.is_file():
            try:
                loaded = OmegaConf.to_container(OmegaConf.load(path), resolve=False) or {}
            except Exception:  # a file YAML cannot read: Hydra's own error names it
                return None
            found, keys = True, [k for k in loaded if k != "defaults"]
            names = [d for d in loaded.get("defaults", []) if isinstance(d, str)]
            break
    for name in names:
        try:
            node = store.load(f"hydra/{part}/{name}.yaml").node
        except Exception:  # not stored: no plugin of that name
            continue
        found, keys = True, [*keys, *(k for k in node if k not in keys)]
    return [k for k in keys if k != "_target_"] if found else None


def picked_in_configs(part: str, search_paths: Sequence[str] = ()) -> bool:
    """Whether a config file (``conf/``'s, a search path's, three folders deep) picks ``hydra/<part>`` in its defaults
    list, ``override /hydra/launcher: submitit_slurm`` in a preset: then the command alone does not say which runs."""
    from gensbi_sharding.harness.groups import CONF

    if any(not s.startswith("file://") for s in search_paths):  # pkg://: Hydra's to list
        return True
    # any YAML spelling Hydra composes, "- override /hydra/launcher: x", "- 'override ...': x", "[{override ...: x}]",
    # outside a comment (one commented out picks nothing)
    picks = re.compile(rf"^[^#\n]*?(?<![\w/.])/?hydra/{part}['\"]?\s*:", re.MULTILINE)
    for folder in [CONF] + [Path(s[len("file://"):]) for s in search_paths]:
        for depth in ("*.yaml", "*/*.yaml", "*/*/*.yaml"):
            for path in folder.glob(depth):
                try:  # a FIFO or device named *.yaml would block the read forever: files only
                    if path.is_file() and picks.search(path.read_text(errors="replace")):
                        return True
                except OSError:  # unreadable: Hydra's own error names it
                    continue
    return False


def hydra_plugin_problem(args) -> str | None:
    """The one-line refusal of ``hydra/launcher=joblib`` (or a sweeper) not installed here, or of a
    ``hydra.launcher.<key>`` the chosen launcher (``hydra/launcher=``'s, else Hydra's ``basic``) lacks: the options,
    the package that adds a plugin of Hydra's, or the option whose setting it is; None when there is none."""
    from gensbi_sharding.harness.hints import closest_name
    from gensbi_sharding.harness.override_grammar import parse

    command = parse(args)
    chosen = {}
    for o in command.parsed:  # one Hydra's grammar cannot read is grammar_problem's (here an AttributeError)
        part = o.key.removeprefix("hydra/") if o.key in ("hydra/launcher", "hydra/sweeper") else None
        if part is None or o.typed != o.key or (options := plugin_options(part, command.search_paths)) is None:
            continue
        chosen[part] = [str(v) for v in o.values()]
        for value in o.values():  # null, a list: override_problem's, which says "not null"
            if isinstance(value, str) and "${" not in value and value not in options:
                said = f"{o.arg}: no {part} {value!r} is installed here (hydra/{part} options: {', '.join(options)})"
                if (package := PLUGIN_PACKAGES[part].get(value)) is None and (near := closest_name(value, options)):
                    return Refusal(said, f"hydra/{part}={near}", how="; did you mean ", after="?")
                return (said + (f"; it is Hydra's plugin {package}: .venv/bin/python -m pip install {package}, or"
                                if package else ";") + f" leave hydra/{part}= out (Hydra's basic {part} "
                        f"{DEFAULTS[part]})")
    for o in command.parsed:  # + and ++ too: a setting is its plugin class's argument (BasicLauncher's TypeError)
        typed = o.typed.removeprefix("++").removeprefix("+")
        part, _, name = typed.removeprefix("hydra.").partition(".")
        if not typed.startswith(("hydra.launcher.", "hydra.sweeper.")) or not name or "=" not in o.arg:
            continue
        option = (chosen.get(part) or ["basic"])[-1] if len(chosen.get(part) or [0]) == 1 else None
        if part not in chosen and picked_in_configs(part, command.search_paths):  # a preset's launcher: not basic
            continue
        setting = name.split(".")[0]
        if option is None or (fields := plugin_settings(part, option, command.search_paths)) is None \
                or setting in fields:
            continue
        others = [x for x in plugin_options(part, command.search_paths) or [] if x != option
                  and setting in (plugin_settings(part, x, command.search_paths) or [])]
        near = closest_name(setting, fields) if fields else None
        said = (f"{o.arg}: hydra/{part}={option}" + (" (Hydra's default)" if option not in chosen.get(part, ()) else "")
                + f" has no setting {setting}; its settings: " + (", ".join(fields) or f"none (it {DEFAULTS[part]})"))
        if others:
            return Refusal(f"{said}; {setting} is a setting of hydra/{part}={', '.join(others)}",
                           (f"hydra/{part}={others[0]}", o.arg), how=": add ", shown=f"hydra/{part}={others[0]}")
        if near:
            return Refusal(said, f"hydra.{part}.{near}={o.raw}", how="; did you mean ", after="?")
        return Refusal(f"{said}; a plugin's settings come with its option (hydra/{part}=<option>), installed "
                       f"first" + (f", e.g. {setting} with hydra/launcher=joblib (pip install hydra-joblib-launcher)"
                                   if setting == "n_jobs" else ""), None)
    return None

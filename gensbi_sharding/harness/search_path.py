"""Where a command line points Hydra for configs: its flags' values, ``--config-dir``'s folders, the search path."""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from pathlib import Path

from gensbi_sharding.harness.groups import CONF

__all__ = ["hydra_flag_values", "config_folders", "search_path_entries", "primary_search_path"]


def hydra_flag_values(args: Sequence[str], short: str, long: str) -> list[str]:
    """The values a command line gives one of Hydra's flags, in its order (Hydra's argparse keeps the last): ``-cd x``,
    ``--config-dir x``, ``--config-dir=x`` or ``-cd=x`` (read, so its folder's options are not refused)."""
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
    my_main`` with ``hydra: {searchpath: [file://...]}`` in my_main.yaml (seen by every check before Hydra, so a
    group added there is checked, not refused). Its file as Hydra finds it: ``--config-path``'s folder (else ``conf/``),
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

"""Each of the project's config files (``conf/``) and Hydra's own parsed once a process, not at every compose;
Hydra's ``ConfigStore`` no longer copied at each (``share_the_config_store``).

Hydra reads every file of a composition's defaults again at each compose (``OmegaConf.load``: PyYAML, then the config
built), about 20 files a composition, and a command composes several times before it runs or is refused (the
command-line checks, Hydra's mode, then the run's own composition), while the checks read the files themselves too
(``config_files``, ``rule_files``, the presets' sizes). A parsed file is kept pickled and handed out again unpickled,
a config of its own for each caller with every node's flags and metadata (~30x cheaper than parsing). Pure Python.
"""

from __future__ import annotations

import os
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["keep_parsed_config_files", "parsed_once", "share_the_config_store"]

#: The OmegaConf.load that reads a file (the one found at the first call), once ``keep_parsed_config_files`` ran.
_READ: list = []


def keep_parsed_config_files() -> None:
    """Let ``OmegaConf.load`` hand out a file of ``conf/`` or of Hydra's package it parsed before (idempotent).

    A file is known by its real path and its bytes (``parsed_once``), so an edited file is read again; any other file
    (a user's own search path) and a stream without a name are read as before, and a file that fails to load raises
    each time, in YAML's own words.
    """
    import hydra
    from omegaconf import OmegaConf

    from gensbi_sharding.harness.groups import CONF

    if _READ:
        return
    roots = (os.path.realpath(CONF) + os.sep, os.path.realpath(Path(hydra.__file__).parent) + os.sep)
    _READ.append(OmegaConf.load)
    load = parsed_once(OmegaConf.load, roots)
    load.__doc__ = OmegaConf.load.__doc__
    OmegaConf.load = staticmethod(load)


def parsed_once(read: Callable[[Any], Any], roots: tuple[str, ...]) -> Callable[[Any], Any]:
    """``read`` (``OmegaConf.load``) that parses each file under ``roots`` once for each content it has had.

    A file is known by its real path and its bytes, read again at each load (a small file's read is ~1/100 of its
    parse). Not by its modification time and size: a file edited to the same size within one clock tick, or
    written back with its old time (``touch -r``, ``cp -p``, ``rsync -t``), would be handed out as it was before,
    and a notebook's second ``run(cfg)`` after such an edit of ``conf/`` compose the old values.

    Parameters
    ----------
    read : callable
        Parses a file, a path or a stream with a ``name``.
    roots : tuple of str
        Real folder paths, each ending in ``os.sep``: only files under them are kept.

    Returns
    -------
    callable
        ``read``'s signature; each call gets a config of its own (unpickled), with every node's flags.
    """
    parsed: dict[tuple[str, bytes], bytes] = {}

    def load(file_):
        name = os.fspath(file_) if isinstance(file_, (str, os.PathLike)) else getattr(file_, "name", None)
        path = os.path.realpath(name) if isinstance(name, str) else None
        if path is None or not path.startswith(roots) or (held := _bytes(path)) is None:
            return read(file_)  # not ours, or gone or unreadable: the load says so, in its own words
        if (path, held) not in parsed:
            loaded = read(file_)
            if _bytes(path) != held:  # rewritten while it was parsed: which version it holds is unknown
                return loaded
            parsed[path, held] = pickle.dumps(loaded)
        return pickle.loads(parsed[path, held])

    return load


def _bytes(path: str) -> bytes | None:
    try:
        with open(path, "rb") as stream:
            return stream.read()
    except OSError:
        return None


def share_the_config_store() -> None:
    """Let each composition's copy of Hydra's config repository refer to the one ``ConfigStore``, not a copy of it.

    Every compose deep-copies its repository (so that adding search paths leaves the original alone), and the
    repository's structured-config source holds the store: every schema Hydra and the harness stored was copied,
    ~20 ms of a ~100 ms compose. Nothing a compose does changes the store (it hands out a deep copy of each node it
    loads), so the copy was never needed; the store stays a singleton, as it is everywhere else.
    """
    from hydra.core.config_store import ConfigStore

    ConfigStore.__deepcopy__ = lambda self, memo: self

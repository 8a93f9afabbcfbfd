"""Which checkpoint step folders are complete, as Orbax records it; which one a path designates.

Complete: listed by ``CheckpointManager.all_steps()``, with a commit in its metadata (none if cut short).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import orbax.checkpoint as ocp

__all__ = ["CHECKPOINT_SUBDIR", "ITEMS", "as_path", "committed_steps", "find_checkpoint"]

#: Folder of a run directory that holds its checkpoints.
CHECKPOINT_SUBDIR = "checkpoints"
#: The Orbax items every checkpoint holds.
ITEMS = ("arrays", "meta", "config")


def as_path(value: Any, name: str, example: str = "checkpoints") -> Path:
    """``Path(value)``; a ``TypeError`` naming ``name`` and the fix unless ``value`` is a str or ``os.PathLike``."""
    if not isinstance(value, (str, os.PathLike)):
        raise TypeError(f"{name}={value!r:.60}: pass a str or os.PathLike, e.g. {name}={example!r}")
    return Path(value)


def committed_steps(directory: str | os.PathLike) -> list[int]:
    """Sorted steps under ``directory`` whose checkpoints are complete (see the module docstring)."""
    return sorted(step for step, complete in _step_folders(directory).items() if complete)


def find_checkpoint(path: str | os.PathLike, base_dir: str | os.PathLike | None = None) -> Path:
    """The step folder ``path`` designates: a run dir or checkpoints dir (its latest complete step), or a step dir.

    A relative ``path`` is resolved against ``base_dir`` (default: the cwd); ``FileNotFoundError`` if none is complete.
    """
    given = as_path(path, "path", "outputs/run").expanduser()
    base = as_path(os.getcwd() if base_dir is None else base_dir, "base_dir", ".")
    resolved = given if given.is_absolute() else base.absolute() / given
    if not resolved.exists():
        raise FileNotFoundError(f"checkpoint path {str(path)!r} does not exist (resolved to {resolved}); "
                                f"pass a run dir, its {CHECKPOINT_SUBDIR}/ dir or one step dir")
    is_run = (resolved / CHECKPOINT_SUBDIR).is_dir()  # a multirun job dir is named by a number too
    if resolved.name.isdigit() and not is_run:
        complete = _step_folders(resolved.parent).get(int(resolved.name))
        if complete:
            return resolved
        if complete is False:
            raise FileNotFoundError(f"{resolved} is not a complete checkpoint (Orbax recorded no commit: "
                                    "the save was cut short); pass its parent for the latest complete step")
    folder = resolved / CHECKPOINT_SUBDIR if is_run else resolved
    steps = committed_steps(folder)
    if not steps:
        raise FileNotFoundError(f"no checkpoint in {resolved}: looked for complete Orbax step folders <step>/ in "
                                f"{folder}; pass a run dir, its {CHECKPOINT_SUBDIR}/ dir or one step dir")
    return folder / str(steps[-1])


def _step_folders(directory: str | os.PathLike) -> dict[int, bool]:
    """``{step: complete}`` of Orbax's step folders holding any item (a multirun job's folder holds none)."""
    directory = as_path(directory, "directory")
    if not directory.is_dir():
        return {}
    manager = ocp.CheckpointManager(directory, options=ocp.CheckpointManagerOptions(read_only=True, create=False))
    try:
        metadata = {step: manager.metadata(step) for step in manager.all_steps()}
    finally:
        manager.close()
    return {step: m.commit_timestamp_nsecs is not None and set(ITEMS) <= set(m.item_handlers)
            for step, m in metadata.items() if m.item_handlers}

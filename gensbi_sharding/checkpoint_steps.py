"""A checkpoint on disk: its Orbax items' names, which step folders are complete, which one a path designates.
Complete: holding every item of ``ITEMS`` and a commit in its Orbax step metadata (read through ``ocp.step`` and
``ocp.metadata``, never by Orbax's file names)."""

import logging
import os
import re
from pathlib import Path
from typing import Any

import orbax.checkpoint as ocp

from gensbi_sharding.messages import shown

__all__ = ["CHECKPOINT_SUBDIR", "ITEMS", "as_path", "check_array_path", "committed_steps", "find_checkpoint",
           "reasoned", "unconfirmed_steps"]

#: Folder of a run directory that holds its checkpoints.
CHECKPOINT_SUBDIR = "checkpoints"
#: The Orbax items every checkpoint holds: the arrays (train state, RNG key data), meta (JSON), config (JSON).
ITEMS = ("arrays", "meta", "config")
#: Why a step folder is no complete checkpoint: an item missing or no commit recorded; or its step metadata gone.
_CUT = "cut short, no commit recorded"
_UNCONFIRMED = ("its items are there, but not Orbax's step metadata, the record of its commit (deleted, or left out of "
                "a copy): copy the step folder again whole from where it was saved")
_PASS = f"a run dir, its {CHECKPOINT_SUBDIR}/ dir or one step dir"  # what find_checkpoint takes


def as_path(value: Any, name: str, example: str = "checkpoints") -> Path:
    """``Path(value)`` with ``~`` expanded; ``TypeError``, or ``ValueError`` for ``""``, a NUL or ``~nosuchuser``."""
    if not isinstance(value, (str, os.PathLike)):
        raise TypeError(f"{name}={shown(value)}: pass a str or os.PathLike, e.g. {name}={example!r}")
    if value == "":
        raise ValueError(f"{name}='' is empty, which Path reads as the current folder ({os.getcwd()}); pass a folder, "
                         f"e.g. {name}={example!r}, or '.' to mean the current one")
    if "\x00" in os.fspath(value):
        raise ValueError(f"{name}={value!r}: holds a NUL character, which no path can; pass the folder's path "
                         "without it")
    try:
        return Path(value).expanduser()
    except RuntimeError as err:  # "~nosuchuser": "Could not determine home directory."
        raise ValueError(f"{name}={value!r}: {Path(value).parts[0]!r} names no home folder here ({err}); pass the "
                         "folder's full path") from None


def check_array_path(path: Path, what: str, saving: bool) -> None:
    """``ValueError`` if TensorStore, Orbax's array storage, misreads ``path`` (``\\``, ``[x]``); Orbax says nothing."""
    if odd := re.search(r"\\|\[[^]/]+]", str(path)):
        why = ("a folder separator", ": arrays would be written outside it") if odd[0] == "\\" else (
            "a pattern", ": arrays saved there would never be read back")
        raise ValueError(f"{what} {path} holds {odd[0]!r}, which TensorStore (Orbax's array storage) reads as {why[0]}"
                         + (f"{why[1]}; rename that folder, or pass another one" if saving else
                            ": its arrays cannot be read from there; rename that folder and restore from its new path"))


def committed_steps(directory: str | os.PathLike) -> list[int]:
    """The steps under ``directory`` whose checkpoints are complete, ascending (``[]`` if it is no folder);
    ``TypeError`` if ``directory`` is neither a str nor ``os.PathLike``, ``ValueError`` if ``""``.

    Parameters
    ----------
    directory : str or os.PathLike
        A checkpoints folder (``<run>/checkpoints``); ``~`` is expanded.
    """
    return sorted(step for step, why in _step_folders(directory).items() if why is None)


def unconfirmed_steps(directory: str | os.PathLike) -> list[int]:
    """The steps under ``directory`` holding every item of ``ITEMS`` but no Orbax step metadata, ascending."""
    return sorted(step for step, why in _step_folders(directory).items() if why == _UNCONFIRMED)


def find_checkpoint(path: str | os.PathLike, base_dir: str | os.PathLike | None = None) -> Path:
    """The step folder (``.../<step>``) ``path`` designates, absolute with symlinks and ``..`` resolved, so a record of
    it still names the checkpoint after a symlink (``runs/latest``) moves on.

    Parameters
    ----------
    path : str or os.PathLike
        A run dir or its ``checkpoints/`` dir (then the latest complete step), or one step dir; ``~`` is expanded.
    base_dir : str or os.PathLike or None, default None
        What a relative ``path`` is resolved against (``~`` expanded); None: the current working directory.

    Raises
    ------
    TypeError, ValueError, FileNotFoundError
        ``path`` or ``base_dir`` not a str or ``os.PathLike``, or ``""``; ``path`` missing, a file, one item of a step
        dir (the folder to pass named), a step dir cut short or without its Orbax step metadata, or holding no complete
        checkpoint; a folder whose step newer than its newest complete one lost only that metadata (both named).
    """
    given = as_path(path, "path", "outputs/run")
    base = as_path(os.getcwd() if base_dir is None else base_dir, "base_dir", ".")
    resolved = (base.absolute() / given).resolve()  # an absolute ``given`` replaces ``base``
    if not resolved.exists():
        steps = committed_steps(resolved.parent) if resolved.name.isdigit() else []  # never saved, or gone by keep
        fix = (f"{resolved.parent} holds steps {steps}: pass one, e.g. {resolved.parent / str(steps[-1])}" if steps
               else f"pass {_PASS}")
        raise FileNotFoundError(f"checkpoint path {str(path)!r} does not exist (resolved to {resolved}); {fix}")
    if not resolved.is_dir():
        raise FileNotFoundError(f"{resolved} is a file, not a folder: pass a run dir (e.g. {resolved.parent}), "
                                f"its {CHECKPOINT_SUBDIR}/ dir or one step dir")
    if resolved.name in ITEMS and resolved.parent.name.isdigit():  # one item of a step folder
        raise FileNotFoundError(f"{resolved} is the {resolved.name!r} item of the step folder {resolved.parent}: "
                                f"pass {resolved.parent}")
    is_run = (resolved / CHECKPOINT_SUBDIR).is_dir()  # a sweep's job is named by a number too: a step holds our items
    if resolved.name.isdigit() and not is_run and any((resolved / item).exists() for item in ITEMS):
        if (why := _step_folders(resolved.parent).get(int(resolved.name), "")) is None:
            return resolved
        if why:
            steps = committed_steps(resolved.parent)
            why = "Orbax recorded no commit: the save was cut short" if why == _CUT else why
            if steps:
                raise FileNotFoundError(f"{resolved} is not a complete checkpoint ({why}); pass its parent for the "
                                        f"latest complete step, {steps[-1]}")
            raise reasoned(f"{resolved} is not a complete checkpoint ({why}); {resolved.parent} holds no complete "
                           "step", ": start without it")
    folder = resolved / CHECKPOINT_SUBDIR if is_run else resolved
    if steps := committed_steps(folder):
        if newer := [s for s in unconfirmed_steps(folder) if s > steps[-1]]:  # was: the older step, without a word
            lost = (f"step {newer[-1]} in {folder} is newer than its newest complete step, {steps[-1]}, but lost "
                    "Orbax's step metadata, the record of its commit (deleted, or left out of a copy): copy that step "
                    "folder again whole from where it was saved")  # kept apart: the harness words its own fix after it
            error = FileNotFoundError(f"{lost}; if the folder it was copied from is gone, pass the newest complete "
                                      f"step left, {folder / str(steps[-1])}")
            error.unconfirmed = lost
            raise error
        return folder / str(steps[-1])
    # another writer's steps; one step folder of another writer's is named by its parent
    if foreign := _foreign_fix(folder) or (_foreign_fix(resolved.parent, resolved.name) if resolved.name.isdigit()
                                           else None):
        raise FileNotFoundError(f"no checkpoint in {resolved}: {foreign}")
    cut: dict[str, list[str]] = {}
    for step, why in sorted((step, why) for step, why in _step_folders(folder).items() if why):
        cut.setdefault(why, []).append(str(step))
    listed = " (" + "; ".join(f"step {', '.join(s)}: {w}" for w, s in cut.items()) + ")" if cut else ""
    raise FileNotFoundError(f"no checkpoint in {resolved}: looked for complete Orbax step folders <step>/ in "
                            f"{'it' if folder == resolved else folder}{listed}; pass {_PASS}")


def reasoned(reason: str, fix: str) -> FileNotFoundError:
    """``FileNotFoundError(reason + fix)``, its ``reason`` kept apart: a sampler words its own fix."""
    error = FileNotFoundError(reason + fix)
    error.reason = reason
    return error


def _foreign_fix(folder: Path, name: str | None = None) -> str | None:
    """Orbax step folders of ``folder`` (or its ``name``) another writer saved, named with how Orbax reads one."""
    paths = {s.step: Path(s.path) for s in ocp.step.standard_name_format().find_all(folder)
             if name in (None, Path(s.path).name)} if folder.is_dir() else {}
    saved = {step: metadata.item_handlers for step, path in paths.items() if not any((path / item).exists() for item
             in ITEMS) and (metadata := _step_metadata(path)) is not None}
    foreign = {step: dict(sorted(h.items())) if isinstance(h, dict) else {} for step, h in saved.items()}  # {}: unnamed
    if not foreign:
        return None
    (step, items), path = max(foreign.items()), repr(str(folder))
    # an item of arrays, not a JSON one; a manager's one unnamed item, 'default', is read without Composite
    arrays = [n for n, h in items.items() if str(h).endswith(("StandardCheckpointHandler", "PyTreeCheckpointHandler"))]
    read = (f"ocp.CheckpointManager({path}).restore({step}, args=" + (
        "ocp.args.StandardRestore(target))" if list(items) == ["default"] else
        f"ocp.args.Composite({(arrays or list(items))[0]}=ocp.args.StandardRestore(target)))") if items
        else f"ocp.StandardCheckpointer().restore({str(folder / str(step))!r}, target)")
    listed = "; ".join(f"step {s}: {', '.join(map(repr, i)) or 'one unnamed item'}" for s, i in sorted(foreign.items()))
    return (f"{folder} holds Orbax checkpoints another writer saved ({listed}), without the items {', '.join(ITEMS)} "
            "that CheckpointWriter saves and restore reads; from Python, read one with Orbax onto the same target: "
            f"target = abstract_state_for(model, mesh, rule); {read}")


def _said_here(record: logging.LogRecord) -> bool:
    """False for Orbax's "Metadata file does not exist" (the refusal names what a step lacks); True for others."""
    return not str(record.msg).startswith("Metadata file does not exist")


def _step_metadata(path: Path) -> Any:
    """Orbax's ``StepMetadata`` of the step folder ``path`` (``ocp.metadata.get_step_metadata``); None if none."""
    absl = logging.getLogger("absl")
    absl.filters.append(_said_here)  # one per read under way, any thread's (addFilter keeps one: the first to end
    # took it off every other read)
    try:
        return ocp.metadata.get_step_metadata(path)
    except ValueError:  # none written: never committed, or the file lost since
        return None
    finally:
        absl.filters.remove(_said_here)  # this read's: the others' stay


def _step_folders(directory: str | os.PathLike) -> dict[int, str | None]:
    """``{step: None if complete, else why not}`` of step folders with an item of ``ITEMS``, read with no
    CheckpointManager (starts JAX)."""
    if not (directory := as_path(directory, "directory")).is_dir():
        return {}
    found = {}
    for step in ocp.step.standard_name_format().find_all(directory):
        if (metadata := _step_metadata(Path(step.path))) is None:  # an item's folder still marks it a save's
            found[step.step] = (None, {item for item in ITEMS if (Path(step.path) / item).is_dir()})
        else:
            items = metadata.item_handlers  # a composite save's names (one unnamed item: its handler's name)
            committed = metadata.commit_timestamp_nsecs is not None
            found[step.step] = (committed, set(items) if isinstance(items, dict) else set())
    whole = set(ITEMS)
    return {step: None if committed and whole <= items else _UNCONFIRMED if committed is None and whole <= items
            else _CUT for step, (committed, items) in found.items() if whole & items}

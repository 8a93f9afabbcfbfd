"""A checkpoint on disk: its Orbax items' names, which step folders are complete, which one a path designates, and
whether a complete one can be restored (``step_damage``). Complete: holding every item of ``ITEMS`` and a commit in its
Orbax step metadata (read through ``ocp.step`` and ``ocp.metadata``, never by Orbax's file names)."""

import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orbax.checkpoint as ocp
import tensorstore as ts

from gensbi_sharding.checkpoint_fixes import absl_filtered, foreign_fix, step_metadata, subfolder_fix
from gensbi_sharding.messages import clipped, shown

__all__ = ["CHECKPOINT_SUBDIR", "ITEMS", "NO_METADATA", "as_path", "committed_steps",
           "damage_behind", "find_checkpoint", "read_json", "reasoned", "runs_below", "step_damage",
           "unconfirmed_steps"]

#: Folder of a run directory that holds its checkpoints.
CHECKPOINT_SUBDIR = "checkpoints"
#: The Orbax items every checkpoint holds: the arrays (train state, RNG key data), meta (JSON), config (JSON).
ITEMS = ("arrays", "meta", "config")
#: What a step folder whose items are all there lacks when its commit's record is gone.
NO_METADATA = "Orbax's step metadata, the record of its commit (deleted, or left out of a copy)"
#: Why a step folder is no complete checkpoint: an item missing or no commit recorded; or its step metadata gone.
_CUT = "cut short, no commit recorded"
_UNCONFIRMED = f"its items are there, but not {NO_METADATA}: copy the step folder again whole from where it was saved"
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


def committed_steps(directory: str | os.PathLike) -> list[int]:
    """The steps under ``directory`` whose checkpoints are complete.

    Parameters
    ----------
    directory : str or os.PathLike
        A checkpoints folder (``<run>/checkpoints``); ``~`` is expanded.

    Returns
    -------
    list of int
        Ascending; ``[]`` if ``directory`` is no folder.

    Raises
    ------
    TypeError, ValueError
        ``directory`` neither a str nor ``os.PathLike``; ``""``.
    """
    return [step for step, why in _step_folders(directory).items() if why is None]


def unconfirmed_steps(directory: str | os.PathLike) -> list[int]:
    """The steps under ``directory`` holding every item of ``ITEMS`` but no Orbax step metadata, ascending."""
    return [step for step, why in _step_folders(directory).items() if why == _UNCONFIRMED]


def find_checkpoint(path: str | os.PathLike, base_dir: str | os.PathLike | None = None) -> Path:
    """The step folder (``.../<step>``) ``path`` designates, absolute with symlinks and ``..`` resolved, so a record of
    it still names the checkpoint after a symlink (``runs/latest``) moves on.

    Parameters
    ----------
    path : str or os.PathLike
        A run dir or its ``checkpoints/`` dir (then the latest complete step), or one step dir; ``~`` is expanded.
    base_dir : str or os.PathLike or None, default None
        What a relative ``path`` is resolved against (``~`` expanded); None: the current working directory.

    Returns
    -------
    pathlib.Path

    Raises
    ------
    TypeError, ValueError, FileNotFoundError
        ``path`` or ``base_dir`` not a str or ``os.PathLike``, or ``""``; ``path`` missing, a file, one item of a step
        dir (the folder to pass named), a step dir cut short or without its Orbax step metadata, or holding no complete
        checkpoint (the run folders below it with one named, newest first; the error's ``runs`` holds their paths,
        newest first); a folder whose step newer than its newest complete one lost only that metadata (both named).
    """
    given = as_path(path, "path", "outputs/run")
    base = as_path(os.getcwd() if base_dir is None else base_dir, "base_dir", ".")
    resolved = (base.absolute() / given).resolve()  # an absolute ``given`` replaces ``base``
    if not resolved.exists():
        saved = committed_steps(resolved.parent) if resolved.name.isdigit() else []  # never saved, or gone by keep
        fix = (f"{resolved.parent} holds steps {saved}: pass one, e.g. {resolved.parent / str(saved[-1])}" if saved
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
        found = _step_folders(resolved.parent)
        if (why := found.get(int(resolved.name), "")) is None:
            return resolved
        if why:
            complete = [step for step, said in found.items() if said is None]
            why = "Orbax recorded no commit: the save was cut short" if why == _CUT else why
            if complete:
                raise FileNotFoundError(f"{resolved} is not a complete checkpoint ({why}); pass its parent for the "
                                        f"latest complete step, {complete[-1]}")
            raise reasoned(f"{resolved} is not a complete checkpoint ({why}); {resolved.parent} holds no complete "
                           "step", ": start without it")
    folder = resolved / CHECKPOINT_SUBDIR if is_run else resolved
    found = _step_folders(folder)  # each step's metadata read once
    if steps := [step for step, why in found.items() if why is None]:
        if newer := [s for s, why in found.items() if why == _UNCONFIRMED and s > steps[-1]]:  # not the older one
            lost = (f"step {newer[-1]} in {folder} is newer than its newest complete step, {steps[-1]}, but lost "
                    f"{NO_METADATA}: copy that step folder again whole from where it was saved")
            error = FileNotFoundError(f"{lost}; if the folder it was copied from is gone, pass the newest complete "
                                      f"step left, {folder / str(steps[-1])}")
            error.unconfirmed = lost  # kept apart: the harness words its own fix after it
            raise error
        return folder / str(steps[-1])
    # another writer's steps; one step folder of another writer's is named by its parent
    if foreign := foreign_fix(folder, ITEMS) or (foreign_fix(resolved.parent, ITEMS, resolved.name) if
                                                  resolved.name.isdigit() else None) or subfolder_fix(folder, ITEMS):
        raise FileNotFoundError(f"no checkpoint in {resolved}: {foreign}")
    cut: dict[str, list[str]] = {}
    for step in (step for step, why in found.items() if why):
        cut.setdefault(found[step], []).append(str(step))
    listed = " (" + "; ".join(f"step {', '.join(s)}: {w}" for w, s in cut.items()) + ")" if cut else ""
    said = f"no checkpoint in {resolved}: looked for complete Orbax step folders <step>/ in " \
        f"{'it' if folder == resolved else folder}{listed}"
    if below := runs_below(resolved):  # outputs/, a date's or a sweep's folder: the runs it holds, named
        named = ", ".join(map(str, below[:3])) + (f" and {len(below) - 3} more" if len(below) > 3 else "")
        error = reasoned(said, f"; it holds {len(below)} run folder(s) with a checkpoint, the newest first: "
                               f"{named}: pass one of them, e.g. {below[0]}")
        error.runs = below  # as data: a caller naming them its own way does not scan again, nor parse the text
        raise error
    error = FileNotFoundError(f"{said}; pass {_PASS}")
    error.runs = []  # scanned: none below it
    raise error


def runs_below(folder: str | os.PathLike) -> list[Path]:
    """The run folders under ``folder`` (``outputs``, a sweep's), four levels at most, holding a complete
    checkpoint, newest step first; ``[]`` if none. A run's ``checkpoints/`` and ``.hydra/`` are not entered."""
    found: list[tuple[float, Path]] = []
    level = [Path(folder)]
    for _ in range(4):
        below = []
        for parent in level:
            try:
                children = [c for c in parent.iterdir() if c.is_dir() and not c.name.startswith(".")]
            except OSError:  # unreadable, or gone meanwhile: it holds no run to name
                continue
            for child in children:
                try:  # a folder this user may not enter (another's 0700 run, lost+found): no run to name
                    if steps := committed_steps(child / CHECKPOINT_SUBDIR):
                        found.append(((child / CHECKPOINT_SUBDIR / str(steps[-1])).stat().st_mtime, child))
                        continue
                except OSError:
                    continue
                if child.name != CHECKPOINT_SUBDIR:
                    below.append(child)
        level = below
    return [run for _, run in sorted(found, key=lambda pair: (-pair[0], str(pair[1])))]


def reasoned(reason: str, fix: str) -> FileNotFoundError:
    """``FileNotFoundError(reason + fix)``, its ``reason`` kept apart: a sampler words its own fix."""
    error = FileNotFoundError(reason + fix)
    error.reason = reason
    return error


def _step_folders(directory: str | os.PathLike) -> dict[int, str | None]:
    """``{step: None if complete, else why not}`` of folders holding an item; no CheckpointManager (it starts JAX)."""
    directory = as_path(directory, "directory")
    if not directory.is_dir():
        return {}
    found = {}
    for step in ocp.step.standard_name_format().find_all(directory):
        if (metadata := step_metadata(Path(step.path))) is None:  # an item's folder still marks it a save's
            found[step.step] = (None, {item for item in ITEMS if (Path(step.path) / item).is_dir()})
        else:
            items = metadata.item_handlers  # a composite save's names (one unnamed item: its handler's name)
            committed = metadata.commit_timestamp_nsecs is not None
            found[step.step] = (committed, set(items) if isinstance(items, dict) else set())
    whole = set(ITEMS)
    return {step: None if committed and whole <= items else _UNCONFIRMED if committed is None and whole <= items
            else _CUT for step, (committed, items) in sorted(found.items()) if whole & items}


def step_damage(step_dir: str | Path, items: Sequence[str] = ITEMS) -> str | None:
    """Why the complete step folder ``step_dir`` cannot be restored, in ``restore``'s words, e.g. "its 'arrays' item
    cannot be read (its folder is missing)"; None where its ``items`` read.

    Cheap, no array data read, JAX's backend unstarted (a launcher asks before it sets its device count): each item's
    folder, the arrays' tree metadata, the JSON items, the data files by the sizes their OCDBT B+tree records
    (TensorStore's ``ocdbt.dump``); not caught: array data changed in place, its size kept.

    Parameters
    ----------
    step_dir : str or os.PathLike
        A complete step folder (one of ``committed_steps``), e.g. ``<run>/checkpoints/8``.
    items : sequence of str, default all of ``ITEMS``, ``("arrays", "meta", "config")``
        The items to check, a subset of ``ITEMS`` (a caller reading the JSON items itself leaves them out).

    Returns
    -------
    str or None

    Raises
    ------
    TypeError, ValueError
        ``step_dir`` neither a str nor ``os.PathLike`` (``3``), or ``""``; ``items`` a str or naming no item.
    Exception
        An error reading an item that names no damage (not ``KeyError``, ``ValueError``, ``AttributeError`` or
        ``OSError``, nor one behind it), as Orbax raised it.
    """
    step_dir = as_path(step_dir, "step_dir", "checkpoints/8")  # Path(3)'s TypeError named neither argument nor fix
    if isinstance(items, str) or not isinstance(items, Sequence) or any(item not in ITEMS for item in items):
        kind = ValueError if isinstance(items, Sequence) and not isinstance(items, str) else TypeError  # a typo: Value
        raise kind(f"items={shown(items)}: pass a sequence of names among {ITEMS}, e.g. items=('arrays',)")
    if missing := [repr(item) for item in items if not (step_dir / item).is_dir()]:
        many = len(missing) > 1
        return f"its {' and '.join(missing)} item{'s' if many else ''} cannot be read ({'their' if many else 'its'} " \
               f"folder{'s are' if many else ' is'} missing)"
    for item in (item for item in ITEMS if item in items):
        try:
            if item == "arrays":  # a handler that asks the backend nothing (it asks whether pinned memory is there)
                # its info line "Created BasePyTreeCheckpointHandler: ..." would stand above a refusal's one line
                with absl_filtered(lambda record: record.levelno >= logging.WARNING):
                    read = ocp.PyTreeCheckpointHandler(enable_pinned_host_transfer=False).metadata(step_dir / item)
                if read is None or read.tree is None:  # not Orbax's "AttributeError: 'NoneType' ..."
                    return f"its {item!r} item cannot be read (Orbax reads no metadata of it: one of its files is " \
                           "missing or damaged)"
                if lost := _lost_data(step_dir / item):
                    return f"its {item!r} item cannot be read ({lost})"
            else:
                read_json(step_dir, item)
        except Exception as raised:
            if (err := damage_behind(raised)) is None:
                raise
            return f"its {item!r} item cannot be read ({type(err).__name__}: {clipped(err)})"
    return None


def _lost_data(folder: Path) -> str | None:
    """Which data file of the OCDBT database ``folder`` (by ``ts.ocdbt.dump``) is missing or cut short; None if none."""
    if not any(folder.glob("*ocdbt*")):  # saved without OCDBT: nothing references a file
        return None
    base = ts.KvStore.open({"driver": "file", "path": f"{folder}/"}).result()
    pending = [(ts.ocdbt.dump(base).result().get("versions") or [{}])[-1]]  # the latest version's tree
    while pending:
        node = pending.pop()
        for value in node.values() if isinstance(node, dict) else node:
            if isinstance(value, (dict, list)):
                pending.append(value)
            elif isinstance(value, str) and value.startswith(("btreenode:", "value:")):
                # "<kind>:<base path>:<file>:<offset>:<length>", e.g. "value:ocdbt.process_0/:d/9744d8b1...:0:10098";
                # another form is left to the restore (read as damage, it would refuse a step that reads)
                if len(parts := value.split(":")) != 5 or not (parts[3].isdigit() and parts[4].isdigit()):
                    continue
                kind, where, name, offset, length = parts
                path, end = folder / where / name, int(offset) + int(length)
                if (size := path.stat().st_size if path.is_file() else None) is None or size < end:
                    return f"its data file {path.relative_to(folder.parent)} is " + (
                        "missing" if size is None else f"cut short: {size} of its {end} bytes")
                if kind == "btreenode":
                    pending.append(ts.ocdbt.dump(base, value).result())
    return None


def read_json(step_dir: Path, item: str) -> dict:
    """The JSON ``item`` of ``step_dir``, read by its own handler: a Checkpointer would start JAX's backend."""
    return ocp.JsonCheckpointHandler().restore(step_dir / item, ocp.args.JsonRestore())


def damage_behind(raised: Exception) -> Exception | None:
    """The error naming a damaged step folder behind ``raised`` (Orbax's bare Exception: TensorStore's), or None."""
    damaged = (KeyError, ValueError, AttributeError, OSError)
    err = raised if isinstance(raised, damaged) else raised.__cause__ or raised.__context__
    return err if isinstance(err, damaged) else None


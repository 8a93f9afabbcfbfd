"""Whether an existing folder takes a new entry, tried (root passes ``os.access``, yet a read-only mount refuses), and
why not in words (/proc's ENOENT is no missing /proc), and whether TensorStore misreads a checkpoint folder's path.
Pure Python: the harness's checks and ``CheckpointWriter``'s."""

import errno
import os
import re
import tempfile
from pathlib import Path

__all__ = ["array_path_fault", "array_path_renamed", "check_array_path", "write_denied", "denied_words"]


def write_denied(folder: Path, target: Path | None = None) -> str | None:
    """Why nothing can be created in the existing ``folder`` (``denied_words``), or None: an empty folder is tried."""
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".write-probe-", dir=folder))
    except OSError as err:
        return denied_words(err, folder, target)
    return None


def denied_words(err: OSError, folder: Path, target: Path | None = None) -> str:
    """"cannot write in <folder> (<reason>)" for ``err`` from making an entry in ``folder``; for ENOENT from an existing
    ``folder`` (/proc), "cannot create <target's first part there>: <folder> exists, but takes no new ... (...)"."""
    folder = Path(folder)
    if err.errno != errno.ENOENT or not folder.is_dir():
        return f"cannot write in {folder} ({err.strerror or err})"
    below = Path(target).relative_to(folder).parts if target is not None and folder in Path(target).parents else ()
    what = f"cannot create {folder / below[0]}: {folder}" if below else f"cannot write in {folder}: it"
    return (f"{what} exists, but takes no new files or folders: making one there fails with \"No such file or "
            "directory\" (a virtual file system, such as /proc)")


def array_path_fault(path: Path, what: str, saving: bool = True) -> str | None:
    """Why TensorStore, Orbax's array storage, misreads ``path`` (``\\``, ``[x]``), in words naming ``what`` and no
    fix (Orbax says nothing); None where it reads it as written. The harness words its own fix (another folder)."""
    if (odd := re.search(r"\\|\[[^]/]+]", str(path))) is None:
        return None
    why = ("a folder separator", ": arrays would be written outside it") if odd[0] == "\\" else (
        "a pattern", ": arrays saved there would never be read back")
    return (f"{what} {path} holds {odd[0]!r}, which TensorStore (Orbax's array storage) reads as {why[0]}"
            + (why[1] if saving else ": its arrays cannot be read from there"))


def array_path_renamed(path: Path) -> Path:
    """``path`` with each character TensorStore misreads (``\\``, ``[``, ``]``) made ``_``: a folder it reads."""
    return Path(re.sub(r"[][\\]", "_", str(path)))


def check_array_path(path: Path, what: str, saving: bool) -> None:
    """``ValueError`` if TensorStore misreads ``path`` (``array_path_fault``), naming the fix: rename the folder."""
    if (fault := array_path_fault(path, what, saving)) is not None:
        raise ValueError(fault + ("; rename that folder, or pass another one" if saving else
                                  "; rename that folder and restore from its new path"))

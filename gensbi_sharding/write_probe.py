"""Whether an existing folder takes a new entry, tried rather than read from its mode bits, and why not in words.

Root passes ``os.access``, yet a read-only mount, /sys or an immutable folder refuses a new entry all the same; /proc
answers a new name with ENOENT, which must not read as /proc missing. Pure Python, no JAX: the harness's command-line
checks and ``CheckpointWriter``'s folder check share it.
"""

from __future__ import annotations

import errno
import os
import tempfile
from pathlib import Path

__all__ = ["write_denied", "denied_words"]


def write_denied(folder: Path, target: Path | None = None) -> str | None:
    """Why nothing can be created in the existing ``folder`` ("cannot write in /data (Permission denied)"), or None.

    The probe is an empty folder, removed at once. The output folders' check (``folder_lock.folder_problem``) and
    ``benchmarks/sbibm.py``'s of ``--root`` and ``--out``. ``target``: the path under ``folder`` to be made, named
    where the reason is about making it (``denied_words``).
    """
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".write-probe-", dir=folder))
    except OSError as err:
        return denied_words(err, folder, target)
    return None


def denied_words(err: OSError, folder: Path, target: Path | None = None) -> str:
    """"cannot write in <folder> (<err's reason>)", ``err`` raised making an entry in ``folder``.

    Parameters
    ----------
    err : OSError
        The error of creating an entry in ``folder``.
    folder : Path
        The existing folder the entry was made in.
    target : Path, optional
        What was to be made in or under ``folder``; its first part there is named when the reason is about it.

    Returns
    -------
    str
        The words; for ENOENT from a ``folder`` that exists (a virtual file system, /proc, takes no new name),
        "cannot create <folder>/<name>: <folder> exists, but takes no new files or folders (...)".
    """
    folder = Path(folder)
    if err.errno != errno.ENOENT or not folder.is_dir():
        return f"cannot write in {folder} ({err.strerror or err})"
    below = Path(target).relative_to(folder).parts if target is not None and folder in Path(target).parents else ()
    what = f"cannot create {folder / below[0]}: {folder}" if below else f"cannot write in {folder}: it"
    return (f"{what} exists, but takes no new files or folders: making one there fails with \"No such file or "
            "directory\" (a virtual file system, such as /proc)")

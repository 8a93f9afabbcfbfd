"""The owner note of a folder lock (``.run.owner.json``): who holds the folder, written as the lock is taken, removed
as it is let go (``folder_lock.FolderLock``), and read, checked, by a run the lock refuses."""

from __future__ import annotations

import atexit
import json
import os
import socket
import sys
import time
from pathlib import Path

from gensbi_sharding.harness.outputs import write_json

__all__ = ["OWNER_NOTE", "write_owner_note", "drop_owner_note", "remove_owner_notes", "owner_line", "running"]

#: The note beside the lock file: the holder's pid, host, start time and command line.
OWNER_NOTE = ".run.owner.json"

#: The owner notes this process wrote and still holds, each with the pid that wrote it: ``remove_owner_notes``.
_NOTES: dict[Path, int] = {}


def write_owner_note(folder: Path) -> None:
    """Write this process's owner note into ``folder``, whose lock it has just taken.

    Parameters
    ----------
    folder : Path
        The locked folder.
    """
    write_json(folder / OWNER_NOTE, {"pid": os.getpid(), "host": socket.gethostname(),
                                     "started": time.strftime("%Y-%m-%d %H:%M:%S"), "command": " ".join(sys.argv)})
    _NOTES[folder / OWNER_NOTE] = os.getpid()


def drop_owner_note(folder: Path) -> None:
    """Remove this process's owner note from ``folder`` as its lock is let go; a folder turned read-only (or full)
    mid-run keeps it, as ``remove_owner_notes`` does: was a PermissionError out of the job's end, which lost a sweep's
    summary and held the lock (``owner_line`` tells such a note from its holder's).

    Parameters
    ----------
    folder : Path
        The folder whose lock is let go.
    """
    _NOTES.pop(folder / OWNER_NOTE, None)
    try:
        (folder / OWNER_NOTE).unlink(missing_ok=True)
    except OSError:
        pass


def remove_owner_notes() -> None:
    """Remove the owner notes of the folder locks this process still holds, as it ends (the system frees its locks).

    Run at the interpreter's exit (``atexit``), and before an ``os._exit``, which runs no exit hooks. A run stopped
    by a preemption (exit 75) or Ctrl-C leaves its folder (and a sweep's) without Hydra's end-of-run callback, which
    releases the lock: was a ``.run.owner.json`` naming a process long gone beside a free lock, read as the holder
    of the next run that took the lock before writing its own note. A note another process wrote is never removed.
    """
    for note, pid in list(_NOTES.items()):
        if pid == os.getpid():  # not one a forked child inherited the record of
            _NOTES.pop(note, None)
            try:
                note.unlink(missing_ok=True)
            except OSError:  # a folder turned read-only: the note stays, as before
                pass


atexit.register(remove_owner_notes)


def owner_line(folder: Path) -> str:
    """Who holds ``folder``'s lock, from its owner note: "pid 123 on node7, started ...: launch.py ...".

    A note naming a process of this host that has ended is not its holder's: one whose folder turned read-only midway
    could not remove its note as it let go of the lock, and the next holder had not written its own yet (or could
    not). Such a note is said to be an earlier run's, never named as the holder to wait for.

    Parameters
    ----------
    folder : Path
        A folder whose lock another process holds.

    Returns
    -------
    str
    """
    try:
        owner = json.loads((folder / OWNER_NOTE).read_text())
        said = f"pid {owner['pid']} on {owner['host']}, started {owner['started']}: {owner['command']}"
    except (OSError, ValueError, KeyError, TypeError):
        return "its owner note is not written yet"
    if owner["host"] == socket.gethostname() and not running(owner["pid"]):
        return (f"its owner note is not written yet; {folder / OWNER_NOTE} names pid {owner['pid']}, which has "
                f"ended ({said}): an earlier run's note, not the holder's")
    return said


def running(pid) -> bool:
    """Whether a process ``pid`` of this host is running (another user's too); True where it cannot be told."""
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except (OSError, ValueError, TypeError, OverflowError):  # another user's (EPERM), or not a number: not told
        return True
    return True

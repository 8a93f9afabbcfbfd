"""One run at a time in an output folder: ``FolderLock`` (a lock file and an owner note) and its error."""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from pathlib import Path

from gensbi_sharding.harness.outputs import write_json

__all__ = ["FolderLock", "FolderInUseError"]


class FolderInUseError(RuntimeError):
    """Another run holds the lock of the output folder."""


class FolderLock:
    """The lock one run holds on its output folder while it writes there (``filelock``).

    Re-entrant within a process (a Hydra callback and ``run()`` may both take it). The
    holder's pid, host, start time and command line go into ``.run.owner.json`` next to
    the lock file, so a refused run can name the one that holds the folder.
    """

    LOCK, OWNER = ".run.lock", ".run.owner.json"

    def __init__(self, folder: Path):
        from filelock import FileLock

        self.folder = Path(folder).absolute()
        self.folder.mkdir(parents=True, exist_ok=True)
        # One instance per path (is_singleton): a second acquire in this process only counts up.
        self._lock = FileLock(self.folder / self.LOCK, timeout=0, is_singleton=True)

    def acquire(self) -> None:
        """Take the lock at once, or raise ``FolderInUseError`` naming the folder and its holder."""
        from filelock import Timeout

        try:
            self._lock.acquire()
        except Timeout:
            raise FolderInUseError(
                f"{self.folder} is in use by another run ({self._holder()}): two runs must not write "
                "into one folder; wait for it to end, or choose another hydra.run.dir (or "
                "hydra.sweep.dir)") from None
        if self._lock.lock_counter == 1:
            write_json(self.folder / self.OWNER, {
                "pid": os.getpid(), "host": socket.gethostname(),
                "started": time.strftime("%Y-%m-%d %H:%M:%S"), "command": " ".join(sys.argv)})

    def release(self) -> None:
        """Undo one ``acquire``; the last one removes the owner note and frees the folder."""
        if self._lock.lock_counter == 1:
            (self.folder / self.OWNER).unlink(missing_ok=True)
        self._lock.release()

    def __enter__(self) -> "FolderLock":
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()

    def _holder(self) -> str:
        try:
            owner = json.loads((self.folder / self.OWNER).read_text())
            return f"pid {owner['pid']} on {owner['host']}, started {owner['started']}: {owner['command']}"
        except (OSError, ValueError, KeyError):
            return "its owner note is not written yet"

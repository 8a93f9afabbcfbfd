"""``CheckpointWriter``'s folder lock: one writer per checkpoints folder, in this process or another.

Two writers of one folder deleted each other's saves under way (Orbax's temporary folders), losing steps. The lock
is a ``flock`` of the folder itself (no file left behind, even by a killed run), taken by process 0 only: every
process of a job writes its part of one checkpoint there.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

import jax
import orbax.checkpoint as ocp

__all__ = ["Lock", "lock_directory", "unlock", "finish_and_unlock"]

#: ``(fd, (device, inode), pid)`` of a held folder, or None (not process 0, or a file system without locks).
Lock = tuple[int, tuple[int, int], int] | None
_HELD: dict[tuple[int, int], int] = {}  # (device, inode) of the folders this process's writers hold: their fds


def lock_directory(directory: Path) -> Lock:
    """``flock`` ``directory`` (created if missing) until ``unlock``.

    Parameters
    ----------
    directory : pathlib.Path

    Returns
    -------
    Lock
        None on processes other than 0 and on file systems without locks (some network mounts: unguarded).

    Raises
    ------
    RuntimeError
        If another writer holds it, saying whether in this process.
    """
    if jax.process_index() != 0:
        return None
    directory.mkdir(parents=True, exist_ok=True)
    fd = os.open(directory, os.O_RDONLY)
    identity = (os.fstat(fd).st_dev, os.fstat(fd).st_ino)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        whose = "open in this process" if identity in _HELD else "in another process"
        raise RuntimeError(f"checkpoint directory {directory} is in use by another CheckpointWriter ({whose}): two "
                           "writers of one folder delete each other's saves under way; close that one first "
                           "(writer.close(), or a with block), or pass another directory") from None
    except OSError:
        os.close(fd)
        return None
    _HELD[identity] = fd
    return fd, identity, os.getpid()


def unlock(lock: Lock) -> None:
    """Release ``lock_directory``'s lock; in a forked child (which let it go at the fork) nothing.

    Parameters
    ----------
    lock : Lock
    """
    if lock is not None and lock[2] == os.getpid():
        _HELD.pop(lock[1], None)
        os.close(lock[0])


def finish_and_unlock(manager: ocp.CheckpointManager, lock: Lock) -> None:
    """Wait for ``manager``'s pending writes, close it, then ``unlock``: at ``close``, or when an unclosed writer is
    collected (else the next writer's manager deleted its save under way as unfinished, and that step was lost).

    Parameters
    ----------
    manager : orbax.checkpoint.CheckpointManager
    lock : Lock
    """
    try:
        if lock is None or lock[2] == os.getpid():  # a forked child's copy has no save of its own to wait for
            manager.wait_until_finished()
            manager.close()
    finally:
        unlock(lock)


def _release_in_child() -> None:
    # A forked child (a fork-started data loader) shares the parent's open folder: it held the lock past close.
    for fd in _HELD.values():
        os.close(fd)
    _HELD.clear()


os.register_at_fork(after_in_child=_release_in_child)

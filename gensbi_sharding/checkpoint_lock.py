"""``CheckpointWriter``'s folder lock: one writer per checkpoints folder, in this process or another.

Two writers of one folder deleted each other's saves under way (Orbax's temporary folders), losing steps. The lock
is a ``flock`` of the folder itself (no file left behind, even by a killed run), taken by process 0 only: every
process of a job writes its part of one checkpoint there.
"""

from __future__ import annotations

import fcntl
import logging
import os
import re
import threading
import time
import warnings
from pathlib import Path

import jax
import orbax.checkpoint as ocp

__all__ = ["Lock", "lock_directory", "unlock", "finish_and_unlock"]

#: ``(fd, (device, inode), pid)`` of a held folder, or None (not process 0, or a file system without locks).
Lock = tuple[int, tuple[int, int], int] | None
# What Python's thread pools and threading say once the interpreter is shutting down (a pool's own "after shutdown"
# too: asyncio's, shut by the same exit).
_SHUTDOWN = re.compile(r"cannot schedule new futures after|can't create new thread at interpreter shutdown")
_EXIT_WAIT_S = 2.0  # at interpreter exit, for a save's last step (its folder's rename) to land
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


def finish_and_unlock(manager: ocp.CheckpointManager, lock: Lock, pending: dict | None = None) -> None:
    """Wait for ``manager``'s pending writes, close it, then ``unlock``: at ``close``, or when an unclosed writer is
    collected (else the next writer's manager deleted its save under way as unfinished, and that step was lost).

    At interpreter exit an asynchronous save still under way cannot finish: Python refuses the threads and
    thread-pool work Orbax needs to commit it (no exit hook runs early enough: ``atexit``, ``weakref.finalize`` and
    threading's own all run after), so it is a ``RuntimeWarning`` naming the step and the fix, not Orbax's traceback.

    Parameters
    ----------
    manager : orbax.checkpoint.CheckpointManager
    lock : Lock
    pending : dict, optional
        ``{"directory": ..., "step": ...}``: the writer's folder and the last step it saved, named by that warning.
    """
    try:
        if lock is None or lock[2] == os.getpid():  # a forked child's copy has no save of its own to wait for
            if not threading.main_thread().is_alive():  # at exit (atexit, weakref.finalize run after it ended): the
                _lost_at_exit(pending)  # save finishes now or never; Orbax's wait could hang
                return
            manager.wait_until_finished()
            manager.close()
    finally:
        unlock(lock)


def _lost_at_exit(pending: dict | None) -> None:
    """Wait (at most ``_EXIT_WAIT_S``) for the step folder of the last save; if it never comes, warn naming it."""
    if pending is None or pending["step"] is None:
        return
    step, deadline = pending["step"], time.monotonic() + _EXIT_WAIT_S
    while not (folder := Path(pending["directory"]) / str(step)).is_dir() and time.monotonic() < deadline:
        time.sleep(0.05)
    if not folder.is_dir():
        warnings.warn_explicit(  # no source line: the exit is no caller's
            f"CheckpointWriter({str(pending['directory'])!r}): step {step} was still being saved when Python exited, "
            f"which refuses the threads that finish an asynchronous save: step {step} is lost (the next writer deletes "
            "its unfinished folder). Call close() (or save in a `with CheckpointWriter(...)` block) before the script "
            "ends, or pass async_save=False", RuntimeWarning, "CheckpointWriter", 0)


def _at_shutdown(err: BaseException | None) -> bool:
    """Whether ``err`` (or what caused it) is Python refusing work at interpreter shutdown."""
    while err is not None:
        if _SHUTDOWN.search(str(err)):
            return True
        err = err.__cause__ or err.__context__
    return False


class _ShutdownNoise(logging.Filter):
    """Drops Orbax's tracebacks (logger ``absl``) of a save cut short by interpreter exit: the warning of
    ``finish_and_unlock`` says it once, with the step and the fix."""

    def filter(self, record: logging.LogRecord) -> bool:
        err = record.exc_info[1] if record.exc_info else None
        return not (_at_shutdown(err) or _SHUTDOWN.search(record.getMessage()))


logging.getLogger("absl").addFilter(_ShutdownNoise())


def _release_in_child() -> None:
    # A forked child (a fork-started data loader) shares the parent's open folder: it held the lock past close.
    for fd in _HELD.values():
        os.close(fd)
    _HELD.clear()


os.register_at_fork(after_in_child=_release_in_child)

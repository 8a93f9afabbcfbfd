"""``CheckpointWriter`` across processes and the script's end: its folder's checks and ``flock`` (process 0's: two
writers of one folder delete each other's saves under way), its exit and its commit (docs/library.md). Python's exit
refuses the threads Orbax needs to finish an asynchronous save before any ``atexit`` hook runs: ``watch_exit`` sees the
script's end through ``sys.monitoring``. ``commit_barrier`` bounds the others' wait for process 0's commit."""

import atexit
import fcntl
import inspect
import logging
import os
import sys
import tempfile
import threading
import time
import traceback
import warnings
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import orbax.checkpoint as ocp

from gensbi_sharding.checkpoint_steps import CHECKPOINT_SUBDIR, ITEMS, NO_METADATA, committed_steps, unconfirmed_steps
from gensbi_sharding.write_probe import check_array_path, denied_words

__all__ = ["lock_directory", "unlock", "finish_and_unlock", "watch_exit", "commit_barrier", "failed_save",
           "check_save_directory", "check_none_cut_short", "continued", "warn_beside_earlier"]

#: ``(fd, (device, inode), pid)`` of a held folder, or None (not process 0, or a file system without locks).
Lock = tuple[int, tuple[int, int], int] | None
_HELD: dict[tuple[int, int], int] = {}  # (device, inode) of the folders this process's writers hold: their fds
_OPEN: weakref.WeakSet = weakref.WeakSet()  # this process's open writers: finished when the script ends
_SCRIPT: dict[str, Any] = {}  # "tool": its sys.monitoring id while armed, None once the script ended
_CONTINUED: set[Path] = set()  # checkpoint folders this process restored from or saved in: their steps continued
_FIX = "call writer.close(), or save inside `with CheckpointWriter(...) as writer:`, before the script ends"


def lock_directory(directory: Path) -> Lock:
    """``flock`` ``directory`` (made if missing) until ``unlock``; None on processes but 0, or where locks fail."""
    if jax.process_index() != 0:
        return None
    try:  # a read-only folder refused now, not at the first save after all the training before it
        directory.mkdir(parents=True, exist_ok=True)
        os.rmdir(tempfile.mkdtemp(prefix=".write-probe-", dir=directory))
    except OSError as err:  # /proc answers a new name with ENOENT: said as what it is, not as /proc missing
        words = denied_words(err, Path(err.filename).parent if err.filename else directory, directory)
        raise type(err)(f"checkpoint directory {directory}: {words}; pass a folder you can write to (check its "
                        "permissions, or a read-only mount)") from None
    fd = os.open(directory, os.O_RDONLY)
    identity = (os.fstat(fd).st_dev, os.fstat(fd).st_ino)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as err:
        os.close(fd)
        if not isinstance(err, BlockingIOError):  # a file system without locks
            return None
        whose = "open in this process" if identity in _HELD else "in another process"
        raise RuntimeError(f"checkpoint directory {directory} is in use by another CheckpointWriter ({whose}): two "
                           "writers of one folder delete each other's saves under way; close that one first "
                           "(writer.close(), or a with block), or pass another directory") from None
    _HELD[identity] = fd
    return fd, identity, os.getpid()


def unlock(lock: Lock) -> None:
    """Release ``lock_directory``'s lock; in a forked child (which let it go at the fork) nothing."""
    if lock is not None and lock[2] == os.getpid():
        _HELD.pop(lock[1], None)
        os.close(lock[0])


def finish_and_unlock(manager: ocp.CheckpointManager, lock: Lock, status: dict) -> None:
    """Wait for ``manager``'s writes, close it, ``unlock`` (at exit, a save cut short warns naming ``status``)."""
    try:
        if lock is None or lock[2] == os.getpid():  # a forked child's copy has no save of its own to wait for
            manager.close()  # waits for its writes first
    except Exception as err:
        if threading.main_thread().is_alive():  # not at exit: the caller's error
            raise
        if not status["warned"]:  # at exit (atexit runs after the main thread ended): nobody left to raise to
            _warn(f"CheckpointWriter({str(status['directory'])!r}) was still open when Python exited and its save of "
                  f"step {status['step']} was cut short ({type(err).__name__}: {err}): that step is lost; {_FIX}")
    finally:
        unlock(lock)


def watch_exit(writer: Any) -> None:
    """Finish ``writer``'s save under way when a script (not an interactive session) ends with it open, and warn."""
    _OPEN.add(writer)
    monitoring, events = sys.monitoring, sys.monitoring.events
    # 3 and 4 are unnamed, 5 (OPTIMIZER_ID) unclaimed; 0-2 are a debugger's, coverage's and cProfile's.
    tool = next((t for t in (4, 3, 5) if monitoring.get_tool(t) is None), None)
    if _SCRIPT or sys.flags.interactive or hasattr(sys, "ps1") or tool is None:
        return
    monitoring.use_tool_id(tool, "gensbi_sharding.checkpoint exit")
    monitoring.register_callback(tool, events.PY_RETURN, _returned)
    monitoring.register_callback(tool, events.PY_UNWIND, _ended)  # sys.exit or an exception (not to be disabled)
    _SCRIPT["tool"] = tool
    monitoring.set_events(tool, events.PY_RETURN | events.PY_UNWIND)


def _returned(code: Any, offset: int, value: Any) -> Any:
    """PY_RETURN callback: a function's return is never the script's end, and is not seen again."""
    return _ended(code) if code.co_name == "<module>" else sys.monitoring.DISABLE


def _ended(code: Any, *_: Any) -> None:
    """A frame of ``code`` ended: if it is the script's (run by nothing but ``runpy``), finish the open writers."""
    if code.co_name != "<module>" or threading.current_thread() is not threading.main_thread():
        return
    main = getattr(sys.modules.get("__main__"), "__dict__", None)
    frame = next(f for f, _ in traceback.walk_stack(inspect.currentframe()) if f.f_code is code)  # the frame ending
    if frame.f_globals is not main:
        return
    outer = [f for f, _ in traceback.walk_stack(frame)][1:]  # its callers (inspect.stack reads every file: 26 ms)
    if any(f.f_globals is main and f.f_code.co_name == "<module>" for f in outer):
        return  # exec() of the script's own, inside it
    _disarm()
    if any(f.f_globals.get("__name__") != "runpy" for f in outer):
        return  # an embedding (IPython) ran it, not an exit: a later writer arms again
    _SCRIPT["tool"] = None  # once: no later writer arms it again
    for writer in [w for w in _OPEN if not w._closed]:  # a closed writer stays in _OPEN while it is referenced
        _finish_at_exit(writer)


def unwatch_if_idle() -> None:
    """Stop watching for the script's end once no writer is open: while armed, every exception unwinding any frame
    runs a callback (a review measured exception-heavy code 15-40 % slower); the next writer arms it again."""
    if not any(not w._closed for w in _OPEN):
        _disarm()


def _disarm() -> None:
    """Stop watching: no callback left to run while Python tears modules down."""
    if _SCRIPT.get("tool") is not None:
        sys.monitoring.set_events(_SCRIPT["tool"], 0)
        sys.monitoring.free_tool_id(_SCRIPT.pop("tool"))


def _finish_at_exit(writer: Any) -> None:
    """Wait (at most ``writer.exit_timeout_s``) for its save under way, close it, and say it was left open."""
    errors = []

    def wait() -> None:
        try:
            writer._manager.wait_until_finished()
        except Exception as err:
            errors.append(err)

    start, step = time.monotonic(), writer.last_saved
    waiter = threading.Thread(target=wait, name="CheckpointWriter exit", daemon=True)  # a thread: a bounded wait
    waiter.start()
    waiter.join(writer.exit_timeout_s)
    where = f"CheckpointWriter({str(writer.directory)!r}) was still open when the script ended"
    if not waiter.is_alive() and not errors:
        writer.close()  # Orbax's manager and the folder let go now, while Python still runs threads
        saved = (f"its save of step {step} was finished ({time.monotonic() - start:.1f} s)" if step is not None
                 else "it had saved nothing")
        _warn(f"{where}; {saved}; {_FIX}")
        return
    steps = committed_steps(writer.directory)
    why = (f"still being written after exit_timeout_s={writer.exit_timeout_s:g} s" if not errors
           else f"its save failed ({type(errors[0]).__name__}: {errors[0]})")
    writer._status["warned"] = True
    # The save left running fails as Python exits, Orbax's threads logging 250 lines: the warning below says it all.
    logging.getLogger("absl").setLevel(logging.CRITICAL)
    _warn(f"{where} and step {step} could not be committed: {why}; it is lost (newest step on disk: "
          f"{steps[-1] if steps else 'none'}); {_FIX}")


def _warn(message: str) -> None:
    warnings.warn_explicit(message, RuntimeWarning, "CheckpointWriter", 0)  # no source line: the exit is no caller's


# Orbax's barrier after process 0's commit, which a failed commit never reaches: only it gets the short bound, not
# AsyncOptions.timeout_secs (20 minutes), which the barrier before it keeps (it waits for every write).
_COMMIT_BARRIER = "async_commit_complete"


def commit_barrier(timeout_s: float) -> Callable[..., None]:
    """Orbax's ``barrier_sync_fn`` (``AsyncOptions``), its wait for process 0's commit bounded by ``timeout_s`` > 0."""
    sync = ocp.multihost.get_barrier_sync_fn()

    def barrier(*, key: str, timeout_ms: int) -> None:
        if _COMMIT_BARRIER in key:
            timeout_ms = min(timeout_ms, max(1, int(timeout_s * 1000)))
        sync(key=key, timeout_ms=timeout_ms)

    return barrier


def failed_save(err: BaseException, step: int | None, directory: Path, timeout_s: float) -> RuntimeError:
    """The error for a save of ``step`` that raised ``err`` (``OSError``, ``TimeoutError``), naming the latest step."""
    steps = committed_steps(directory)
    kept = (f"the latest complete checkpoint, {directory / str(steps[-1])}, is kept: resume from it" if steps
            else "no earlier checkpoint was saved")
    what = f"{type(err).__name__}: {err}".strip().rstrip(":")
    bound = (f"process 0's commit did not finish within {timeout_s:g} s (CheckpointWriter.commit_timeout_s, the "
             f"other processes' bound on waiting for it; {what}), so this process stopped waiting")
    raise_it = ("On a slow file system raise the bound before the writer is built, e.g. "
                "CheckpointWriter.commit_timeout_s = 120")
    if step in steps:  # complete on disk: committed late, or what follows the commit failed (keep deleting a step)
        return RuntimeError(f"checkpoint step {step} in {directory} is complete and kept ({directory / str(step)}: "
                            "resume from it), yet " + (f"{bound}. {raise_it}" if isinstance(err, TimeoutError) else
                                                       f"what follows its commit failed, e.g. deleting older steps "
                                                       f"(keep): {what}; check that folder's contents and permissions"))
    if isinstance(err, TimeoutError):  # the other processes: process 0's commit was slow, or failed
        return RuntimeError(f"checkpoint step {step} was not saved in {directory} within {timeout_s:g} s: {bound}; it "
                            "is not complete: process 0 may still be committing it (a slow file system) or its commit "
                            f"failed (process 0's log names why, e.g. the folder turned read-only); {kept}. {raise_it}")
    return RuntimeError(f"checkpoint step {step} was not saved in {directory}: writing or committing it failed "
                        f"({what}). Keep the checkpoint folder writable while the run saves (check its permissions, "
                        f"free space, 'chattr -i'); {kept}")


def check_save_directory(directory: Path) -> None:
    """Refuse ``directory`` for ``CheckpointWriter`` as its docstring's Raises say, naming it and the fix."""
    check_array_path(directory, "checkpoint directory", saving=True)
    if directory.is_symlink() and not directory.exists():
        raise FileNotFoundError(f"checkpoint directory {directory} is a symbolic link to {os.readlink(directory)}, "
                                "which does not exist; create that folder first, or pass another directory")
    file = next((p for p in (directory, *directory.parents) if p.exists() and not p.is_dir()), None)
    if file is not None:
        raise NotADirectoryError(f"checkpoint directory {directory} " + ("is a file" if file == directory else
                                 f"is under {file}, a file") + "; pass a folder path, e.g. <run>/checkpoints")
    if directory.name.isdigit() and all((directory / item).is_dir() for item in ITEMS):
        raise FileExistsError(f"checkpoint directory {directory} is a checkpoint's step folder (step {directory.name} "
                              f"of {directory.parent}): steps saved inside it are never restored from "
                              f"{directory.parent}, and go with it when keep deletes it; pass a folder of its own")
    if (directory / CHECKPOINT_SUBDIR).is_dir():  # restore(directory) reads that one: steps saved here, never
        raise FileExistsError(f"checkpoint directory {directory} is a run folder, holding {CHECKPOINT_SUBDIR}/, which "
                              f"restore reads, not steps saved beside it: pass {directory / CHECKPOINT_SUBDIR}")
    if foreign := sorted(p.name for p in (directory.iterdir() if directory.is_dir() else ()) if p.is_dir()
                         and p.name.isdigit() and not set(ITEMS) & {c.name for c in p.iterdir()}):
        raise FileExistsError(f"checkpoint directory {directory} holds folders named like steps that are no "
                              f"checkpoints ({', '.join(foreign[:6])}); old steps there are deleted as new ones "
                              "are saved: pass an empty folder or one holding only checkpoints")


def check_none_cut_short(directory: Path) -> None:
    """Refuse step folders of ``directory`` without a commit (Orbax lists them, restore skips them); under the lock."""
    done = {str(step) for step in committed_steps(directory)}  # other step-named folders: check_save_directory's
    cut = sorted((p.name for p in directory.glob("*") if p.is_dir() and p.name.isdigit() and p.name not in done),
                 key=int)
    if not cut:
        return
    lost = [str(step) for step in unconfirmed_steps(directory) if str(step) in cut]
    short = [step for step in cut if step not in lost]
    gone = f"every item there, but not {NO_METADATA}"
    why = (f"step {', '.join(short)}: a save or copy cut short; step {', '.join(lost)}: {gone}" if short and lost
           else gone if lost else "a save or copy cut short")
    fix = f"copy step {', '.join(lost)} again whole from where it was saved, or " if lost else ""
    skips = (f"restore of the folder refuses step {lost[-1]}, newer than its newest complete step" if done and lost
             and int(lost[-1]) > max(map(int, done)) else "restore skips them")  # find_checkpoint's refusal
    raise FileExistsError(f"checkpoint directory {directory} holds step folders that are no complete checkpoints "
                          f"({why}): {', '.join(cut)}; {skips}, and saving any step up to {cut[-1]} would "
                          f"be refused: {fix}move them aside, e.g. {directory / cut[0]} to {directory / cut[0]}"
                          ".incomplete, or delete them")


def continued(directory: Path) -> None:
    """Record that this process restored from (or saved in) the checkpoint folder ``directory``."""
    _CONTINUED.add(Path(directory).resolve())


def warn_beside_earlier(directory: Path, steps: list[int], step: int, keep: int) -> None:
    """Warn that ``step`` is saved beside ``steps`` this process neither restored from nor saved (an earlier run's)."""
    if not steps or Path(directory).resolve() in _CONTINUED:
        return
    gone = [s for s in sorted([*steps, step])[:-keep] if s in steps]
    now = f"step{'s' * (len(gone) > 1)} {', '.join(map(str, gone))} now" if gone else ""
    later = "" if len(gone) == len(steps) else f"{'the others' if gone else 'them'} as newer steps come"
    fate = f"keep={keep} deletes " + " and ".join(words for words in (now, later) if words)
    warnings.warn(f"CheckpointWriter: {directory} holds steps {steps}, which this process did not restore from: "
                  f"step {step} is saved beside them and {fate}. A run continuing them restores from {directory} "
                  "first; a new run gets a directory of its own", RuntimeWarning,
                  skip_file_prefixes=(os.path.dirname(__file__),))  # the line of the user's save or maybe_save
    continued(directory)  # once


def _release_in_child() -> None:
    # A forked child (a fork-started data loader) shares the parent's open folder: it held the lock past close.
    for fd in _HELD.values():
        os.close(fd)
    _HELD.clear()
    _OPEN.clear()  # the parent's writers: the parent finishes their saves


os.register_at_fork(after_in_child=_release_in_child)
atexit.register(_disarm)

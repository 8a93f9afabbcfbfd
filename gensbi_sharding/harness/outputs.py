"""Writing a run's files so that nothing is lost: atomic writes, with the mode an ordinary file gets.

Every file is written to a temporary name in its folder and renamed into place,
so a killed run never leaves a half-written file, and gets the mode the umask
gives an ordinary file (0644 under umask 022), so colleagues can read results.
Who may write into a folder: ``harness.run_folder`` (``harness.folder_lock``).
"""

from __future__ import annotations

import errno
import io
import json
import os
import secrets
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["write_atomic", "write_json", "write_npz", "read_metrics", "metrics_problem", "read_record", "MAKE_ROOM",
           "room_fix"]


#: The fix every message about a refused write (a full disk, a read-only folder) names.
MAKE_ROOM = "free space there (or make it writable)"


def room_fix(err: OSError) -> str:
    """The fix of a write ``err`` refused: ``MAKE_ROOM``; for a file over the process's file-size limit (``ulimit -f``:
    "File too large"), raising that limit (not "free space there (or make it writable)", on a disk with room), as far
    as its hard limit lets a user: bash's ``ulimit -f 8`` sets both, so "ulimit -f unlimited", pasted in that shell,
    was refused ("cannot modify limit: Operation not permitted").

    Parameters
    ----------
    err : OSError
        What the write raised (its ``errno``: ENOSPC, EROFS, EFBIG, ...).

    Returns
    -------
    str
        The fix, a phrase to follow a semicolon.
    """
    import errno
    import resource

    if err.errno != errno.EFBIG:
        return MAKE_ROOM
    limit, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    # Said in the shell's own unit (ulimit -f counts blocks of 1,024 B), so the number reads as `ulimit -f` prints it
    if limit == resource.RLIM_INFINITY:  # no limit of the process's: the file system's own largest file
        return "the file is larger than that file system takes: write to a folder on another disk"
    if hard == resource.RLIM_INFINITY:
        return (f"raise the file-size limit of the shell that runs it (ulimit -f: {limit // 1024:,} blocks of "
                "1,024 B here; ulimit -f unlimited lifts it)")
    if limit < hard:  # a user may raise it up to the hard limit, not past it
        return (f"raise the file-size limit of the shell that runs it (ulimit -f: {limit // 1024:,} blocks of "
                f"1,024 B here; ulimit -f hard raises it to its hard limit, {hard // 1024:,} blocks)")
    return (f"run it from a new shell: this one's file-size limit ({limit // 1024:,} blocks of 1,024 B) is its hard "
            "limit too, which only root raises (bash's ulimit -f <N> sets both); where a new shell has it too, ask the "
            "administrator")


def write_atomic(path: Path, data: bytes | str, *, exclusive: bool = False) -> Path:
    """Write ``data`` to ``path`` through a temporary file in the same folder, flushed to disk, and a rename.

    The file gets the mode the umask gives an ordinary file (``0o666 & ~umask``). ``exclusive``: a hard link
    instead of the rename, so a file another process created at ``path`` meanwhile is kept and
    ``FileExistsError`` raised (a check before writing cannot see a file made while the data was computed); on a file
    system without hard links (vfat, some FUSE or SMB mounts), the name taken by an exclusive create, then the rename.
    """
    path = Path(path)
    tmp = path.parent / f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    try:  # a refusal names the file meant, never the temp name, nor none where a write met a full disk
        path.parent.mkdir(parents=True, exist_ok=True)
        # os.open applies the umask to 0o666 as open() does; tempfile.mkstemp would give 0o600.
        handle = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    except OSError as err:
        raise (OSError(err.errno, err.strerror, str(path)) if err.errno else err) from err
    try:
        with os.fdopen(handle, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
            # On disk before the rename: after a machine crash the name holds the old file or the new one,
            # never a new name over data the kernel had not yet written (a zero-length or cut-off file).
            f.flush()
            os.fsync(f.fileno())
        if exclusive:
            _link_exclusive(tmp, path)
        else:
            os.replace(tmp, path)
    except BaseException as err:
        tmp.unlink(missing_ok=True)
        if isinstance(err, OSError) and err.errno:  # the same kind (FileExistsError stays one), the file meant named
            raise OSError(err.errno, err.strerror, str(path)) from err
        raise
    return path


#: What ``os.link`` raises on a file system without hard links (vfat: EPERM; FUSE, SMB: ENOTSUP, ENOSYS, EXDEV).
_NO_HARD_LINKS = {errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV, errno.ENOSYS}


def _link_exclusive(tmp: Path, path: Path) -> None:
    """Put the written ``tmp`` at ``path`` unless a file is there: ``FileExistsError`` then, and ``tmp`` kept (the
    caller removes it). A hard link where the file system makes one; else ``path`` taken by an exclusive create (an
    empty file only this call made) and ``tmp`` renamed over it, still never a half-written file at ``path``.
    """
    try:
        os.link(tmp, path)
    except OSError as err:
        if err.errno not in _NO_HARD_LINKS:
            raise
        # WHY not a copy into the new file: a kill mid-copy would leave it cut off; the rename is whole or nothing
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
        try:
            os.replace(tmp, path)
        except BaseException:
            path.unlink(missing_ok=True)  # the empty file this call made: never left in place of the data
            raise
        return
    tmp.unlink()


#: The statuses a run (``run``) or a benchmark's job (``benchmarks/sequential.py``: stopped) writes into metrics.json.
STATUSES = ("ok", "error", "preempted", "interrupted", "stopped")


def metrics_problem(path: Path) -> str | None:
    """What is wrong with the run's record ``path`` (``metrics.json``), e.g. "a JSON list, not an object"; None where it
    is a JSON object with a status a run writes (``STATUSES``)."""
    try:
        metrics = json.loads(Path(path).read_text())
    except (OSError, ValueError) as err:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        return f"{type(err).__name__}: {err}"
    if not isinstance(metrics, dict):
        return f"a JSON {type(metrics).__name__}, not an object"
    # Every run writes its status first: an object without one ({}, edited) was listed and refused as "status unknown"
    if "status" not in metrics:
        return "a JSON object with no status, which every run writes" + (
            f" (its keys: {', '.join(list(map(str, metrics))[:5])})" if metrics else " (it is empty)")
    # A status no run writes ({"status": 5}, edited) was read as a finished run's: "status 5", train it further
    if metrics["status"] not in STATUSES:
        return f"its status {json.dumps(metrics['status'])} is not one a run writes: {', '.join(STATUSES)}"
    return None


def read_metrics(path: Path) -> dict:
    """A run's ``metrics.json``; one that is not a JSON object (emptied, truncated, edited), has no ``status`` or one
    that is none of ``STATUSES`` is named (``metrics_problem``).

    Raises
    ------
    FileExistsError
        Naming the file and what to do: its folder holds a run's record, which is never overwritten.
    """
    if (problem := metrics_problem(path)) is not None:
        from gensbi_sharding.harness.python_words import said_as  # launch.py's words, or a Python caller's

        raise FileExistsError(f"{path} cannot be read ({problem}): this folder holds an earlier run's damaged "
                              "record, which is never overwritten; choose another "
                              f"{said_as('hydra.run.dir (or hydra.sweep.dir)', 'cfg.output_dir')}, "
                              f"or move {path} aside")
    return json.loads(Path(path).read_text())


def write_json(path: Path, obj: Any) -> Path:
    """``write_atomic`` of ``obj`` as indented JSON (NumPy scalars and arrays converted)."""
    # NaN and inf are not JSON: strict parsers (jq, browsers) reject them, so they become null.
    return write_atomic(path, json.dumps(_finite(obj), indent=2, default=_jsonable, allow_nan=False) + "\n")


def _finite(obj: Any) -> Any:
    if isinstance(obj, float | np.floating):
        return float(obj) if np.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_finite(v) for v in obj]
    return obj


def write_npz(path: Path, *, exclusive: bool = False, **arrays: np.ndarray) -> Path:
    """``write_atomic`` of ``numpy.savez(**arrays)`` (``exclusive``: as ``write_atomic``'s)."""
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return write_atomic(path, buffer.getvalue(), exclusive=exclusive)


def read_record(path: Path) -> Any:
    """A Hydra record (``.hydra/overrides.yaml``, ``hydra.yaml``, ``multirun.yaml``) as OmegaConf reads it; None where
    it is missing or damaged (edited, cut off, a tab), so the hints and summaries read from it go without, not with the
    YAML error in place of what it was read for (e.g. a resume's refusal naming the overrides that fit)."""
    from omegaconf import OmegaConf

    try:
        return OmegaConf.load(path)
    except Exception:  # noqa: BLE001 (yaml's errors, OSError, a record that is no YAML mapping or list)
        return None


def _jsonable(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, Path):
        return str(value)
    return str(value)

"""A run's folder deleted or moved while the run went on: said on its last line, never a plain "outputs in <folder>".

The run writes each output by its folder's path (``outputs.write_atomic`` and Orbax make the folder again), so a folder
deleted or renamed mid-run (``rm -r outputs/...``, ``mv`` to a better name) was made anew holding only what was written
after, without its ``launch.log``, ``.hydra/`` record or earlier checkpoints, and the run ended "done ...; outputs in
<folder>" as if they were all there. The claim's lock file (``folder_lock.FolderLock.LOCK``, kept after the run on
purpose) marks the folder this run claimed: gone from that path, the folder there is not the one claimed. A sweep's
folder alike (``sweep_gone_note``): its jobs' folders went with it, so its table counted those jobs "not run".
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["LOST_SWEEPS", "gone_note", "holds_lock", "sweep_gone_note", "sweep_lost"]

LOST_SWEEPS: list[Path] = []  # the sweep folders whose loss ``sweep_gone_note`` said, in this process


def gone_note(out: Any, metrics: dict) -> str:
    """What the last line adds where the folder this process claimed is no longer at ``out``; "" where it is.

    Parameters
    ----------
    out : path-like
        The run's folder, as it was claimed.
    metrics : dict
        The run's metrics (kept for the callers; the claim is what ``CLAIMED`` records).

    Returns
    -------
    str
        E.g. "; but /runs/a was deleted or moved while the run went on (its .run.lock is gone): ...", or "".
    """
    from gensbi_sharding.harness.console import job_log_name
    from gensbi_sharding.harness.folder_lock import CLAIMED, FolderLock, physical
    from gensbi_sharding.harness.run_folder import is_writer

    out = Path(out).absolute()
    # A run refused before its claim (distributed=auto with no cluster at [1/7], a folder run() refused) had its wall_s
    # and no lock file: it ended "...; but <folder> was deleted or moved" though nothing had touched the folder. Its
    # job log told it apart only where Hydra writes one (not under hydra/job_logging=stdout or =disabled, which write
    # no log file): the claim itself, recorded as it is taken, is asked instead.
    if out not in CLAIMED and physical(out) not in CLAIMED:
        return ""
    if not is_writer() or (out / FolderLock.LOCK).exists():
        return ""  # another process's folder (process 0 writes it), or still the folder claimed
    # The job's log, opened by Hydra as the job started (never again by its path): the folder the job started in is
    # there, not made anew.
    if (out / job_log_name()).exists():
        return ""
    held = ("holds only what was written after it was made anew" if out.is_dir() else "no longer exists")
    return (f"; but {out} was deleted or moved while the run went on (its {FolderLock.LOCK} is gone) and {held}: "
            "its launch.log, .hydra/ record and what was written before then are not there (a moved folder holds "
            "them)")


def holds_lock(folder: Any) -> bool:
    """Whether ``folder`` holds a claim's lock file (``folder_lock.FolderLock.LOCK``): asked as a sweep starts, after
    ``folder_claim`` claimed it, so that ``sweep_gone_note`` speaks only of a folder this process claimed.

    Parameters
    ----------
    folder : path-like

    Returns
    -------
    bool
    """
    from gensbi_sharding.harness.folder_lock import FolderLock

    try:
        return (Path(folder) / FolderLock.LOCK).is_file()
    except OSError:  # an unreadable path: no claim seen, so nothing said of it later
        return False


def sweep_gone_note(sweep_dir: Any, claimed: bool) -> str:
    """What a sweep's last line adds where the folder it claimed is no longer at ``sweep_dir``; "" where it is.

    A sweep folder deleted or moved mid-sweep took its finished jobs' folders with it: the table, read from the
    folder made anew by the later jobs, counts them "not run", though they ran.

    Parameters
    ----------
    sweep_dir : path-like
        The sweep's folder, as it was claimed.
    claimed : bool
        Whether it held the claim's lock file as the sweep started (``holds_lock``); False: nothing said.

    Returns
    -------
    str
        E.g. "; but /sweeps/a was deleted or moved while the sweep went on (its .run.lock is gone): ...", or "".
    """
    if not claimed or holds_lock(sweep_dir):
        return ""
    LOST_SWEEPS.append(Path(sweep_dir))  # its exit code says it too (``sweep_lost``)
    return (f"; but {sweep_dir} was deleted or moved while the sweep went on (its .run.lock is gone) and holds only "
            "what was written after it was made anew: a job counted not run may have run, its folder (and the "
            "sweep's multirun.yaml) in the folder moved, if it was moved")


def sweep_lost() -> bool:
    """Whether a sweep of this process lost its folder (``sweep_gone_note`` said so), for launch.py's exit code (1).

    Every other sweep with a job counted not run exits non-zero (a job refused its folder: 1; preempted: 75; Ctrl-C:
    130); one whose folder was moved mid-sweep ended "sweep stopped: ... 1 not run" with exit 0, so a script or a
    scheduler read it as complete while its summary lacked the jobs that went with the folder.

    Returns
    -------
    bool
    """
    return bool(LOST_SWEEPS)

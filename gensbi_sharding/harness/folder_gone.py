"""A run's folder deleted or moved while the run went on: said on its last line, never a plain "outputs in <folder>".

The run writes each output by its folder's path (``outputs.write_atomic`` and Orbax make the folder again), so a folder
deleted or renamed mid-run (``rm -r outputs/...``, ``mv`` to a better name) was made anew holding only what was written
after, without its ``launch.log``, ``.hydra/`` record or earlier checkpoints, and the run ended "done ...; outputs in
<folder>" as if they were all there. The claim's lock file (``folder_lock.FolderLock.LOCK``, kept after the run on
purpose) marks the folder this run claimed: gone from that path, the folder there is not the one claimed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["gone_note"]


def gone_note(out: Any, metrics: dict) -> str:
    """What the last line adds where the folder this process claimed is no longer at ``out``; "" where it is.

    Parameters
    ----------
    out : path-like
        The run's folder, as it was claimed.
    metrics : dict
        The run's metrics; one refused before it started (no ``wall_s``) claimed no folder.

    Returns
    -------
    str
        E.g. "; but /runs/a was deleted or moved while the run went on (its .run.lock is gone): ...", or "".
    """
    from gensbi_sharding.harness.folder_lock import FolderLock
    from gensbi_sharding.harness.run_folder import is_writer

    out = Path(out)
    if metrics.get("wall_s") is None or not is_writer() or (out / FolderLock.LOCK).exists():
        return ""  # never claimed, another process's folder (process 0 writes it), or still the folder claimed
    held = ("holds only what was written after it was made anew" if out.is_dir() else "no longer exists")
    return (f"; but {out} was deleted or moved while the run went on (its {FolderLock.LOCK} is gone) and {held}: "
            "its launch.log, .hydra/ record and what was written before then are not there (a moved folder holds "
            "them)")

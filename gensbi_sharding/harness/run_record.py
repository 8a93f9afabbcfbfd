"""A run's record, ``error.txt`` and ``metrics.json``, written in its folder; where the disk refuses, one line naming
what was not written, why, the fix and the command that continues the run.

Above ``outputs`` (the atomic writes, read through the module so that a test's stand-in for ``write_atomic`` is the one
used) and ``sweep_hints`` (the continue command): ``outputs`` holding it reached ``sweep_hints`` and every hint module
behind it (an import cycle).
"""

from __future__ import annotations

from pathlib import Path

from gensbi_sharding.harness import outputs
from gensbi_sharding.harness.sweep_hints import continue_command

__all__ = ["write_record", "kept_checkpoints_command"]


def write_record(folder: Path, metrics: dict, traceback_text: str | None = None) -> str | None:
    """A run's record, ``error.txt`` (with ``traceback_text``) and ``metrics.json``, written in ``folder``; where the
    disk refuses (full, read-only), one line naming what was not written, why, and the fix; else None (not Hydra's
    traceback of the OSError, the run's error unnamed and its folder without a record)."""
    # The files not written, named: a disk that filled up between them kept error.txt, which the run's final line
    # points at, so it must not be called unwritten.
    unwritten = [*(["error.txt"] if traceback_text else []), "metrics.json"]
    try:
        if traceback_text:
            outputs.write_atomic(Path(folder) / "error.txt", traceback_text)
            unwritten.remove("error.txt")
        outputs.write_json(Path(folder) / "metrics.json", metrics)
    except OSError as err:
        then = (f", then continue it with {command} (its checkpoints are kept)"
                if (command := kept_checkpoints_command(folder)) else " before continuing the run")
        said = ("on this console only" if unwritten[0] == "error.txt" or not traceback_text
                else "on this console, its traceback in error.txt")
        return (f"this run's record ({', '.join(unwritten)}) could not be written in {folder} ({err.strerror or err})"
                f": its outcome is {said}; {outputs.room_fix(err)}{then}")
    return None


def kept_checkpoints_command(folder: Path) -> str | None:
    """The command that continues the run in ``folder`` from its kept checkpoints (None where it has none): what
    ``write_record``'s line offers where the disk refused the record, and the run's ``continue_with`` then.

    Parameters
    ----------
    folder : path-like
        The run's folder.

    Returns
    -------
    str or None
    """
    # Continued in this folder, named ("the same command plus train.resume=auto" would, in the default
    # outputs/<date>/<time>, run in a new folder, where train.resume=auto starts from step 0).
    return continue_command(folder) if any(p.name.isdigit() for p in Path(folder).glob("checkpoints/*")) else None

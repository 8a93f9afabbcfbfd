"""An earlier attempt's files in a continued run's folder: set aside as the folder is claimed, read back to keep scores.

A run continued in its own folder (``train.resume=auto``, a requeue) writes ``error.txt`` and its evaluation's files
(``c2st.csv``, ``posterior.png``, ``posterior_samples[_<k>].npz``) anew, or never: with ``eval.enabled=false``, other
``eval.observations``, or a stop before its evaluation. Left under those names, an earlier attempt's scores read as this
attempt's beside a ``metrics.json`` that says otherwise (a continuation with ``eval.enabled=false`` ending ``ok``
with ``c2st`` null beside the interrupted attempt's ``c2st.csv``, which ``benchmarks/sbibm.py table`` counts; one
scoring ``eval.observations=[1]`` beside the earlier ``posterior_samples_2.npz``). So do a ``distributed=local`` job's
``process_<i>.log``, which its processes append to and its parent reads for their refusals and errors (an earlier
attempt's error would read as this attempt's, "they were stuck, not slow: process 0 logged ..."), and ``sharding.txt``,
written once an attempt places its state (a continuation failing before then would keep the earlier attempt's, whose
mesh reads as this attempt's beside its error). Each is renamed
``<name>.attempt<N><suffix>`` (``c2st.attempt1.csv``), N the attempt that wrote it, so nothing is lost, and an
observation scored before from the same weights and settings is still kept rather than sampled again
(``kept_scores.earlier_scores`` reads those names too). An attempt killed outright in the middle of a write also left
``outputs.write_atomic``'s temporary file (``drop_cut_writes`` removes it as the next attempt claims the folder).
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

from gensbi_sharding.harness.folder_note import running

__all__ = ["ATTEMPT_FILES", "set_aside", "with_aside_copies", "take_back", "plotted_after", "drop_cut_writes"]

#: The files an attempt writes anew (or not at all), which an earlier attempt's would stand in for.
ATTEMPT_FILES = re.compile(r"error\.txt|c2st\.csv|posterior\.png|posterior_samples(_\d+)?\.npz|process_\d+\.log"
                           r"|sharding\.txt")
_ASIDE = re.compile(r"(?P<stem>.+)\.attempt(?P<n>\d+)(?P<suffix>\.[a-z]+)")
#: ``outputs.write_atomic``'s temporary name, ``.<name>.<pid>.<8 hex>.tmp``.
_CUT_WRITE = re.compile(r"\.(?P<name>.+)\.(?P<pid>\d+)\.[0-9a-f]{8}\.tmp")
#: The files a run (or a sweep, in its folder) writes with ``write_atomic`` under the folder's lock: only their cut-off
#: writes are removed. The pid is this host's; another host's ``sample.py --out <run folder>`` (a pid not alive here)
#: or a user's file of that shape is not the run's to delete.
_RUN_WRITES = re.compile(ATTEMPT_FILES.pattern + r"|metrics\.json|train_losses\.npz|losses\.png|\.run\.owner\.json"
                         r"|sweep_summary\.(csv|md|png)|multirun\.yaml|continue_unfinished\.sh")


def _attempt_number(folder: Path, previous: dict | None) -> int:
    """The earlier attempt's number: its record's count of attempts, and past every number already set aside, as an
    attempt killed outright left no record to count (the record's count alone, after such an attempt, names copies
    that exist, and leaves its files under the names this attempt writes)."""
    recorded = len((previous or {}).get("previous_attempts", [])) + 1
    return max(recorded, 1 + max((int(m["n"]) for p in folder.iterdir() if (m := _ASIDE.fullmatch(p.name))), default=0))


def set_aside(folder: Path, previous: dict | None, names: re.Pattern = ATTEMPT_FILES, *,
              copy: bool = False) -> list[str]:
    """Rename the earlier attempt's files ``names`` matches in ``folder`` to ``<stem>.attempt<N><suffix>``.

    Parameters
    ----------
    folder : Path
        The run's folder, just claimed for this attempt.
    previous : dict or None
        The earlier attempt's ``metrics.json``, None when it left none.
    names : re.Pattern
        The file names to set aside: ``ATTEMPT_FILES``, or ``launch_record``'s Hydra record in ``<run>/.hydra``.
    copy : bool
        Copy rather than rename: the files stay until the new attempt writes its own (a sweep's job not yet started
        keeps its record, which a rerun reads); a file whose newest copy holds the same bytes is not copied again.

    Returns
    -------
    list of str
        The new names, sorted (empty in a fresh folder).
    """
    folder = Path(folder)
    if names is ATTEMPT_FILES and not copy and folder.is_dir():  # the run's own folder, claimed: its cut-off writes
        drop_cut_writes(folder)
    earlier = sorted(p for p in folder.iterdir() if names.fullmatch(p.name)) if folder.is_dir() else []
    if not earlier:
        return []
    attempt, moved = _attempt_number(folder, previous), []
    for path in earlier:
        target = path.with_name(f"{path.stem}.attempt{attempt}{path.suffix}")
        if target.exists() or copy and (kept := with_aside_copies([path])[1:2]) and \
                kept[0].read_bytes() == path.read_bytes():  # never over another attempt's copy, nor twice the same
            continue
        shutil.copy2(path, target) if copy else os.replace(path, target)
        moved.append(target.name)
    return sorted(moved)


def drop_cut_writes(folder: Path) -> list[str]:
    """Remove the temporary files of writes an earlier attempt never finished, from ``folder`` and its ``.hydra/``.

    ``outputs.write_atomic`` writes ``.<name>.<pid>.<hex>.tmp`` and renames it; an attempt killed outright in between
    (SIGKILL, out of memory) left it there for good: a hidden, cut-off copy of ``metrics.json`` or of a samples file
    (megabytes) in every folder such a kill hit, which no later attempt wrote over. Called as a run claims its
    folder (the lock held: no other run writes there); a file whose process is still alive is left alone, and so is
    one not named after a file runs and sweeps write (``.hydra/``: any), whatever its pid: the pid is this host's.

    Parameters
    ----------
    folder : Path
        The run's folder, just claimed.

    Returns
    -------
    list of str
        The names removed (paths relative to ``folder``), sorted.
    """
    folder, removed = Path(folder), []
    for place in (folder, folder / ".hydra"):
        for path in place.iterdir() if place.is_dir() else ():
            m = _CUT_WRITE.fullmatch(path.name)
            ours = m is not None and (place != folder or _RUN_WRITES.fullmatch(m["name"]) is not None)  # .hydra/: all
            if ours and path.is_file() and not running(int(m["pid"])):  # this process's too: alive
                path.unlink(missing_ok=True)
                removed.append(str(path.relative_to(folder)))
    return sorted(removed)
    return True


def with_aside_copies(paths: list[Path]) -> list[Path]:
    """``paths``, then the copies ``set_aside`` made of them (``posterior_samples_3.attempt2.npz`` of
    ``posterior_samples_3.npz``), the newest attempt's first.

    Parameters
    ----------
    paths : list of Path
        Files under the names an attempt writes.

    Returns
    -------
    list of Path
        ``paths`` followed by their copies that exist.
    """
    copies = [(int(m["n"]), p) for path in map(Path, paths)
              for p in path.parent.glob(f"{path.stem}.attempt*{path.suffix}")
              if (m := _ASIDE.fullmatch(p.name)) and m["stem"] == path.stem]
    return [*map(Path, paths), *(p for _, p in sorted(copies, key=lambda c: -c[0]))]


def take_back(source: Path, path: Path) -> bool:
    """Move ``source``, a copy ``set_aside`` made whose score this attempt keeps, to ``path``; False for any other file.

    Parameters
    ----------
    source : Path
        The file the kept score was read from.
    path : Path
        The name this attempt gives that observation's samples.

    Returns
    -------
    bool
        Whether ``source`` was such a copy, now ``path`` (its bytes as written: the score is this attempt's again).
    """
    if not _ASIDE.fullmatch(Path(source).name):
        return False
    os.replace(source, path)
    return True


def plotted_after(plot: Path, samples: Path) -> bool:
    """Whether ``plot`` was written after ``samples``: from those kept samples, not an earlier evaluation's (a job
    killed between the samples file and its plot leaves an earlier step's posterior.png).

    Parameters
    ----------
    plot, samples : Path
        The pair plot and the samples file it would show.

    Returns
    -------
    bool
        False also when either is missing.
    """
    try:
        return Path(plot).stat().st_mtime_ns >= Path(samples).stat().st_mtime_ns
    except OSError:
        return False

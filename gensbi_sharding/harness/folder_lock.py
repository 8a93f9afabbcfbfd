"""One run at a time in an output folder: ``FolderLock`` (a lock file and an owner note) and its error;
``folder_problem``: whether a path can be a run's (or a sweep's) folder at all."""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

from gensbi_sharding.harness.checkout_folders import config_folder_problem
from gensbi_sharding.harness.foreign_record import another_apps_record
from gensbi_sharding.harness.folder_note import (OWNER_NOTE, drop_owner_note, owner_line, remove_owner_notes,
                                                 write_owner_note)
from gensbi_sharding.harness.outputs import read_metrics
from gensbi_sharding.harness.python_words import OPEN_DICT, said_as
from gensbi_sharding.harness.python_words import setting as typed  # launch.py's override as typed, or cfg's setting
from gensbi_sharding.write_probe import array_path_fault, array_path_renamed, write_denied  # tests patch write_denied

__all__ = ["CLAIMED", "FolderLock", "FolderInUseError", "folder_problem", "remove_owner_notes", "run_folder_holding",
           "physical", "runs_under", "write_denied"]

#: The folders this process claimed (``FolderLock.acquire`` adds each once it holds the lock): a folder never claimed
#: here (a run refused before its claim) was never made anew, whatever its files say (``folder_gone.gone_note``).
CLAIMED: set[Path] = set()

# What a run (a sweep) writes at the top of its folder, and what marks a folder one has used: a folder without such a
# mark that holds one of those names is someone else's, whose file the run would overwrite without a word.
# (the .attempt<N> names: earlier_attempts')
_RUN_OUTPUTS = re.compile(r"(metrics\.json|sharding\.txt|launch\.log|c2st(\.attempt\d+)?\.csv|"
                          r"posterior(\.attempt\d+)?\.png|"
                          r"train_losses\.npz|losses\.png|error(\.attempt\d+)?\.txt|checkpoints|"
                          r"posterior_samples(_\d+)?(\.attempt\d+)?\.npz|process_\d+(\.attempt\d+)?\.log)")
_SWEEP_OUTPUTS = re.compile(r"(sweep_summary\.(csv|md|png)|continue_unfinished\.sh|\d+)")
#: How a run's folder lies in a sweep's, said after "choose another hydra.run.dir" (a Python caller runs no sweep).
_SWEEP_JOB = " (a sweep's job: hydra.run.dir=<sweep>/<job>)"
_MARKS = {False: (".run.lock", ".hydra", "metrics.json", "checkpoints"), True: (".run.lock", "multirun.yaml")}


class FolderInUseError(RuntimeError):
    """Another run holds the lock of the output folder; ``holder`` names it, its command line as it ran."""

    holder = ""


class FolderLock:
    """The lock one run holds on its output folder while it writes there (``filelock``).

    Re-entrant within a process (a Hydra callback and ``run()`` may both take it). The
    holder's pid, host, start time and command line go into ``.run.owner.json`` next to
    the lock file, so a refused run can name the one that holds the folder.
    """

    #: The empty lock file stays after the run, on purpose. Removing it as the lock is freed would let two runs hold
    #: the folder at once: a run that opened the file just before the removal locks that unlinked file, while a third
    #: makes a new one and locks it (the lock lives on the file opened, not on its name; filelock keeps the file for
    #: this reason). It also marks the folder as a run's or a sweep's (``_MARKS``: another's files are refused) and is
    #: how a checkpoint path finds its run's folder (``resume``, ``own_observation``). The owner note goes with the
    #: lock.
    LOCK, OWNER = ".run.lock", OWNER_NOTE

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
            holder = self.holder()
            refused = FolderInUseError(f"{self.folder} is in use by another run ({holder}): two runs must not write "
                                       "into one folder; wait for it to end, or choose another "
                                       f"{said_as('hydra.run.dir (or hydra.sweep.dir)', f'cfg.output_dir{OPEN_DICT}')}")
            refused.holder = holder
            raise refused from None
        CLAIMED.add(self.folder)  # folder_gone.gone_note speaks only of a folder this process claimed
        if self._lock.lock_counter == 1:
            write_owner_note(self.folder)

    def release(self) -> None:
        """Undo one ``acquire``; the last one removes the owner note and frees the folder."""
        try:
            if self._lock.lock_counter == 1:
                drop_owner_note(self.folder)  # kept where the folder turned read-only: never an error here
        finally:
            self._lock.release()

    def __enter__(self) -> "FolderLock":
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()

    def holder(self) -> str:
        """Who holds the lock, from its owner note: "pid 123 on node7, started ...: launch.py ..." (``owner_line``:
        a note of a process that has ended is said to be an earlier run's)."""
        return owner_line(self.folder)


def physical(path: str | os.PathLike) -> Path:
    """``path`` made absolute, a ``..`` in it resolved as the file system will (so ``runs/a/../b`` does not lie inside
    the run ``runs/a``, and ``runs/x/../a`` does not make ``runs/x`` for its lock); any other path as it is."""
    path = Path(path).absolute()
    return Path(os.path.realpath(path)) if ".." in path.parts else path


def folder_problem(folder: Path, *, sweep: bool, before_hydra: bool = False, saves: bool = True,
                   as_typed: str | None = None) -> str | None:
    """Why ``folder`` cannot be this job's output folder, naming the override to change; None if it can.

    A path that is (or lies under) a file cannot be made a folder; one whose nearest existing folder refuses
    a new entry (read-only, another user's) cannot be written (said here, before Hydra's PermissionError traceback and
    its warning that a callback raised it); and a run and a sweep never share one, or a sweep's job folders,
    ``multirun.yaml`` and summary would mix with the run's own files. ``before_hydra``: the check of the Hydra
    callback, before Hydra writes: a run in a running sweep's job folder, or a sweep over one a run writes, too
    (not a sweep's own jobs, whose sweep holds their folder's parent). ``saves``: whether the run saves checkpoints
    (not a dry run): only then is a folder TensorStore misreads (``[x]``, ``\\``) refused; a dry run writes none.
    ``as_typed``: ``key`` unresolved (the config's ``outputs/${now:...}``), where a relative one under a working
    directory TensorStore misreads is refused naming that directory, not a timestamped folder the user never typed.
    """
    key = "hydra.sweep.dir" if sweep else "hydra.run.dir"
    folder = physical(folder)
    named, another = typed(key, folder), said_as(key, "cfg.output_dir")  # a Python caller's folder
    blocker = next((p for p in (folder, *folder.parents) if p.exists()), None)
    # A symbolic link to nothing (its target moved, not made yet) cannot be made a folder: named, not "[Errno 17]
    # File exists", which names neither the link nor the fix.
    if dangling := next((p for p in (folder, *folder.parents) if p.is_symlink() and not p.exists()), None):
        target = Path(os.path.join(dangling.parent, os.readlink(dangling)))
        return (f"{named}: {dangling} is a symbolic link to {target}, which does not exist; make that folder "
                f"(mkdir -p {shlex.quote(str(target))}), or choose another {another}")
    if blocker is not None and not blocker.is_dir():
        return f"{named}: {blocker} is a file, not a folder; choose another {another}"
    # its checkpoints/ (each job's, in a sweep's): the writer refused it only at [5/7], after the setup's minutes; a
    # dry run saves none, so TensorStore never reads the path. The fault in the library's words; the fix another folder
    if saves and (fault := array_path_fault(folder / "checkpoints", "its checkpoint folder")) is not None:
        if (cwd := _misread_working_directory(folder, as_typed)) is not None:
            return (f"{cwd[0]}, and {key} ({as_typed}) puts the {'sweep' if sweep else 'run'}'s folder under it; run "
                    f"from a folder without it, or set {key} to one outside it, e.g. "
                    f"{shlex.quote(f'{key}={cwd[1] / as_typed}')}")  # quoted: ${now:...} pastes as Hydra's, not bash's
        return f"{named}: {fault}; choose another {another}, e.g. {typed(key, str(array_path_renamed(folder)))}"
    if (in_conf := config_folder_problem(folder, named, key)) is not None:  # hydra.run.dir=conf: never run there
        return in_conf
    metrics, sweep_file = folder / "metrics.json", folder / "multirun.yaml"
    if sweep and metrics.is_file():
        status = read_metrics(metrics).get("status", "unknown")
        return (f"{named} holds a single run's outputs ({metrics}, status {status}): a sweep never "
                f"writes into a run's folder; choose another {another}")
    if not sweep and sweep_file.is_file():
        return (f"{named} is a sweep's folder ({sweep_file}): a run never writes into a sweep's folder; "
                f"choose another {another}{said_as(_SWEEP_JOB, '')}")
    # Not hydra.run.dir=<a run>/checkpoints/20: a run there is a step folder, whose checkpoint sample.py and
    # train.resume=<the run> would read as the run's own newest; nor <a run>/sub, inside a completed run's folder.
    if host := run_folder_holding(folder.parent):
        instead = typed(key, f"{host}-{folder.name.lstrip('.')}")
        return (f"{named} lies inside the folder of the run {host}: a {'sweep' if sweep else 'run'} never "
                f"writes into another run's folder; choose one outside it, e.g. {instead}")
    # Not hydra.run.dir=outputs (the folder of every run): each run after it would lie inside it.
    if not sweep and folder.is_dir() and (runs := runs_under(folder)):
        return (f"{named} holds the folders of other runs ({', '.join(runs[:3])}{', ...' if len(runs) > 3 else ''}"
                f"): a run never writes around other runs; choose a new folder, e.g. {typed(key, folder / 'new_run')}")
    if blocker is not None and (denied := write_denied(blocker, folder)):
        # A stopped run's checkpoints there stay readable; train.resume=auto in another folder starts from step 0.
        saved = not sweep and blocker == folder and any(p.name.isdigit() for p in folder.glob("checkpoints/*"))
        then = (f"; to continue from its checkpoints in a new folder: {typed('train.resume', folder)}"
                f"{said_as(' ', ' and ')}{typed(key, '<a new folder>')}")
        return f"{named}: {denied}; choose another {another}, in a folder you can write to{then if saved else ''}"
    if folder.is_dir() and not any((folder / mark).exists() and not (mark == ".hydra" and another_apps_record(
            folder / mark)) for mark in _MARKS[sweep]):  # another Hydra app's .hydra/ marks no run of ours
        outputs = _SWEEP_OUTPUTS if sweep else _RUN_OUTPUTS  # a sweep's job folder: marked as a run's
        names = sorted(p.name for p in folder.iterdir() if outputs.fullmatch(p.name)
                       and not (sweep and any((p / mark).exists() for mark in _MARKS[False])))
        if names:  # a c2st.csv of one's own, say: no run there to refuse, yet overwritten
            shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
            return (f"{named} holds {shown}, not written by a {'sweep' if sweep else 'run'}, which it would "
                    f"overwrite; choose another {another} (a new or empty folder), or move them out")
    return _shared_with_running(folder, sweep, key) if before_hydra else None


def _misread_working_directory(folder: Path, as_typed: str | None) -> tuple[str, Path] | None:
    """``(the fault, the directory renamed)`` where ``folder`` is the relative ``as_typed`` under a working directory
    that TensorStore misreads (``cwd[1]``); else None."""
    cwd = Path.cwd()
    if as_typed is None or Path(as_typed).is_absolute() or cwd not in folder.parents:
        return None
    fault = array_path_fault(cwd, "the working directory")
    return None if fault is None else (fault, array_path_renamed(cwd))


def run_folder_holding(path: Path) -> Path | None:
    """The run's folder that ``path`` is or lies inside (the nearest), or None.

    Parameters
    ----------
    path : Path
        A folder about to be written (need not exist).

    Returns
    -------
    Path or None
        The folder holding Hydra's ``.hydra`` record and the run's log, metrics or checkpoints.
    """
    return next((p for p in (Path(path).absolute(), *Path(path).absolute().parents) if _is_run_folder(p)), None)


def _is_run_folder(path: Path, *, any_app: bool = False) -> bool:
    """Whether ``path`` is a run's folder (Hydra's ``.hydra`` record, and the run's log, metrics or checkpoints).

    Another Hydra app's output folder has a ``.hydra`` record and a ``launch.log`` or ``checkpoints/`` too: its record
    (``another_apps_record``) says it is no run of ours, so a run may write in a folder below it; one holding our
    ``metrics.json`` is a run's whatever its record says (sbibm.py's and sequential.py's job folders). ``any_app``: its
    runs count too (``runs_under``: a run never writes around runs, whoever's; its record is not read, which cost
    13 ms a folder, 6.5 s for 500)."""
    if not (path / ".hydra").is_dir():
        return False
    if (path / "metrics.json").exists():
        return True
    return (any((path / mark).exists() for mark in ("launch.log", "checkpoints"))
            and (any_app or not another_apps_record(path / ".hydra")))


def runs_under(folder: Path, depth: int = 3, most: int = 2000) -> list[str]:
    """The run and sweep folders under ``folder`` (``depth`` levels, ``most`` folders looked at), relative to it.

    Deeper than its children: ``hydra.run.dir=outputs`` (runs at ``<date>/<time>``) or ``.`` in a checkout
    (``runs/a``) would write a run around them, and every run after it in ``outputs/<date>/<time>`` be refused
    as inside that run's folder. A run's or sweep's own folders are not looked into, nor hidden ones.

    Parameters
    ----------
    folder : Path
        An existing folder.
    depth : int
        Levels below it looked at (``outputs/<date>/<time>``: 2; ``multirun/<date>/<time>``, a sweep's: 2).
    most : int
        Folders looked at, at most (a home folder given by mistake is not walked whole).

    Returns
    -------
    list of str
        Each run's or sweep's folder, relative to ``folder``, sorted; ``[]`` when none.
    """
    found, level, seen = [], [folder], 0
    for _ in range(depth):
        below = []
        for parent in level:
            try:
                children = sorted(c for c in parent.iterdir() if c.is_dir() and not c.name.startswith("."))
            except OSError:  # unreadable, or gone meanwhile: nothing of a run's to keep apart
                continue
            for child in children[:max(most - seen, 0)]:
                seen += 1
                # another app's runs too: hydra.run.dir=<its outputs> put ours among its <date>/<time> folders
                if _is_run_folder(child, any_app=True) or (child / "multirun.yaml").is_file():
                    found.append(child.relative_to(folder).as_posix())
                else:
                    below.append(child)
        level = below
    return sorted(found)


def _shared_with_running(folder: Path, sweep: bool, key: str) -> str | None:
    """Why a run cannot start in a job folder of a running sweep, or a sweep over a job folder a run writes; None.

    Hydra writes a job's ``.hydra/`` record before the job's own lock is tried: a sweep reaching a job folder that a
    run continued alone was writing replaced that run's record, then failed its job (``FolderInUseError``) and ended
    "done, 0 failed" with exit code 1; a run started in a job folder of a running sweep wrote into its jobs.
    """
    from filelock import FileLock, Timeout

    named, another = typed(key, folder), said_as(key, "cfg.output_dir")  # a Python caller's folder
    if not sweep:
        others = [folder.parent] if (folder.parent / "multirun.yaml").is_file() else []
    else:
        others = sorted(p for p in folder.glob("*") if (p / FolderLock.LOCK).is_file()) if folder.is_dir() else []
    for other in others:
        lock = FileLock(other / FolderLock.LOCK, timeout=0, is_singleton=True)  # this process's own: counted up
        try:
            lock.acquire()
        except Timeout:
            holder = FolderLock(other).holder()
            if sweep:
                return (f"{named}: its job folder {other} is in use by a run ({holder}); wait for that run to "
                        f"end, or choose another {another}")
            return (f"{named} is a job folder of the sweep {other}, which is running ({holder}): the sweep "
                    f"writes its jobs; wait for it to end, or choose another {another}")
        except OSError:  # a lock file we cannot open: folder_problem's write check names the folder
            continue
        lock.release()
    return None

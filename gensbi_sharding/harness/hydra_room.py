"""Room on the disk for the files Hydra writes into a job's folder before the job's own code runs.

Hydra writes ``.hydra/config.yaml``, ``hydra.yaml`` and ``overrides.yaml`` into each job's folder before the job
starts, outside any code of the harness: a disk that filled (``mount -t tmpfs -o size=8k``), or a file-size limit
(``ulimit -f``) under them, ended the command in Hydra's traceback of ``OSError: [Errno 28] No space left on device``
with an empty ``hydra.yaml`` left; in a sweep, a later job died so, with no sweep summary, stop line or continue
command. Hydra offers no hook between making the folder and writing them, so the room they take is checked before:
a single run's by ``LauncherPreflight.on_run_start``, a sweep's next job's as the job before it ends (launch.py).
"""

from __future__ import annotations

import errno
import os
import resource
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gensbi_sharding.harness.outputs import room_fix
from gensbi_sharding.write_probe import denied_words

__all__ = ["HYDRA_FILES", "hydra_file_sizes", "room_problem"]

#: The files Hydra writes into ``<job folder>/.hydra`` (``hydra.output_subdir``) before the job starts.
HYDRA_FILES = ("config.yaml", "hydra.yaml", "overrides.yaml")
#: Files the job writes beside them as it starts (launch.log, the folder's lock): a block each at least.
STARTING_FILES = 2


def hydra_file_sizes(config: Any) -> dict[str, int]:
    """The sizes in bytes Hydra's files of the job ``config`` (with its ``hydra`` section) take, as it writes them.

    Parameters
    ----------
    config : DictConfig
        The job's config as a Hydra callback gets it.

    Returns
    -------
    dict
        ``{"config.yaml": ..., "hydra.yaml": ..., "overrides.yaml": ...}``.
    """
    from omegaconf import OmegaConf, open_dict

    task = OmegaConf.create(OmegaConf.to_container(config, resolve=False))
    with open_dict(task):
        hydra = task.pop("hydra", None)
    texts = (OmegaConf.to_yaml(task), OmegaConf.to_yaml({"hydra": hydra}),
             OmegaConf.to_yaml(OmegaConf.select(config, "hydra.overrides.task", default=[]) or []))
    return {name: len(text.encode()) for name, text in zip(HYDRA_FILES, texts)}


def _existing(folder: Path) -> Path:
    while not folder.exists() and folder.parent != folder:
        folder = folder.parent
    return folder


def room_problem(folder: Path, sizes: Mapping[str, int], subdir: str = ".hydra") -> str | None:
    """What stops Hydra writing its files of ``sizes`` into ``folder/subdir``: too little free space on its disk, or a
    file over the process's file-size limit, as one line naming the files and the fix; None where they fit.

    Parameters
    ----------
    folder : pathlib.Path
        The job's folder (``hydra.run.dir``, a sweep's ``<sweep>/<job>``); it need not exist yet.
    sizes : mapping
        File name -> bytes (``hydra_file_sizes``).
    subdir : str
        ``hydra.output_subdir``.

    Returns
    -------
    str or None
        E.g. ``"<run>/.hydra could not be written (No space left on device): Hydra's record of the command
        (config.yaml, hydra.yaml, overrides.yaml, about 16 KB) needs more than the 4 KB free on its disk; ..."``.
    """
    target = Path(folder) / subdir
    try:
        disk = os.statvfs(existing := _existing(target))
    except OSError:  # nothing to read its room from: Hydra's write says it
        return None
    # no size of its own (sysfs, procfs: 0 blocks), read-only or not ours to write: the folder check says why (not
    # "0 KB free" for hydra.run.dir=/sys/..., before the folder check's "cannot write in /sys")
    if not disk.f_blocks or disk.f_flag & os.ST_RDONLY or not os.access(existing, os.W_OK):
        return None
    # a file takes whole blocks, but at most 4 KiB's worth: NFS reports its transfer size (1 MiB) as f_frsize, and a
    # 1 MiB block a file would be 5 MiB needed for Hydra's few KB (refused with 3 MiB free)
    block = min(disk.f_frsize or 4096, 4096)
    # a file of the same name there is replaced (truncated), its blocks freed first
    kept = {n: (target / n).stat().st_size if (target / n).is_file() else 0 for n in sizes}
    needed = sum(-(-max(size, 1) // block) * block - -(-kept[n] // block) * block for n, size in sizes.items())
    needed += STARTING_FILES * block
    free = (disk.f_bfree if os.geteuid() == 0 else disk.f_bavail) * disk.f_frsize  # root: the reserved blocks too
    limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    largest = max(sizes, key=lambda n: sizes[n])
    names = ", ".join(sizes)
    if limit != resource.RLIM_INFINITY and sizes[largest] > limit:
        err = OSError(errno.EFBIG, os.strerror(errno.EFBIG))
        said = (f"{target / largest} could not be written ({err.strerror}): Hydra's record of the command "
                f"({names}) holds a {sizes[largest] / 1000:,.0f} KB file, over this process's file-size limit")
    elif free < needed:
        err = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        said = (f"{target} could not be written ({err.strerror}): Hydra's record of the command ({names}) and the "
                f"job's first files need about {needed / 1000:,.0f} KB, more than the {free / 1000:,.0f} KB free on "
                "its disk")
    else:
        return None
    return f"{said}; {room_fix(err)}"


def next_job_room_lines(job_dir: Any, ended: int, argv: list[str]) -> list[str] | None:
    """The console lines that stop a sweep after job ``job_dir`` where its next job's Hydra files would not fit on the
    disk (their sizes: this job's), its summary written as a stop between jobs writes it; None where they fit, the job
    was the sweep's last, or the sweep's record cannot be read.

    Parameters
    ----------
    job_dir : path-like
        The folder of the job that ended, ``<sweep>/<job>``.
    ended : int
        How many of the sweep's jobs this process ran.
    argv : list of str
        ``sys.argv`` of the command that started the sweep.

    Returns
    -------
    list of str or None
        The refusal (naming the next job's folder, the files and the fix), the command that continues the sweep and
        the sweep's outcome line.
    """
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import OmegaConf

    from gensbi_sharding.harness.outputs import read_record
    from gensbi_sharding.harness.sweep_stop import stopped_between_jobs
    from gensbi_sharding.harness.sweep_plan import every_job, folder_of, job_folders

    job_dir = Path(job_dir).absolute()
    try:
        hydra, saved = HydraConfig.get(), read_record(job_dir.parent / "multirun.yaml")
    except Exception:  # noqa: BLE001 (no sweep's record to read the next job from: Hydra's write says it)
        return None
    if hydra.output_subdir is None or not OmegaConf.is_dict(saved):
        return None
    jobs, number = every_job(saved), int(hydra.job.num)
    if number + 1 >= len(jobs):
        return None
    sizes = {n: (job_dir / hydra.output_subdir / n).stat().st_size for n in HYDRA_FILES
             if (job_dir / hydra.output_subdir / n).is_file()}
    following = job_dir.parent / folder_of(number + 1, job_folders(saved, jobs))
    # A sweep folder made read-only (or remounted) while a job ran: Hydra's mkdir of the next job's folder ended the
    # sweep in its traceback (room_problem reads no room on a disk it cannot write, and leaves that to this check).
    target = following / str(hydra.output_subdir)
    if denied := _write_refused(existing := _existing(target)):
        problem = f"{target} could not be made: {denied_words(denied, existing, target)}; {_fix_of(denied)}"
    elif not sizes or (problem := room_problem(following, sizes, str(hydra.output_subdir))) is None:
        return None
    # as a stop between two jobs says it (its summary, the continue command), the disk named as what stopped it
    said = stopped_between_jobs(job_dir, None, ended, argv, made=False)[1:]
    return [f"the sweep stops before job {following.name}: {problem}; {ended} job(s) ended, each recorded in its "
            "folder's metrics.json, and no later job started", *said]


def _write_refused(folder: Path) -> OSError | None:
    """What refused an empty folder made in the existing ``folder`` (its errno chooses the fix), or None."""
    import tempfile

    try:
        os.rmdir(tempfile.mkdtemp(prefix=".write-probe-", dir=folder))
    except OSError as err:
        return err
    return None


def _fix_of(err: OSError) -> str:
    """The fix of a refused mkdir by its errno: "free space there" said to a folder made read-only (EPERM, EACCES,
    EROFS) pointed at the wrong fault, as "make it writable" would to a full disk."""
    if err.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return "make it writable"
    return "free space there" if err.errno in (errno.ENOSPC, errno.EDQUOT) else room_fix(err)

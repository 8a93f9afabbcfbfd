"""What a stopped job's lines advise where the usual "continue with: <command>" would not be true or would not work.

A dry run continues nothing: its stop said "continue with: ... dry_run=true ... train.resume=auto", a command
refused when pasted (``config_checks.dry_run_resume_problem``), and its folder, which holds the stop's record, takes
no dry run again (``fresh_folder``): it now names the command that runs it again in a new folder.

A Ctrl-C can land after ``launch.py`` started a job but before its run set up its Ctrl-C handling (the folder claimed,
the watch not yet installed), or on a process other than 0 of several, which writes no ``metrics.json``: launch.py
said "the job's metrics.json records it" either way. ``interrupted_line`` says what is true for this process.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from gensbi_sharding.harness.not_started import mark_not_started

__all__ = ["JOB_OVERRIDES_ENV", "job_overrides", "again_command", "stop_advice", "record_stamp", "job_ended",
           "interrupted_line", "ended_run_exit"]

#: A ``distributed=local`` job's overrides and whether it is a multirun's (JSON), set by its parent for its processes:
#: a process's own are its share of the job (``distributed.process_id=0 ... devices.cpu_count=4``), and a command
#: made of them, pasted, started one process that waited at the coordinator for the others.
JOB_OVERRIDES_ENV = "GENSBI_SHARDING_JOB_OVERRIDES"


def job_overrides() -> tuple[list[str], bool] | None:
    """The overrides of the job as it was launched and whether it is a multirun's; None outside a Hydra job.

    Returns
    -------
    tuple of (list of str, bool) or None
        ``distributed=local``'s parent's (``JOB_OVERRIDES_ENV``) in one of its processes, else Hydra's
        ``overrides.task`` and mode.
    """
    import json
    import os

    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    if given := os.environ.get(JOB_OVERRIDES_ENV):
        job = json.loads(given)
        return list(job["overrides"]), bool(job["multirun"])
    if not HydraConfig.initialized():
        return None
    hydra = HydraConfig.get()
    return list(hydra.overrides.task), hydra.mode == RunMode.MULTIRUN


def again_command(run_dir: Any, *, same_folder: bool = False) -> str:
    """The command that runs the job in ``run_dir`` again from its start, as it was given (``hydra.*`` and, into a
    new folder, ``train.resume`` left out).

    Parameters
    ----------
    run_dir : path-like
        The job's folder.
    same_folder : bool
        True: into ``run_dir`` itself (it holds no run's record); False: into a folder not used yet beside it.

    Returns
    -------
    str
        ``python launch.py <overrides> [hydra.mode=RUN] hydra.run.dir=<folder>``; outside a Hydra job (``run(cfg)``
        from Python) the sentence that says what to set.
    """
    from gensbi_sharding.harness.override_grammar import hydra_override
    from gensbi_sharding.harness.paste_command import command_for
    from gensbi_sharding.harness.resume_settings import continue_prefix
    from gensbi_sharding.harness.sweep_hints import SEARCH_PATH, with_search_path

    run_dir = Path(run_dir)
    target = run_dir if same_folder else unused_folder(run_dir)
    if (job := job_overrides()) is None:
        return f"run(cfg) again with cfg.output_dir={str(target)!r} set in omegaconf.open_dict(cfg)"
    overrides, multirun = job
    dropped = ("hydra.",) if same_folder else ("hydra.", "train.resume=")
    kept = [shlex.quote(o) for o in with_search_path(overrides)
            if o.startswith(SEARCH_PATH) or not o.startswith(dropped)]
    return " ".join([continue_prefix(run_dir) + command_for(), *kept, *(["hydra.mode=RUN"] if multirun else []),
                     hydra_override("hydra.run.dir", target)])


def unused_folder(run_dir: Path) -> Path:
    """``<run_dir>-again`` (``-again-2``, ...): a folder not used yet, which a dry run is never refused."""
    copy = 1
    while (new_dir := run_dir.with_name(f"{run_dir.name}-again" + (f"-{copy}" if copy > 1 else ""))).exists():
        copy += 1
    return new_dir


def stop_advice(run_dir: Any, dry_run: bool, resume: Any = None) -> str:
    """The end of a stop's line: ``"continue with: <command>"``, or for a dry run ``"a dry run has nothing to
    continue: run it again with: <command>"`` (``again_command``, into a new folder).

    Parameters
    ----------
    run_dir : path-like
        The job's folder.
    dry_run : bool
        Whether the job is a dry run (``dry_run=true``).
    resume : str or None
        The job's ``train.resume`` (``continue_command``'s: read from Python, which Hydra records nothing of).

    Returns
    -------
    str
    """
    from gensbi_sharding.harness.sweep_hints import continue_command

    if dry_run:
        return f"a dry run has nothing to continue: run it again with: {again_command(run_dir)}"
    return f"continue with: {continue_command(run_dir, resume)}"


def record_stamp(run_dir: Any) -> int | None:
    """The modification time (ns) of ``run_dir/metrics.json``; None where there is none: compared after a Ctrl-C,
    it tells whether this attempt wrote its record."""
    try:
        return (Path(run_dir) / "metrics.json").stat().st_mtime_ns
    except OSError:
        return None


def job_ended(run_dir: Any, stamp: int | None) -> bool:
    """Whether the job's run returned before a Ctrl-C: its folder's ``metrics.json`` was written since ``stamp`` and
    records an end other than a stop by Ctrl-C (a run that a Ctrl-C stops records ``status: interrupted``).

    Parameters
    ----------
    run_dir : path-like
        The job's folder.
    stamp : int or None
        ``record_stamp`` of the folder as the job started.

    Returns
    -------
    bool
        True: the Ctrl-C came after the job ended (ok, failed or preempted), which its record says.
    """
    import json

    if (now := record_stamp(run_dir)) is None or now == stamp:
        return False
    try:
        status = json.loads((Path(run_dir) / "metrics.json").read_text()).get("status")
    except (OSError, ValueError, AttributeError):  # unreadable or not a record: not known to have ended
        return False
    return status is not None and status != "interrupted"


def interrupted_line(run_dir: Any, *, owner: bool | None, stamp: int | None, dry_run: bool = False) -> str:
    """launch.py's console line for a Ctrl-C that ended this process's job, true for this process.

    Parameters
    ----------
    run_dir : path-like
        The job's folder.
    owner : bool or None
        ``processes.folder_owner``: False for a process other than 0 of several, which writes no record.
    stamp : int or None
        ``record_stamp`` of the folder as the job started.
    dry_run : bool
        Whether the job is a dry run.

    Returns
    -------
    str
        ``"interrupted: the job's metrics.json records it (status interrupted)"`` where this attempt wrote it; else
        what the folder kept and the command that starts the job again, or continues this process.
    """
    from gensbi_sharding.harness.sweep_hints import continue_command

    metrics = Path(run_dir) / "metrics.json"
    if owner is False:  # process 1 or later: process 0 alone writes the job's record
        return (f"interrupted by Ctrl-C: this process writes no record (process 0 writes the job's, {metrics}); "
                f"continue this process with: {continue_command(run_dir)}")
    if (now := record_stamp(run_dir)) is not None and now != stamp:
        return "interrupted: the job's metrics.json records it (status interrupted)"
    mark_not_started(run_dir, "interrupted by Ctrl-C as it started")
    earlier = " (its metrics.json is an earlier attempt's)" if now is not None else ""
    return (f"interrupted by Ctrl-C as the run started, before it could record the stop: nothing was trained and no "
            f"metrics.json was written{earlier}; {run_dir} keeps Hydra's record of the config (.hydra/) and "
            f"launch.log; start it again with: {again_command(run_dir, same_folder=now is None or not dry_run)}")


def ended_run_exit(run_dir: Any) -> tuple[int, str] | None:
    """A Ctrl-C after a single run ended (its record written, its final line maybe printed): the exit its record gives,
    as a SIGTERM there gets, and the one line saying so, not "interrupted by Ctrl-C" (exit 130) after an ``ok`` record.

    Parameters
    ----------
    run_dir : path-like
        The run's folder, whose ``metrics.json`` its run wrote before the Ctrl-C.

    Returns
    -------
    (int, str) or None
        The exit code (0 for ``ok``, 75 for ``preempted``, 1 for any other end) and the line; None where the record is
        unreadable or says ``interrupted`` (the Ctrl-C stopped the run: launch.py's own lines and 130 are true).
    """
    import json

    try:
        status = json.loads((Path(run_dir) / "metrics.json").read_text()).get("status")
    except (OSError, ValueError, AttributeError):  # unreadable or not a record: not known to have ended
        return None
    if not isinstance(status, str) or status == "interrupted":
        return None
    code = {"ok": 0, "preempted": 75}.get(status, 1)  # EXIT_PREEMPTED (preemption.py), not imported: a light module
    return code, (f"Ctrl-C after the run had ended (status {status}): nothing left to stop; "
                  f"{Path(run_dir) / 'metrics.json'} records how it ended")

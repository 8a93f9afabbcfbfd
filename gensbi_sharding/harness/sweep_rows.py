"""The sweep summary's rows: each job's record and overrides, the keys swept, and a row for each job never run."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from gensbi_sharding.harness.folder_lock import FolderLock
from gensbi_sharding.harness.outputs import read_metrics, read_record
from gensbi_sharding.harness.summary_columns import SAID_HERE, differing_settings
from gensbi_sharding.harness.sweep_plan import folder_of, job_configuration, never_started

__all__ = ["said_here", "summary_rows", "declared_sweeps", "swept_keys", "not_run_rows", "unrecorded_rows", "NO_RECORD"]

#: The status of a job whose run started (it claimed its folder: ``unrecorded_rows``) and left no metrics.json.
NO_RECORD = "no record"


def _override_key(override: str) -> str:
    return override.split("=", 1)[0].lstrip("+~")


#: Overrides that say how a job was run, not what it ran (a continued job records them); a declared one: declared_resume
_NOT_CONFIGURATION = ("train.resume",)


def _job_overrides(job_dir: Path) -> dict[str, str]:
    """``{key: value}`` of the overrides Hydra recorded for this job (empty if it recorded none)."""
    recorded = read_record(job_dir / ".hydra" / "overrides.yaml")  # missing or damaged: none
    pairs = {_override_key(o): o.split("=", 1)[1] if "=" in o else ""
             for o in (map(str, recorded) if OmegaConf.is_list(recorded) else ())}
    return {key: value for key, value in pairs.items() if key not in _NOT_CONFIGURATION}


def _job_choices(job_dir: Path) -> dict[str, str]:
    """``{group: option}`` Hydra composed this job with (``distributed: none``), from its record; {} without one."""
    recorded = read_record(job_dir / ".hydra" / "hydra.yaml")  # missing or damaged: none
    choices = OmegaConf.select(recorded, "hydra.runtime.choices", default=None) if OmegaConf.is_dict(recorded) else None
    return {str(k): str(v) for k, v in (choices or {}).items() if v is not None}


def said_here(metrics: dict[str, Any], job_dir: Path) -> dict[str, Any]:
    """``metrics`` (a job's record) with ``SAID_HERE``, its continue command said for the job's folder as it is now
    (``moved_folder.continue_in``), where that folder moved since; ``metrics`` itself where it did not.

    The table's error cell showed the error as recorded: after ``mv`` of the sweep folder, a command short enough to be
    shown named the folder the job ran in, where the sweep's notes already named the current one.
    """
    from gensbi_sharding.harness.continue_field import continue_of
    from gensbi_sharding.harness.moved_folder import continue_in

    recorded = continue_of(metrics)
    if not recorded or (now := continue_in(metrics, job_dir)) == recorded:
        return metrics
    return {**metrics, SAID_HERE: now}


def summary_rows(sweep_dir: Path) -> list[dict[str, Any]]:
    """One row per job folder holding a metrics.json, by job number.

    Each row: ``job`` (folder name), ``overrides`` (``{key: value}`` as typed), ``metrics``
    (the job's metrics.json, its continue command said for the folder as it is now: ``said_here``), ``dry_run``
    and ``choices`` (the group options it was composed with).
    """
    def order(path: Path):
        name = path.parent.name
        return (not name.isdigit(), int(name) if name.isdigit() else 0, name)

    rows = []
    for path in sorted(Path(sweep_dir).glob("*/metrics.json"), key=order):
        try:
            metrics = read_metrics(path)
        except FileExistsError as err:  # one damaged record must not cost the other jobs' rows
            metrics = {"status": "damaged", "error": str(err)}
        metrics = said_here(metrics, path.parent)
        rows.append({"job": path.parent.name, "overrides": _job_overrides(path.parent), "metrics": metrics,
                     "dry_run": bool(metrics.get("config", {}).get("dry_run")), "choices": _job_choices(path.parent)})
    return rows


def declared_sweeps(task_overrides: Sequence[str], sweeper_params: Mapping[str, Any] | None = None) -> list[str]:
    """Keys the multirun declared with several values: ``rule=fsdp,tensor`` or ``hydra.sweeper.params``."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parsed = OverridesParser.create().parse_overrides(overrides=list(task_overrides))
    keys = [o.key_or_group for o in parsed if o.is_sweep_override()]
    return keys + [k for k in (sweeper_params or {}) if k not in keys]


def swept_keys(rows: Sequence[dict[str, Any]], declared: Sequence[str] = ()) -> list[str]:
    """Declared sweep keys, every other override key whose value differs between jobs, then config settings that do."""
    keys = [k for k in declared if any(k in row["overrides"] for row in rows)]
    for row in rows:
        for key in row["overrides"]:
            values = {r["overrides"].get(key) for r in rows}
            if key not in keys and len(values) > 1:
                keys.append(key)
    return keys + differing_settings(rows, keys)


def not_run_rows(rows: Sequence[dict[str, Any]], all_jobs: Sequence[Sequence[str]],
                 folders: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """Rows (``status: not run``) for the jobs of ``all_jobs`` (``sweep_plan.sweep_jobs``) without a folder.

    A sweep stopped early (preempted, Ctrl-C) never started its later jobs; its table says so
    instead of silently holding fewer jobs. Each is named by the folder Hydra gives it (``folders``,
    ``sweep_plan.job_folders``: its number, or its ``hydra.sweep.subdir``); a job folder continued
    alone with another override still stands for its job (``sweep_plan.never_started``).
    """
    ran = {str(row["job"]): job_configuration([f"{k}={v}" for k, v in row["overrides"].items()]) for row in rows}
    return [{"job": folder_of(number, folders), "metrics": {"status": "not run"}, "dry_run": False,
             "overrides": {k: v for k, v in (o.split("=", 1) for o in map(str, job) if "=" in o)
                           if _override_key(k) not in _NOT_CONFIGURATION and not k.startswith("hydra.")}}
            for number, job in never_started(all_jobs, ran, folders)]


def unrecorded_rows(sweep_dir: Path, folders: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """Rows (``status: no record``) for the job folders whose run started and left no ``metrics.json``.

    A job's run claims its folder first (``FolderLock``: its empty lock file stays, and an empty file is made on a
    full disk too): such a folder ran, and its record was lost (a full or read-only disk refused it, or the process
    was killed) or is still to come (a job running beside this one), so it is not counted with the jobs never started,
    ``not run``. A folder Hydra made for a job the sweep stopped before (``.hydra/`` only) stays ``not run``.
    ``folders``: the sweep's job folders, where known (``sweep_plan.job_folders``); else every folder of the sweep.
    """
    rows = []
    for lock in sorted(Path(sweep_dir).glob(f"*/{FolderLock.LOCK}")):
        job = lock.parent
        if (job / "metrics.json").exists() or (folders is not None and job.name not in folders):
            continue
        log = job / "launch.log"  # the reasons first: the summary's table cuts a long error
        error = ("it started but left no metrics.json: the disk refused it, the job was killed, or it still runs; "
                 + (f"{log} says how far it got" if log.is_file() and log.stat().st_size else f"its folder: {job}"))
        rows.append({"job": job.name, "overrides": _job_overrides(job), "metrics": {"status": NO_RECORD,
                     "error": error}, "dry_run": False, "choices": _job_choices(job)})
    return rows

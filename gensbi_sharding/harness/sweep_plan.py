"""The jobs of a multirun: each job's overrides in Hydra's order, its folder, its configuration, which never started.

Hydra gives job ``i`` folder ``i``, or what ``hydra.sweep.subdir`` resolves to for it (``job_folders``); the
summary, the continue hints and ``train.resume=auto`` all read the sweep's jobs from here, so they agree on which
job is which.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from gensbi_sharding.harness.job_values import folder_of, job_configuration
# moved_folders: named here too, beside moved_job and another_sweep (its home reads each job folder's outcome)
from gensbi_sharding.harness.sweep_retyped import (changed_keys, failed_on, moved_folders, swept_keys, typed_values,
                                                     values_words)

__all__ = ["sweep_jobs", "command_overrides", "every_job", "job_folders", "folder_of", "job_order", "never_started",
           "job_configuration", "declared_resume", "moved_job", "unstarted_words",
           "another_sweep", "moved_folders"]

#: Hydra's default ``hydra.sweep.subdir``: job ``i`` in folder ``i``.
DEFAULT_SUBDIR = "${hydra.job.num}"


def sweep_jobs(task_overrides: Sequence[str], sweeper_params: Mapping[str, Any] | None = None,
               config_loader: Any = None) -> list[list[str]]:
    """Every job of a multirun, as its overrides, in Hydra's order: job ``i`` runs in folder ``i``.

    ``task_overrides`` are the command's overrides (``rule=fsdp,tensor`` sweeps), ``sweeper_params``
    the preset's ``hydra.sweeper.params``. As Hydra's basic sweeper: the preset's keys come first,
    the command's after them, and a command-line override of a preset's key takes its value in the
    preset's place (the order decides the job numbers). ``config_loader``: Hydra's, which expands a
    ``glob(...)`` of a group's options (default: the running app's; without one a glob raises ``HydraException``).
    """
    import itertools

    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.override_parser.overrides_parser import OverridesParser

    if config_loader is None and GlobalHydra.instance().is_initialized():
        config_loader = GlobalHydra.instance().config_loader()

    params = [f"{k}={v}" for k, v in (sweeper_params or {}).items()]
    choices: dict[str, list[str]] = {}
    for o in OverridesParser.create(config_loader=config_loader).parse_overrides(params + list(task_overrides)):
        key = o.get_key_element()
        choices[key] = ([f"{key}={v}" for v in o.sweep_string_iterator()] if o.is_sweep_override()
                        else [f"{key}={o.get_value_element_as_str()}"])
    return [list(job) for job in itertools.product(*choices.values())]


def command_overrides(config: Any) -> tuple[list[str] | None, dict[str, Any] | None]:
    """The command's overrides (``hydra.overrides.task``) and the preset's ``hydra.sweeper.params``, as typed.

    Unresolved: a multirun's own config keeps an override's ``${...}`` as text (a job's is escaped), and
    reading it resolved raised ``InterpolationKeyError`` in the folder and summary callbacks for
    ``-m 'train.steps=2,${data.nope}'`` (the folder lock and the summary were skipped). None where unset.
    """
    from omegaconf import OmegaConf

    task = OmegaConf.select(config, "hydra.overrides.task", default=None)
    params = OmegaConf.select(config, "hydra.sweeper.params", default=None)
    unresolved = [None if node is None else OmegaConf.to_container(node, resolve=False) for node in (task, params)]
    return unresolved[0], unresolved[1]


def every_job(config: Any) -> list[list[str]]:
    """Every job of the multirun ``config`` starts, as its overrides (``sweep_jobs``); [] if unknown."""
    task, params = command_overrides(config)
    return [] if task is None else sweep_jobs(task, params)


def job_folders(config: Any, jobs: Sequence[Sequence[str]]) -> list[str] | None:
    """The folder name of each job of the multirun ``config`` (its ``hydra.sweep.subdir``); None where unknown.

    Parameters
    ----------
    config : DictConfig
        The multirun's config: Hydra's while it runs, or its record, ``<sweep>/multirun.yaml``.
    jobs : sequence of sequence of str
        Every job's overrides in Hydra's order (``every_job``).

    Returns
    -------
    list of str or None
        Job ``i``'s folder at index ``i``: ``str(i)`` under Hydra's default subdir; a custom one
        (``hydra.sweep.subdir='${rule.name}_${mesh.model_axis}'``) as Hydra's launcher resolves it per job
        (``sweep_subdirs.job_subdirs``). None outside a running Hydra app, or where it does not resolve.
    """
    from omegaconf import OmegaConf

    from gensbi_sharding.harness.sweep_subdirs import job_subdirs

    sweep = OmegaConf.select(config, "hydra.sweep", default=None)
    raw = None if sweep is None else OmegaConf.to_container(sweep, resolve=False).get("subdir")  # as typed
    if raw in (None, DEFAULT_SUBDIR):
        return [str(number) for number in range(len(jobs))]
    try:
        folders = job_subdirs(config, jobs)
    except Exception:  # a subdir no job resolves (refused before the sweep ran): the folders are unknown
        return None
    return None if folders is None else [str(folder).strip("/") for folder in folders]


def declared_resume(all_jobs: Sequence[Sequence[str]], folders: Sequence[str] | None, job: str,
                    declared: Sequence[str], sweep_dir: Any = None) -> dict[str, str]:
    """``{"train.resume": <run>}``: the run job ``job`` (its folder name) continued, where the sweep swept
    ``train.resume`` (``-m train.resume=<run a>,<run b> train.steps=8000``); {} otherwise.

    Each job's own record names it only until the job is continued alone with ``train.resume=auto``: then the
    sweep's declaration tells its rows apart. A job retried in its folder with another run (a path corrected) is
    named by that run, as its record holds it.

    Parameters
    ----------
    all_jobs : sequence of sequence of str
        Every job the sweep declared (``sweep_jobs``), in Hydra's order.
    folders : sequence of str or None
        Each job's folder name (``job_folders``), where known.
    job : str
        The row's folder name.
    declared : sequence of str
        The keys the sweep declared with several values (``sweep_rows.declared_sweeps``).
    sweep_dir : path-like, optional
        The sweep folder, where the job's record is read.

    Returns
    -------
    dict of str to str
        The run as the job's record or else the sweep names it, or {}.
    """
    from omegaconf import OmegaConf

    from gensbi_sharding.harness.outputs import read_record
    from gensbi_sharding.harness.resume_command import named_resume

    if "train.resume" not in declared:
        return {}
    recorded = read_record(Path(sweep_dir) / str(job) / ".hydra" / "overrides.yaml") if sweep_dir else None
    planned = [jobs for number, jobs in enumerate(all_jobs) if folder_of(number, folders) == str(job)]
    ran = named_resume(map(str, recorded)) if OmegaConf.is_list(recorded) else None
    named = ran or (named_resume(planned[0]) if planned else None) or next(
        (o.lstrip("+") for o in (planned[0] if planned else ()) if o.lstrip("+").startswith("train.resume=")), None)
    return {"train.resume": named.split("=", 1)[1]} if named else {}


def job_order(folders: Sequence[str] | None = None) -> Any:
    """The sort key of a sweep's job folder names: by job number (a folder's place in ``folders``, where known),
    then any other folder by name."""
    def key(name: str) -> tuple[bool, int, str]:
        if folders is not None and name in folders:
            return False, list(folders).index(name), name
        return not name.isdigit(), int(name) if name.isdigit() else 0, name
    return key


def never_started(all_jobs: Sequence[Sequence[str]], ran: Mapping[str, dict[str, str]],
                  folders: Sequence[str] | None = None) -> list[tuple[int, list[str]]]:
    """The jobs of ``all_jobs`` (``sweep_jobs``) that have no folder, with their job numbers.

    Parameters
    ----------
    all_jobs : sequence of sequence of str
        Every job the sweep declared, in Hydra's order.
    ran : mapping of str to dict
        ``{folder name: job_configuration of its recorded overrides}`` of the job folders there are.
    folders : sequence of str, optional
        Each job's folder name (``job_folders``), where known.

    Returns
    -------
    list of (int, list of str)
        A job's folder stands for it even when its overrides changed since (a job continued alone with
        another value), so a sweep never lists more jobs than it has. Without ``folders``, job ``i``'s is
        folder ``str(i)``, and a folder of another name (``hydra.sweep.subdir``) stands for one job whose
        configuration it recorded: one only, so a value swept twice (``rule=fsdp,fsdp,tensor``) is two jobs
        (not both stood for by the one folder that ran: the sweep would count one job too few).
    """
    if folders is not None:
        return [(number, list(job)) for number, job in enumerate(all_jobs) if folder_of(number, folders) not in ran]
    numbered = {str(number) for number in range(len(all_jobs))}
    others = [configuration for name, configuration in ran.items() if name not in numbered]
    never = []
    for number, job in enumerate(all_jobs):
        if str(number) in ran:
            continue
        if (configuration := job_configuration(job)) in others:
            others.remove(configuration)  # that folder stands for this job, and no other
            continue
        never.append((number, list(job)))
    return never


def unstarted_words(never: Sequence[tuple[int, Any]], sweep_dir: Any, folders: Sequence[str] | None) -> str:
    """``never_started``'s jobs as a hint counts them: ``"2 never started"``, ``"1 stopped without a record"`` (a
    folder of checkpoints and no record: a job killed, which its folder's record never listed), or both."""
    stopped = sum((Path(sweep_dir) / folder_of(number, folders) / "checkpoints").is_dir() for number, _ in never)
    return ", ".join(f"{count} {words}" for count, words in ((len(never) - stopped, "never started"),
                                                             (stopped, "stopped without a record")) if count)


def moved_job(sweep_dir: Any, all_jobs: Sequence[Sequence[str]], folders: Sequence[str] | None = None,
              every: bool = False) -> tuple[int, str, Any, str] | None:
    """The first job of ``all_jobs`` whose folder recorded other values of a swept key: (number, its values, the
    folder, the values it ran); None if every job folder there matches (``every``: if any one matches). Only swept
    keys, and only folders a sweep wrote last: a job continued alone (``hydra.mode=RUN``) may be on another rule or
    mesh on purpose. A folder whose run failed naming each swept key that changed (``sweep_retyped.failed_on``) is
    this sweep's job there, its value corrected. ``folders``: each job's folder name (``job_folders``), where known;
    else job ``i``'s is ``i``."""
    wanted = [job_configuration(job) for job in all_jobs]
    swept, first, matched = swept_keys(wanted), None, False
    for number, want in enumerate(wanted):
        if (changed := changed_keys(folder := Path(sweep_dir) / folder_of(number, folders), want, swept)) is None:
            continue
        if not (differ := changed[0]) or failed_on(folder, differ):  # failed on its value (1e+30): this sweep's
            matched = True  # under ``every``: one job of this sweep there, so the others are its jobs changed
            continue
        first = first or (number, values_words(typed_values(all_jobs[number]), differ), folder,
                          values_words(changed[1], differ))
        if not every:
            return first
    return None if matched else first


def another_sweep(sweep_dir: Any, all_jobs: Sequence[Sequence[str]], folders: Sequence[str] | None = None,
                  any_job: bool = False) -> str | None:
    """``"<sweep_dir> holds another sweep (...): run this sweep in another hydra.sweep.dir"`` where no job folder
    there ran this sweep's values of the keys it varies (``any_job``: where one did not, ``moved_job``); else None.
    A sweep with no job of its own there is named so however many jobs it has: one of as many jobs or fewer is not
    counted as the other sweep's, nor offered its jobs to continue."""
    if (other := moved_job(sweep_dir, all_jobs, folders, every=not any_job)) is None:
        return None
    number, want, folder, done = other
    return (f"{sweep_dir} holds another sweep (its job {number}, {folder}, ran {done}; this sweep's job {number} is "
            f"{want}): run this sweep in another hydra.sweep.dir")

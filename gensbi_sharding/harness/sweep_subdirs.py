"""The folder each job of a sweep will get (``hydra.sweep.subdir``), checked before any job runs.

Hydra resolves ``hydra.sweep.subdir`` per job, inside the launcher, and writes the job's ``.hydra/``
record there before the job (or any callback of ours) runs. A subdir that resolves to one folder for
two jobs (``${rule.name}`` while sweeping ``mesh.model_axis``) would let the second job relabel the
first one's results; so each job's subdir is resolved here, as the launcher will, before the sweep starts.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gensbi_sharding.harness.paste_command import command_for
from gensbi_sharding.write_probe import array_path_fault

__all__ = ["job_subdirs", "colliding_subdirs_problem", "misread_folder_problem", "foreign_runs_problem",
           "nested_sweep_problem", "unused_folder_problem"]

#: Subdirs that name the job's number (or its launcher id): one folder per job whatever the swept values.
_PER_JOB = ("hydra.job.num", "hydra.job.id")


def job_subdirs(config: Any, jobs: Sequence[Sequence[str]]) -> list[str] | None:
    """Each job's ``hydra.sweep.subdir`` as Hydra's launcher resolves it; None outside a running Hydra app.

    Parameters
    ----------
    config : DictConfig
        The multirun's master config (what ``on_multirun_start`` gets).
    jobs : sequence of sequence of str
        Every job's overrides in Hydra's order (``sweep_plan.every_job``): job ``i`` has number ``i``.

    Returns
    -------
    list of str or None
        The subdir of job ``i`` at index ``i``.

    Raises
    ------
    Exception
        Whatever Hydra raises composing a job's config or resolving its subdir (the job would fail there too).
    """
    from hydra.core.global_hydra import GlobalHydra
    from omegaconf import OmegaConf, open_dict

    if not GlobalHydra.instance().is_initialized():
        return None
    loader = GlobalHydra.instance().config_loader()
    subdirs = []
    for number, job in enumerate(jobs):
        job_config = loader.load_sweep_config(config, list(job))  # as the launcher composes the job
        with open_dict(job_config):  # as the basic launcher numbers it
            job_config.hydra.job.id = number
            job_config.hydra.job.num = number
        subdirs.append(str(OmegaConf.select(job_config, "hydra.sweep.subdir")))
    return subdirs


def colliding_subdirs_problem(config: Any, subdir: Any, jobs: Sequence[Sequence[str]], sweep_dir: Any) -> str | None:
    """The refusal of a ``hydra.sweep.subdir`` that gives two jobs of the sweep one folder; None if each has its own.

    Parameters
    ----------
    config : DictConfig
        The multirun's master config.
    subdir : Any
        ``hydra.sweep.subdir`` unresolved, as written (a literal one is ``sweep_hints.shared_folder_problem``'s).
    jobs : sequence of sequence of str
        Every job's overrides in Hydra's order.
    sweep_dir : path-like
        The sweep's folder.

    Returns
    -------
    str or None
        One line naming the subdir, two jobs that share a folder with their overrides, the folder, and the
        override that fixes it; or naming a subdir that does not resolve for a job (Hydra's reason), or that
        gives a job no folder of its own directly in the sweep's (empty, nested ``a/b``, or outside it).
    """
    if isinstance(subdir, str) and ("/" in subdir or subdir.strip() in ("..", ".")):  # whatever it resolves to
        return (f"hydra.sweep.subdir={subdir} is a path, not one folder name: the jobs' folders would not lie "
                f"directly in the sweep's {sweep_dir}, where its summary and checks find them; name one folder, "
                f"e.g. hydra.sweep.subdir='{_flat(subdir)}'")
    if len(jobs) < 2 or not isinstance(subdir, str) or "${" not in subdir or any(k in subdir for k in _PER_JOB):
        return None
    fix = f"hydra.sweep.subdir='${{hydra.job.num}}_{subdir}'"
    try:
        subdirs = job_subdirs(config, jobs)
    except Exception as err:  # e.g. an interpolation of a key no job has: every job would fail on it
        reason = str(err).splitlines()[0] if str(err) else type(err).__name__
        return (f"hydra.sweep.subdir={subdir} does not resolve for the jobs of this sweep ({reason}); "
                "name keys of the config, e.g. hydra.sweep.subdir='${hydra.job.num}_${rule.name}', or leave "
                "hydra.sweep.subdir out (a folder per job number)")
    if subdirs is None:
        return None
    sweep = os.path.normpath(os.path.abspath(sweep_dir))
    first: dict[str, int] = {}
    for number, name in enumerate(subdirs):
        folder = os.path.normpath(os.path.join(sweep, name))  # one spelling: "a/./b", "a/b/" and "a/b" are one
        if folder == sweep:
            return (f"hydra.sweep.subdir={subdir} is empty for job {number} ({_own(jobs, number, 0)}): the job "
                    f"would write into the sweep's own folder {sweep}; make it differ per job, e.g. {fix}")
        if os.path.dirname(folder) != sweep:  # nested, or outside: the summary and checks read <sweep>/<job>/
            return (f"hydra.sweep.subdir={subdir} gives job {number} ({_own(jobs, number, number)}) the folder "
                    f"{folder}, not one directly in the sweep's {sweep}, where its summary and checks find the "
                    f"jobs; name one folder, e.g. hydra.sweep.subdir='{_flat(subdir)}'")
        if folder in first:
            other = first[folder]
            return (f"hydra.sweep.subdir={subdir} gives job {other} ({_own(jobs, other, number)}) and job {number} "
                    f"({_own(jobs, number, other)}) one folder ({folder}); make it differ per job, e.g. {fix}, "
                    "or leave hydra.sweep.subdir out (a folder per job number)")
        first[folder] = number
    return None


def misread_folder_problem(subdir: Any, jobs: Sequence[Sequence[str]], folders: Sequence[str] | None,
                           sweep_dir: Any) -> str | None:
    """A job's folder (``folders``: ``hydra.sweep.subdir`` resolved) whose ``checkpoints/`` TensorStore misreads (the
    ``[1]`` of ``${eval.observations}``, a ``\\``): each job's writer refused it at its [5/7], after its setup."""
    for number, name in enumerate(folders or ()):  # the sweep's own folder is folder_problem's: here the subdir's
        fault = array_path_fault(Path(sweep_dir) / name / "checkpoints", f"job {number}'s checkpoint folder")
        if fault is not None:
            said = shlex.quote(f"hydra.sweep.subdir={subdir}")  # as it pastes: bash reads an unquoted ${...}
            return (f"{said} gives job {number} ({_own(jobs, number, number)}) the folder {name}: {fault}; leave "
                    "that value out of the jobs' folder names, e.g. hydra.sweep.subdir='${hydra.job.num}'")
    return None


def _own(jobs: Sequence[Sequence[str]], number: int, other: int) -> str:
    """Job ``number``'s overrides that job ``other`` does not share: what tells the two apart."""
    own = [o for o in jobs[number] if o not in jobs[other]] or list(jobs[number])
    return " ".join(own)


def _flat(subdir: str) -> str:
    """``subdir`` as one folder name: ``${rule.name}/${mesh.model_axis}`` -> ``${rule.name}_${mesh.model_axis}``."""
    flat = "_".join(part for part in subdir.split("/") if part.strip() not in ("", ".", ".."))
    return flat or "${hydra.job.num}"


#: Hydra settings only a multirun reads (a group, or a key and what lies under it), but for their defaults.
_MULTIRUN_ONLY, _MULTIRUN_DEFAULTS = ("hydra/launcher", "hydra/sweeper", "hydra.launcher", "hydra.sweeper",
                                      "hydra.sweep.subdir"), ("hydra/launcher=basic", "hydra/sweeper=basic")


def foreign_runs_problem(sweep_dir: Any, folders: Sequence[str] | None) -> str | None:
    """The refusal of a sweep folder holding runs that are none of its jobs, without a sweep's record; None if none.

    Else ``-m ... hydra.sweep.dir=runs`` (a folder of one's runs a, b) would take them for the sweep's jobs: "2 of its
    2 jobs complete (a, b)", and offer to continue jobs 0 and 1 one by one into runs/0, runs/1, among them.

    Parameters
    ----------
    sweep_dir : str or Path
        The multirun's ``hydra.sweep.dir``.
    folders : sequence of str or None
        The sweep's job folders (``sweep_plan.job_folders``); None or none where unknown: nothing is refused.

    Returns
    -------
    str or None
        One line naming those runs, the sweep's own job folders and a new folder to choose.
    """
    from pathlib import Path

    from gensbi_sharding.harness.folder_lock import runs_under
    from gensbi_sharding.harness.override_grammar import hydra_override

    sweep_dir = Path(sweep_dir).absolute()
    if not folders or (sweep_dir / "multirun.yaml").is_file() or not sweep_dir.is_dir():  # no jobs: unknown
        return None
    others = [run for run in runs_under(sweep_dir) if run not in folders]
    if not others:
        return None
    # beside it, not in it (sweep_dir/new_sweep: the sweep among the very runs it is refused for)
    free = next(free for n in range(1, 1000)
                if not (free := sweep_dir.with_name(f"{sweep_dir.name}_sweep{n}")).exists())
    return (f"{hydra_override('hydra.sweep.dir', sweep_dir)} holds the folders of other runs ("
            f"{', '.join(others[:3])}{', ...' if len(others) > 3 else ''}), none of this sweep's jobs "
            f"({', '.join(folders[:3])}{', ...' if len(folders) > 3 else ''}), and no sweep's multirun.yaml: a sweep "
            f"never writes among other runs; choose a new folder, e.g. "
            f"{hydra_override('hydra.sweep.dir', free)}")


def nested_sweep_problem(sweep_dir: Any) -> str | None:
    """The refusal of a sweep folder that is, or lies inside, another sweep's job folder; None where it is not.

    A sweep in ``<sweep>/3`` would take the folder that sweep's job 3 writes, and the advice continuing that sweep
    with a fourth job would name a folder refused as a sweep's. Only the first part below that sweep matters
    (``<sweep>/ablation`` can be no job's folder of ``subdir: ${hydra.job.num}``); a checkout's own folder is refused
    by ``checkout_folders.checkout_folder_problem``.

    Parameters
    ----------
    sweep_dir : str or Path
        The multirun's ``hydra.sweep.dir``, symbolic links resolved (``folder_lock.physical``).

    Returns
    -------
    str or None
        One line naming the sweep it lies in and a folder to choose instead.
    """
    from pathlib import Path

    from gensbi_sharding.harness.override_grammar import hydra_override

    sweep_dir = Path(sweep_dir).absolute()
    named = hydra_override("hydra.sweep.dir", sweep_dir)
    host = next((p for p in sweep_dir.parents if (p / "multirun.yaml").is_file()
                 and _job_slot(p, sweep_dir.relative_to(p).parts[0])), None)
    if host is None:
        return None
    instead = hydra_override("hydra.sweep.dir", f"{host}-{'-'.join(sweep_dir.relative_to(host).parts)}")
    return (f"{named} lies inside the folder of the sweep {host}: a sweep "
            f"never writes into another sweep's folder, whose job folders are that sweep's; choose one outside it, "
            f"e.g. {instead}")


def _job_slot(host: Any, part: str) -> bool:
    """Whether ``host/part`` is, or could become, a job folder of the sweep in ``host``: one (``.hydra``,
    ``metrics.json``), or a name its recorded ``hydra.sweep.subdir`` makes; any name where none is recorded."""
    import re

    from omegaconf import OmegaConf

    from gensbi_sharding.harness.outputs import read_record

    if (host / part / ".hydra").exists() or (host / part / "metrics.json").exists():
        return True
    sweep = OmegaConf.select(saved, "hydra.sweep", default=None) if OmegaConf.is_dict(
        saved := read_record(host / "multirun.yaml")) else None
    subdir = OmegaConf.to_container(sweep, resolve=False).get("subdir") if OmegaConf.is_dict(sweep) else None
    if subdir is None:  # no record of the pattern: any name may be a job's
        return True
    pattern = ""
    for piece in re.split(r"(\$\{[^}]*})", str(subdir)):
        if re.fullmatch(r"\$\{\s*hydra\.job\.num\s*}", piece):
            pattern += r"\d+"
        elif piece.startswith("${"):  # any text, a "/" too: the first part may end inside it
            return re.fullmatch(pattern + ".*", part) is not None
        elif "/" in piece:  # the first part ends here
            return re.fullmatch(pattern + re.escape(piece.split("/")[0]), part) is not None
        else:
            pattern += re.escape(piece)
    return re.fullmatch(pattern, part) is not None


def unused_folder_problem(config: Any, multirun: bool) -> str | None:
    """The refusal of a folder override this mode ignores, or of a launcher a single run ignores; None if none.

    A multirun writes into ``hydra.sweep.dir`` and ignores ``hydra.run.dir``; a single run the reverse. A
    folder typed for the other mode was ignored without a word: the outputs went to ``multirun/<date>/...``
    (or ``outputs/<date>/...``) while the user looked in the folder they named. Likewise a single run ignores
    ``hydra/launcher=``, ``hydra/sweeper=``, ``hydra.launcher.*``, ``hydra.sweeper.*`` and ``hydra.sweep.subdir``:
    ``hydra/launcher=slurm`` without ``-m`` trained here, on the login node, with no word of SLURM.

    Parameters
    ----------
    config : DictConfig
        The run's or multirun's config (``hydra.overrides.hydra``: the hydra overrides typed).
    multirun : bool
        Whether this is a multirun.

    Returns
    -------
    str or None
        One line naming the override, where the outputs would go, and the override to use instead.
    """
    from omegaconf import OmegaConf

    overrides = OmegaConf.select(config, "hydra.overrides.hydra", default=None)
    # As typed: an override holding "${...}" (hydra.sweep.subdir='${rule.name}') is text here, not resolved.
    typed = [str(o) for o in (OmegaConf.to_container(overrides, resolve=False) if overrides is not None else ())]
    launching = [o for o in typed if not multirun and o not in _MULTIRUN_DEFAULTS and any(
        (key := o.lstrip("+~").split("=", 1)[0]) == k or key.startswith(k + ".") for k in _MULTIRUN_ONLY)]
    # hydra.mode=RUN typed: -m overrides it (Hydra's warning), so a fix adding -m leaves it out too. A single run whose
    # command typed no hydra.mode gets Hydra's own "hydra.mode=RUN" appended last (hydra.main's run), so the last
    # entry is not counted: typed last, the note is missed, never said to a command that lacks it.
    run_mode = [o for o in typed[:-1] if o.split("=", 1)[0] == "hydra.mode" and o.split("=", 1)[1].upper() in
                ("RUN", "1")]
    drop = f" with {' and '.join(map(shlex.quote, run_mode))} left out" if run_mode else ""
    if launching:
        return (f"{' '.join(map(shlex.quote, launching))}: only a multirun (-m) reads "
                f"{'it' if len(launching) == 1 else 'them'}; this single run would run here, in this process, "
                f"without {'it' if len(launching) == 1 else 'them'}: add -m{drop} ({command_for()} -m ...), or leave "
                f"{'it' if len(launching) == 1 else 'them'} out")
    unused, used = ("hydra.run.dir", "hydra.sweep.dir") if multirun else ("hydra.sweep.dir", "hydra.run.dir")
    named = [o.split("=", 1)[1] for o in typed if o.lstrip("+").split("=", 1)[0] == unused]
    if not named or any(o.lstrip("+").split("=", 1)[0] == used for o in typed):  # both given: as meant
        return None
    mode = ("a multirun (-m, or a preset such as experiment=sbibm) writes into hydra.sweep.dir" if multirun
            else "a single run writes into hydra.run.dir")
    # The override as typed for Hydra, as one shell word (bare, it would split at a space when pasted).
    fix = f"set {shlex.quote(f'{used}={named[0]}')} instead{'' if multirun else f', or add -m{drop} for a sweep'}"
    return f"{unused}={named[0]} is not used here: {mode} ({OmegaConf.select(config, used)}); {fix}"

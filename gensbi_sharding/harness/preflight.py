"""Checks made before Hydra creates a multirun's sweep folder or hands jobs to a launcher, or makes a run's folder.

A launcher that cannot work here should stop the command with one line that says why and
what to type instead, not with a traceback from inside the launcher after the sweep folder
was made; a job whose config is refused stops the sweep before the first job trains
(``sweep_check``), not when its own turn comes.
"""

from __future__ import annotations

import copy
import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from gensbi_sharding.harness.check_crash import check_crashed
from gensbi_sharding.harness.console import tagged
from gensbi_sharding.harness.processes import LOCAL_CHILD_ENV
from gensbi_sharding.harness.units import is_int

__all__ = ["launcher_problem", "run_config_problem", "LauncherPreflight"]

#: Launchers that hand jobs to a scheduler, and the commands the scheduler must provide on this host
#: (submitit looks for ``srun`` and submits with ``sbatch``).
_SCHEDULER_COMMANDS = {"SlurmLauncher": ("slurm", ("srun", "sbatch"))}


def launcher_problem(target: str | None, which: Callable[[str], str | None] = shutil.which,
                     launcher: Any = None) -> str | None:
    """What stops the launcher ``target`` (``hydra.launcher._target_``) from working on this host.

    Parameters
    ----------
    target : str or None
        The launcher's import path, e.g.
        ``hydra_plugins.hydra_submitit_launcher.submitit_launcher.SlurmLauncher``.
    which : callable, optional
        ``shutil.which``: the path of a command on PATH, or None.
    launcher : DictConfig, optional
        ``hydra.launcher``: the settings submitit's local executor is given (``nodes``), checked as it checks them.

    Returns
    -------
    str or None
        None if the launcher runs jobs here or its scheduler's commands are on PATH; else the
        message naming the launcher, the missing commands, and what to do instead.
    """
    name = (target or "").rsplit(".", 1)[-1]
    if name == "LocalLauncher" and launcher is not None:
        return _local_problem(launcher)
    if name not in _SCHEDULER_COMMANDS:
        return None
    group, commands = _SCHEDULER_COMMANDS[name]
    missing = [command for command in commands if which(command) is None]
    if not missing:
        return None
    named = " and ".join(f"`{command}`" for command in missing)
    return (f"hydra/launcher={group} submits the jobs to {group.upper()}, but {named} "
            f"{'is' if len(missing) == 1 else 'are'} not on PATH on this host (not a {group.upper()} login "
            f"node?): run the same command on the cluster, or leave out hydra/launcher={group} to run the jobs "
            "here one after another")


def _local_problem(launcher: Any) -> str | None:
    """What submitit's local executor refuses of ``hydra.launcher``, before any job (else its traceback, "LocalExecutor
    can use only one node", comes from inside the launcher, once Hydra made the sweep's folder, lock and .submitit)."""
    nodes = OmegaConf.select(launcher, "nodes", default=1)
    if is_int(nodes) and nodes > 1:
        return (f"hydra.launcher.nodes={nodes}: hydra/launcher=submitit_local runs the jobs on this host, one node; "
                "pass hydra.launcher.nodes=1 (hydra.launcher.tasks_per_node sets the processes on it), or "
                "hydra/launcher=slurm on a cluster for several nodes")
    return None


def run_config_problem(config: Any) -> str | None:
    """A single run's refusal by the checks ``run`` makes before training (``job_problem``); None where it would train.

    Parameters
    ----------
    config : DictConfig
        The run's config with its ``hydra`` section, as Hydra's ``on_run_start`` gets it: before Hydra makes the run's
        folder, so a refused run leaves no folder of .hydra/, launch.log, error.txt, metrics.json behind.
    """
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import open_dict

    from gensbi_sharding.harness.resume_source import resume_source_problem
    from gensbi_sharding.harness.job_check import job_problem

    cfg, before = copy.deepcopy(config), HydraConfig.instance().cfg  # as run_job hands the task its own copy
    try:  # as Hydra's run_job: HydraConfig holds the run's section (validate reads its group choices), the task not
        HydraConfig.instance().set_config(config)
        with open_dict(cfg):
            del cfg["hydra"]
        problem = job_problem(cfg)
        # the checkpoint train.resume names, and the settings it resumes under (refused before Hydra makes
        # a folder for the run); the run's Hydra config held: its overrides name the presets of a fix
        return problem or resume_source_problem(cfg, OmegaConf.select(config, "hydra.run.dir", default=None))
    finally:
        HydraConfig.instance().cfg = before


def _hydra_room_problem(config: DictConfig) -> str | None:
    """``hydra_room.room_problem`` of the run's folder, for the files Hydra writes there next; None where they fit,
    Hydra writes none (``hydra.output_subdir=null``) or the check cannot be made (Hydra's write then says it)."""
    from gensbi_sharding.harness.hydra_room import hydra_file_sizes, room_problem

    subdir, folder = (OmegaConf.select(config, f"hydra.{key}", default=None) for key in ("output_subdir", "run.dir"))
    if subdir is None or folder is None:
        return None
    try:
        return room_problem(Path(str(folder)), hydra_file_sizes(config), str(subdir))
    except Exception:  # noqa: BLE001 (an estimate of ours: never what stops a run)
        return None


class LauncherPreflight(Callback):
    """Hydra callback: stop a multirun whose launcher cannot work here, or any of whose jobs' configs is
    refused, or a single run whose config is refused, before anything is written (the first of
    ``hydra.callbacks``: before the folder lock).

    A crash of a check itself (a fault of ours, not of the command) never blocks the sweep: it is one
    ``[WARNING]`` line (``check_crashed``), and each job is still checked when it starts, where
    Hydra would turn it into a UserWarning quoting its own source line, and the sweep go on unchecked.
    """

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        from gensbi_sharding.harness.config_checks import dry_run_resume_problem
        from gensbi_sharding.harness.config_values import folder_interpolation_problem, interpolation_problem

        if problem := folder_interpolation_problem(config):  # the folder callback next would end in its traceback
            print(tagged("ERROR", problem), file=sys.stderr, flush=True)
            raise SystemExit(1)
        # distributed=local's process: its parent checked the job. A ${...} that does not resolve and a dry run's
        # resume: the folder check's to say (refuse_completed, next), as it said them before this check
        if os.environ.get(LOCAL_CHILD_ENV) or interpolation_problem(config) or dry_run_resume_problem(config):
            return
        try:
            problem = run_config_problem(config)
        except Exception as err:  # noqa: BLE001 (a fault of ours: the run checks its config again as it starts)
            check_crashed("the check of the run's config", err, config, then="the run starts, and checks its config "
                          "again as it starts")
            return
        if problem:  # as the run would say it, but before Hydra makes its folder: nothing is written
            print(tagged("ERROR", problem), file=sys.stderr, flush=True)
            raise SystemExit(1)  # a refused run's exit code; Hydra turns an Exception raised here into a warning
        if (full := _hydra_room_problem(config)) is not None:  # else Hydra's traceback from its _save_config
            print(tagged("ERROR", f"{full}, then run the same command again (nothing was written)"), file=sys.stderr,
                  flush=True)
            raise SystemExit(1)

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        from gensbi_sharding.harness import sweep_check
        from gensbi_sharding.harness.config_values import folder_interpolation_problem

        checks = (("the sweep's folder", 1, lambda: folder_interpolation_problem(config)),  # before the folder callback
                  ("the launcher", 2, lambda: launcher_problem(OmegaConf.select(config, "hydra.launcher._target_",
                                                                               default=None),
                                                              launcher=OmegaConf.select(config, "hydra.launcher"))),
                  ("every job's config", 1, lambda: sweep_check.sweep_config_problem(config)))  # 1: as a refused run
        for name, code, check in checks:
            try:
                problem = check()
            except Exception as err:  # Hydra would turn it into a warning on its own line of source, then go on
                check_crashed(f"the pre-sweep check of {name}", err, config, then="the sweep starts without it, and "
                              "each job's config is still checked when that job starts")
                continue
            if problem:
                # Hydra turns an Exception raised by a callback into a warning; SystemExit stops the run.
                print(tagged("ERROR", problem), file=sys.stderr, flush=True)
                raise SystemExit(code)

"""Checks a multirun makes before Hydra creates its sweep folder or hands jobs to a launcher.

A launcher that cannot work here should stop the command with one line that says why and
what to type instead, not with a traceback from inside the launcher after the sweep folder
was made; a job whose config is refused stops the sweep before the first job trains
(``sweep_check``), not when its own turn comes.
"""

from __future__ import annotations

import shutil
import sys
import traceback
from collections.abc import Callable
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from gensbi_sharding.harness.console import tagged

__all__ = ["launcher_problem", "LauncherPreflight", "precheck_failed_line"]

#: Launchers that hand jobs to a scheduler, and the commands the scheduler must provide on this host
#: (submitit looks for ``srun`` and submits with ``sbatch``).
_SCHEDULER_COMMANDS = {"SlurmLauncher": ("slurm", ("srun", "sbatch"))}


def launcher_problem(target: str | None, which: Callable[[str], str | None] = shutil.which) -> str | None:
    """What stops the launcher ``target`` (``hydra.launcher._target_``) from working on this host.

    Parameters
    ----------
    target : str or None
        The launcher's import path, e.g.
        ``hydra_plugins.hydra_submitit_launcher.submitit_launcher.SlurmLauncher``.
    which : callable, optional
        ``shutil.which``: the path of a command on PATH, or None.

    Returns
    -------
    str or None
        None if the launcher runs jobs here or its scheduler's commands are on PATH; else the
        message naming the launcher, the missing commands, and what to do instead.
    """
    name = (target or "").rsplit(".", 1)[-1]
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


def precheck_failed_line(check: str, err: BaseException) -> str:
    """The one line saying a pre-sweep check of ours crashed and the sweep goes on without it.

    Parameters
    ----------
    check : str
        What the check would have found, e.g. "every job's config".
    err : BaseException
        The exception the check raised (its type and the first line of its message are named).
    """
    reason = next(iter(str(err).strip().splitlines()), "")
    return (f"the pre-sweep check of {check} could not run ({type(err).__name__}{': ' + reason if reason else ''}; "
            "a fault of gensbi_sharding's own, not of this command): the sweep starts without it, and each job's "
            "config is still checked when that job starts (debug=true prints the check's traceback)")


class LauncherPreflight(Callback):
    """Hydra callback: stop a multirun whose launcher cannot work here, or any of whose jobs' configs is
    refused, before anything is written (the first of ``hydra.callbacks``: before the folder lock).

    A crash of a check itself (a fault of ours, not of the command) never blocks the sweep: it is one
    ``[WARNING]`` line (``precheck_failed_line``), and each job is still checked when it starts. Was: Hydra
    turned it into a UserWarning quoting its own source line, and the sweep went on unchecked.
    """

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        from gensbi_sharding.harness import sweep_check

        checks = (("the launcher", 2, lambda: launcher_problem(OmegaConf.select(config, "hydra.launcher._target_",
                                                                               default=None))),
                  ("every job's config", 1, lambda: sweep_check.sweep_config_problem(config)))  # 1: as a refused run
        for name, code, check in checks:
            try:
                problem = check()
            except Exception as err:  # Hydra would turn it into a warning on its own line of source, then go on
                print(tagged("WARNING", precheck_failed_line(name, err)), file=sys.stderr, flush=True)
                if OmegaConf.select(config, "debug", default=False):
                    traceback.print_exc()
                continue
            if problem:
                # Hydra turns an Exception raised by a callback into a warning; SystemExit stops the run.
                print(tagged("ERROR", problem), file=sys.stderr, flush=True)
                raise SystemExit(code)

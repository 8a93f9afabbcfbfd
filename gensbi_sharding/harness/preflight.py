"""Checks a multirun makes before Hydra creates its sweep folder or hands jobs to a launcher.

A launcher that cannot work here should stop the command with one line that says why and
what to type instead, not with a traceback from inside the launcher after the sweep folder
was made; a job whose config is refused stops the sweep before the first job trains
(``sweep_check``), not when its own turn comes.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from gensbi_sharding.harness.console import tagged

__all__ = ["launcher_problem", "LauncherPreflight"]

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


class LauncherPreflight(Callback):
    """Hydra callback: stop a multirun whose launcher cannot work here, or any of whose jobs' configs is
    refused, before anything is written (the first of ``hydra.callbacks``: before the folder lock)."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        from gensbi_sharding.harness.sweep_check import sweep_config_problem

        problem = launcher_problem(OmegaConf.select(config, "hydra.launcher._target_", default=None))
        if problem:
            # Hydra turns an Exception raised by a callback into a warning; SystemExit stops the run.
            print(tagged("ERROR", problem), file=sys.stderr, flush=True)
            raise SystemExit(2)
        problem = sweep_config_problem(config)
        if problem:
            print(tagged("ERROR", problem), file=sys.stderr, flush=True)
            raise SystemExit(1)  # as a run whose config is refused

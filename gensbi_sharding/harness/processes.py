"""Which process this is, read from the config and the environment before JAX joins the processes: the rank and
count (``process_rank``), whether it owns the run's folder (``folder_owner``) and whether it hears process 0's verdict
(``hears_process_0``).

Below ``folder_verdict`` (process 0's verdict, told and heard) and ``summary`` (which only process 0 writes): both read
these, and a summary reading them from ``folder_verdict`` reached the preflight checks through it (an import cycle).
"""

from __future__ import annotations

import os

from omegaconf import DictConfig, OmegaConf

__all__ = ["process_rank", "several_processes", "hears_process_0", "folder_owner", "LOCAL_CHILD_ENV"]

#: Set by ``distributed=local`` in its children: the file descriptor of a pipe the parent holds open. Such a child's
#: folder is its parent's (``run_folder`` names it from here).
LOCAL_CHILD_ENV = "GENSBI_SHARDING_PARENT_FD"


def process_rank(config: DictConfig) -> tuple[int | None, int]:
    """This process's (rank, process count) before JAX joins the processes: explicit mode's settings, or under
    ``distributed=auto`` the cluster's variables (``devices.environment_rank``); (None, 1) for one process, or where
    the rank is not known before JAX joins (then every process checks the folder itself).

    Parameters
    ----------
    config : DictConfig
        The composed config; one without a ``distributed`` section is one process.
    """
    mode = OmegaConf.select(config, "distributed.mode", default=None)
    if os.environ.get(LOCAL_CHILD_ENV) or mode not in ("explicit", "auto"):  # a distributed=local child: its parent's
        return None, 1
    if mode == "auto":  # the cluster's rank: else unknown before JAX joins, so each process would lock the folder
        from gensbi_sharding.harness.devices import environment_rank

        return environment_rank() or (None, 1)
    return (OmegaConf.select(config, "distributed.process_id", default=None),
            OmegaConf.select(config, "distributed.num_processes", default=None) or 1)


def folder_owner(cfg: DictConfig) -> bool | None:
    """Whether this process owns the job's folder (locks it, records its outcome).

    False for a ``distributed=local`` child (its parent owns the folder) and for a process other than 0 (explicit
    mode's, or ``distributed=auto``'s where SLURM's or Open MPI's variables give the rank: ``process_rank``); None
    where only JAX knows the rank (``distributed=auto`` elsewhere: process 0 owns it).
    """
    if os.environ.get(LOCAL_CHILD_ENV):
        return False
    if cfg.distributed.mode == "auto":
        rank, count = process_rank(cfg)
        return None if count < 2 else rank == 0
    return cfg.distributed.process_id in (None, 0)


def several_processes(config: DictConfig) -> bool:
    """Whether ``config`` is one of several processes whose ranks are known before JAX joins them (explicit mode's
    processes started by hand, or ``distributed=auto``'s under SLURM or Open MPI), not ``distributed=local``'s.

    Parameters
    ----------
    config : DictConfig
        The composed config; one without a ``distributed`` section is one process.
    """
    return process_rank(config)[1] > 1


def hears_process_0(config: DictConfig) -> bool:
    """Whether this process waits for process 0's verdict on the folder, its own claim left to process 0.

    Parameters
    ----------
    config : DictConfig
        The composed config.
    """
    rank, count = process_rank(config)
    return count > 1 and rank not in (None, 0)

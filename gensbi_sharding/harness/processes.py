"""Which process this is, read from the config and the environment before JAX joins the processes: the rank and
count (``process_rank``), whether it owns the run's folder (``folder_owner``) and whether it hears process 0's verdict
(``hears_process_0``); and what process 0 tells the others once JAX joins them (``told_by_process_0``: the collective
of the folder's verdict, each job's claim and the check between a sweep's jobs).

Below ``folder_verdict`` (process 0's verdict, told and heard), ``run_folder``, ``sweep_verdict`` and ``summary`` (which
only process 0 writes): each read these from ``folder_verdict``, which imports ``run_folder`` and ``sweep_verdict``, and
reaches the preflight checks (import cycles).
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from omegaconf import DictConfig, OmegaConf

__all__ = ["process_rank", "several_processes", "hears_process_0", "folder_owner", "told_by_process_0",
           "LOCAL_CHILD_ENV", "SAID_BYTES", "CLUSTER_VARIABLES", "environment_rank"]

#: Set by ``distributed=local`` in its children: the file descriptor of a pipe the parent holds open. Such a child's
#: folder is its parent's (``run_folder`` names it from here).
LOCAL_CHILD_ENV = "GENSBI_SHARDING_PARENT_FD"
#: The variables that give distributed=auto its process's rank and count, as JAX's detection tries them (Open MPI's,
#: then SLURM's: all five of these present, JAX's own condition), each (rank, count, also needed).
CLUSTER_VARIABLES = (("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", ("OMPI_COMM_WORLD_LOCAL_RANK",)),
                     ("SLURM_PROCID", "SLURM_NTASKS", ("SLURM_JOB_ID", "SLURM_STEP_NODELIST", "SLURM_LOCALID")))
#: The bytes of the words process 0 tells the other processes (``told_by_process_0``; a longer text is cut there).
SAID_BYTES = 4096


def process_rank(config: DictConfig) -> tuple[int | None, int]:
    """This process's (rank, process count) before JAX joins the processes: explicit mode's settings, or under
    ``distributed=auto`` the cluster's variables (``environment_rank``); (None, 1) for one process, or where
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


def told_by_process_0(counts: Sequence[int], text: str) -> tuple[list[int], str]:
    """Process 0's ``counts`` and ``text`` (cut to ``SAID_BYTES`` bytes), as every process JAX joins hears them. A
    collective: every process calls it at the same point, its own arguments read on process 0 alone.

    Parameters
    ----------
    counts : sequence of int
        Numbers to tell (the same count of them on every process).
    text : str
        Words to tell; "" for none.

    Returns
    -------
    tuple of (list of int, str)
        Process 0's numbers and words.
    """
    import numpy as np
    from jax.experimental import multihost_utils

    said, size = text.encode()[:SAID_BYTES], len(counts)
    words = np.zeros(size + 1 + SAID_BYTES, np.int32)  # the numbers, the length of the words, their bytes
    words[:size], words[size] = counts, len(said)
    words[size + 1:size + 1 + len(said)] = np.frombuffer(said, np.uint8)
    got = np.asarray(multihost_utils.broadcast_one_to_all(words))
    heard = bytes(got[size + 1:size + 1 + got[size]].astype(np.uint8)).decode("utf-8", "replace")
    return [int(count) for count in got[:size]], heard


def environment_rank(environ=None) -> tuple[int, int] | None:
    """This process's (rank, process count) under ``distributed=auto``, before JAX joins the processes: read from
    the cluster's variables JAX's detection reads (``CLUSTER_VARIABLES``); None where none (or a value) is there,
    or where the rank is not below the count (no process's: ``check_cluster_ranks`` refuses it, untagged).

    Parameters
    ----------
    environ : mapping, optional
        The environment (``os.environ``).
    """
    environ = os.environ if environ is None else environ
    for rank, count, needed in CLUSTER_VARIABLES:
        if all(name in environ for name in (rank, count, *needed)):
            try:
                found = int(environ[rank]), int(environ[count])
            except ValueError:  # not a cluster's: check_cluster_ranks says so
                return None
            return found if 0 <= found[0] < found[1] else None
    return None

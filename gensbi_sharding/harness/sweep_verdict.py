"""Whether a sweep of several processes per job goes on to its next job: process 0's word, told to every process;
and, before its first, whether every process runs the same sweep.

Between two jobs launch.py checks the next one (room for Hydra's files on the disk: ``hydra_room``). Process 0 checks,
and every process JAX joins hears its verdict before any of them starts the next job, so all stop at once, with the
same words and exit code: were process 0 to stop alone, the others would start the next job and die on the
coordinator process 0 took with it (JAX's shutdown barrier: an abort, exit 134).
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from omegaconf import DictConfig, OmegaConf

from gensbi_sharding.harness.processes import told_by_process_0

__all__ = ["next_job_verdict", "same_sweep"]


def next_job_verdict(check: Callable[[], list[str] | None]) -> list[str] | None:
    """``check()`` run by process 0, its first line told to every process JAX joins (a collective: every process of a
    multi-process sweep calls it after each job); without JAX joining several processes, ``check()`` alone.

    Parameters
    ----------
    check : callable
        Returns the lines that stop the sweep before its next job (the refusal first), or None where it goes on.

    Returns
    -------
    list of str or None
        Process 0's lines (its summary and continue command included); on another process, the refusal's line alone;
        None where the sweep goes on.
    """
    jax = sys.modules.get("jax")  # not imported: no job joined JAX (e.g. distributed=local's parent)
    if jax is None or not jax.distributed.is_initialized() or jax.process_count() < 2:
        return check()
    first = jax.process_index() == 0
    lines = check() if first else None
    _, heard = told_by_process_0([], lines[0] if lines else "")
    if first or not heard:
        return lines
    return [heard]


def same_sweep(config: DictConfig) -> None:
    """Several processes of one sweep, joined: each process's count of jobs compared (a collective, on every process
    of a multirun alike). Processes whose sweeps differ in length (``seed=0,1`` typed on one, ``seed=0,1,2`` on
    another) would run the shorter's jobs together, then the longer's alone, which JAX's coordinator, gone with the
    shorter's process, aborts (exit 134 on every process): they stop here, before any job, each with this error.

    Parameters
    ----------
    config : DictConfig
        The composed config, as a Hydra callback gets it; nothing is compared outside a multirun.

    Raises
    ------
    ConfigError
        Naming each process's count of jobs and the fix.
    """
    from hydra.types import RunMode

    if OmegaConf.select(config, "hydra.mode", default=None) != RunMode.MULTIRUN:
        return
    import numpy as np
    from jax.experimental import multihost_utils

    from gensbi_sharding.harness.config import ConfigError
    from gensbi_sharding.harness.sweep_plan import every_job

    counts = np.asarray(multihost_utils.process_allgather(np.array([len(every_job(config))], np.int32))).reshape(-1)
    if len(set(counts.tolist())) > 1:
        each = ", ".join(f"process {rank}: {count} job{'s' if count != 1 else ''}" for rank, count in enumerate(counts))
        raise ConfigError(f"the processes' sweeps differ in length ({each}): start every process with the same -m "
                          "command, its distributed.process_id aside")

"""The ``distributed.*`` settings' checks, and whether a job's processes were given the same settings."""

from __future__ import annotations

import json
import os

from omegaconf import DictConfig, OmegaConf

from gensbi_sharding.harness.config import require
from gensbi_sharding.harness.hints import override_literal
from gensbi_sharding.harness.processes import LOCAL_CHILD_ENV
from gensbi_sharding.harness.refusal import Refusal

__all__ = ["check_distributed", "no_mesh_problem", "processes_config_problem", "partial_cluster",
           "check_cluster_ranks"]

# What each process may set alone: its rank, its output, how it joins (the coordinator as its host sees it: joined)
PER_PROCESS = ("distributed.process_id", "verbose", "debug", "distributed.coordinator_address",
               "distributed.timeout_s", "distributed.heartbeat_s")


def check_distributed(cfg: DictConfig) -> None:
    """Refuse ``distributed.*`` values out of range, and those ``distributed=local`` sets itself.

    Raises
    ------
    ConfigError
        Naming the first bad key, its value and the override that fixes it.
    """
    # distributed=local (explicit, no coordinates) needs 2 or more: the schema's default 1 is refused there below.
    local = cfg.distributed.mode == "explicit" and cfg.distributed.coordinator_address is None
    require(cfg.distributed.local_processes >= 1, Refusal(f"distributed.local_processes="
                                                          f"{cfg.distributed.local_processes} must be >= 1",
                                                          f"distributed.local_processes={2 if local else 1}"))
    for key in ("timeout_s", "heartbeat_s", "run_timeout_s"):
        require(cfg.distributed[key] >= 1, f"distributed.{key}={cfg.distributed[key]} must be >= 1")
    _check_rank(cfg.distributed)
    require(cfg.distributed.mode in ("none", "auto", "explicit"),
           f"distributed.mode={override_literal(cfg.distributed.mode)} is not one of none, auto, explicit")
    require(cfg.mesh.spec is not None or cfg.distributed.local_processes == 1,
            no_mesh_problem(cfg.distributed.local_processes))  # before distributed=local starts its processes
    # distributed=local is mode explicit without coordinates: its parent hands them to the processes it starts.
    require(not (cfg.distributed.mode == "explicit" and cfg.distributed.local_processes == 1
                 and cfg.distributed.coordinator_address is None and cfg.distributed.process_id is None),
            Refusal("distributed=local with distributed.local_processes=1 starts no processes",
                    "distributed.local_processes=2", after=" (or more), or distributed=none for one process "
                    "(distributed.mode=explicit: give distributed.coordinator_address, num_processes and process_id)"))
    # distributed=local numbers and connects its processes (local_cluster drops these); its children hold the env
    typed = [k for k in ("process_id", "coordinator_address", "num_processes") if cfg.distributed[k] is not None]
    if typed and cfg.distributed.local_processes > 1 and not os.environ.get(LOCAL_CHILD_ENV):
        require(False, Refusal(f"distributed.{typed[0]}={override_literal(cfg.distributed[typed[0]])}: distributed="
                               "local gives each process it starts its own process_id, coordinator_address and "
                               "num_processes", f"distributed.{typed[0]}=null"))


def _check_rank(dist: DictConfig) -> None:
    # Caught here, before any join: a rank outside 0..n-1 made process 0 wait out timeout_s blaming the rank that was
    # missing, and the stray one was told "distributed=auto found no cluster" by JAX's own check.
    count, rank = dist.num_processes, dist.process_id
    if count is not None:
        require(count >= 1, Refusal(f"distributed.num_processes={count} must be >= 1 (one per process of the job)",
                                    "distributed.num_processes=2"))
    if rank is not None:
        top = f"is not one of 0..{count - 1}" if count is not None else "must be 0 or more"
        require(rank >= 0 and (count is None or rank < count),
                Refusal(f"distributed.process_id={rank} {top}"
                        + (f" (distributed.num_processes={count})" if count is not None else ""),
                        "distributed.process_id=0", how="; number the processes from 0, e.g. ",
                        after=" on the first, and raise distributed.num_processes to the job's process count"
                        if count is not None else ""))


def no_mesh_problem(processes: int) -> str:
    """The refusal of ``mesh=none`` in a job of ``processes`` > 1 processes.

    Without a mesh nothing syncs the processes' copies of the model, and no checkpoint can hold
    arrays local to each process (Orbax refuses them only when the first one is saved).
    """
    return Refusal(f"mesh=none in a job of {processes} processes: each process would train its own copy of the "
                   "model, unsynchronised", "mesh=auto", after=" (or mesh=dict) to train one model on every process's "
                   "devices, or distributed=none for one process")


def processes_config_problem(cfg: DictConfig) -> str | None:
    """With several JAX processes, the settings they were given differently (the same text on every process).

    Each composes its config from its own command line: one with another seed or data trained beside the others
    silently. One small allgather of a digest; the settings are gathered only when the digests differ.
    """
    import jax

    from gensbi_sharding.host_input import texts_if_processes_differ

    if jax.process_count() < 2:
        return None
    flat = {key: value for key, value in _flat(OmegaConf.to_container(cfg, resolve=True)) if key not in PER_PROCESS}
    if (texts := texts_if_processes_differ(json.dumps(flat, sort_keys=True, default=str))) is None:
        return None
    every = [json.loads(text) for text in texts]
    differ = sorted(key for key in set().union(*every) if len({json.dumps(c.get(key)) for c in every}) > 1)
    shown = "; ".join(f"{key}: " + ", ".join(f"{c.get(key)!r} on process {p}" for p, c in enumerate(every))
                      for key in differ[:3]) + (f"; and {len(differ) - 3} more" if len(differ) > 3 else "")
    return (f"the {len(every)} processes were given other settings ({shown}); start every process with the same "
            "overrides (only these may differ: " + ", ".join(PER_PROCESS) + ")")


def _flat(tree: object, prefix: str = "") -> list[tuple[str, object]]:
    """``("a.b", value)`` for every leaf of a config container (a list is one value)."""
    if not isinstance(tree, dict) or not tree:
        return [(prefix, tree)]
    return [pair for key, value in tree.items() for pair in _flat(value, f"{prefix}.{key}" if prefix else str(key))]


def partial_cluster(variables: tuple, environ=None) -> str:
    """Words naming the cluster variables that are missing where only some of one cluster's are set, else "".

    ``SLURM_PROCID`` and ``SLURM_NTASKS`` typed by hand look like a cluster, but JAX's detection needs all of its
    variables; ``distributed=auto`` then says it found no cluster, and these words say why.

    Parameters
    ----------
    variables : tuple
        ``processes.CLUSTER_VARIABLES``: (rank, count, (also needed, ...)) per cluster.
    environ : mapping, optional
        The environment (``os.environ``).
    """
    environ = os.environ if environ is None else environ
    for rank, count, needed in variables:
        names = (rank, count, *needed)
        missing = [name for name in names if name not in environ]
        if missing and len(missing) < len(names):
            # The launcher sets the rest: in an salloc shell (SLURM_JOB_ID alone) "set them" would not be the fix
            return (f" ({', '.join(n for n in names if n in environ)} set, but JAX also needs {', '.join(missing)}, "
                    "which the cluster's launcher (srun, mpirun) sets for each process it starts)")
    return ""


def check_cluster_ranks(variables: tuple, environ=None) -> dict:
    """Refuse a cluster environment whose rank is not below its count (``SLURM_PROCID=3`` with ``SLURM_NTASKS=2``).

    JAX's detection reads such a pair and refuses it with a ValueError that ``distributed=auto`` took for "no
    cluster"; this names the two variables instead, before any join.

    Parameters
    ----------
    variables : tuple
        ``processes.CLUSTER_VARIABLES``: (rank, count, (also needed, ...)) per cluster, in JAX's order.
    environ : mapping, optional
        The environment (``os.environ``).

    Returns
    -------
    dict
        ``{}``: the keywords ``jax.distributed.initialize`` gets (JAX reads the cluster's variables itself).

    Raises
    ------
    ConfigError
        Naming both variables, their values and what to fix.
    """
    environ = os.environ if environ is None else environ
    for rank, count, needed in variables:
        if not all(name in environ for name in (rank, count, *needed)):
            continue
        try:
            ok = 0 <= int(environ[rank]) < int(environ[count])
        except ValueError:
            ok = False
        require(ok, f"distributed=auto: {rank}={environ[rank]} with {count}={environ[count]} is not a rank of the "
                    f"job ({rank} must be a whole number from 0 to {count} - 1): under the cluster's launcher (srun, "
                    f"mpirun) these are set for each process; set by hand, fix them, or unset all of {rank}, {count}"
                    f", {', '.join(needed)} and use distributed=none")
        return {}
    return {}

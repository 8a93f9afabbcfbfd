"""The refusal one job's run would start with, before training, as ``run`` words it (``job_problem``): the checks
``run`` makes without a JAX backend, one job's config at a time. ``sweep_check`` puts every job of a multirun through
them, ``command_checks`` a command's config.

Below both: ``command_checks`` reading ``job_problem`` from ``sweep_check``, which reads ``command_problem`` from
``command_checks`` for a job Hydra cannot compose, was an import cycle.
"""

from __future__ import annotations

from typing import Any

from gensbi_sharding.harness.cpu_count import count_setting, cpu_devices_known, resolve_cpu_count, start_problem
from gensbi_sharding.harness.refusal import Refusal, fix_of, rephrased

__all__ = ["job_problem", "process_split_problem", "local_processes_problem"]


def job_problem(cfg: Any, *, in_process: bool = True) -> str | None:
    """The refusal one job's run would start with, before training, as ``run`` words it; None if it would train.

    Parameters
    ----------
    cfg : DictConfig
        The job's composed config, without its ``hydra`` section (as Hydra hands it to the task).
    in_process : bool
        Whether the job runs in this process (Hydra's basic launcher): only then are its CPU devices this
        machine's, and fixed by the first job that starts JAX.

    Returns
    -------
    str or None
        ``"ConfigError: <the check's message, naming the value and the override that fixes it>"``, that override
        itself checked (``checked_fix.with_checked_fix``); several, one a line (``checked_fix.every_refusal``).
    """
    from gensbi_sharding.harness.checked_fix import every_refusal

    return every_refusal(cfg, lambda cfg: _job_problem(cfg, in_process))


def _job_problem(cfg: Any, in_process: bool) -> str | None:
    from gensbi_sharding.harness.config import ConfigError
    from gensbi_sharding.harness.config_checks import validate
    from gensbi_sharding.harness.memory_check import simulations_problem
    from gensbi_sharding.harness.model_checks import platform_problem
    from gensbi_sharding.harness.log_observations import log_observation_problem
    from gensbi_sharding.harness.state_check import TRACED_UNSTARTED, state_problem

    problem, local = None, False
    try:
        validate(cfg)  # its first check: every ${...} resolves
        if cfg.distributed.mode != "none":  # several processes: their count and devices are known once they join
            local = cfg.distributed.local_processes > 1 and cfg.distributed.process_id is None
            problem = local_processes_problem(cfg) if local else None  # distributed=local: this machine's
        else:
            count, source = resolve_cpu_count(cfg.devices.cpu_count)
    except Exception as err:  # as run() records it: any exception here would end the job before training
        said = next((said for said in err.args[:1] if fix_of(said) is not None), str(err))  # a Refusal keeps its fix
        return rephrased(said, lead=f"{type(err).__name__}: ")
    here = in_process and (cfg.distributed.mode == "none" or local)  # the model on cpu, known before JAX starts
    on_cpu = cfg.devices.platform == "cpu" or (here and cpu_devices_known(cfg.devices.platform))
    problem = problem or (start_problem(cfg.devices.platform, cfg.dry_run) if here else None)  # this machine's JAX
    problem = problem or (platform_problem(cfg.model, "cpu") if on_cpu else None)
    if cfg.distributed.mode == "none":  # one process: this machine's devices
        devices = count if in_process and cpu_devices_known(cfg.devices.platform) else None
        problem = problem or _mesh_problem(cfg, devices, source) or _batch_problem(cfg, devices, source=source)
        # the host's memory (a dry run simulates none); on CPU devices, strict=true's fallbacks and the state's memory
        problem = problem or (not cfg.dry_run and simulations_problem(cfg)) or (devices and state_problem(cfg, devices))
    elif here and on_cpu and cfg.model.name in TRACED_UNSTARTED:  # distributed=local: its parent starts no backend
        problem = problem or state_problem(cfg, resolve_cpu_count(cfg.devices.cpu_count)[0])  # (not in its folder)
    problem = problem or (None if cfg.dry_run else log_observation_problem(cfg.data, cfg.eval))  # the data step's
    return None if problem is None else rephrased(problem, lead=f"{ConfigError.__name__}: ")


def local_processes_problem(cfg: Any) -> str | None:
    """Why ``distributed=local``'s processes cannot start (their device split, a model group across them, the batch
    over their shards and mesh, their simulations' share of this host; a dry run simulates none); None if they can.
    Checked by their parent before any process starts (not by each process once started, in its folder)."""
    from gensbi_sharding.harness.local_children import model_group_problem
    from gensbi_sharding.harness.memory_check import simulations_problem

    n, cpu = cfg.distributed.local_processes, resolve_cpu_count(cfg.devices.cpu_count)[0]
    data = cfg.get("data") is not None  # a bare config (no data): the split and the model group only
    return process_split_problem(cfg) or model_group_problem(cfg, n, cpu // n) or (data and _batch_problem(
        cfg, cpu, n)) or (None if cfg.get("dry_run") or not data else simulations_problem(cfg, n, n))


def process_split_problem(cfg: Any) -> str | None:
    """Why ``distributed=local``'s processes cannot share this machine's CPU devices evenly; None if they can.

    Parameters
    ----------
    cfg : DictConfig
        The job's config: ``distributed.local_processes`` and ``devices.cpu_count`` (``resolve_cpu_count``).
    """
    n, (cpu, source) = cfg.distributed.local_processes, resolve_cpu_count(cfg.devices.cpu_count)
    if not cpu % n:
        return None
    nearest = min([d for d in range(2, cpu + 1) if cpu % d == 0] or [1], key=lambda d: (abs(d - n), d))
    # The count goes where it came from: devices.cpu_count=N beside the environment's count is refused.
    return Refusal(f"devices.cpu_count={cpu} does not split over distributed.local_processes={n} (the count from "
                   f"{source})", f"distributed.local_processes={nearest}", how="; set ",
                   after=f" or {count_setting(source)}{n * max(round(cpu / n), 1)}")


def _mesh_problem(cfg: Any, devices: int | None, source: str) -> str | None:
    """``mesh.devices`` and ``mesh.model_axis`` against ``devices`` CPU devices, as ``run_mesh`` checks them."""
    from gensbi_sharding.harness.hints import mesh_devices_problem, model_axis_problem

    if devices is None or cfg.mesh.spec != "dict":
        return None
    listed = None if cfg.mesh.devices is None else list(cfg.mesh.devices)
    simulated = bool(cfg.dry_run) and not listed and source in ("default", "devices.cpu_count")
    return mesh_devices_problem(listed, list(range(devices)), cfg.mesh.model_axis) or model_axis_problem(
        cfg.mesh.model_axis, len(listed or range(devices)), simulated, listed, cfg.data.batch_size)


def _batch_problem(cfg: Any, devices: int | None, processes: int = 1, source: str = "default") -> str | None:
    """``data.batch_size`` against the shards, the training pairs and (CPU devices known) the data-parallel size."""
    from gensbi_sharding.harness.split_rows import shard_train_rows, simulations_for
    from gensbi_sharding.harness.hints import batch_size_problem, kept_on_other_meshes

    if cfg.dry_run and cfg.mesh.spec is None:  # a dry run without a mesh builds no batches
        return None
    shards = cfg.data.shards or processes  # one per process unless data.shards says more
    data_parallel = 1 if devices is None or cfg.mesh.spec not in ("auto", "dict") else (
        devices if cfg.mesh.spec == "auto" else len(cfg.mesh.devices or range(devices)) // cfg.mesh.model_axis)
    budget, vf = cfg.data.num_simulations, cfg.data.val_fraction
    rows = shard_train_rows(budget, vf, shards)
    problem = batch_size_problem(cfg.data.batch_size, shards=shards, data_parallel=data_parallel, train_rows=rows,
                                 per_process=cfg.data.shards is None,
                                 budget=lambda need: simulations_for(need, budget, vf, shards))
    # the CPU devices known: the meshes that keep the batch, as the run's check names them, here too
    return problem if devices is None else kept_on_other_meshes(problem, cfg.data.batch_size, cfg.mesh, shards=shards,
                                                                train_rows=rows, devices=devices, processes=processes,
                                                                source=source)

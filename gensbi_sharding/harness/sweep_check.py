"""Every job of a multirun composed and checked before the first one starts.

Each job's config is checked again when it starts (``run``); a value that only that job's config refuses (``-m
train.steps=100,-5``, ``mesh.model_axis=1,2,3`` on 8 devices, a batch larger than one job's data) was refused only once
every earlier job had trained (hours). Here every job is composed as Hydra's launcher does and put through the checks
``run`` makes before training without a JAX backend; one refused job stops the sweep before any folder is made.

Left to each job (what only a started backend or the task's files know): on GPU/TPU or across processes the device
count (``run_mesh``), the batch size against the data-parallel size, the model (``platform_problem``), the state's
memory and strict=true's fallbacks (``check_fits``, ``model_plan``; on CPU: ``state_check``); the reference samples.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from typing import Any

from gensbi_sharding.harness.cpu_count import cpu_devices_known
from gensbi_sharding.harness.job_check import job_problem
from gensbi_sharding.harness.paste_command import command_for
from gensbi_sharding.harness.sweep_drop import dropped_sweep

__all__ = ["refused_jobs", "refused_jobs_message", "sweep_config_problem"]


def refused_jobs(config: Any, jobs: Sequence[Sequence[str]], loader: Any, *,
                 in_process: bool = True) -> list[tuple[int, list[str], str]]:
    """The jobs of a sweep whose config is refused: ``(job number, its overrides, the refusal)``.

    Parameters
    ----------
    config : DictConfig
        The multirun's master config (what ``on_multirun_start`` gets).
    jobs : sequence of sequence of str
        Every job's overrides in Hydra's order (``sweep_plan.sweep_jobs``).
    loader : hydra.core.config_loader.ConfigLoader
        Hydra's config loader: each job is composed with ``load_sweep_config``, as the launcher composes it.
    in_process : bool
        Whether the jobs run in this process (``job_problem``).
    """
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import OmegaConf, open_dict

    from gensbi_sharding.harness.command_checks import command_problem
    from gensbi_sharding.harness.cpu_count import resolve_cpu_count
    from gensbi_sharding.harness.resume_source import resume_source_problem, sweep_job_folder
    from gensbi_sharding.harness.sweep_hints import config_flags, search_path_of

    refused, first_count, before = [], None, HydraConfig.instance().cfg
    hydra_overrides = OmegaConf.select(config, "hydra.overrides.hydra", default=None)  # hydra.searchpath, if any
    for number, job in enumerate(jobs):
        try:
            cfg = loader.load_sweep_config(config, list(job))
        except Exception as err:  # Hydra would refuse the whole sweep composing this job, but after making its folder
            # Refused as the job's command alone is: Hydra's own advice ("use +model.width=3") may be refused in turn.
            flags = config_flags(OmegaConf.select(config, "hydra"))  # -cn my: my.yaml's model, not conf's
            if not (problem := command_problem([*flags, *search_path_of(hydra_overrides), *job])):
                reason = str(err.__cause__ or "").strip().splitlines()
                cause = f" ({reason[0]})" if reason else ""
                problem = f"{type(err).__name__}: {err}{cause}"
            refused.append((number, list(job), problem))
            continue
        lost, out = _lost_sweep(config, cfg, job), sweep_job_folder(cfg, number)
        try:  # as Hydra's run_job: HydraConfig holds the job's Hydra section (validate reads its group choices
            HydraConfig.instance().set_config(cfg)  # there), and the task gets its config without it
            with open_dict(cfg):
                del cfg["hydra"]
            problem = lost or job_problem(cfg, in_process=in_process)
            problem = problem or resume_source_problem(cfg, out)  # its checkpoint and settings
        finally:
            HydraConfig.instance().cfg = before
        one_process = in_process and cfg.distributed.mode == "none"
        if problem is None and one_process and cpu_devices_known(cfg.devices.platform):
            count = resolve_cpu_count(cfg.devices.cpu_count)[0]
            first_count = count if first_count is None else first_count
            if count != first_count:
                problem = (f"ConfigError: devices.cpu_count={count} after an earlier job's {first_count}: the jobs "
                           "run one after another in this process, whose CPU device count is fixed when the first "
                           f"job starts JAX; sweep each device count in a sweep of its own (devices.cpu_count={count} "
                           f"in another command), or set devices.cpu_count={first_count}")
        if problem is not None:
            refused.append((number, list(job), problem))
    return refused


def refused_jobs_message(refused: Sequence[tuple[int, Sequence[str], str]], jobs: Sequence[Sequence[str]]) -> str:
    """One message listing each refused job (its swept values) with its refusal.

    Parameters
    ----------
    refused : sequence of (int, sequence of str, str)
        ``refused_jobs``' answer.
    jobs : sequence of sequence of str
        Every job of the sweep: a job is named by the values the sweep varies (all its overrides if none vary).
    """
    import re

    from gensbi_sharding.harness.refusal import Refusal, listed, sweep_parts
    from gensbi_sharding.harness.sweep_plan import job_configuration
    from gensbi_sharding.harness.sweep_retyped import swept_keys
    from gensbi_sharding.harness.units import compact_value

    wanted = [job_configuration(job) for job in jobs]
    swept = set(swept_keys(wanted))
    each = [sweep_parts(problem, job, jobs) for _, job, problem in refused]  # a refusal every job has is said once
    alike = [p for p in each[0] if all(p in parts for parts in each)] if len(refused) == len(jobs) > 1 else []  # (not
    labels, problems = [f"all {len(jobs)} jobs: "] * len(alike), list(alike)  # per job: JAX_PLATFORMS=tpu, twice)
    for (number, job, _), parts in zip(refused, each):  # each refusal of a job on a line of its own, as a run lists
        named = [o for o in job if o.split("=", 1)[0].lstrip("+~") in swept] or list(job)
        named = [re.sub(r"\\(.)", r"\1", o) for o in named]  # as typed: Hydra escapes a swept ${...} as $\{...\}
        named = [re.sub(r"=(.*)", lambda m: "=" + compact_value(m[1]), o, count=1) for o in named]  # 1e12, not 1e+12
        problems += (parts := [p for p in parts if p not in alike])
        labels += [f"job {number} ({' '.join(named)}): "] * len(parts)
    count = f"{len(refused)} of the {len(jobs)} jobs" if len(jobs) > 1 else "its job"
    said = listed(f"this sweep's config is refused for {count}, before any job ran (nothing was written); fix or drop "
                  "the values named, then run the sweep again:", problems, labels, together=False)
    # a job's own fix typed into the sweep can repeat a kept value (model_axis=2,3 -> 2,2): name the sweep left
    drop = dropped_sweep(refused, jobs)
    if not drop:
        return said
    with_drop = Refusal(f"{said}\n{drop}")  # dropping values is no override a check could try: no fix
    with_drop.parts = said.parts
    return with_drop


def sweep_config_problem(config: Any) -> str | None:
    """The refusal of a multirun any of whose jobs' configs is refused (``refused_jobs_message``); None if none is.

    Only Hydra's basic sweeper is known to run the cartesian product of the values (another sweeper picks
    its jobs as it goes: each is checked when it starts); None outside a running Hydra app.
    """
    from hydra.core.global_hydra import GlobalHydra
    from hydra.errors import HydraException
    from omegaconf import OmegaConf

    from gensbi_sharding.harness.groups import group_options  # on Hydra's whole search path
    from gensbi_sharding.harness.sweep_composed import reusing
    from gensbi_sharding.harness.sweep_plan import command_overrides, sweep_jobs
    from gensbi_sharding.harness.override_hydra_text import preset_sweep_problem
    from gensbi_sharding.harness.refusal import Refusal
    from gensbi_sharding.harness.sweep_common_fix import common_fix

    # Hydra's own sweeper and launcher by their option names (HydraConfig.get().runtime.choices in a running app),
    # not by their classes' module paths, hydra._internal's: the cartesian product of the values, run in this process
    choices = OmegaConf.select(config, "hydra.runtime.choices", default=None) or {}
    if choices.get("hydra/sweeper") != "basic" or not GlobalHydra.instance().is_initialized():
        return None
    loader = reusing(GlobalHydra.instance().config_loader())  # each job composed once: Hydra's sweeper and launcher too
    task, params = command_overrides(config)
    # A preset's interval(...) or empty sweep: the basic sweeper's traceback, or 0 jobs and exit 0; its yes/no for a
    # text setting of Hydra's: 'True' (the command line's are launch.py's, checked before Hydra composed).
    preset = [f"{k}={v}" for k, v in (params or {}).items()]
    if problem := preset_sweep_problem(preset, group_options):
        return problem
    try:
        jobs = sweep_jobs(task or [], params, config_loader=loader)
    except HydraException as err:  # any other sweep Hydra's sweeper cannot run: its reason, not its traceback
        return f"this sweep cannot run: {str(err).strip().splitlines()[0]}"
    if not jobs:
        return ("this sweep has no job (a swept key with no value); give each swept key at least one value: "
                + " ".join(list(task or []) + preset))
    in_process = choices.get("hydra/launcher") == "basic"
    refused = refused_jobs(config, jobs, loader, in_process=in_process)
    if not refused:
        return None
    message = refused_jobs_message(refused, jobs)
    # each job's own fix of a key the sweep does not vary (896 on 8x1, 900 on 4x2): the one value that fixes all
    common = common_fix(refused, jobs, lambda fixed: refused_jobs(config, fixed, loader, in_process=in_process))
    if not common:
        return message
    with_common = Refusal(f"{message}\n{common}")  # as with_drop: the parts stay the jobs' own
    with_common.parts = message.parts
    return with_common


def _lost_sweep(config: Any, cfg: Any, job: Sequence[str]) -> str | None:
    """A job whose preset is a sweep of its own (``-m experiment=quick,sbibm``): Hydra reads a sweep's
    ``hydra.sweeper.params`` from the command's config only, so that job ran one config of the preset's 24."""
    from omegaconf import OmegaConf

    nodes = [OmegaConf.select(c, "hydra.sweeper.params", default=None) for c in (config, cfg)]
    params = [{} if node is None else OmegaConf.to_container(node, resolve=False) for node in nodes]
    if params[1] == params[0] or not params[1]:
        return None
    extra = [k for k in params[1] if params[0].get(k) != params[1][k]]
    presets = [o for o in job if o.split("=", 1)[0] in ("experiment", "sweep")] or list(job)
    return (f"{' '.join(presets)} is a sweep of its own (hydra.sweeper.params: {', '.join(extra)}), which Hydra starts "
            f"only from a command's own config: in this sweep it would run as one job; run it in a command of its own: "
            f"{command_for()} {shlex.join(presets)} ...")

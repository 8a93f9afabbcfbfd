"""The checkpoint ``train.resume`` names, checked before Hydra makes the run's folder (``preflight``).

Refused by the run itself, a ``train.resume`` naming a sweep's folder, a folder that does not exist or one without
a checkpoint would come after Hydra made its folder: ``.hydra/``, ``.run.lock``, ``launch.log``, ``error.txt`` and
``metrics.json`` left behind, and in a sweep every job started and failed so, one after another. Pure Python: no JAX.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["resume_source_problem", "sweep_job_folder"]


def resume_source_problem(cfg: Any, out: Any) -> str | None:
    """Why the run of ``cfg`` would refuse the checkpoint its ``train.resume`` names (``resume.resume_step_dir``: a
    sweep's folder, nothing there, no complete checkpoint, a run still writing there) or the settings it resumes it
    under (``resume_settings``: another model, task or transform, a step beyond ``train.steps``), as the run says
    it; None where it would resume it, or where the run's own folder ``out`` decides (it holds a checkpoint of its
    own, as a requeued continuation's, or ``train.resume`` names it): the run reads that itself.

    Parameters
    ----------
    cfg : DictConfig
        The job's config (``train.resume``), with or without its ``hydra`` section.
    out : path-like or None
        The job's output folder, before Hydra makes it; None where it is not known yet (the check is then left to the
        run, which knows it).

    Returns
    -------
    str or None
        E.g. ``"ConfigError: train.resume=multirun/x is a sweep's folder: resume one of its jobs, ..."``.
    """
    from hydra.core.hydra_config import HydraConfig

    from gensbi_sharding.harness.config import ConfigError
    from gensbi_sharding.harness.launch_record import quiet_absl, step_folder_names
    from gensbi_sharding.harness.python_words import as_overrides
    from gensbi_sharding.harness.resume import resume_step_dir
    from gensbi_sharding.harness.resume_refusal import refuse_resume_settings
    from gensbi_sharding.harness.resume_command import launch_dir
    from gensbi_sharding.harness.step_items import damaged_refusal

    resume = cfg.train.resume
    if resume in (None, "", "auto") or out is None:
        return None
    out = (launch_dir() / Path(str(out)).expanduser()).resolve()
    named = (launch_dir() / Path(str(resume)).expanduser()).resolve()
    if out == named or out in named.parents or step_folder_names(out):  # by name: Orbax would start JAX
        return None
    hydra, before = HydraConfig.instance(), HydraConfig.instance().cfg
    hydra.cfg = None  # no job's folder yet (--cfg's app, a sweep's start): out, checked above, is the run's own
    try:
        with quiet_absl():  # Orbax's notes as it reads the checkpoint ("Read Metadata=..."): no console's
            step_dir = resume_step_dir(cfg)
    except (ConfigError, FileNotFoundError) as refused:  # as run() records them
        return f"{type(refused).__name__}: {refused}"
    finally:
        hydra.cfg = before
    if step_dir is not None and (damaged := damaged_refusal(step_dir)) is not None:  # Orbax's step metadata lists an
        return damaged  # item deleted since: the run refused it in its new folder (the arrays item, never read here)
    try:  # the caller's Hydra config (the job's, if set): its overrides name the presets that give the saved model
        with as_overrides():  # launch.py's words, though no run holds the app yet
            refuse_resume_settings(step_dir, cfg)
    except (ConfigError, FileNotFoundError) as refused:  # the library's for a damaged item: as run() records it
        return f"{type(refused).__name__}: {refused}"
    return None


def sweep_job_folder(cfg: Any, number: int) -> Path | None:
    """The folder of a sweep's job ``number`` (``hydra.sweep.dir`` / ``hydra.sweep.subdir``), as Hydra's launcher
    makes it once it sets the job's number; None where its subdir does not resolve before the job runs.

    Parameters
    ----------
    cfg : DictConfig
        The job's config with its ``hydra`` section (Hydra's ``load_sweep_config``); its ``hydra.job.num`` is set.
    number : int
        The job's number in the sweep.
    """
    from omegaconf import OmegaConf, open_dict

    with open_dict(cfg):
        cfg.hydra.job.num = number
    subdir = OmegaConf.select(cfg, "hydra.sweep.subdir", default=None, throw_on_resolution_failure=False)
    return None if subdir is None else Path(str(cfg.hydra.sweep.dir)) / str(subdir)

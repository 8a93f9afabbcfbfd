"""A multirun's jobs composed once: the check before the first job (``sweep_check.refused_jobs``) keeps each job's
config, and Hydra's basic sweeper (``validate_batch_is_legal``) and launcher, which compose each job again, get a copy.

Each job is composed once, not three times (~0.1 s of CPU each, the search path read and merged anew).
A copy is what each composition would give: the same inputs (the master config, its ``hydra.overrides.hydra``, the
config's name, the job's overrides), composed seconds apart; each reader gets its own (the check drops its
``hydra`` node, the launcher numbers the job). Pure Python.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

__all__ = ["reusing", "READS"]

#: The reads of a job's config in a multirun: the check's, the sweeper's, the launcher's; a read after them composes.
READS = 3


def reusing(loader: Any) -> Any:
    """``loader`` (Hydra's ``ConfigLoader`` of this app) with ``load_sweep_config`` composing each job once.

    Parameters
    ----------
    loader : hydra.core.config_loader.ConfigLoader
        The app's loader (``GlobalHydra.instance().config_loader()``): the sweeper and the launcher call the same one.

    Returns
    -------
    ConfigLoader
        ``loader``: its ``load_sweep_config`` hands out a deep copy of a config composed before for the same master
        config and overrides, until its ``READS``-th read; only the latest master config's jobs are kept (a later
        multirun of this process).
    """
    if getattr(loader.load_sweep_config, "reuses", False):
        return loader
    compose, kept = loader.load_sweep_config, {}

    def load_sweep_config(master_config: Any, sweep_overrides: Sequence[str]) -> Any:
        from omegaconf import OmegaConf

        hydra = OmegaConf.select(master_config, "hydra", default=None)
        key = (OmegaConf.select(hydra, "job.config_name", default=None), tuple(sweep_overrides),
               tuple(OmegaConf.to_container(hydra.overrides.hydra)) if hydra is not None else ())
        if kept.get("master") is not master_config:  # another multirun: its master config, its jobs
            kept.clear()
            kept["master"] = master_config
        if key not in kept:  # Hydra's own error, as before, where it cannot compose (nothing kept)
            kept[key] = [compose(master_config, list(sweep_overrides)), READS]
        kept[key][1] -= 1  # ~150 KB a job: forgotten at its last read (a 1,000-job sweep held ~150 MB to its end)
        return copy.deepcopy(kept[key][0]) if kept[key][1] else kept.pop(key)[0]  # the last read: its own

    load_sweep_config.reuses = True
    loader.load_sweep_config = load_sweep_config
    return loader

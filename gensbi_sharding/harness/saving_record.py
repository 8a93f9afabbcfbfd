"""The command that launched the run a checkpoint came from, as a refused resume names it.

A refused resume names the settings that differ from the checkpoint's, and the saving run's own command line (Hydra's
record of it), which sets a preset's several values at once. From ``hints``, which re-exports both. Pure Python: no JAX.
"""

from __future__ import annotations

from typing import Any

__all__ = ["launched_with", "saving_overrides"]


def launched_with(step_dir: Any) -> str:
    """"; the run that saved it was launched with: experiment=quick train.steps=6000" for a checkpoint's step
    folder (``<run>/checkpoints/<step>``), from Hydra's record of that run; "" without one.

    A refused resume names the settings that differ, but a preset (``experiment=quick``) sets several at once:
    its own command line is the shorter, complete fix.
    """
    import shlex

    record = saving_overrides(step_dir)
    if record is None:
        return ""
    searched, kept = record
    command = " ".join(map(shlex.quote, [*searched, *kept]))  # one shell word each, as job_command writes them
    return f"; the run that saved it was launched with: {command or 'no overrides'}"


def saving_overrides(step_dir: Any) -> tuple[list[str], list[str]] | None:
    """``(search path overrides and --config-* flags, other overrides)`` the run that saved a checkpoint's step
    folder (``<run>/checkpoints/<step>``) was launched with, from Hydra's record of it, ``train.resume`` and
    ``hydra.*`` left out; None without a record, or with one that cannot be read (its refusal goes without).

    For a checkpoint in the running job's own folder, whose record Hydra has replaced by this attempt's, the
    copy kept before (``launch_record``).
    """
    from omegaconf import OmegaConf

    from gensbi_sharding.harness.launch_record import saving_record
    from gensbi_sharding.harness.outputs import read_record
    from gensbi_sharding.harness.sweep_hints import config_flags

    # A checkpoint of this run's own folder (train.resume=auto): Hydra (or a run from Python) has just replaced the
    # record with this attempt's, which would read as the saving run's ("saved with model.num_heads=2 ... launched
    # with ... model.num_heads=4"): the copy kept before (saving_record).
    recorded = saving_record(step_dir) / "overrides.yaml"
    # Hydra records a search path (a preset of one's own: model=my_flux1) apart, in hydra.yaml: without it the
    # named command could not find that preset.
    hydra_yaml = recorded.parent / "hydra.yaml"
    hydra = getattr(read_record(hydra_yaml), "hydra", None)  # so are --config-dir and -name (damaged: none)
    searched = [o for o in [*config_flags(hydra), *OmegaConf.to_container(hydra.overrides.hydra)]
                if o.startswith(("hydra.searchpath=", "--config-"))] if hydra else []  # unresolved: ${hydra.job.num}
    if not OmegaConf.is_list(overrides := read_record(recorded)):  # missing or damaged
        return None
    return searched, [str(o) for o in overrides if not str(o).startswith(("train.resume=", "hydra."))]

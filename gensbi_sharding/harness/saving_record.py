"""The command that launched the run a checkpoint came from, as a refused resume names it.

A refused resume names the settings that differ from the checkpoint's, and the saving run's own command line (Hydra's
record of it), which sets a preset's several values at once. Out of ``hints``, its home before. Pure Python: no JAX.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["launched_with", "saving_overrides", "as_it_ran", "gone_presets"]


def launched_with(step_dir: Any) -> str:
    """"; the run that saved it was launched with: experiment=quick train.steps=6000" for a checkpoint's step
    folder (``<run>/checkpoints/<step>``), from Hydra's record of that run; "" without one.

    A refused resume names the settings that differ, but a preset (``experiment=quick``) sets several at once:
    its own command line is the shorter, complete fix. Where a preset was edited after the run started, so that the
    command now composes to other settings than the record's ``config.yaml`` (what ran), each setting that ran is
    added (``as_it_ran``): "experiment=mine model.width=32" ("experiment=mine" alone, pasted, would compose the edited
    preset, not what ran).
    """
    import shlex

    from gensbi_sharding.harness.launch_record import saving_record

    record = saving_overrides(step_dir)
    if record is None:
        return ""
    searched, kept = record
    words = as_it_ran([*searched, *kept], saving_record(Path(step_dir)) / "config.yaml")
    command = " ".join(map(shlex.quote, words))  # one shell word each, as job_command writes them
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


def as_it_ran(words: list[str], ran: Path) -> list[str]:
    """``words`` (a launch's overrides, its search path among them) with ``key=value`` added for each setting the
    config they compose to now gives otherwise than ``ran`` (Hydra's ``config.yaml`` of that launch: a preset edited
    since); ``words`` as they are where ``ran`` cannot be read, they compose to it already, or no such addition
    composes to it (a setting only the edited preset's defaults list gives, an interpolation changed).

    Parameters
    ----------
    words : list of str
        The overrides, as ``saving_overrides`` gives them.
    ran : Path
        The launch's ``config.yaml``.

    Returns
    -------
    list of str
    """
    from omegaconf import OmegaConf

    from gensbi_sharding.harness.checkpoint_settings import composed_leaves, dotted_leaves
    from gensbi_sharding.harness.outputs import read_record
    from gensbi_sharding.harness.override_grammar import hydra_value
    from gensbi_sharding.harness.override_words import override_literal

    if not OmegaConf.is_dict(saved := read_record(ran)):
        return words
    saved = dotted_leaves(OmegaConf.to_container(saved, resolve=False))
    # A preset deleted (or renamed) since: Hydra's optional group skips it as it composes, but launch.py refuses its
    # word pasted ("Could not find 'experiment/mine'"): left out, its settings added as they ran
    gone = gone_presets(words)
    words = [w for w in words if w not in gone]
    if (now := composed_leaves(words, resolve=False, config_name="config")) is None:
        return words
    differ = [k for k, v in saved.items() if k in now and now[k] != v and not k.startswith(("train.resume", "hydra."))]
    if not differ or any(isinstance(saved[k], str) and "${" in saved[k] for k in differ):
        return words
    typed = [f"{k}={hydra_value(v) if isinstance(v, str) and v else override_literal(v)}"
             for k, v in ((k, saved[k]) for k in differ)]
    fixed = [*(w for w in words if w.split("=", 1)[0].lstrip("+~") not in differ), *typed]
    again = composed_leaves(fixed, resolve=False, config_name="config")
    return fixed if again is not None and all(again.get(k) == saved[k] for k in differ) else words


def gone_presets(words: list[str]) -> list[str]:
    """The words of ``words`` that pick a group's option (``experiment=mine``) no folder of their search path (and
    ``conf/``) holds any longer; none where a search path is not a folder (``pkg://``: Hydra's to list).

    Parameters
    ----------
    words : list of str
        A launch's overrides, its search path among them.

    Returns
    -------
    list of str
    """
    from gensbi_sharding.harness.override_grammar import parse
    from gensbi_sharding.harness.override_keys import option_groups, options

    try:
        command = parse(words)
        groups, paths = option_groups(), command.search_paths
        picks = [(o.arg, o.key, o.values()) for o in command.parsed if o.key in groups and o.hydra.package is None]
    except Exception:  # noqa: BLE001 - a record that does not parse: its words as they are
        return []
    gone = []
    for arg, group, values in picks:
        choices = options(group, paths)
        if choices is not None and any(isinstance(v, str) and "${" not in v and v not in choices for v in values):
            gone.append(arg)
    return gone

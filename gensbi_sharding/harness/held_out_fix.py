"""The words of a resumed run's warning that its checkpoint's validation losses no longer compare, with the fix.

A resume whose seed, simulation budget, held-out fraction or validation draws differ from its checkpoint's (a preset
file edited since: ``data.val_fraction`` 0.1 -> 0.2) measures on other held-out pairs, so early stopping starts
afresh. The warning names the override that keeps the saved split, not the change only ("... (data.val_fraction=0.1
-> 0.2)"). ``state`` (the resume) says it with ``held_out_warning``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gensbi_sharding.harness.held_out import HELD_OUT_KEYS, config_value
from gensbi_sharding.harness.override_grammar import hydra_override
from gensbi_sharding.harness.python_words import fix_said, said_as

__all__ = ["keep_split_overrides", "held_out_warning"]


def keep_split_overrides(saved_config: dict, now: dict) -> list[str]:
    """The overrides that give this run the checkpoint's held-out pairs and draws back, one per setting changed.

    Parameters
    ----------
    saved_config : dict
        The config saved with the checkpoint.
    now : dict
        This run's config, resolved.

    Returns
    -------
    list of str
        E.g. ``["data.val_fraction=0.1"]``, each one shell word Hydra reads back as the saved value; empty where
        none of ``HELD_OUT_KEYS`` changed or the checkpoint recorded none (``held_out_changes`` then names the data
        shards alone, with their own fix).
    """
    saved = {key: config_value(saved_config, key) for key in HELD_OUT_KEYS}
    # A number as Hydra reads it back (quoted, "0.1" would be a string); any other value quoted for Hydra and shell
    return [f"{key}={value}" if isinstance(value, (int, float)) else hydra_override(key, value)
            for key, value in saved.items() if value is not None and value != config_value(now, key)]


def held_out_warning(changed: Sequence[str], overrides: Sequence[str], *, sampling: bool = False) -> str:
    """The warning of a resume whose held-out pairs or draws differ from its checkpoint's.

    Parameters
    ----------
    changed : sequence of str
        ``held_out.held_out_changes``: ``"data.val_fraction=0.1 -> 0.2"``, ...
    overrides : sequence of str
        ``keep_split_overrides``.
    sampling : bool, optional
        The checkpoint is read to sample it (``sample.py``), not trained on: no fix offered.

    Returns
    -------
    str
        E.g. ``"early stopping starts afresh: the checkpoint's validation losses were measured on other held-out
        pairs or draws (data.val_fraction=0.1 -> 0.2); add data.val_fraction=0.1 to the command to keep the
        checkpoint's data split and its best weights"``.
    """
    lead = "its newest weights are sampled, not its best" if sampling else "early stopping starts afresh"
    # sample.py reads the checkpoint's own config: an override there is no fix, so it is offered to training only
    # In the caller's words: run(cfg) from Python sets cfg's settings, and has no command
    fix = (f"; {fix_said(overrides)}{said_as(' to the command', '')} to keep the checkpoint's data split and its best "
           "weights" if overrides and not sampling else "")
    return (f"{lead}: the checkpoint's validation losses were measured on other held-out pairs or draws "
            f"({', '.join(changed)}){fix}")

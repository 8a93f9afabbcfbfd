"""Which held-out pairs and validation draws a run measured on, so a resumed run can tell whether its
checkpoint's validation losses (early stopping's best) compare with its own.

The pairs follow from the seed, the simulation budget, the held-out fraction and the *effective*
number of data shards: ``data.shards``, or one per JAX process when it is null. A run in one process
with ``data.shards=2`` sees exactly the pairs of a two-process run with ``data.shards=null``, so the
raw ``data.shards`` values are not what is compared. A checkpoint records its effective count in its
``info`` (``DATA_SHARDS``); for one saved before that, it is read from the saved config's
``distributed`` settings, and when they cannot tell (auto-detected processes, no such section) it
counts as unknown: the losses are not carried over.
"""

from __future__ import annotations

from typing import Any

__all__ = ["DATA_SHARDS", "config_value", "effective_shards", "held_out_changes"]

#: Key of the effective data-shard count in a checkpoint's ``info``.
DATA_SHARDS = "data_shards"

# Settings compared as written (dotted keys of the config).
_AS_WRITTEN = ("seed", "data.num_simulations", "data.val_fraction", "train.val_draws")


def config_value(tree: Any, dotted: str) -> Any:
    """``tree["a"]["b"]`` for ``"a.b"`` in a saved config (plain dicts); None where a part is missing."""
    for part in dotted.split("."):
        tree = tree.get(part) if isinstance(tree, dict) else None
    return tree


def effective_shards(config: dict, info: dict | None = None) -> int | None:
    """The data shards a run of the saved ``config`` used (``data.shards``, or one per process).

    Parameters
    ----------
    config : dict
        The config saved with a checkpoint (``checkpoint.saved_config``).
    info : dict, optional
        The checkpoint's ``info`` (``checkpoint.saved_info``); its ``DATA_SHARDS`` wins when present.

    Returns
    -------
    int or None
        The count; None when neither the info nor the config can tell it (an older checkpoint of
        processes counted by auto-detection, or a config without ``distributed`` settings).
    """
    if (info or {}).get(DATA_SHARDS) is not None:
        return int(info[DATA_SHARDS])
    if config_value(config, "data.shards") is not None:
        return int(config_value(config, "data.shards"))
    distributed = config_value(config, "distributed")
    if not isinstance(distributed, dict):
        return None
    if distributed.get("mode", "none") == "none":
        # A distributed=local parent never trains: its processes run with mode=explicit.
        return 1
    count = distributed.get("num_processes")  # explicit: always set; auto: null when detected
    return int(count) if count is not None else None


def held_out_changes(saved_config: dict, saved_info: dict, now: dict, process_count: int) -> list[str]:
    """What differs between the checkpoint's held-out pairs or draws and this run's; empty: none.

    Parameters
    ----------
    saved_config, saved_info : dict
        The checkpoint's config and ``info``.
    now : dict
        This run's config, resolved.
    process_count : int
        This run's JAX processes (what ``data.shards=null`` means here).

    Returns
    -------
    list of str
        One entry a setting, e.g. ``"seed=0 -> 1"`` or ``"data shards 2 -> 1 (add data.shards=2 ...)"``.
    """
    changed = [f"{key}={config_value(saved_config, key)} -> {config_value(now, key)}" for key in _AS_WRITTEN
               if config_value(saved_config, key) != config_value(now, key)]
    before = effective_shards(saved_config, saved_info)
    after = config_value(now, "data.shards") or process_count
    if before is None:
        changed.append(f"data shards unknown -> {after} (the checkpoint records neither data.shards nor its "
                       "process count)")
    elif before != after:
        written = "null" if config_value(now, "data.shards") is None else config_value(now, "data.shards")
        # data.shards must be a multiple of the processes: name it only where these processes take it.
        fix = (f"add data.shards={before} for the checkpoint's pairs" if before % process_count == 0 else
               f"the checkpoint's {before} shard(s) do not split over {process_count} processes: its pairs need a "
               f"process count that divides {before}, with data.shards={before}")
        changed.append(f"data shards {before} -> {after} (data.shards={written} in {process_count} process(es); {fix})")
    return changed

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

import math
from typing import Any

from gensbi_sharding.harness.python_words import fix_said, setting
from gensbi_sharding.harness.refusal import Refusal
from gensbi_sharding.harness.split_rows import held_out_pairs

__all__ = ["DATA_SHARDS", "HELD_OUT_KEYS", "MIN_VAL_PAIRS", "config_value", "effective_shards", "held_out_changes",
           "val_pairs_problem"]

#: The fewest held-out pairs a run validates on. Every run validates (at its end at least) and keeps the best
#: weights; the loss of fewer pairs (each scored at ``train.val_draws`` draws) is mostly noise, so the "best"
#: weights and early stopping would follow chance. ``data.val_fraction=1e-6`` held out 0.01 of 10,000 pairs,
#: which the split rounds up to one.
MIN_VAL_PAIRS = 10

#: Key of the effective data-shard count in a checkpoint's ``info``.
DATA_SHARDS = "data_shards"

# Settings compared as written (dotted keys of the config). data.batch_size is not one: each held-out pair's draws
# are its own whichever batch holds it (validation.held_out_indexed), so its losses compare at any batch size.
HELD_OUT_KEYS = ("seed", "data.num_simulations", "data.val_fraction", "train.val_draws")


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
    changed = [f"{key}={config_value(saved_config, key)} -> {config_value(now, key)}" for key in HELD_OUT_KEYS
               if config_value(saved_config, key) != config_value(now, key)]
    before = effective_shards(saved_config, saved_info)
    after = config_value(now, "data.shards") or process_count
    if before is None:
        changed.append(f"data shards unknown -> {after} (the checkpoint records neither data.shards nor its "
                       "process count)")
    elif before != after:
        written = "null" if config_value(now, "data.shards") is None else config_value(now, "data.shards")
        # data.shards must be a multiple of the processes: name it only where these processes take it.
        fix = (f"{fix_said([f'data.shards={before}'])} for the checkpoint's pairs" if before % process_count == 0
               else f"the checkpoint's {before} shard(s) do not split over {process_count} processes: its pairs need "
               f"a process count that divides {before}, with {setting('data.shards', before)}")
        changed.append(f"data shards {before} -> {after} (data.shards={written} in {process_count} process(es); {fix})")
    return changed


def val_pairs_problem(num_simulations: int, val_fraction: float, batch_size: int = 1, shards: int = 1) -> str | None:
    """The refusal of a ``data.val_fraction`` (or budget) that holds out fewer than ``MIN_VAL_PAIRS`` pairs; else None.

    Each suggested fix also leaves ``batch_size`` training pairs: ``experiment=quick data.num_simulations=50`` was
    told ``data.val_fraction=0.2``, which left 40 training pairs for its batch of 64 and was refused in turn.
    The pairs are counted as the split takes them, shard by shard (``split_rows.held_out_pairs``):
    ``data.num_simulations=1000 data.val_fraction=0.01 data.shards=8`` holds out 8, not the 10 of the whole budget.

    Parameters
    ----------
    num_simulations : int
        ``data.num_simulations``, the whole budget (train + validation), >= 1.
    val_fraction : float
        ``data.val_fraction``, in (0, 1).
    batch_size : int, optional
        ``data.batch_size``: the training pairs a fix must leave (default 1).
    shards : int, optional
        The data shards the budget splits over (``data.shards``, or one per process); default 1.

    Returns
    -------
    str or None
        The message naming the value, the pairs it holds out, and the smallest ``data.val_fraction`` (and the
        ``data.num_simulations`` at this fraction) that hold out ``MIN_VAL_PAIRS``.
    """
    def held(budget: int, fraction: float) -> int:
        return held_out_pairs(budget, fraction, shards)

    held_out = held(num_simulations, val_fraction)
    if held_out >= MIN_VAL_PAIRS:
        return None
    fixes = []
    if num_simulations > MIN_VAL_PAIRS:  # else no fraction below 1 leaves a training pair beside them
        fraction = MIN_VAL_PAIRS / num_simulations
        scale = 10.0 ** (math.floor(math.log10(fraction)) - 1)  # two significant digits, rounded up
        steps = math.ceil(round(fraction / scale, 6))
        while steps * scale < 1 and held(num_simulations, float(f"{steps * scale:.2g}")) < MIN_VAL_PAIRS:
            steps += 1  # per-shard rounding may need a step or more above the whole budget's fraction
        text = f"{steps * scale:.2g}"
        if float(text) < 1 and num_simulations - held(num_simulations, float(text)) >= batch_size:
            fixes += [f"data.val_fraction={text}", f" (the smallest that holds out {MIN_VAL_PAIRS})"]
    budget = max(math.ceil(MIN_VAL_PAIRS / val_fraction), math.ceil(batch_size / (1 - val_fraction)) - 2)
    while held(budget, val_fraction) < MIN_VAL_PAIRS or budget - held(budget, val_fraction) < batch_size:
        budget += 1  # the smallest budget holding out the minimum and leaving a batch: a step or a few per shard
    fixes += [f"data.num_simulations={budget}", " at this fraction" + (
        f" (the smallest that also leaves data.batch_size={batch_size} training pairs)" if batch_size > 1 else "")]
    over = f" (split over {shards} data shards, each rounding its own share)" if shards > 1 else ""
    return Refusal(f"data.val_fraction={val_fraction} holds out {held_out} of the {num_simulations} simulations "
                   f"(data.num_simulations){over} for validation, fewer than the {MIN_VAL_PAIRS} pairs a run "
                   "validates on (the best weights and early stopping follow their loss)", fixes[0], how=": set ",
                   after=fixes[1] + "".join(f" or {fix}{said}" for fix, said in zip(fixes[2::2], fixes[3::2])))

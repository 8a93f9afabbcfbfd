"""A run's loss history: its logging windows' means (``loss_windows.windows``, named here too: ``run_steps`` reads it
here), and a resumed run's losses joined to the earlier run's.

``write_losses`` writes the whole history to ``train_losses.npz`` and plots it to ``losses.png``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from gensbi_sharding.harness.loss_windows import windows
from gensbi_sharding.harness.units import is_number

__all__ = ["windows", "LossHistory", "joined_loss_history", "write_losses"]


@dataclasses.dataclass
class LossHistory:
    """A run's losses from step 1, resumed parts joined: what ``train_losses.npz`` holds."""

    step: np.ndarray  # (n,) int64, global step of each train loss
    losses: np.ndarray  # (n,) float32
    val_step: np.ndarray  # (m,) int64
    val_losses: np.ndarray  # (m,) float32
    resumed_at: np.ndarray  # (k,) int64, steps a resumed part started from
    # (m,) int64, the held-out set each validation loss was measured on: 0 first, one more at each resume whose
    # held-out pairs or draws changed (early stopping started afresh), as losses on other pairs do not compare.
    val_set: np.ndarray

    def arrays(self) -> dict[str, np.ndarray]:
        return dataclasses.asdict(self)


def joined_loss_history(losses: np.ndarray, *, start_step: int, val_points: list[tuple[int, float]],
                        resume_dir: Path | None, val_afresh: bool = False,
                        restored_val: Sequence[tuple[int, float]] = ()) -> LossHistory:
    """This run's losses (steps ``start_step + 1 ...``) after the earlier run's, when resuming.

    The earlier run's ``train_losses.npz`` is looked up in the run folder of the checkpoint
    resumed from (``<run>/checkpoints/<step>``: another folder, or this one under
    ``train.resume=auto``); only its steps up to ``start_step`` are kept (it may have trained
    past the checkpoint). Without it, the history starts at the resume. ``val_afresh``: this
    attempt validates on other held-out pairs or draws than the earlier one (early stopping
    started afresh), so its validation losses get a ``val_set`` of their own. ``restored_val``: the validations
    the checkpoint's early-stopping state holds (steps up to ``start_step``, ``metrics.json``'s ``val_history``);
    those the earlier file lacks (never written: that attempt was killed, or its folder refused it) join this
    attempt's set.
    """
    steps = start_step + 1 + np.arange(len(losses), dtype=np.int64)
    val = [(int(s), float(v)) for s, v in val_points if is_number(v)]
    parts = [(steps, np.asarray(losses, np.float32), np.asarray([s for s, _ in val], np.int64),
              np.asarray([v for _, v in val], np.float32), np.asarray([start_step] if start_step else [], np.int64),
              np.zeros(len(val), np.int64))]
    offset = 0  # this attempt's val_set
    earlier = next((p / "train_losses.npz" for p in (resume_dir.parent.parent, resume_dir.parent)
                    if (p / "train_losses.npz").is_file()), None) if resume_dir is not None else None
    if earlier is not None:
        with np.load(earlier) as old:
            old_losses = old["losses"]
            old_steps = old["step"] if "step" in old else np.arange(1, len(old_losses) + 1)
            keep = old_steps <= start_step
            # A step this attempt validated again (its checkpoint was saved before its validation) counts once,
            # unless on other pairs: then both losses are kept, each on its own line.
            vkeep = ((old["val_step"] <= start_step) & (val_afresh | ~np.isin(old["val_step"], parts[0][2]))
                     if "val_step" in old else None)
            parts.insert(0, (old_steps[keep], old_losses[keep],
                             old["val_step"][vkeep] if vkeep is not None else np.zeros(0, np.int64),
                             old["val_losses"][vkeep] if vkeep is not None else np.zeros(0, np.float32),
                             old["resumed_at"][old["resumed_at"] < start_step] if "resumed_at" in old
                             else np.zeros(0, np.int64),
                             # an earlier version's file has no val_set: its points were one set
                             np.asarray(old["val_set"] if "val_set" in old else np.zeros(len(old["val_step"])),
                                        np.int64)[vkeep] if vkeep is not None else np.zeros(0, np.int64)))
            kept = parts[0][5]  # this attempt's losses continue the earlier attempt's last set, or start one after it
            offset = int(kept.max()) + int(val_afresh) if len(kept) else 0
            parts[1] = (*parts[1][:5], parts[1][5] + offset)
    # An attempt killed before its end (kill -9) wrote no train_losses.npz: its validations up to the resume live in
    # the checkpoint's history only, which metrics.json's val_history lists, so the file and losses.png take them too.
    known = set(np.concatenate([part[2] for part in parts]).tolist())
    lost = [(int(s), float(v)) for s, v in restored_val
            if int(s) <= start_step and int(s) not in known and is_number(v)]
    if lost:
        mine = parts[-1]  # the checkpoint's validations are on the pairs and draws this attempt's are: its set
        parts[-1] = (*mine[:2], np.concatenate([np.asarray([s for s, _ in lost], np.int64), mine[2]]),
                     np.concatenate([np.asarray([v for _, v in lost], np.float32), mine[3]]), mine[4],
                     np.concatenate([np.full(len(lost), offset, np.int64), mine[5]]))
    return LossHistory(*(np.concatenate([part[i] for part in parts]) for i in range(6)))


def write_losses(out: Path, history: LossHistory, *, window: int, title: str) -> None:
    """``train_losses.npz`` (the whole history, a resumed run joined to the earlier one) and ``losses.png``."""
    from gensbi_sharding.harness import outputs, plots

    outputs.write_npz(out / "train_losses.npz", **history.arrays())
    plots.plot_losses(out / "losses.png", steps=history.step, losses=history.losses, window=window,
                      val_steps=history.val_step, val_losses=history.val_losses, resumed_at=history.resumed_at,
                      val_sets=history.val_set, title=title)

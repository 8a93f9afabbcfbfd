"""A ``.hydra/`` folder another Hydra app wrote: no mark of a run of this harness.

``folder_lock.folder_problem`` refuses a folder holding files a run writes (``losses.png``, ``launch.log``, ...) that no
run wrote, unless a mark says a run used it; ``.hydra/`` is one (a run stopped as Hydra recorded its config). Another
Hydra app's output folder has one too, with its own plots beside: a run there overwrote its ``losses.png`` and
``train_losses.npz`` without a word. Its ``config.yaml`` tells it apart: a run of this harness records ``mesh``,
``rule`` and ``train`` (with ``train.steps``). Any one of them marks a record as ours: one holding only part of them (a
record cut down, an earlier layout) was refused as another app's, and the folder of a run killed before its first
checkpoint with it, whose record the next launch sets aside; another app's ``train: true``
(a flag, as the Lightning-Hydra template has) is none.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["another_apps_record"]

#: Config groups only this harness records in ``.hydra/config.yaml``; its ``train`` section holds ``steps``.
OUR_GROUPS = ("mesh", "rule")


def another_apps_record(record: Path) -> bool:
    """Whether ``record``, a folder's ``.hydra/``, holds a ``config.yaml`` of another Hydra app (one with none of
    ``OUR_GROUPS`` nor a ``train`` section holding ``steps``); False where it is this harness's, or unreadable, or not
    there (a run stopped as Hydra wrote it).

    Parameters
    ----------
    record : Path
        ``<folder>/.hydra``.

    Returns
    -------
    bool
    """
    import yaml

    try:
        config = yaml.safe_load((Path(record) / "config.yaml").read_text())
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return False
    if not isinstance(config, dict):
        return False
    train = config.get("train")
    return not (any(group in config for group in OUR_GROUPS) or isinstance(train, dict) and "steps" in train)

"""A ``.hydra/`` folder another Hydra app wrote: no mark of a run of this harness.

``folder_lock.folder_problem`` refuses a folder holding files a run writes (``losses.png``, ``launch.log``, ...) that no
run wrote, unless a mark says a run used it; ``.hydra/`` is one (a run stopped as Hydra recorded its config). Another
Hydra app's output folder has one too, with its own plots beside: a run there overwrote its ``losses.png`` and
``train_losses.npz`` without a word. Its ``config.yaml`` tells it apart: a run of this harness records ``mesh``,
``rule`` and ``train``.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["another_apps_record"]

#: The config groups every run of this harness records in ``.hydra/config.yaml``.
OUR_GROUPS = ("mesh", "rule", "train")


def another_apps_record(record: Path) -> bool:
    """Whether ``record``, a folder's ``.hydra/``, holds a ``config.yaml`` of another Hydra app (one lacking any of
    ``OUR_GROUPS``); False where it is this harness's, or unreadable, or not there (a run stopped as Hydra wrote it).

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
    return isinstance(config, dict) and not all(group in config for group in OUR_GROUPS)

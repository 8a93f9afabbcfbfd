"""Whether a checkpoint's step folder can be resumed, seen before a run's folder exists and without JAX's backend.

The library counts a step complete by Orbax's step metadata, which still lists an item deleted since (``<step>/arrays``
removed, or lost from a copy): such a step was refused by the run itself, after Hydra had made its folder (``error.txt``,
``launch.log`` and ``metrics.json`` left there), and a finished run's hint offered to train it further from it. Here a
step holds every item the library writes (``checkpoint_steps.ITEMS``, by those names) and its JSON items read (the
library's ``saved_config``/``saved_info``: no backend); its arrays are left to the restore (reading them starts JAX).
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["step_damage", "readable_steps", "damaged_refusal"]

_JSON_ITEMS = ("config", "meta")  # read by the library's saved_config and saved_info: their refusal names the item


def step_damage(step_dir: Path, json_items: bool = True) -> str | None:
    """Why ``step_dir`` cannot be resumed, e.g. "its 'arrays' item is missing"; None where it holds every item.

    Parameters
    ----------
    step_dir : Path
        A complete step folder (``checkpoint.committed_steps``).
    json_items : bool, default True
        Whether its ``config`` and ``meta`` items are looked at too (a caller that reads them itself leaves them out).
    """
    from gensbi_sharding.checkpoint_steps import ITEMS

    items = [item for item in ITEMS if json_items or item not in _JSON_ITEMS]
    if missing := [repr(item) for item in items if not (Path(step_dir) / item).is_dir()]:
        return f"its {' and '.join(missing)} item{'s are' if len(missing) > 1 else ' is'} missing"
    if json_items:
        from gensbi_sharding.checkpoint import saved_config, saved_info

        for item, read in zip(_JSON_ITEMS, (saved_config, saved_info)):
            try:
                read(step_dir)
            except FileNotFoundError:  # the library's refusal names it too: the run says it whole
                return f"its {item!r} item cannot be read"
    return None


def readable_steps(checkpoints: Path) -> list[int]:
    """The complete steps of ``checkpoints`` (``<run>/checkpoints``) with no ``step_damage``, ascending."""
    from gensbi_sharding.checkpoint import committed_steps

    return [step for step in committed_steps(checkpoints) if step_damage(Path(checkpoints) / str(step)) is None]


def damaged_refusal(step_dir: Path) -> str | None:
    """The run's refusal of ``step_dir`` where one of its items is missing, with the library's fix (another step
    folder that reads, or start without it); None where every item is there (the JSON items: the caller reads them).

    Parameters
    ----------
    step_dir : Path
        The step folder ``train.resume`` designates (``resume.resume_step_dir``).
    """
    if (why := step_damage(step_dir, json_items=False)) is None:
        return None
    others = [step for step in readable_steps(step_dir.parent) if str(step) != step_dir.name]
    fix = (f"resume from another step folder: {step_dir.parent / str(others[-1])} (or move {step_dir} aside, e.g. to "
           f"{step_dir}.damaged, and the newest is {others[-1]})" if others
           else "no other step folder is complete: start without it")
    return f"FileNotFoundError: checkpoint {step_dir} is damaged: {why}; {fix}"

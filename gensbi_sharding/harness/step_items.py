"""Whether a checkpoint's step folder can be resumed, seen before a run's folder exists and without JAX's backend.

The library counts a step complete by Orbax's step metadata, which still lists an item deleted since (``<step>/arrays``
removed, or lost from a copy): such a step was refused by the run itself, after Hydra had made its folder
(``error.txt``, ``launch.log`` and ``metrics.json`` left there), and a finished run's hint offered to train it further
from it. Here a step is checked by the library's ``checkpoint.step_damage`` (its items' folders, its arrays' metadata,
its JSON items: no array data read), in the words its restore uses (not every array of every step read in a child
process: seconds, on every resume). Damage to array data alone (a data file deleted by hand) is left to the run's
restore, which refuses it naming the step to resume from instead.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["step_damage", "readable_steps", "damaged_refusal"]


def step_damage(step_dir: Path, json_items: bool = True) -> str | None:
    """Why ``step_dir`` cannot be resumed, e.g. "its 'arrays' item cannot be read (its folder is missing)"; None where
    the library's ``checkpoint.step_damage`` finds nothing.

    Parameters
    ----------
    step_dir : Path
        A complete step folder (``checkpoint.committed_steps``).
    json_items : bool, default True
        Whether its ``config`` and ``meta`` items are checked too (a caller that reads them itself leaves them out).
    """
    from gensbi_sharding.checkpoint import step_damage as library_damage

    return library_damage(step_dir, ("arrays", "meta", "config") if json_items else ("arrays",))


def readable_steps(checkpoints: Path) -> list[int]:
    """The complete steps of ``checkpoints`` (``<run>/checkpoints``) with no ``step_damage``, ascending."""
    from gensbi_sharding.checkpoint import committed_steps

    return [step for step in committed_steps(checkpoints) if step_damage(Path(checkpoints) / str(step)) is None]


def damaged_refusal(step_dir: Path) -> str | None:
    """The run's refusal of ``step_dir`` where one of its items is missing or its arrays do not read, with the
    library's fix (another step folder that reads, or start without it); None where it reads (the JSON items: the
    caller reads them).

    Parameters
    ----------
    step_dir : Path
        The step folder ``train.resume`` designates (``resume.resume_step_dir``).
    """
    from gensbi_sharding.checkpoint import committed_steps

    if (why := step_damage(step_dir, json_items=False)) is None:
        return None
    others = [step for step in readable_steps(step_dir.parent) if str(step) != step_dir.name]
    unreadable = [step for step in committed_steps(step_dir.parent)
                  if step not in others and str(step) != step_dir.name]
    moved = [step_dir, *(step_dir.parent / str(s) for s in unreadable[::-1] if others and s > others[-1])]
    aside = (f"{', '.join(map(str, moved[:-1]))} and " if len(moved) > 1 else "") + f"{moved[-1]} aside, e.g. to " + \
        ", ".join(f"{m}.damaged" for m in moved)  # each damaged one newer too, not this one alone
    fix = (f"resume from another step folder: {step_dir.parent / str(others[-1])} (or move {aside}, and the newest "
           f"is {others[-1]})" if others else
           f"no other step folder can be read either (steps {', '.join(map(str, unreadable))}): start without it"
           if unreadable else "no other step folder is complete: start without it")
    return f"FileNotFoundError: checkpoint {step_dir} is damaged: {why}; {fix}"

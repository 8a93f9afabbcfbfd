"""Whether a checkpoint's step folder can be resumed, seen before a run's folder exists and without JAX's backend.

The library counts a step complete by Orbax's step metadata, which still lists an item deleted since (``<step>/arrays``
removed, or lost from a copy): such a step was refused by the run itself, after Hydra had made its folder (``error.txt``,
``launch.log`` and ``metrics.json`` left there), and a finished run's hint offered to train it further from it. Here a
step holds every item the library writes (``checkpoint_steps.ITEMS``, by those names), its JSON items read (the
library's ``saved_config``/``saved_info``: no backend) and, where asked, its arrays read (``step_arrays``: in a child
process). Every damage is worded as the library words it: "its 'arrays' item cannot be read (...)" (was: "its 'arrays'
item is missing" here, "cannot be read" from the run, for the same folder).
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["step_damage", "readable_steps", "damaged_refusal"]

_JSON_ITEMS = ("config", "meta")  # read by the library's saved_config and saved_info: their refusal names the item


def step_damage(step_dir: Path, json_items: bool = True, arrays: bool = False) -> str | None:
    """Why ``step_dir`` cannot be resumed, e.g. "its 'arrays' item cannot be read (its folder is missing)"; None where
    it holds every item.

    Parameters
    ----------
    step_dir : Path
        A complete step folder (``checkpoint.committed_steps``).
    json_items : bool, default True
        Whether its ``config`` and ``meta`` items are read too (a caller that reads them itself leaves them out).
    arrays : bool, default False
        Whether its ``arrays`` item is read too (``step_arrays.arrays_damage``: a child process, seconds).
    """
    from gensbi_sharding.checkpoint_steps import ITEMS

    items = [item for item in ITEMS if json_items or item not in _JSON_ITEMS]
    if missing := [repr(item) for item in items if not (Path(step_dir) / item).is_dir()]:
        many = len(missing) > 1
        return f"its {' and '.join(missing)} item{'s' if many else ''} cannot be read ({'their' if many else 'its'} " \
               f"folder{'s are' if many else ' is'} missing)"
    if json_items:
        from gensbi_sharding.checkpoint import saved_config, saved_info

        for item, read in zip(_JSON_ITEMS, (saved_config, saved_info)):
            try:
                read(step_dir)
            except FileNotFoundError:  # the library's refusal names it too: the run says it whole
                return f"its {item!r} item cannot be read"
    if arrays:
        from gensbi_sharding.harness.step_arrays import arrays_damage

        return arrays_damage([Path(step_dir)]).get(Path(step_dir))
    return None


def readable_steps(checkpoints: Path, arrays: bool = False) -> list[int]:
    """The complete steps of ``checkpoints`` (``<run>/checkpoints``) with no ``step_damage``, ascending (``arrays``:
    their arrays read too, every step in one child process)."""
    from gensbi_sharding.checkpoint import committed_steps
    from gensbi_sharding.harness.step_arrays import arrays_damage

    whole = [step for step in committed_steps(checkpoints) if step_damage(Path(checkpoints) / str(step)) is None]
    unread = arrays_damage([Path(checkpoints) / str(step) for step in whole]) if arrays else {}
    return [step for step in whole if Path(checkpoints) / str(step) not in unread]


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
    from gensbi_sharding.harness.step_arrays import arrays_damage

    if (why := step_damage(step_dir, json_items=False)) is None:
        whole = [step_dir.parent / str(step) for step in committed_steps(step_dir.parent)
                 if step_damage(step_dir.parent / str(step)) is None and str(step) != step_dir.name]
        unread = arrays_damage([step_dir, *whole])  # one child: this step and those its fix may name
        if (why := unread.get(step_dir)) is None:
            return None
        others = [int(step.name) for step in whole if step not in unread]
    else:
        others = [step for step in readable_steps(step_dir.parent, arrays=True) if str(step) != step_dir.name]
    unreadable = [step for step in committed_steps(step_dir.parent) if step not in others and str(step) != step_dir.name]
    fix = (f"resume from another step folder: {step_dir.parent / str(others[-1])} (or move {step_dir} aside, e.g. to "
           f"{step_dir}.damaged, and the newest is {others[-1]})" if others else
           f"no other step folder can be read either (steps {', '.join(map(str, unreadable))}): start without it"
           if unreadable else "no other step folder is complete: start without it")
    return f"FileNotFoundError: checkpoint {step_dir} is damaged: {why}; {fix}"

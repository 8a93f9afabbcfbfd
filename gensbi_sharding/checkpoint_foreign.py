"""Orbax checkpoints another writer saved (a ``CheckpointManager``'s step folders, a ``StandardCheckpointer``'s save
in a folder of its own, as Flax's guide saves ``ckpt_dir / 'state'``), found where ``find_checkpoint`` finds none of
its own, and named with the Orbax call that reads each; and ``step_metadata``, how a folder's Orbax step metadata is
read (through ``ocp.metadata``, never by Orbax's file names)."""

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orbax.checkpoint as ocp

from gensbi_sharding.messages import absl_filtered

__all__ = ["foreign_fix", "step_metadata", "subfolder_fix"]


def foreign_fix(folder: Path, ours: Sequence[str], name: str | None = None) -> str | None:
    """Orbax step folders of ``folder`` (or its step folder ``name``; None: every one), or a checkpoint in ``folder``
    itself, that another writer saved (holding none of our items ``ours``), named with the Orbax call that reads one;
    None if none."""
    paths = {s.step: Path(s.path) for s in ocp.step.standard_name_format().find_all(folder)
             if name in (None, Path(s.path).name)} if folder.is_dir() else {}
    if not paths and name is None and folder.is_dir() and not folder.name.isdigit():  # a step's: named by its parent
        paths = {None: folder}  # one checkpoint in the folder itself, as StandardCheckpointer().save(ckpt / 's', state)
    saved = {step: metadata.item_handlers for step, path in paths.items() if not any((path / item).exists() for item
             in ours) and (metadata := step_metadata(path)) is not None}
    foreign = {step: dict(sorted(h.items())) if isinstance(h, dict) else {} for step, h in saved.items()}  # {}: unnamed
    if not foreign:
        return None
    (step, items), path = max(foreign.items()), repr(str(folder))
    # an item of arrays, not a JSON one; a manager's one unnamed item, 'default', is read without Composite
    arrays = [n for n, h in items.items() if str(h).endswith(("StandardCheckpointHandler", "PyTreeCheckpointHandler"))]
    composite = f"ocp.args.Composite({(arrays or list(items) or [''])[0]}=ocp.args.StandardRestore(target)))"
    if step is None:
        read = (f"ocp.Checkpointer(ocp.CompositeCheckpointHandler()).restore({path}, args={composite}" if items
                else f"ocp.StandardCheckpointer().restore({path}, target)")
        listed = f"its item{'s' if len(items) > 1 else ''} {', '.join(map(repr, items))}" if items else \
            "one unnamed item"
        said = f"{folder} is an Orbax checkpoint another writer saved in the folder itself ({listed}), not in step " \
            "folders"
    else:
        read = (f"ocp.CheckpointManager({path}).restore({step}, args=" + (
            "ocp.args.StandardRestore(target))" if list(items) == ["default"] else composite) if items
            else f"ocp.StandardCheckpointer().restore({str(folder / str(step))!r}, target)")
        listed = "; ".join(f"step {s}: {', '.join(map(repr, i)) or 'one unnamed item'}" for s, i in
                           sorted(foreign.items()))
        said = f"{folder} holds Orbax checkpoints another writer saved ({listed})"
    return (f"{said}, without the items {', '.join(ours)} that CheckpointWriter saves and restore reads; from Python, "
            f"read one with Orbax onto the same target: target = abstract_state_for(model, mesh, rule); {read}")


def subfolder_fix(folder: Path, ours: Sequence[str]) -> str | None:
    """``foreign_fix`` of the first subfolder of ``folder`` (not a step folder) holding a checkpoint another writer
    saved, as Flax's guide saves one, ``StandardCheckpointer().save(ckpt_dir / 'state', state)``, and ``ckpt_dir`` is
    passed; None if none does."""
    try:
        children = sorted(child for child in folder.iterdir() if child.is_dir() and not child.name.isdigit())
    except OSError:  # no folder, or none it may list: this refusal's words are "no checkpoint" all the same
        return None
    found = []
    for child in children:
        try:
            found += [(child, fix)] if (fix := foreign_fix(child, ours)) else []
        except OSError:  # a child that may not be read (another user's folder beside the run): not one
            continue
    if not found:
        return None
    names = ", ".join(repr(child.name) for child, _ in found)
    return (f"its subfolders {names} hold one each; the first: " if len(found) > 1 else
            f"its subfolder {names} holds one: ") + found[0][1]


def step_metadata(path: Path) -> Any:
    """Orbax's ``StepMetadata`` of the step folder ``path`` (``ocp.metadata.get_step_metadata``); None if none."""
    try:
        # Orbax's "Metadata file does not exist" dropped: the refusal names what a step lacks
        with absl_filtered(lambda record: not str(record.msg).startswith("Metadata file does not exist")):
            return ocp.metadata.get_step_metadata(path)
    except ValueError:  # none written: never committed, or the file lost since
        return None

"""Whether a complete step folder can be restored, said cheaply: by its items' folders, the metadata of its arrays and
its JSON items, through Orbax's public handlers, and its arrays' data files, by the sizes TensorStore's B+tree records;
no array data read, JAX's backend never started.

``restore`` names the other steps it offers with it, and the harness asks it before a run's folder exists (was: every
array of every step read in a child process, seconds, a second copy of a big checkpoint in host memory).
"""

import logging
from collections.abc import Sequence
from pathlib import Path

import orbax.checkpoint as ocp
import tensorstore as ts

from gensbi_sharding.checkpoint_steps import ITEMS
from gensbi_sharding.messages import clipped

__all__ = ["step_damage", "damage_behind"]


def step_damage(step_dir: str | Path, items: Sequence[str] = ITEMS) -> str | None:
    """Why the complete step folder ``step_dir`` cannot be restored, e.g. "its 'arrays' item cannot be read (its
    folder is missing)"; None where its ``items`` read.

    Cheap: each item's folder must be there, the ``arrays`` item's tree metadata read (shapes and dtypes, never its
    data), the ``meta`` and ``config`` items read (small JSON). JAX's backend is not started (Orbax's handler is made
    not to ask it), so a launcher may ask it before it sets its device count.

    A data file of the arrays item deleted or cut short by hand is found by the sizes its B+tree records (TensorStore's
    public ``ocdbt.dump`` of the tree's nodes, a few KB). Not caught: array data changed in place, its size kept.
    ``restore`` of such a step refuses with the same words ("... is damaged: its 'arrays' ... item cannot be read
    (<error>)") and offers the newest other step this check passes, or to start without it.

    Parameters
    ----------
    step_dir : str or os.PathLike
        A complete step folder (one of ``committed_steps``), e.g. ``<run>/checkpoints/8``.
    items : sequence of str, default all of ``("arrays", "meta", "config")``
        The items to check (a caller reading the JSON items itself leaves them out).

    Returns
    -------
    str or None
        The reason, in the words ``restore`` uses; None where nothing is found.

    Raises
    ------
    Exception
        An error reading an item that names no damage (not ``KeyError``, ``ValueError``, ``AttributeError`` or
        ``OSError``, nor one behind it), as Orbax raised it.
    """
    step_dir = Path(step_dir)
    if missing := [repr(item) for item in items if not (step_dir / item).is_dir()]:
        many = len(missing) > 1
        return f"its {' and '.join(missing)} item{'s' if many else ''} cannot be read ({'their' if many else 'its'} " \
               f"folder{'s are' if many else ' is'} missing)"
    for item in (item for item in ITEMS if item in items):
        try:
            if item == "arrays":  # a handler that asks the backend nothing (it asks whether pinned memory is there)
                absl, level = logging.getLogger("absl"), logging.getLogger("absl").level
                absl.setLevel(max(level, logging.WARNING))  # its info line "Created BasePyTreeCheckpointHandler: ..."
                try:  # (was: on a launcher's console, above a refusal's one line)
                    read = ocp.PyTreeCheckpointHandler(enable_pinned_host_transfer=False).metadata(step_dir / item)
                finally:
                    absl.setLevel(level)
                if read is None or read.tree is None:  # was said "AttributeError: 'NoneType' ..."
                    return f"its {item!r} item cannot be read (Orbax reads no metadata of it: one of its files is " \
                           "missing or damaged)"
                if lost := _lost_data(step_dir / item):
                    return f"its {item!r} item cannot be read ({lost})"
            else:
                ocp.JsonCheckpointHandler().restore(step_dir / item, ocp.args.JsonRestore())
        except Exception as raised:
            if (err := damage_behind(raised)) is None:
                raise
            return f"its {item!r} item cannot be read ({type(err).__name__}: {clipped(err)})"
    return None


def _lost_data(folder: Path) -> str | None:
    """Which data file the OCDBT database ``folder`` (Orbax's arrays) references is missing or cut short, read by
    TensorStore's public ``ocdbt.dump`` of its manifest and B+tree nodes (no array data); None if each is whole."""
    if not any(folder.glob("*ocdbt*")):  # saved without OCDBT: nothing references a file
        return None
    base = ts.KvStore.open({"driver": "file", "path": f"{folder}/"}).result()
    pending = [(ts.ocdbt.dump(base).result().get("versions") or [{}])[-1]]  # the latest version's tree
    while pending:
        node = pending.pop()
        for value in node.values() if isinstance(node, dict) else node:
            if isinstance(value, (dict, list)):
                pending.append(value)
            elif isinstance(value, str) and value.startswith(("btreenode:", "value:")):
                # "<kind>:<base path>:<file>:<offset>:<length>", e.g. "value:ocdbt.process_0/:d/9744d8b1...:0:10098";
                # another form is left to the restore (read as damage, it would refuse a step that reads)
                if len(parts := value.split(":")) != 5 or not (parts[3].isdigit() and parts[4].isdigit()):
                    continue
                kind, where, name, offset, length = parts
                path, end = folder / where / name, int(offset) + int(length)
                if (size := path.stat().st_size if path.is_file() else None) is None or size < end:
                    return f"its data file {path.relative_to(folder.parent)} is " + (
                        "missing" if size is None else f"cut short: {size} of its {end} bytes")
                if kind == "btreenode":
                    pending.append(ts.ocdbt.dump(base, value).result())
    return None


def damage_behind(raised: Exception) -> Exception | None:
    """The error naming a damaged step folder behind ``raised`` (a data file missing: Orbax raises Exception, its
    text a whole TensorStore spec, from tensorstore's); None for any other error."""
    damaged = (KeyError, ValueError, AttributeError, OSError)
    err = raised if isinstance(raised, damaged) else raised.__cause__ or raised.__context__
    return err if isinstance(err, damaged) else None


"""Whether the ``arrays`` items of checkpoint step folders read, asked before a run's folder exists.

Reading arrays starts JAX's backend, which the launching process must not start (the run sets its device count
later; a GPU's memory would be held): so they are read in a child process on the CPU, every step asked in one child.
The library has no public way to ask this without a restore target (``checkpoint.restore`` needs the model's abstract
state): the child reads each array as NumPy through Orbax's public PyTree restore, as saved, and counts a step
damaged by the errors the library's restore counts so (KeyError, ValueError, AttributeError, OSError, or one behind
another error), worded as the library words them ("its 'arrays' item cannot be read (<error>)").
Was: a run given ``train.resume=<run>`` whose newest step lost an array file (or its database's manifest) was refused
by the run itself, after Hydra had made its folder (``error.txt``, ``launch.log``, ``metrics.json`` left there).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

__all__ = ["arrays_damage", "READ_TIMEOUT_S"]

#: How long the child may read (it reads every array of each step); past it the run's own restore decides.
READ_TIMEOUT_S = 300.0


def arrays_damage(step_dirs: list[Path]) -> dict[Path, str]:
    """``{step folder: "its 'arrays' item cannot be read (...)"}`` for each of ``step_dirs`` whose arrays do not read;
    ``{}`` where all read, or where the child could not ask (it timed out, or failed for another reason: the run's
    restore then says it).

    Parameters
    ----------
    step_dirs : list of Path
        Complete step folders (``checkpoint.committed_steps``), each holding an ``arrays`` item.
    """
    if not step_dirs:
        return {}
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}  # never a GPU's memory for a check
    try:
        child = subprocess.run([sys.executable, "-m", __name__, *map(str, step_dirs)], capture_output=True, text=True,
                               env=env, timeout=READ_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return {}
    lines = [line for line in child.stdout.splitlines() if line.startswith("{")]
    if child.returncode != 0 or not lines:
        return {}
    return {Path(path): f"its 'arrays' item cannot be read ({why})" for path, why in json.loads(lines[-1]).items()}


def _read_all(step_dir: str) -> str | None:
    """In the child: None where every array of ``step_dir``'s arrays item reads; else the error, one line."""
    import jax
    import numpy as np
    import orbax.checkpoint as ocp

    from gensbi_sharding.messages import clipped

    damaged = (KeyError, ValueError, AttributeError, OSError)
    try:
        with ocp.PyTreeCheckpointer() as checkpointer:
            metadata = checkpointer.metadata(Path(step_dir) / "arrays")
            if metadata is None or metadata.item_metadata is None:  # was said "AttributeError: 'NoneType' ..."
                return "Orbax reads no metadata of it: one of its files is missing or damaged"
            tree = metadata.item_metadata.tree
            args = jax.tree.map(lambda _: ocp.RestoreArgs(restore_type=np.ndarray), tree)
            checkpointer.restore(Path(step_dir) / "arrays", args=ocp.args.PyTreeRestore(restore_args=args))
    except Exception as raised:
        err = raised if isinstance(raised, damaged) else raised.__cause__ or raised.__context__
        if not isinstance(err, damaged):
            raise
        return f"{type(err).__name__}: {clipped(err)}"
    return None


if __name__ == "__main__":  # the child: one JSON line, {step folder: error} for the damaged ones
    import logging

    logging.getLogger("absl").setLevel(logging.ERROR)
    said = {path: why for path in sys.argv[1:] if (why := _read_all(path)) is not None}
    print(json.dumps(said), flush=True)

"""sample.py's options: its whole numbers (``whole_number``); the file it writes its samples to, and why it may
not: checked once the run folder and the observation are found good (was: an existing or unwritable output was named
first, for a folder that had no checkpoint to sample), and before any model is built (was: the posterior drawn, then
an OSError traceback as it was written). Pure Python: no JAX.
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import tempfile
from pathlib import Path

__all__ = ["out_path", "output_problem", "whole_number"]


def whole_number(text: str, *, noun: str = "a whole number", example: int = 10000) -> int:
    """``text`` as an int: the type of sample.py's count options (``--num-samples``, ``--seed``, ``--ode-steps``) and
    of the benchmark scripts' integers (``benchmarks/cli_args.integer``).

    Refused as launch.py refuses ``train.steps=1e3`` (a whole number, named as one to type): argparse's own
    "invalid int value: '1e3'" named no fix.

    Parameters
    ----------
    text : str
        The option's value as typed, e.g. ``"10000"``.
    noun, example : str, int
        What the option takes, its article included, and a value of it, as a refusal names them
        (``"'x' is not a whole number; e.g. 10000"``).

    Returns
    -------
    int

    Raises
    ------
    argparse.ArgumentTypeError
        E.g. ``"'1e3' is a whole number written as a float; write 1000"``.
    """
    try:
        return int(text)
    except ValueError:
        pass
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not {noun}; e.g. {example}") from None
    if math.isfinite(value) and value == int(value):
        raise argparse.ArgumentTypeError(f"{text!r} is a whole number written as a float; write {int(value)}")
    example = round(value) if math.isfinite(value) else example
    raise argparse.ArgumentTypeError(f"{text!r} is not {noun}; e.g. {example}")


def out_path(given: str | None, observation: Path) -> Path:
    """The file ``--out`` names: ``.npz`` appended where its name lacks it (numpy.savez's rule: was written without
    it, so ``np.load('mine.npz')`` found nothing), a folder's ``<observation>_posterior.npz`` (was: 'exists'), also
    one typed with a trailing ``/`` that does not exist yet (refused by ``output_problem``, naming it)."""
    default = f"{observation.stem}_posterior.npz"
    if not given:
        return observation.with_name(default)
    out = Path(given)
    if out.is_dir() or given.endswith(("/", os.sep)):  # "new/" names a folder, made or not (was: wrote new.npz)
        return out / default
    return out if out.name.endswith(".npz") else out.with_name(out.name + ".npz")


def output_problem(out: Path, given: str | None, size: int = 0) -> str | None:
    """Why ``sample.py`` may not write ``out`` (``given``: ``--out`` as typed, None for the default; ``size``: the
    bytes it will write, which its disk must have free: was a traceback after the draw), as one line naming the
    fix; None where it may."""
    # A run's own names: a stopped run's folder holding one it did not write is refused when continued.
    if out.name.startswith("posterior_samples") or out.name == "train_losses.npz":
        return (f"--out {out}: {out.name} is a name a run writes its outputs under; choose another "
                "(a later run in that folder would take it for its own)")
    if out.exists():
        return f"{out} exists and is never overwritten: pass --out <a new file>.npz"
    if not out.parent.is_dir():
        return f"--out {out}: its folder {out.parent} does not exist; create it or pass another --out"
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".write-probe-", dir=out.parent))
    except OSError as err:
        which = f"--out {out}" if given else f"the default output {out} (beside the observation file)"
        return (f"{which}: cannot write in {out.parent} ({err.strerror or err}); pass --out <a file in a folder you "
                "can write to>.npz")
    free = shutil.disk_usage(out.parent).free
    if free < size:
        which = f"--out {out}" if given else f"the default output {out} (beside the observation file)"
        return (f"{which}: its disk has {free:,} bytes free, and the samples take {size:,}; free space there, or "
                "pass --out <a file on a disk with room>.npz (or fewer --num-samples)")
    return None

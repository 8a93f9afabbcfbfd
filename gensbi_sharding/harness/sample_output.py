"""sample.py's options: its whole numbers (``whole_number``); the file it writes its samples to, and why it may
not: checked once the run folder and the observation are found good (an output refused first would hide that the folder
has no checkpoint to sample), and before any model is built (not a posterior drawn, then an OSError traceback as it is
written). Pure Python: no JAX.
"""

from __future__ import annotations

import argparse
import itertools
import math
import os
import re
import shlex
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gensbi_sharding.harness.units import is_int

__all__ = ["out_path", "output_problem", "free_name", "whole_number", "at_least", "NumberParser", "named",
           "count_problems", "tried"]

#: The .npz names a run writes in its folder (earlier_attempts' copies of them included), which a later run there would
#: take for its own: refused as sample.py's output. Only these: ``posterior_samples_x_o_posterior.npz``, the default
#: output of the observation the refusal of a run's ``posterior_samples.npz`` saves, is no run's.
RUN_NPZ_NAMES = re.compile(r"posterior_samples(_\d+)?(\.attempt\d+)?\.npz|train_losses\.npz")
SEED_MAX = 2**63 - 1  # saved in the .npz as int64: beyond it numpy writes an object array np.load refuses
BOUNDS = {"seed": " (the .npz stores it as a 64-bit integer)",
          "ode_steps": " (as a run's eval.ode_steps; flow-matching samplers use 10-1,000)"}


def whole_number(text: str, *, noun: str = "a whole number", example: int = 10000, minimum: int | None = None) -> int:
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
    minimum : int, optional
        The least value the option takes: a whole float below it is refused as out of range, not told to be
        written as the int the next check refuses (``--num-samples -1e1``: "write -10").

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
        if minimum is not None and value < minimum:
            raise argparse.ArgumentTypeError(f"{text!r} must be {noun} >= {minimum}; e.g. {max(example, minimum)}")
        raise argparse.ArgumentTypeError(f"{text!r} is a whole number written as a float; write {int(value)}")
    example = round(value) if math.isfinite(value) and round(value) >= (-math.inf if minimum is None else minimum) \
        else example
    raise argparse.ArgumentTypeError(f"{text!r} is not {noun}; e.g. {example}")


def at_least(minimum: int, example: int) -> Callable[[str], int]:
    """The argparse type of an integer option whose values start at ``minimum``.

    Parameters
    ----------
    minimum : int
        The least value taken (sample.py: 1 for ``--num-samples`` and ``--ode-steps``, 0 for ``--seed``).
    example : int
        A value a refusal names (``whole_number``'s ``example``).

    Returns
    -------
    callable
        ``text -> int``, refusing as ``whole_number(text, example=example, minimum=minimum)`` does
        (``argparse.ArgumentTypeError``).
    """
    return lambda text: whole_number(text, example=example, minimum=minimum)


class NumberParser(argparse.ArgumentParser):
    """The parser of sample.py and the benchmark scripts: an option given a negative number written otherwise than
    ``-12`` or ``-1.5`` (``--seed -1e3``, ``--budgets -inf``) reaches the option's type, which accepts it or refuses it
    naming the value (argparse would take it for an option: "argument --seed: expected one argument")."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.valued_options: dict[str, argparse.Action] = {}

    def add_argument(self, *args, **kwargs) -> argparse.Action:
        action = super().add_argument(*args, **kwargs)
        if action.option_strings and action.nargs != 0:
            self.valued_options.update(dict.fromkeys(action.option_strings, action))
        return action

    def parse_known_args(self, args=None, namespace=None):
        words, option = [], None  # the option taking values that the next word may be one of
        for word in sys.argv[1:] if args is None else args:
            if option is not None and _negative_number(word) and "--" not in words:
                if option.nargs is None:  # one value: given as --seed=-1e3, which argparse reads as the value
                    words[-1], option = f"{words[-1]}={word}", None
                    continue
                try:  # a list of values (--budgets 1000 -1e3): its type names the value (no such list takes one)
                    (option.type or str)(word)
                except (argparse.ArgumentTypeError, TypeError, ValueError) as err:
                    self.error(f"argument {'/'.join(option.option_strings)}: {err}")
                self.error(f"argument {'/'.join(option.option_strings)}: {word!r} is negative; give it on its own, "
                           f"as {option.option_strings[-1]}={word}")
            words.append(word)
            if (valued := self._valued(word)) is not None or word.startswith("-") or option is None:
                option = valued
            elif option.nargs is None:  # its value given
                option = None
        return super().parse_known_args(words, namespace)

    def _valued(self, word: str) -> argparse.Action | None:
        """The option taking a value that ``word`` names, or a unique abbreviation of."""
        if word in self.valued_options or not word.startswith("--") or word == "--" or not self.allow_abbrev:
            return self.valued_options.get(word)
        matches = {action for name, action in self.valued_options.items() if name.startswith(word)}
        return matches.pop() if len(matches) == 1 else None


def _negative_number(word: str) -> bool:
    """Whether ``word`` is a negative number (``-1e3``, ``-inf``, ``-1_000``) argparse would read as an option."""
    try:
        float(word)
    except ValueError:
        return False
    return word.startswith("-")


def out_path(given: str | None, observation: Path) -> Path:
    """The file ``--out`` names: ``.npz`` appended where its name lacks it (numpy.savez's rule: written without
    it, ``np.load('mine.npz')`` would find nothing), a folder's ``<observation>_posterior.npz`` (not 'exists'), also
    one typed with a trailing ``/`` that does not exist yet (refused by ``output_problem``, naming it). A name of
    another file type (``x.npy``) is kept as typed, for ``output_problem`` to refuse (not ``x.npy.npz`` written)."""
    default = f"{observation.stem}_posterior.npz"
    if not (given or "").strip():  # a blank one: refused by output_problem, naming this default
        return observation.with_name(default)
    out = Path(given)
    if out.is_dir() or given.endswith(("/", os.sep)):  # "new/" names a folder, made or not, not new.npz
        return out / default
    return out if out.suffix.lower() == ".npz" or _file_type(out) else out.with_name(out.name + ".npz")


def _file_type(out: Path) -> str:
    """The file type ``out``'s name ends in, e.g. ``.npy`` or ``.csv`` (letters only: ``r.v2`` names none)."""
    return out.suffix if out.suffix[1:].isalpha() else ""


def free_name(out: Path) -> Path:
    """The first numbered name beside ``out`` that no file holds: the name ``sample.py`` advises where ``out`` exists.

    Parameters
    ----------
    out : pathlib.Path
        The output that exists, e.g. ``x_o_posterior.npz``.

    Returns
    -------
    pathlib.Path
        ``x_o_posterior_2.npz``, or on from a name's own number: ``x_o_posterior_2.npz`` taken gives ``_3``, where
        it gave ``x_o_posterior_2_2.npz`` to a user pasting the advised name a second time.
    """
    base, number = m.groups() if (m := re.fullmatch(r"(.+)_(\d+)", out.stem)) else (out.stem, "1")
    return next(p for n in itertools.count(int(number) + 1)
                if not ((p := out.with_name(f"{base}_{n}{out.suffix}")).exists() or p.is_symlink()))


def output_problem(out: Path, given: str | None, size: int = 0) -> str | None:
    """Why ``sample.py`` may not write ``out`` (``given``: ``--out`` as typed, None for the default; ``size``: the
    bytes it will write, which its disk must have free: was a traceback after the draw), as one line naming the
    fix; None where it may."""
    if given is not None and not given.strip():  # --out '' must not write the default output silently
        return (f"--out {shlex.quote(given)} names no file; pass --out <a file>.npz, or drop --out to write the "
                f"default beside the observation file, {out}")
    # A run's own names: a stopped run's folder holding one it did not write is refused when continued. Was any name
    # starting posterior_samples: the observation saved as observation_input advises, posterior_samples_x_o.npy,
    # then had its default output refused, naming an --out never typed.
    if RUN_NPZ_NAMES.fullmatch(out.name):
        return (f"--out {out}: {out.name} is a name a run writes its outputs under; choose another "
                "(a later run in that folder would take it for its own)")
    if _file_type(out) and out.suffix.lower() != ".npz":  # an .npy holds one array; the record would be lost
        return (f"--out {out}: sample.py writes a .npz archive (the samples with their observation, seed and "
                f"checkpoint), not a {out.suffix} file; pass --out {out.with_suffix('.npz')} (its 'samples' is the "
                "array of samples)")
    if (held := _checkpoint_folder(out)) is not None:  # was written, then deleted with its step (train.keep)
        run = held.parent if held.name == "checkpoints" else next(
            (p.parent for p in held.parents if p.name == "checkpoints"), held.parent)
        kept = run / out.name if not (run / out.name).exists() else free_name(run / out.name)
        return (f"--out {out}: {held} is a run's checkpoint folder: a continued run deletes its older steps as it "
                f"saves newer ones (train.keep), with any file put among them; pass --out {shlex.quote(str(kept))} "
                "(the run's own folder keeps it) or another folder")
    if out.exists() or out.is_symlink():  # a free name, not "<a new file>": sampling a second run at one x_o is usual
        free = shlex.quote(str(free_name(out)))
        if not out.exists():  # a link to no file: was refused only after the draw, as "created while sampling"
            return (f"{out} is a link to {os.readlink(out)}, which does not exist; a link is never written through: "
                    f"pass --out {free} (or another new file)")
        return f"{out} exists and is never overwritten: pass --out {free} (or another new file)"
    if not out.parent.is_dir():  # a file on its way is no folder to create: 'create it' would not work
        file = next((p for p in (out.parent, *out.parent.parents) if p.exists() and not p.is_dir()), None)
        if file is not None:
            return f"--out {out}: {file} is a file, not a folder; pass another --out"
        return f"--out {out}: its folder {out.parent} does not exist; create it or pass another --out"
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".write-probe-", dir=out.parent))
    except OSError as err:  # /proc's ENOENT said as what it is (write_probe): was "cannot write in /proc (No such ...)"
        from gensbi_sharding.write_probe import denied_words

        which = f"--out {out}" if given else f"the default output {out} (beside the observation file)"
        return (f"{which}: {denied_words(err, out.parent, out)}; pass --out <a file in a folder you "
                "can write to>.npz")
    free = shutil.disk_usage(out.parent).free
    if free < size:
        which = f"--out {out}" if given else f"the default output {out} (beside the observation file)"
        return (f"{which}: its disk has {free:,} bytes free, and the samples take {size:,}; free space there, or "
                "pass --out <a file on a disk with room>.npz (or fewer --num-samples)")
    return None


def _checkpoint_folder(out: Path) -> Path | None:
    """The folder above ``out`` that is a run's ``checkpoints/`` folder (beside its ``metrics.json``, ``.run.lock`` or
    ``.hydra`` record) or one of its steps (Orbax's ``_CHECKPOINT_METADATA`` in it), the nearest first, also where a
    link leads there; None where none is. Another Hydra app's ``checkpoints/`` (its ``.hydra`` record not ours:
    ``foreign_record``) is none: our runs' ``train.keep`` never deletes in it."""
    from gensbi_sharding.harness.foreign_record import another_apps_record

    real = Path(os.path.realpath(out.parent))  # a link to a run's checkpoints/ is looked through
    for folder in dict.fromkeys([*out.absolute().parents, real, *real.parents]):
        if (folder / "_CHECKPOINT_METADATA").exists() or folder.name == "checkpoints" and (
                any((folder.parent / name).exists() for name in ("metrics.json", ".run.lock"))
                or (folder.parent / ".hydra").is_dir() and not another_apps_record(folder.parent / ".hydra")):
            return folder
    return None


def named(what: str, value: Any, flags: bool) -> str:
    """``num_samples=0`` (the keyword), or ``--num-samples 0`` (``sample.py``'s flag: what its user typed)."""
    return f"--{what.replace('_', '-')} {value}" if flags else f"{what}={value!r}"


def count_problems(counts: dict[str, Any], flags: bool) -> list[str]:
    """The refusal of each of ``counts`` (``num_samples``, ``seed``, ``ode_steps``: None, not given, is passed) out of
    its range; ``flags``: said as ``sample.py``'s options."""
    from gensbi_sharding.harness.tasks import ODE_STEPS_MAX  # as a run's: 2**31 - 1 would be days of sampling

    ranges = {"num_samples": (1, None), "seed": (0, SEED_MAX), "ode_steps": (1, ODE_STEPS_MAX)}
    # a value to type, as the options' argparse types name one, so each refusal says what to type
    examples = {"num_samples": 10000, "seed": 0, "ode_steps": 32}
    return [f"{named(what, value, flags)} must be an integer >= {low}"
            + (f" and <= {high:,}{BOUNDS[what]}" if high is not None else "")
            + f"; e.g. {named(what, examples[what], flags)}"
            for what, value in counts.items() if value is not None
            for low, high in [ranges[what]]
            if not is_int(value) or value < low
            or (high is not None and value > high)]


def tried(refused: list, check: Callable[..., Any], *args: Any) -> Any:
    """``check(*args)``; or None, its refusal of an argument (``FileNotFoundError``, ``ValueError``) appended to
    ``refused``, so that every argument is checked and all refused are said at once. A damaged checkpoint
    (``sampled_checkpoint.DamagedCheckpoint``) is raised: no argument was mistyped."""
    from gensbi_sharding.harness.sampled_checkpoint import DamagedCheckpoint

    try:
        return check(*args)
    except (FileNotFoundError, ValueError) as err:
        if isinstance(err, DamagedCheckpoint):
            raise
        refused.append(err)
    return None

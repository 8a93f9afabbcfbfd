"""Your own observation x_o as ``sample.py`` takes it: read from a ``.npy`` file (``load_observation``) and checked
against the run's task (``check_observation``), each refusal naming the value and the fix, before JAX or the model.
"""

from __future__ import annotations

import itertools
import logging
import os
import shlex
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["load_observation", "check_observation", "far_from_training", "FAR_SD"]

#: Standard deviations from the training simulations' mean beyond which x_o is named as lying outside what the run
#: trained on: by Chebyshev's inequality at most 1/10^2 = 1 % of them lie that far in one coordinate. sbibm's
#: observations 1..10 lie within 6.1 of every task's (slcp's observation 7 the farthest); of 20,000 simulations from
#: the prior, 0.1 % of sir's and 0.03 % of lotka_volterra's lie that far, none of the 6 other tasks' (2026-12-04).
FAR_SD = 10.0


def _shell_word(code: str) -> str:
    """``code`` as one shell word: in double quotes as before where the shell leaves it as is there, else quoted."""
    return f'"{code}"' if not set(code) & set('"$`\\!') else shlex.quote(code)


def _text_keywords(path: Path) -> str | None:
    """The ``numpy.loadtxt`` keywords reading the text file ``path`` (its first 64 KiB looked at), or None where no
    row of numbers is there (an empty file, column names alone, a binary file: the command would fail or save an
    empty array, which sample.py refuses): ``delimiter`` where
    its first row of numbers is split by ``,`` or ``;`` (not whitespace), ``skiprows`` past rows of column names
    before it (sbibm's observation.csv: ``data_1,data_2``), ``encoding`` past a UTF-8 byte order mark (a
    spreadsheet's "CSV UTF-8", else "could not convert string '\\ufeff0.5' to float64") or bytes UTF-8 cannot
    read (a Windows-1252 "CSV"'s column names). Read from the file, not its suffix: a ``.csv`` may be split by ``;``
    and a ``.txt`` by ``,``, and a header row would make the printed command fail ("could not convert string to
    float: 'x1'")."""
    def numbers(line: str, delimiter: str | None) -> bool:
        try:
            [float(value) for value in line.split(delimiter)]
        except ValueError:
            return False
        return True

    with open(path, "rb") as f:  # loadtxt's comments (# to the line's end) and blank lines: it skips both
        head = f.read(1 << 16)
    try:
        head.decode("utf-8")
        bom = ", encoding='utf-8-sig'" * head.startswith(b"\xef\xbb\xbf")  # else the first value reads '\ufeff0.5'
    except UnicodeDecodeError:  # a Windows-1252 'température' (or a character cut at 64 KiB): latin-1 reads any byte
        bom = ", encoding='latin-1'"  # no UnicodeDecodeError; the numbers are ASCII, read alike
    lines = [line.partition("#")[0].strip() for line in head.decode("utf-8-sig", "replace").splitlines()]
    for at, line in enumerate(lines):
        delimiter = next((d for d in (None, ",", ";") if line and numbers(line, d)), "?")
        if delimiter != "?":
            return (f"{'' if delimiter is None else f', delimiter={delimiter!r}'}{f', skiprows={at}' * any(lines[:at])}"
                    f"{bom}")
    return None


def _saved_beside(path: Path) -> Path:
    """The ``.npy`` file the conversion command of ``path`` writes: ``<stem>_x_o.npy`` beside it, never ``path``.

    Was ``'x_o.npy'``: pasted, it wrote x_o.npy and then sample.py's x_o_posterior.npz into the folder the command ran
    from, the checkout's root (git status showed both), for a run's ``posterior_samples.npz`` too. Beside it, both land
    in the run's folder (or wherever the user keeps the file), as the README promises (both files go into outputs/).
    A folder this process cannot write (a shared, read-only data folder) gets the current folder's, by absolute path:
    beside it, the command pasted failed with PermissionError.
    """
    folder = path.parent if os.access(path.parent, os.W_OK) else Path.cwd()
    return (base := _free_base(folder / f"{path.stem}_x_o", [""])).with_name(f"{base.name}.npy")


def _free_base(base: Path, endings: list[str], *, first: Path | None = None) -> Path:
    """``first``, ``base``, ``<base>_2``, ``<base>_3``, ...: the first for which no ``<it><ending>.npy`` exists (a link
    to no file counts), so that the command advised never overwrites a file: was ``np.save`` over the user's
    ``obs_1.npy`` (another observation) when ``obs.npy``'s rows were split, over an earlier conversion's likewise."""
    for candidate in itertools.chain([first] if first is not None else [], [base],
                                     (base.with_name(f"{base.name}_{n}") for n in itertools.count(2))):
        if not any((f := candidate.with_name(f"{candidate.name}{end}.npy")).exists() or f.is_symlink()
                   for end in endings):
            return candidate
    raise AssertionError("unreachable: itertools.count never ends")


def load_observation(x_o: Any) -> np.ndarray:
    """``x_o`` as a float array: an array as given, or a path to a ``.npy`` file read with ``numpy.load``.

    Raises
    ------
    FileNotFoundError
        A path that does not exist, or is a folder.
    ValueError
        A file numpy cannot read as one numeric array, or values that are not real numbers (bool, complex, text:
        named with their dtype).
    """
    where = ""  # the file x_o was read from, named in the refusal of its values
    if isinstance(x_o, (str, os.PathLike)):
        path = Path(x_o).expanduser()
        where = f"observation file {path}: "
        if path.is_dir():  # e.g. the two arguments swapped: the run folder where x_o.npy goes
            raise FileNotFoundError(f"observation file {os.fspath(x_o)!r} is a folder ({path.absolute()}), not a .npy "
                                    "file: the order is sample.py <run folder> <x_o.npy>")
        if path.exists() and not path.is_file():  # a pipe or device: was "does not exist", and a pipe's read waits
            raise FileNotFoundError(f"observation file {os.fspath(x_o)!r} is not a regular file (a pipe or device): "
                                    "save your observation with numpy.save('x_o.npy', x_o) and pass that file")
        if not path.is_file():
            # The file the command names, to save: saved anywhere else, the same command would be refused again
            raise FileNotFoundError(f"observation file {os.fspath(x_o)!r} does not exist (resolved to "
                                    f"{path.absolute()}); save your observation with numpy.save({os.fspath(x_o)!r}, "
                                    "x_o) and pass that file")
        with open(path, "rb") as f:
            head = f.read(6)
        if head != b"\x93NUMPY" and head[:2] != b"PK":  # numpy's own error for text: 'pickled data', misleading
            # The path as Python and the shell read it back: a quote or $ in it must not break the command
            saved = _saved_beside(path)
            keywords = _text_keywords(path)
            if keywords is None:  # was: "convert it once: ... np.loadtxt(...)", which failed or saved no values
                what = "is empty (0 bytes)" if not head else "is neither a .npy file nor text holding a row of numbers"
                raise ValueError(f"observation file {path} {what}; save your observation with "
                                 f"numpy.save({os.fspath(saved)!r}, x_o) and pass {shlex.quote(str(saved))}")
            convert = (f"import numpy as np; np.save({os.fspath(saved)!r}, np.loadtxt({os.fspath(path)!r}"
                       f"{keywords}))")
            raise ValueError(f"observation file {path} is not a .npy file (text? a .npy starts with \\x93NUMPY); "
                             f"convert it once: python -c {_shell_word(convert)} and pass {shlex.quote(str(saved))}")
        try:
            x_o = np.load(path, allow_pickle=False)
        except (ValueError, OSError) as err:
            raise ValueError(f"observation file {path} is not a .npy array numpy can read ({err}); save your "
                             "observation with numpy.save('x_o.npy', x_o)") from None
        if not isinstance(x_o, np.ndarray):  # a .npz archive: its arrays named, even just one
            names = x_o.files
            x_o.close()
            saved = _saved_beside(path)
            if not names:  # was: the command saving its 'x_o' array, a KeyError when pasted
                raise ValueError(f"observation file {path} is a .npz archive holding no array; save your observation "
                                 f"with numpy.save({os.fspath(saved)!r}, x_o) and pass {shlex.quote(str(saved))}")
            # a run's posterior_samples.npz or sample.py's output holds the observation it was drawn at
            name = next((n for n in ("observation", "x_o", "x") if n in names), names[0])
            save = f"import numpy as np; np.save({os.fspath(saved)!r}, np.load({os.fspath(path)!r})[{name!r}])"
            raise ValueError(f"observation file {path} is a .npz archive (its arrays: {', '.join(names)}), "
                             f"not a .npy file; save the observation once: python -c {_shell_word(save)} and pass "
                             f"{shlex.quote(str(saved))}")
    try:  # complex: float64 would drop the imaginary part (a warning only); text would be parsed silently
        dtype = np.asarray(x_o).dtype
    except (TypeError, ValueError):  # a ragged list
        dtype = None
    if dtype is not None and dtype.kind in "iuf":  # bool too refused: True/False were read as 1.0/0.0, no data
        return np.asarray(x_o, dtype=np.float64)
    what = f" (dtype {dtype})" if dtype is not None else ""
    raise ValueError(f"{where}x_o={x_o!r}{what} is not an array of real numbers: give a (dim_x,) vector of floats"
                     + (", e.g. x_o.astype(float) where 1/0 are the values measured" if what == " (dtype bool)"
                        else ""))


def check_observation(x_o: np.ndarray, *, dim_x: int, x_transform: str, task: str, source: Any = None) -> np.ndarray:
    """``x_o`` as a float32 (dim_x,) vector, or ``ValueError`` naming the value and the fix.

    Accepts (dim_x,) and (1, dim_x); refuses other shapes, NaN or inf, and values outside the
    domain of the run's ``data.x_transform`` (log: every value > 0). ``source``: the file x_o was read from, if any
    (several observations in it: the command that saves one file per row).
    """
    x_o = load_observation(x_o)  # refused as sample_posterior refuses it: a bool or text array, named by its dtype
    shape = x_o.shape
    if x_o.ndim == 2 and shape[0] == 1:
        x_o = x_o[0]
    if x_o.ndim == 2 and shape[1] == dim_x and not shape[0]:  # none to split per row: ask for one
        raise ValueError(f"{source or 'x_o'} holds no observation (shape {shape}): give one, a ({dim_x},) vector or a "
                         f"(1, {dim_x}) row" + (", saved with numpy.save('x_o.npy', x_o)" if source else ""))
    if x_o.ndim == 2 and shape[1] == dim_x:
        if source is None:
            raise ValueError(f"x_o has shape {shape}: {shape[0]} observations, but a posterior is drawn at one; "
                             f"pass one row, x_o[i] (shape ({dim_x},)), per call")
        # a file per row (sample.py takes a file, not x_o[i]), under names no file holds yet
        stem = _free_base((plain := Path(source).with_suffix("")).with_name(f"{plain.name}_x_o"),
                          [f"_{i}" for i in range(shape[0])], first=plain)
        # The paths as Python and the shell read them back: was '{source}' pasted as typed, which a quote in a
        # folder's name (John's data) broke, and a $ in it the shell expanded
        split = (f"import numpy as np; [np.save({os.fspath(stem)!r} + f'_{{i}}.npy', row) "
                 f"for i, row in enumerate(np.load({os.fspath(source)!r}))]")
        raise ValueError(f"{source} holds {shape[0]} observations (shape {shape}), but a posterior is drawn at one; "
                         f"save one file per row: python -c {_shell_word(split)}, "
                         f"then run sample.py on each {stem.name}_<i>.npy")
    if x_o.ndim != 1 or x_o.size != dim_x:
        from gensbi_sharding.harness.tasks import TASK_DIMS

        # An observation of another task: name whose it may be, not just its size
        theirs = [name for name, (_, size) in TASK_DIMS.items() if size == x_o.size and name != task]
        raise ValueError(f"x_o has shape {shape}, but the run's task {task!r} has dim_x={dim_x}: give a "
                         f"({dim_x},) vector or a (1, {dim_x}) row" + (
                             f"; {x_o.size} values are what {', '.join(theirs)} observe{'s' * (len(theirs) == 1)}: "
                             "if x_o is their data, sample a run trained on it" if theirs and x_o.ndim == 1 else ""))
    if not np.all(np.isfinite(x_o)):
        bad = np.flatnonzero(~np.isfinite(x_o)).tolist()
        raise ValueError(f"x_o holds non-finite values at index {bad} ({x_o[bad].tolist()}): the posterior cannot "
                         "be conditioned on NaN or inf; give finite data")
    if x_transform == "log" and np.any(x_o <= 0):
        bad = np.flatnonzero(x_o <= 0).tolist()
        raise ValueError(f"x_o[{bad[0]}] = {x_o[bad[0]]:g} (indices {bad} are <= 0), but the run was trained with "
                         "data.x_transform=log, which needs every value > 0: its posterior cannot be conditioned on "
                         "the log of it; give positive data, or train a run with data.x_transform=none")
    if np.any(np.abs(x_o) > np.finfo(np.float32).max):
        raise ValueError(f"x_o holds values beyond float32's range ({float(np.abs(x_o).max()):g}); give finite "
                         "float32 data")
    return x_o.astype(np.float32)


def far_from_training(x_o: np.ndarray, statistics: dict, x_transform: str, task: str) -> str | None:
    """Why ``x_o`` lies outside the simulations the run trained on, logged as a warning, or None.

    Named: a coordinate over ``FAR_SD`` of their standard deviations from their mean (``statistics``, the run's
    z-score statistics, after ``data.x_transform``). There the model extrapolates, and its samples were read as a
    posterior without a word (under ``data.theta_transform=support`` every draw lands inside the prior all the
    same): data in other units than the simulator's, or another task's.
    """
    from gensbi_sharding.harness.tasks import transform_x

    z = np.abs((transform_x(x_transform, np.asarray(x_o, np.float64)) - np.asarray(statistics["x_mean"], np.float64))
               / np.asarray(statistics["x_std"], np.float64))
    far = np.flatnonzero(z > FAR_SD)
    if not far.size:
        return None
    worst = int(far[np.argmax(z[far])])
    units = " (of log x: data.x_transform=log)" if x_transform == "log" else ""
    many = f" ({far.size} of x_o's {z.size} values lie over {FAR_SD:g})" if far.size > 1 else ""
    sd = f"{z[worst]:.1f}" if z[worst] < 1e6 else f"{z[worst]:.3g}"  # 3e+30, not 30 digits
    why = (f"x_o[{worst}] = {float(x_o[worst]):g} lies {sd} standard deviations from the mean of the "
           f"run's training simulations{units}{many}; at most 1/{sd}^2 of them lie that far (Chebyshev): "
           "the model saw few or none there, and its samples may be far off: check that x_o is data of task "
           f"{task!r} in the simulator's raw units")
    logging.getLogger("gensbi_sharding").warning(why)
    return why

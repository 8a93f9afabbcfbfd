"""The files the sbibm table reads, each checked as it is read: a job's ``c2st.csv`` (``read_scores``) and sbibm's
published C2ST (``read_published``).

A damaged score file costs its own job in the table, named, never the table or a row that reads as finished; a
damaged published file stops ``table`` naming its line.
"""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path

from cli_args import not_a_script
not_a_script(__name__, __file__)  # run as a script: name the one to run


def read_scores(scores: Path, observations: list[int] | None) -> tuple[list[dict], str | None]:
    """A job's ``c2st.csv`` as ``[{"observation", "c2st", "c2st_sd_folds"}]``, or why it cannot be counted.

    A finished job's file holds one row per observation it was asked to score. One that is empty, cut
    short (a row missing its last fields, or missing observations), or holds a value that is not a
    C2ST would read as a row of fewer observations or of wrong numbers.

    Parameters
    ----------
    scores : Path
        The ``c2st.csv``.
    observations : list of int or None
        The observations the job's config asked for; None when its config does not say (not checked).

    Returns
    -------
    tuple
        ``(rows, None)``, or ``([], "line 2 has c2st='abc', not a number in [0, 1]")``.
    """
    try:
        text = scores.read_text()
    except (OSError, UnicodeDecodeError) as err:
        return [], f"cannot be read ({err})"
    rows = []
    for line, r in enumerate(csv.DictReader(io.StringIO(text)), start=2):
        try:
            observation, c2st, sd = int(r["observation"]), float(r["c2st"]), float(r["c2st_sd_folds"])
        except (KeyError, TypeError, ValueError):  # a missing column, a field cut off, or not a number
            return [], (f"line {line} is not a row of observation, c2st, c2st_sd_folds "
                        f"({','.join(str(v) for v in r.values() if v is not None)!r})")
        if not (0.0 <= c2st <= 1.0 and math.isfinite(sd)):
            return [], f"line {line} has c2st={r['c2st']!r}, c2st_sd_folds={r['c2st_sd_folds']!r}, not C2ST scores"
        rows.append({"observation": str(observation), "c2st": r["c2st"], "c2st_sd_folds": r["c2st_sd_folds"]})
    found = [int(r["observation"]) for r in rows]
    if len(set(found)) != len(found):
        return [], f"holds observations {found}, one of them twice"
    if not rows:
        return [], "holds no observation (it is empty, or its header only)"
    if observations is not None and sorted(found) != sorted(observations):
        return [], f"holds observations {found}, not the {list(observations or [])} its job scored"
    return rows, None


#: The algorithms of sbibm's paper: the "best" of each (task, budget) is one of them.
SBIBM_ALGORITHMS = ("REJ-ABC", "SMC-ABC", "NLE", "NPE", "NRE", "SNLE", "SNPE", "SNRE")
PUBLISHED_COLUMNS = ["task", "num_simulations", "npe_mean", "npe_sd", "best_algorithm", "best_mean", "best_sd"]


def read_published(path: Path, tasks: tuple, budgets: tuple) -> tuple[dict[tuple[str, int], dict], str]:
    """sbibm's published C2ST (``benchmarks/sbibm_published.csv``) by (task, budget), and its source line.

    Every row is checked as it is read, so that a damaged or edited copy stops ``table`` naming the line,
    instead of printing wrong reference numbers beside ours (or a KeyError from the plot): the columns, one
    row per (task, budget) of ``tasks`` x ``budgets``, each C2ST in [0.5, 1] with a spread >= 0, the best
    algorithm one of sbibm's eight and no worse than NPE (NPE is one of them), and a ``# Source:`` line.

    Returns
    -------
    tuple
        ``({(task, budget): row}, "github.com/sbi-benchmark/results, ...")``.
    """
    fix = f"restore it (git checkout -- {path.name}, in {path.parent})"
    lines = path.read_text().splitlines()
    source = " ".join(line.lstrip("# ").removeprefix("Source:").strip() for line in lines
                      if line.startswith("# Source:"))
    if not source:
        raise SystemExit(f"{path} has no '# Source:' line naming where its numbers come from; {fix}")
    numbered = [(k, line) for k, line in enumerate(lines, start=1) if line.strip() and not line.startswith("#")]
    header = numbered[0][1].split(",") if numbered else []
    if header != PUBLISHED_COLUMNS:
        raise SystemExit(f"{path}: its header is {header}, not {PUBLISHED_COLUMNS}; {fix}")
    rows: dict[tuple[str, int], dict] = {}
    for k, line in numbered[1:]:
        r = next(csv.DictReader(io.StringIO(line), fieldnames=PUBLISHED_COLUMNS))
        try:
            cell = (r["task"], int(r["num_simulations"]))
            numbers = [float(r[c]) for c in ("npe_mean", "npe_sd", "best_mean", "best_sd")]
        except (TypeError, ValueError):
            numbers, cell = [], None
        if (cell is None or None in r or not (0.5 <= numbers[0] <= 1 and 0.5 <= numbers[2] <= numbers[0])
                or min(numbers[1], numbers[3]) < 0 or r["best_algorithm"] not in SBIBM_ALGORITHMS):
            raise SystemExit(f"{path} line {k} ({line!r}) is not a row of sbibm's C2ST (each mean in [0.5, 1], the "
                             f"best's at most NPE's, sd >= 0, the best one of {', '.join(SBIBM_ALGORITHMS)}); {fix}")
        if cell in rows:
            raise SystemExit(f"{path} line {k}: {cell[0]} at {cell[1]} simulations a second time; {fix}")
        rows[cell] = r
    lacking = [f"{t} {b}" for t in tasks for b in budgets if (t, b) not in rows]
    if lacking:
        raise SystemExit(f"{path} lacks {', '.join(lacking)}; {fix}")
    return rows, source

"""The files the sbibm table reads, each checked as it is read: a job's ``c2st.csv`` (``read_scores``) and sbibm's
published C2ST (``read_published``, with each (task, budget)'s scores per observation: ``add_by_observation``).

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
    add_by_observation(path.with_name("sbibm_published_observations.csv"), rows)
    return rows, source


def add_by_observation(path: Path, rows: dict[tuple[str, int], dict]) -> None:
    """Give each row of ``rows`` sbibm's C2ST per observation (``"by_observation": {k: (npe, best)}``) from ``path``,
    checked against the row: its 10 observations, its best algorithm, and means and sds equal to the row's (to 4
    decimals). A row scored on fewer observations is then set beside sbibm's over the same ones (``published_over``)."""
    fix = f"restore it (git checkout -- {path.name}, in {path.parent})"
    try:
        lines = [line for line in path.read_text().splitlines() if line.strip() and not line.startswith("#")]
    except OSError as err:
        raise SystemExit(f"{path} cannot be read ({err.strerror or err}); {fix}") from None
    found: dict[tuple[str, int], dict[int, tuple[float, float]]] = {}
    for r in csv.DictReader(lines):
        try:
            cell, k = (r["task"], int(r["num_simulations"])), int(r["observation"])
            found.setdefault(cell, {})[k] = (float(r["npe"]), float(r["best"]))
            assert cell in rows and r["best_algorithm"] == rows[cell]["best_algorithm"]
        except (KeyError, TypeError, ValueError, AssertionError):
            raise SystemExit(f"{path}: {r!r} is not a row of sbibm's C2ST per observation of a (task, budget) of "
                             f"sbibm_published.csv, with its best algorithm; {fix}") from None
    for cell, row in rows.items():
        each = found.get(cell, {})
        # the sds too: the table prints them beside the means, so a per-observation copy must give both
        stats = [f(v[i] for v in each.values()) for i in (0, 1) for f in (_mean, _sd)] if len(each) > 1 else []
        if sorted(each) != list(range(1, 11)) or any(abs(m - float(row[c])) > 6e-5 for m, c in
                                                     zip(stats, ("npe_mean", "npe_sd", "best_mean", "best_sd"))):
            raise SystemExit(f"{path}: {cell[0]} at {cell[1]} simulations has not the 10 observations whose means are "
                             f"sbibm_published.csv's ({row['npe_mean']}, {row['best_mean']}), with its sds "
                             f"({row['npe_sd']}, {row['best_sd']}); {fix}")
        row["by_observation"] = each


def _mean(values) -> float:
    values = list(values)
    return sum(values) / len(values)


def _sd(values) -> float:
    """The sd (ddof=1, as sbibm_published.csv's), nan for one value (no spread)."""
    values = list(values)
    if len(values) < 2:
        return math.nan
    mean = _mean(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))


def published_over(ref: dict | None, observations: list[int]) -> dict:
    """sbibm's numbers for a row scored on ``observations``, as the table (md and csv) gives them.

    Over observations 1-10 (or none: a row not counted) the published mean and sd; over fewer, sbibm's mean and sd
    over the same observations, named in ``over`` (``"obs. 1-3"``; ``""`` for the published ones): a mean over
    other observations misled, a row of observations 1-3 at 0.559 read as above NPE's 0.553, which reads 0.566
    over 1-3. ``ref`` None (a task or budget sbibm did not publish): nan and ``not published``.

    Returns
    -------
    dict
        ``npe_mean``, ``npe_sd``, ``best_algorithm``, ``best_mean``, ``best_sd`` (floats; an sd nan over one
        observation) and ``over``.
    """
    if ref is None:
        return dict(npe_mean=math.nan, npe_sd=math.nan, best_algorithm="not published", best_mean=math.nan,
                    best_sd=math.nan, over="")
    numbers = {c: float(ref[c]) for c in ("npe_mean", "npe_sd", "best_mean", "best_sd")}
    each = ref.get("by_observation", {})
    ks = sorted(observations)
    if ks == list(range(1, 11)) or not ks or not set(ks) <= set(each):
        return dict(numbers, best_algorithm=ref["best_algorithm"], over="")
    over = (f"obs. {ks[0]}-{ks[-1]}" if len(ks) > 2 and ks == list(range(ks[0], ks[-1] + 1))
            else f"obs. {', '.join(map(str, ks))}")
    (npe_mean, npe_sd), (best_mean, best_sd) = ((_mean(each[k][i] for k in ks), _sd(each[k][i] for k in ks))
                                                for i in (0, 1))
    return dict(npe_mean=npe_mean, npe_sd=npe_sd, best_algorithm=ref["best_algorithm"], best_mean=best_mean,
                best_sd=best_sd, over=over)


def published_fields(numbers: dict) -> list[str]:
    """``published_over``'s ``numbers`` as ``sbibm_table.csv``'s five sbibm columns: npe mean and sd, best algorithm,
    best mean and sd (4 decimals; ``nan`` where there is none)."""
    return [numbers["best_algorithm"] if c == "best_algorithm" else f"{numbers[c]:.4f}"
            for c in ("npe_mean", "npe_sd", "best_algorithm", "best_mean", "best_sd")]


def published_columns(numbers: dict) -> str:
    """The table's two sbibm columns of ``published_over``'s ``numbers``: ``| 0.606 +- 0.039 | 0.554 +- 0.024
    (SNPE) |``, over fewer observations ``| 0.566 +- 0.013 (obs. 1-3) | 0.539 +- 0.015 (SNPE, obs. 1-3) |`` (one
    observation: no spread, as this harness's column), or not published."""
    if numbers["best_algorithm"] == "not published":
        return "| not published | not published |"

    def shown(mean: float, sd: float) -> str:  # "+- nan" would read as a failed computation
        return f"{mean:.3f}" + ("" if math.isnan(sd) else f" +- {sd:.3f}")

    over = f", {numbers['over']}" if numbers["over"] else ""
    return (f"| {shown(numbers['npe_mean'], numbers['npe_sd'])}{f' ({over[2:]})' if over else ''} | "
            f"{shown(numbers['best_mean'], numbers['best_sd'])} ({numbers['best_algorithm']}{over}) |")

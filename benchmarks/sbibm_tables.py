"""The files ``benchmarks/sbibm.py table`` writes, made from per-observation rows, whichever way it got them.

``table <folders>`` turns the job folders into the text of ``sbibm_results.csv`` (``results_text``) and
``table --from-results <csv>`` reads such a file; both then go through the same ``parse_results`` and
``write_tables``, so a table rebuilt from a committed ``sbibm_results.csv`` is the one its job folders made.

A row of ``sbibm_results.csv`` is one observation of one cell: ``task, num_simulations, observation, c2st,
c2st_sd_folds, method`` and, when known, ``settings`` (the overrides its job ran with beyond experiment=sbibm,
the task and the budget; ``none`` for the preset alone), which ``sbibm_table.md`` names under the table. A file
written before the ``method`` column reads as amortised; one without ``settings`` says they are not recorded.
A cell with no job counted (stopped, failed, asked but never run) is one row with no score and why in a last
``not_counted`` column, a column written only then: its table row ``not counted (why)`` is rebuilt too.
"""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

import numpy as np

from cli_args import Refused, command_line, not_a_script
from gensbi_sharding.harness.outputs import MAKE_ROOM, write_atomic
from sbibm_files import published_columns, published_fields, published_over
from sbibm_method import AMORTISED, Method, cell_of, method_of
from table_kept import keep_previous
not_a_script(__name__, __file__)  # run as a script: name the one to run

TASKS = ("two_moons", "gaussian_linear", "gaussian_linear_uniform", "gaussian_mixture", "slcp", "sir",
         "lotka_volterra", "bernoulli_glm")
BUDGETS = (1000, 10_000, 100_000)
OUTPUTS = ("sbibm_results.csv", "sbibm_table.md", "sbibm_table.csv", "sbibm.png")  # what table writes into --out
REQUIRED = ("task", "num_simulations", "observation", "c2st", "c2st_sd_folds")
# method and settings last: a reader of the columns before them by position reads them as before
COLUMNS = (*REQUIRED, "method", "settings")
NOT_RECORDED = ""  # a cell's settings when its file has no settings column


def mean_sd(values) -> tuple[float, float]:
    """The mean and sd (ddof=1; nan for one value) of a cell's C2STs, as the table and ``run``'s line for a job both
    give them: one sum for both (Python's ``sum`` and NumPy's pairwise one differ in the last bit, which rounded a
    mean of 0.9665 to 0.966 on the run's line and 0.967 in the table)."""
    values = np.asarray(values, dtype=float)
    return float(values.mean()), (float(values.std(ddof=1)) if len(values) > 1 else float("nan"))


def row_order(cell: tuple) -> tuple[int, str, int, int, str]:
    """sbibm's task order, then the budget, the amortised row before the sequential ones; a task sbibm lacks (a
    registered one) after its eight."""
    return (TASKS.index(cell[0]) if cell[0] in TASKS else len(TASKS), cell[0], cell[1], len(cell), method_of(cell))


def row_name(cell: tuple) -> str:
    """A cell in words: ``sir at 10,000 simulations`` or ``sir at 10,000 simulations per observation (sequential
    rounds=2 region=box margin=0.5)``."""
    if len(cell) == 2:
        return f"{cell[0]} at {cell[1]:,} simulations"
    return f"{cell[0]} at {cell[1]:,} simulations per observation ({method_of(cell)})"


def results_text(cells: dict[tuple, list[dict]], settings: dict[tuple, str], left_out: dict | None = None) -> str:
    """The text of ``sbibm_results.csv``: a row per observation of each cell, in the table's order; the
    ``settings`` column only when some cell's are recorded (a file without it rebuilds as it was); a row of
    ``left_out`` (``{cell: why}``: no job counted) with no score, why in a ``not_counted`` column, only then."""
    # The not-counted cells are in the file too, so --from-results of it keeps their table rows.
    left_out = {cell: why for cell, why in (left_out or {}).items() if cell not in cells}
    recorded = bool(left_out) or any(settings.get(cell, NOT_RECORDED) != NOT_RECORDED for cell in cells)
    f = io.StringIO()
    writer = csv.writer(f)
    writer.writerow([*COLUMNS, "not_counted"] if left_out else COLUMNS if recorded else COLUMNS[:-1])
    for cell in sorted([*cells, *left_out], key=row_order):
        kept = [settings.get(cell, NOT_RECORDED)] if recorded else []
        if cell in left_out:
            writer.writerow([*cell[:2], "", "", "", method_of(cell), *kept, left_out[cell]])
        for r in sorted(cells.get(cell, []), key=lambda r: int(r["observation"])):
            writer.writerow([*cell[:2], r["observation"], r["c2st"], r["c2st_sd_folds"], method_of(cell), *kept,
                             *([""] if left_out else [])])
    return f.getvalue()


def parse_results(text: str, where: str, tasks: tuple | None = None) -> tuple[dict[tuple, list[dict]], dict, dict]:
    """``({cell: [rows]}, {cell: settings}, {cell: why not counted})`` of a ``sbibm_results.csv``'s text, every
    row checked.

    Parameters
    ----------
    text : str
        The file's text.
    where : str
        The file, as errors name it.
    tasks : tuple of str or None
        The tasks a row may name (those of sbibm's published table); None: any.

    Raises
    ------
    Refused
        One line naming the file, the line and the value, and the fix: a missing column, a value that is not
        a C2ST, an unknown task or method, an observation twice, two settings in one cell, a cell both counted
        and not (or a not-counted row with a score), no row at all.
    """
    fix = "pass the sbibm_results.csv that sbibm.py table wrote, or make the table from the job folders"
    reader = csv.DictReader(io.StringIO(text))
    lacking = [c for c in REQUIRED if c not in (reader.fieldnames or [])]
    if lacking:
        raise Refused(f"{where} lacks the column(s) {', '.join(lacking)} (its header: {reader.fieldnames}); "
                         f"a sbibm_results.csv has {', '.join(REQUIRED)}[, method, settings]: {fix}")
    cells: dict[tuple, list[dict]] = {}
    settings: dict[tuple, str] = {}
    left_out: dict[tuple, str] = {}
    for line, r in enumerate(reader, start=2):
        shown = ",".join(str(v) for v in r.values() if v is not None)
        why = (r.get("not_counted") or "").strip()
        try:
            task, budget = r["task"], int(r["num_simulations"])
            method = Method.from_label(r.get("method") or AMORTISED)
            scored = not why or any(r.get(k) for k in REQUIRED[2:])  # a not-counted row has no score at all
            observation, c2st, sd = ((int(r["observation"]), float(r["c2st"]), float(r["c2st_sd_folds"])) if scored
                                     else (None, 1.0, 1.0))  # 1.0: passes the C2ST checks below
        except (KeyError, TypeError, ValueError):  # a field cut off, not a number, a method label not Method's
            raise Refused(f"{where} line {line} ({shown!r}) is not a row of {', '.join(REQUIRED)}, method "
                             f"(amortised or e.g. 'sequential rounds=2 region=box margin=0.5'): {fix}") from None
        if None in r or budget < 1 or not (0.0 <= c2st <= 1.0 and np.isfinite(sd)):
            raise Refused(f"{where} line {line} ({shown!r}) is not a C2ST row (a positive budget, c2st in "
                             f"[0, 1], a finite c2st_sd_folds, no extra field): {fix}")
        if tasks is not None and task not in tasks:
            raise Refused(f"{where} line {line}: task {task!r} is not one of sbibm's published table "
                             f"({', '.join(tasks)}); correct its name, or make the table from its job folders "
                             f"({command_line('benchmarks/sbibm.py', 'table', '<folders>')}), which lists it as not "
                             "published")
        cell = cell_of(task, budget, method.label)
        if why or cell in left_out:
            if cell in left_out or cell in cells or scored:
                raise Refused(f"{where} line {line} ({shown!r}): {row_name(cell)} is counted and not counted, "
                                 "or not counted twice (a not-counted row has no observation, c2st or "
                                 "c2st_sd_folds); keep its scores or one not-counted row")
            left_out[cell], settings[cell] = why, r.get("settings") or NOT_RECORDED
            continue
        if any(int(s["observation"]) == observation for s in cells.get(cell, [])):
            raise Refused(f"{where} line {line}: observation {observation} of {row_name(cell)} a second time "
                             f"(one table row averages one run); keep one of its rows")
        if settings.setdefault(cell, r.get("settings") or NOT_RECORDED) != (r.get("settings") or NOT_RECORDED):
            raise Refused(f"{where} line {line}: settings {r.get('settings')!r}, but {settings[cell]!r} in the "
                             f"rows of {row_name(cell)} before it (one table row averages one run); keep one run")
        cells.setdefault(cell, []).append({"observation": str(observation), "c2st": r["c2st"],
                                           "c2st_sd_folds": r["c2st_sd_folds"]})
    if not cells:
        raise Refused(f"{where} holds no row{' with a score' if left_out else ''} (it is empty, or its header "
                         f"only): {fix}")
    return cells, settings, left_out


def settings_note(settings: dict[tuple, str]) -> str | None:
    """One line naming the rows' settings beyond the preset, task and budget: a table that mixes them says which rows
    have which (``train.steps=20`` in one, the preset's in another), a setting every recorded row shares said once (not
    ``mesh=none`` after each of 15 rows); None when every row is the preset's alone."""
    rows = {f"{cell[0]} {cell[1]:,}" + (f" {method_of(cell)}" if len(cell) > 2 else ""): value or "not recorded"
            for cell, value in sorted(settings.items(), key=lambda kv: row_order(kv[0]))}
    beyond = "beyond experiment=sbibm, the task and the budget"
    if set(rows.values()) <= {"none"}:
        return None
    if set(rows.values()) == {"not recorded"}:
        return (f"the settings the rows were made with ({beyond}) are not recorded: their sbibm_results.csv has no "
                "settings column")
    if len(set(rows.values())) == 1:
        return f"every row made with settings {beyond}: {rows.popitem()[1]}"
    # a value split into its overrides (a space inside one, as in a list's, stays); unrecorded rows share none
    words = {row: re.split(r" (?=[^ =]+=)", value) for row, value in rows.items()
             if value != "not recorded" and not value.startswith("unknown")}
    shared = [w for w in next(iter(words.values()), []) if w != "none" and all(w in ws for ws in words.values())]
    rest = {row: " ".join(w for w in words[row] if w not in shared) if row in words else value for row, value in
            rows.items()}  # a row of the shared settings alone is not listed again
    if not any(rest.values()):  # the same settings in another order (a csv's rows, as written): one recipe
        return f"every row made with settings {beyond}: {' '.join(shared)}"
    every = "every row" if len(words) == len(rows) else "every row whose settings are recorded"
    return (f"rows made with different settings ({beyond}): " + (f"{' '.join(shared)} in {every}; besides it, "
            if shared else "") + "; ".join(f"{row}: {value}" for row, value in rest.items() if value))


def write_tables(cells: dict, left_out: dict, settings: dict, published: tuple[dict, str], out: Path, plot,
                 source: Path | None = None) -> str:
    """Write ``OUTPUTS`` into ``out``, each whole, only once all are made; return the table's markdown.

    ``cells``, ``settings`` and ``left_out`` (``{cell: why}`` of the cells with no job counted: their rows say so)
    are ``parse_results``'s; ``published`` is ``(rows, where they come from)`` of sbibm's numbers; ``plot`` makes
    the PNG of ``(cells, rows, left_out)``. sbibm's columns, in the md and the csv alike, are its mean and sd over
    the observations the row scored (``published_over``). ``source``: the ``sbibm_results.csv`` read, if any: an
    existing ``out/sbibm_results.csv`` other than the rebuilt one (that file itself, rebuilt otherwise, or another
    run's) may be the only record of hours of training, so nothing is written then.
    """
    paper, origin = published
    taken = [str(out / name) for name in OUTPUTS if (out / name).is_dir()]
    if taken:  # checked before any is written: never a table beside another run's plot
        raise Refused(f"{', '.join(taken)} is a folder, where table writes its file; pass another --out")
    files: dict[str, bytes | str] = {"sbibm_results.csv": results_text(cells, settings, left_out)}
    problem = overwrite_problem(out / "sbibm_results.csv", files["sbibm_results.csv"], cells, source)
    if problem:
        raise Refused(problem)
    lines = ["| task | simulations | this harness: C2ST mean +- sd (observations) | sbibm NPE: mean +- sd "
             "| sbibm best: mean +- sd |",
             "|---|---|---|---|---|"]
    summary = []
    for cell in sorted([*cells, *left_out], key=row_order):
        task, budget = cell[:2]
        # a sequential row is its own, named, its budget spent per observation (as sbibm's sequential methods)
        name, simulations = ((task, f"{budget:,}") if len(cell) == 2 else
                             (f"{task}, {Method.from_label(method_of(cell)).title}", f"{budget:,} per observation"))
        # sbibm's columns (md and csv alike): its mean and sd over the observations this row scored
        theirs = published_over(paper.get((task, budget)), [int(r["observation"]) for r in cells.get(cell, [])])
        columns, sbibm = published_columns(theirs), published_fields(theirs)
        if cell in left_out:  # c2st_mean nan over 0 observations, and why in the last column
            summary.append([task, budget, "nan", "nan", 0, *sbibm, left_out[cell], method_of(cell)])
            lines.append(f"| {name} | {simulations} | not counted ({left_out[cell]}) {columns}")
            continue
        values = [float(r["c2st"]) for r in cells[cell]]
        mean, sd = mean_sd(values)
        summary.append([task, budget, f"{mean:.4f}", f"{sd:.4f}", len(values), *sbibm, "", method_of(cell)])
        # One observation has no spread: "+- nan" read as a failed computation (the CSV keeps its exact nan).
        mark = "" if len(values) == 10 else f" ({len(values)} obs.{', no spread' if len(values) == 1 else ''})"
        spread = f" +- {sd:.3f}" if len(values) > 1 else ""
        lines.append(f"| {name} | {simulations} | {mean:.3f}{spread}{mark} {columns}")
    # Under the table, as it is read (and copied) apart from its sources: the settings its rows were made with
    # when not the preset's alone (a 20-step row reads as the preset's otherwise), and where sbibm's columns
    # come from.
    note = settings_note({cell: settings.get(cell, NOT_RECORDED) for cell in cells})
    lines += ["", *([note, ""] if note else []),
              f"sbibm NPE and best: Lueckmann et al. 2021, {origin}."]
    files["sbibm_table.md"] = text = "\n".join(lines) + "\n"
    f = io.StringIO()
    writer = csv.writer(f)
    writer.writerow(["task", "num_simulations", "c2st_mean", "c2st_sd", "observations", "sbibm_npe_mean",
                     "sbibm_npe_sd", "sbibm_best_algorithm", "sbibm_best_mean", "sbibm_best_sd", "not_counted",
                     "method"])
    writer.writerows(summary)
    files["sbibm_table.csv"] = f.getvalue()
    files["sbibm.png"] = plot(cells, paper, left_out)
    # Every file is made in memory first and written only once all four are made, each whole (a temporary
    # name, then a rename): a failure making one (the plot) leaves the previous four as they were.
    written: list[str] = []
    keep_previous(out, files)  # a table written over is kept under a new name first, said (nothing replaced silently)
    for name in OUTPUTS:
        try:
            write_atomic(out / name, files[name])
        except OSError as err:  # a full or read-only disk: named, and what is kept (not a traceback)
            raise SystemExit(f"{out / name} could not be written ({err.strerror or err}); "
                             f"{', '.join(written) or 'none of the four files'} written, the rest "
                             f"as they were, each whole; the scores are kept in {source or 'the job folders'}: "
                             f"{MAKE_ROOM}, or pass another --out, then run the same command "
                             "again") from None
        written.append(name)
    return text


def overwrite_problem(there: Path, text: str, cells: dict, source: Path | None) -> str | None:
    """Why writing ``text`` over ``there`` (an ``--out``'s ``sbibm_results.csv``) would lose work, or None.

    Made from a csv (``source``), any other content is refused: ``there`` is that csv, rebuilt otherwise, or
    another run's, maybe the only record of its hours of training. Made from job folders, those folders are the
    record: ``there`` may be rewritten (a job rerun changes its scores), but not lose an observation they no
    longer make (a job folder moved or deleted since, another --root's rows); a ``there`` that is no
    ``sbibm_results.csv`` holds no rows to lose.
    """
    if not there.is_file() or there.read_bytes() == text.encode():
        return None
    if source is not None:
        old, new = there.read_text(errors="replace").splitlines(), text.splitlines()
        k = next((k for k, (a, b) in enumerate(zip(old, new)) if a != b), min(len(old), len(new)))
        what = (f"rebuilding {source} in place would change it" if there.resolve() == Path(source).resolve() else
                f"{there} holds other rows than those of {source}")
        return (f"{what} (line {k + 1}: {old[k] if k < len(old) else 'nothing'!r} would become "
                f"{new[k] if k < len(new) else 'nothing'!r}); wrote nothing: pass another --out")
    try:
        kept, _, _ = parse_results(there.read_bytes().decode(), str(there))
    except (Refused, UnicodeDecodeError):
        return None
    lost = [f"{row_name(cell)}, observation {r['observation']}" for cell, rows in sorted(kept.items(), key=lambda kv:
            row_order(kv[0])) for r in rows if r["observation"] not in {s["observation"] for s in cells.get(cell, [])}]
    if not lost:
        return None
    return (f"{there} holds {len(lost)} row(s) these job folders do not make ({'; '.join(lost[:3])}"
            f"{'; ...' if len(lost) > 3 else ''}), which writing it would lose; wrote nothing: pass another --out, or "
            f"move {there} aside ({command_line('benchmarks/sbibm.py', 'table', '--from-results <it>', '--out <another '
            'folder>')} rebuilds its table)")


def read_results_file(path: Path, tasks: tuple) -> tuple[dict, dict, dict]:
    """``parse_results`` of the file ``path``, naming a missing or unreadable file with the fix."""
    if not path.is_file():
        raise Refused(f"--from-results {path} {'is a folder' if path.is_dir() else 'does not exist'}: pass the "
                         "sbibm_results.csv that sbibm.py table wrote (e.g. benchmarks/results/sbibm_results.csv)")
    try:
        text = path.read_bytes().decode()
    except (OSError, UnicodeDecodeError) as err:
        raise Refused(f"--from-results {path} cannot be read ({err}): pass a readable sbibm_results.csv") from None
    return parse_results(text, str(path), tasks)

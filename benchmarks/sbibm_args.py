"""``benchmarks/sbibm.py``'s command line: its ``run`` and ``table`` commands' arguments, and the check of a folder
argument (``--root``, ``--out``, a job folder) before anything is written."""

from __future__ import annotations

import argparse
import shlex
from argparse import SUPPRESS
from pathlib import Path

from cli_args import HelpFormatter, Refused, command_line, new_parser, one_of, positive_int, not_a_script
from gensbi_sharding.harness.checkout_folders import config_folder_problem
from gensbi_sharding.harness.folder_lock import run_folder_holding, runs_under, write_denied
from sbibm_method import TASK_SETTINGS, margin_arg, region_arg, rounds_arg
from sbibm_tables import BUDGETS, TASKS
not_a_script(__name__, __file__)  # run as a script: name the one to run


def sbibm_parsers(description: str) -> tuple[argparse.ArgumentParser, argparse.ArgumentParser,
                                             argparse.ArgumentParser]:
    """sbibm.py's parser and those of its ``run`` and ``table`` commands (their errors name the command)."""
    parser = new_parser(description)
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="run the missing (task, budget) jobs, resumably", formatter_class=HelpFormatter)
    r.add_argument("--root", type=Path, required=True, default=SUPPRESS,
                   help="folder of the jobs, <root>/<task>_<budget>")
    r.add_argument("--tasks", nargs="+", default=list(TASKS), type=one_of(TASKS, argument="--tasks"),
                   help="sbibm tasks")
    r.add_argument("--budgets", nargs="+", default=list(BUDGETS), type=one_of(BUDGETS, int, argument="--budgets"),
                   help="simulation budgets")
    r.add_argument("--stop-grace", type=positive_int, default=300, metavar="SECONDS",
                   help="after Ctrl-C or a signal, how long the job under way may take to stop before it is killed")
    r.add_argument("--rounds", type=rounds_arg, default=1,
                   help="1: one amortised posterior per (task, budget); 2 or more: sequential rounds per observation "
                        "(benchmarks/sequential.py), the budget spent per observation, in its own folder and row")
    r.add_argument("--region", type=region_arg, default=None,
                   help="with --rounds >= 2: truncate later rounds to the posterior samples' widened box, or their "
                        "Gaussian's ellipsoid (None: box)")
    r.add_argument("--margin", type=margin_arg, default=None,
                   help="with --rounds >= 2: box widening, times its range, per side; ellipsoid: radius times "
                        "1 + margin (None: 0.5)")
    own = "; ".join(f"{task} at {budget}: {' '.join(v)}" for (task, budget), v in TASK_SETTINGS.items())
    r.add_argument("extra", nargs="*", default=[], help=f"overrides for every job, after --; an amortised job gets its "
                   f"task's own settings at the budget they were measured at first ({own}; why: "
                   "docs/posterior_quality.md), all left out when one of their keys is given here (e.g. model=mlp)")
    t = sub.add_parser("table", help="table and plot from job folders, or from a sbibm_results.csv",
                       formatter_class=HelpFormatter)
    t.add_argument("folders", nargs="*", type=Path, help="--root folders of run (or --from-results)")
    t.add_argument("--root", type=Path, action="append", default=[], dest="roots", metavar="ROOT",  # as run takes it
                   help="a --root of run, as run took it: the same as naming it as a folder (may be repeated)")
    t.add_argument("--from-results", type=Path, default=None, metavar="CSV",
                   help="rebuild from the rows of a sbibm_results.csv, not job folders (None: from the folders)")
    t.add_argument("--out", type=Path, default=None,
                   help="where the table and plot go (None: the first folder, or the --from-results csv's)")
    return parser, r, t


def check_folder(path: Path, what: str, may_be_missing: bool = False) -> None:
    """``Refused`` (exit code 2) naming ``path`` when it is a file, lies under one, cannot be written or is or lies
    inside a run's folder (a folder to be made or written, ``may_be_missing``), or is missing where a folder must
    exist."""
    if path.is_file():
        raise Refused(f"{what} {path} is a file, not a folder; pass another {what}" if what.startswith("--")
                         else f"{path} is a file, not a folder: pass the multirun or --root folder holding the jobs")
    if not may_be_missing:
        if not path.is_dir():
            raise Refused(f"{path} does not exist: pass the multirun or --root folder holding the jobs")
        return
    nearest = next(p for p in (path.absolute(), *path.absolute().parents) if p.exists())  # "/" always exists
    if not nearest.is_dir():  # mkdir would stop with NotADirectoryError's traceback
        raise Refused(f"{what} {path} lies under {nearest}, a file, not a folder; pass another {what}")
    if refusal := write_denied(nearest, path.absolute()):
        raise Refused(f"{what} {path}: {refusal}; pass another {what}, in a folder you can write to")
    # A finished run's folder is never written into: not sbibm_asked.json and job folders (run: each job would
    # refuse its hydra.sweep.dir there), nor the table's files (table)
    if host := run_folder_holding(path):
        flag, where = what.split()[0], "is" if host == path.absolute() else "lies inside"
        raise Refused(f"{what} {path} {where} the folder of the run {host}, which is never written into again; "
                         f"pass a folder outside it, e.g. {flag} {host}-{'sbibm' if flag == '--root' else 'table'}")
    # Nor the harness's conf/ (--root conf/x): each job would refuse the hydra.sweep.dir=multirun/... that run sets
    # itself, after sbibm_asked.json and a job folder were written there
    if refusal := config_folder_problem(path.absolute(), f"{what} {path}", what.split()[0]):
        raise Refused(refusal)


def check_root(root: Path) -> None:
    """``Refused`` for a ``--root`` that is or lies inside a sweep's folder (a launch.py multirun, or one (task, budget)
    folder of another ``--root``), lies inside another ``--root`` or holds one: ``table`` over that folder, which reads
    every job below it, would then find two jobs of one (task, budget) and refuse: refused before run writes
    there."""
    from sbibm_jobs import ASKED

    path = root.absolute()
    for above in (path, *path.parents):
        sweep, other = (above / "multirun.yaml").is_file(), above != path and (above / ASKED).is_file()
        if sweep or other:
            where = "is" if above == path else "lies inside"
            what = "the sweep folder" if sweep else "the --root of another sbibm.py run,"
            owner = above.parent if sweep and (above.parent / ASKED).is_file() else None if sweep else above
            fix = (f"--root {owner}, whose jobs done are skipped, or a folder outside it" if owner else
                   f"a folder outside it, e.g. --root {above}-sbibm")
            table = command_line("benchmarks/sbibm.py", "table", shlex.quote(str(owner or above)))
            raise Refused(f"--root {root} {where} {what} {above}: {table} counts every job "
                          "below it, so a (task, budget) run here too would be found twice, and that table refused; "
                          f"pass {fix}")
    # and the reverse: table over this --root would count the jobs of another --root below it
    inner = next((r.parent for r in sorted(path.rglob(ASKED)) if r.parent != path), None) if path.is_dir() else None
    if inner is not None:
        table = command_line("benchmarks/sbibm.py", "table", shlex.quote(str(root)))
        raise Refused(f"--root {root} holds the --root of another sbibm.py run, {inner}: {table} counts "
                      "every job below it, so a (task, budget) run here too would be found twice, and that table "
                      f"refused; pass --root {inner}, whose jobs done are skipped, or a folder outside {root}, e.g. "
                      f"--root {path}-sbibm")



def job_folder_problem(job: Path, cell: str) -> str | None:
    """Why ``--job`` (no run's folder: ``sequential.py`` refuses those first) cannot be a sequential job's folder, or
    None. Taken: a new or empty folder, a sequential job's own (its ``RECORD``) or one holding only what a job
    writes. Refused: a file, a path under one, an unwritable folder, and a folder of other files (an sbibm.py
    ``--root``, ``outputs/``, a checkout), among which the job's ``.hydra`` and ``metrics.json`` would make it a
    run's folder, every run below it then refused as inside that run; a ``c2st.csv`` of no job, which it would
    delete. ``cell``: the folder ``run`` gives this job under a ``--root``."""
    from sbibm_jobs import ASKED
    from sbibm_method import RECORD

    try:
        check_folder(job, "--job", may_be_missing=True)
    except Refused as refusal:  # one line, not the folder lock's OSError traceback
        return str(refusal)
    path = job.absolute()
    if not path.is_dir() or (path / RECORD).is_file():  # new, or a sequential job's own: started again in place
        return None
    then = "where this job's .hydra and metrics.json would make it a run's folder, every run below it refused"
    if (path / ASKED).is_file():
        return (f"--job {job} is the --root of an sbibm.py run ({ASKED}): {then}; pass the folder run gives this "
                f"job there, --job {path / cell / 'job'}")
    held = (["multirun.yaml"] if (path / "multirun.yaml").is_file() else []) + runs_under(path)
    # Hidden names are a file manager's or notebook's clutter (.DS_Store, .ipynb_checkpoints) or a job's own (.hydra,
    # a temporary record left by a kill): none is another's work (so "holds .DS_Store" would be a false refusal)
    others = held or sorted(p.name for p in path.iterdir() if p.name not in (RECORD, "metrics.json", "c2st.csv")
                            and not p.name.startswith("."))
    # The cell's own folder (job/ left off the --job run gives): its job/ (there is no <cell>/<cell> to offer)
    fix = (f"pass the folder run gives this job there, --job {path / 'job'}" if path.name == cell else
           f"pass a new or empty folder, e.g. --job {path / cell}")
    if others:
        return (f"--job {job} holds {'other runs or sweeps (' * bool(held)}{', '.join(others[:3])}"
                f"{f' and {len(others) - 3} more' * (len(others) > 3)}{')' * bool(held)}, not a sequential job's "
                f"folder ({RECORD}): {then}; {fix}")
    if (path / "c2st.csv").is_file() and not any((path / m).exists() for m in (".run.lock", ".hydra", "metrics.json")):
        return (f"--job {job} holds a c2st.csv of no job, which this job would delete; pass a new or empty folder, "
                f"e.g. --job {path / cell}, or move it out")
    return None

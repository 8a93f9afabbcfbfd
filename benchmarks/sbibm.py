"""The sbibm benchmark: C2ST per (task, simulation budget) beside sbibm's published numbers.

Two commands (``table`` in two forms):

    # Resumable: one ``launch.py -m experiment=sbibm`` job per (task, budget) under --root,
    # skipping the pairs whose job already finished; extra arguments go to every job. A root of your own:
    # benchmarks/results holds the committed table, which a job there would be added to.
    python benchmarks/sbibm.py run --root runs/sbibm --tasks two_moons slcp --budgets 10000 -- mesh=none

    # The same, sequential: per observation, 2 rounds of truncated proposals (benchmarks/sequential.py), each
    # (task, budget) in its own folder (<task>_<budget>_sequential-2-box-0.5) and its own table row.
    python benchmarks/sbibm.py run --root runs/sbibm --tasks sir --budgets 10000 --rounds 2 \
        --region box --margin 0.5 -- mesh=none

    # The table (markdown + CSV) and the plot from any job folders: a multirun of
    # ``python launch.py -m experiment=sbibm`` or a --root of ``run``.
    python benchmarks/sbibm.py table multirun/2026-11-30/12-00-00 --out runs/sbibm-table

    # The same from the per-observation rows table wrote (sbibm_results.csv), no job folder needed: the
    # committed table and plot are made so. An --out holding another sbibm_results.csv is refused.
    python benchmarks/sbibm.py table --from-results benchmarks/results/sbibm_results.csv --out benchmarks/results

Every job (amortised or sequential; ``sbibm_results.csv`` and ``sbibm_table.csv`` say which in their ``method`` column)
writes ``c2st.csv`` (one row per observation, rewritten as each is scored); ``table`` counts a job only once it ended
``ok`` with a C2ST of each observation it asked, and names every other job on stderr (still running, stopped, failed,
damaged); a (task, budget) with no job counted, or asked of ``run`` and never started, keeps its row saying so; a cell
of fewer than 10 observations is marked with its count; an --out whose ``sbibm_results.csv`` holds rows the folders no
longer make is refused, nothing written. ``run`` checks its extra arguments before any job, continues a job stopped by
a preemption or Ctrl-C, or failed after a checkpoint (not its config), from its checkpoint and, stopped itself (Ctrl-C,
SIGTERM), lets the job under way save a checkpoint first. sbibm's numbers: ``benchmarks/sbibm_published.csv``, whose
header names their source.
"""

from __future__ import annotations

import re
import shlex
import shutil
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# The package of this checkout, as the launch.py it starts imports (its folder comes first on its path),
# not whichever checkout the environment has installed.
sys.path.insert(0, str(REPO))
# Its sibling modules, also when loaded by file (the tests); last, so that they shadow nothing.
sys.path.append(str(REPO / "benchmarks"))

# cli_args first: run by a Python without the dependencies, it ends in one line
from cli_args import Refused, command_line, fit_console, said  # noqa: E402
from gensbi_sharding.harness.override_grammar import hydra_value  # noqa: E402 (after the path above)
from gensbi_sharding.harness.resume_command import holds_checkpoint  # noqa: E402
from sbibm_checks import extra_problem  # noqa: E402
from sbibm_files import read_published  # noqa: E402
from sbibm_args import check_folder, check_root, sbibm_parsers  # noqa: E402
from sbibm_method import Method, job_method, method_from_args, sequential_problem, task_settings  # noqa: E402
# OUTPUTS, row_order: sbibm.py's names before they moved, kept for its readers
from sbibm_tables import (BUDGETS, OUTPUTS, TASKS, parse_results, read_results_file, results_text,  # noqa: E402, F401
                          row_name, row_order, settings_note as note_of, write_tables)
from sbibm_jobs import (ASKED, JobsStopped, failure, job_status, launch, other_settings, read_asked,  # noqa: E402
                        record_asked, running_in, score_said, scores_problem, sweep_never_started)
from sbibm_collect import collect, row_settings  # noqa: E402
from sbibm_outcome import ended, stopped, stopped_between_jobs, unwritable  # noqa: E402
from sbibm_plot import plot  # noqa: E402
PUBLISHED = REPO / "benchmarks" / "sbibm_published.csv"


def run(root: Path, tasks: list[str], budgets: list[int], extra: list[str], grace_s: float = 300.0,
        method: Method = Method()) -> list[str]:
    """Run each missing (task, budget) job of ``method`` in its own process; a failed one is moved aside and retried.

    An amortised job (the default) is ``launch.py``'s, in ``<root>/<task>_<budget>``; a sequential one
    (``method.rounds`` >= 2) is ``benchmarks/sequential.py``'s, in ``<root>/<task>_<budget>_sequential-...``
    (``Method.folder``), so neither kind is ever skipped, continued or moved aside for the other.

    A job stopped by a preemption or Ctrl-C (status ``preempted`` / ``interrupted``), killed after it
    saved a checkpoint (no metrics.json), or failed after it committed one (status ``error``, an error other than
    its config's ``ConfigError``), with the settings asked is continued in its folder from its last
    checkpoint (``train.resume=auto``), not restarted.
    Returns the "task budget" pairs whose job did not end with status ok.
    """
    root.mkdir(parents=True, exist_ok=True)
    record_asked(root, tasks, budgets, method.label)
    failed = []
    for task in dict.fromkeys(tasks):  # a task or budget given twice is one job, run once
        for cell_budget in dict.fromkeys(budgets):
            # "sir 10000", or "sir 10000 (sequential rounds=2 ...)": every line and failure names the kind
            budget = f"{cell_budget}" + (f" ({method.label})" if method.sequential else "")
            job_root = root / method.folder(task, cell_budget)
            metrics = job_root / "job" / "metrics.json"
            # The task's own settings (TASK_SETTINGS, amortised jobs) go first, recorded: a job of others is not done
            own, left = ([], "") if method.sequential else task_settings(task, cell_budget, extra)
            settings = ["experiment=sbibm", f"data={task}", f"data.num_simulations={cell_budget}", *own, *extra]
            status, resume, continuing = job_status(metrics), [], False
            checkpoints = job_root / "job" / "checkpoints"
            if status.startswith("unknown") and checkpoints.is_dir() and any(checkpoints.iterdir()):
                # Killed (SIGKILL, the OOM killer) after it saved a checkpoint (train.checkpoint_every): its steps
                # are continued, as launch.py's train.resume=auto does, not moved aside and trained again.
                status = "killed (no metrics.json; checkpoints kept)"
            # Failed after a committed checkpoint, not refused its config (which fails alike from any step): its
            # steps are continued as launch.py's train.resume=auto continues them (not from step 0: the steps are kept).
            why = failure(metrics, job_root / "launch.log") if status == "error" else ""
            failed_saved = (why and not why.startswith("ConfigError") and not method.sequential
                            and holds_checkpoint(job_root / "job"))
            if (status in ("ok", "preempted", "interrupted") or status.startswith("killed") or failed_saved) \
                    and not running_in(job_root / "job"):
                ran, unread = job_method(job_root / "job")  # an amortised job's folder holding a sequential one
                other = unread or (f"made {ran.label}, asked {method.label}" if ran != method else "") \
                    or other_settings(job_root / "job", settings)
                # (a failed one asked with other settings now: moved aside and run anew, as before)
                if other and not failed_saved:  # its results answer another question: neither reused nor thrown away
                    print(f"{task} {budget}: {'finished' if status == 'ok' else status} with other settings ({other}): "
                          f"not rerun, not counted; pass another --root for these settings, or move {job_root} "
                          "aside to rerun it", flush=True)
                    failed.append(f"{task} {budget} (other settings)")
                    continue
                damaged = status == "ok" and scores_problem(job_root / "job")
                if status == "ok" and not damaged:
                    print(f"{task} {budget}: done, skipped", flush=True)
                    continue
                if damaged:
                    print(f"{task} {budget}: finished, but {damaged}: rerun", flush=True)
                elif method.sequential:  # its rounds keep no checkpoint: started again, the stopped one kept aside
                    print(f"{task} {budget}: {status}: no checkpoint of its rounds; starting it again", flush=True)
                elif not other:  # its checkpoint holds the steps trained so far; stopped before its first, afresh
                    saved = checkpoints.is_dir() and any(checkpoints.iterdir())
                    print(f"{task} {budget}: {f'failed ({why})' if failed_saved else status}: " + (
                          "continuing from its last checkpoint (train.resume=auto; to start it again instead, move "
                          f"{job_root} aside)" if failed_saved else "continuing from its last checkpoint" if saved else
                          "it saved no checkpoint: starting it again in its folder"), flush=True)
                    continuing = True
                    resume = [] if any(a.startswith("train.resume=") for a in extra) else ["train.resume=auto"]
            # A failed or damaged job: keep it aside, start clean. One stopped before it made its folder (Ctrl-C
            # while it started) left only launch.log, which the next start appends to: nothing failed to keep.
            if (job_root / "job").exists() and not continuing:
                busy = running_in(job_root / "job")
                if busy:  # another runner's job: moving it would split its files over two folders
                    print(f"{task} {budget}: skipped, {busy}", flush=True)
                    failed.append(f"{task} {budget}")
                    continue
                aside = job_root.with_name(f"{job_root.name}.failed-{int(time.time())}")
                shutil.move(job_root, aside)  # said, a stopped sequential job's too: a folder moved silently looks lost
                print(f"{task} {budget}: status {status}: its folder kept aside as {aside}; starting it again",
                      flush=True)
            command = ([sys.executable, str(REPO / "benchmarks" / "sequential.py"), "--job", str(job_root / "job"),
                        "--task", task, "--budget", str(cell_budget), "--rounds", str(method.rounds), "--region",
                        method.region, "--margin", repr(float(method.margin)), "--", *extra] if method.sequential else
                       [sys.executable, str(REPO / "launch.py"), "-m", *settings[:3],
                        f"hydra.sweep.dir={hydra_value(job_root)}", "hydra.sweep.subdir=job", *settings[3:], *resume])
            # the interpreter too (pasted, '/.../launch.py -m ...' alone runs nothing); the note its own
            # line: after the command, '# ...' broke a paste into zsh
            print(*[f"{task} {budget}: {line}" for line in (left, shlex.join(map(str, command))) if line],
                  sep="\n", flush=True)
            start = time.perf_counter()
            code, stopped = launch(command, job_root / "launch.log", grace_s, checkpoints=not method.sequential)
            status, why = job_status(metrics), failure(metrics, job_root / "launch.log")
            print(f"{task} {budget}: exit {code} after {time.perf_counter() - start:.0f} s"
                  + (score_said(job_root / "job") if status == "ok" else f", status {status}: {why}"), flush=True)
            if status != "ok":  # an error naming an argument after -- (its fix): rerun as is, it fails alike
                named = [key for key in dict.fromkeys(a.split("=", 1)[0].lstrip("+~") for a in extra if "=" in a)
                         if re.search(rf"(?<![\w.]){re.escape(key)}=", why)]
                failed.append(f"{task} {budget}" + (f" (its error names {', '.join(named)}, given after --)"
                                                    if named else ""))
            if stopped or status == "interrupted":  # Ctrl-C or a signal stops the runner, not only this job
                saved = not method.sequential and checkpoints.is_dir() and any(checkpoints.iterdir())
                raise JobsStopped(f"{task} {budget}", status, stopped or 130, saved)
    return failed


def settings_note(jobs: dict[tuple, Path]) -> str | None:
    """The line under the table naming the settings of the rows of ``jobs`` (``sbibm_tables.settings_note``)."""
    return note_of(row_settings(jobs))


def published() -> tuple[dict[tuple[str, int], dict], str]:
    """sbibm's published C2ST by (task, budget), every row checked (``read_published``), and its source."""
    return read_published(PUBLISHED, TASKS, BUDGETS)


def table(folders: list[Path], out: Path) -> str:
    """Write ``sbibm_results.csv`` (per observation), ``sbibm_table.md/.csv`` and ``sbibm.png`` into ``out``."""
    jobs: dict[tuple, Path] = {}
    left_out: dict[tuple, str] = {}
    cells = collect(folders, jobs, left_out)
    # A (task, budget) whose only job is left out keeps its row, saying why: a row just missing from the
    # published table would read as never run (each such job is also named on stderr, with what to do).
    left_out = {cell: why for cell, why in left_out.items() if cell not in cells}
    for folder in folders:  # and so does one that `run` or a multirun was asked for there but never started
        asked = [(cell, f"asked of sbibm.py run under {record.parent}", "run that command again to run it")
                 for record in sorted(folder.rglob(ASKED)) for cell in read_asked(record)]
        asked += [((task, budget), f"a job of the multirun {sweep}", "its command with train.resume=auto runs it")
                  for task, budget, sweep in sweep_never_started(folder)]
        for cell, where, then in asked:
            if cell not in cells and cell not in left_out:
                left_out[cell] = "not run"
                print(f"not run: {row_name(cell)}, {where}, has no job folder there; {then}", file=sys.stderr)
    if not cells:
        raise Refused(f"no finished job (status ok, with a C2ST of each observation it asked) under "
                         f"{', '.join(map(str, folders))}: run the benchmark first (a job found there is named "
                         "above with why it is left out)")
    # The per-observation rows as sbibm_results.csv holds them, read back as --from-results reads that file:
    # one aggregation for both, so a table rebuilt from the committed csv is the one the job folders made.
    rows, settings, left_out = parse_results(results_text(cells, row_settings(jobs), left_out),
                                             "the rows of the job folders")
    return write_tables(rows, left_out, settings, _published_for_table(), out, plot)


def table_from_results(results: Path, out: Path) -> str:
    """``table`` of the rows of a ``sbibm_results.csv`` (``results``) instead of job folders: the same files
    into ``out``, none of them written when ``out`` holds another ``sbibm_results.csv`` than the rebuilt one."""
    paper, origin = _published_for_table()
    cells, settings, left_out = read_results_file(results, tuple(dict.fromkeys(task for task, _ in paper)))
    return write_tables(cells, left_out, settings, (paper, origin), out, plot, source=results)


def _published_for_table() -> tuple[dict, str]:
    """sbibm's numbers and where they come from, as the table's last line names them."""
    paper, source = published()
    return paper, f"{source} ({PUBLISHED.relative_to(REPO)})"


def main(argv: list[str] | None = None) -> None:
    parser, r, t = sbibm_parsers(__doc__.split("\n\n")[0])
    given = sys.argv[1:] if argv is None else argv
    if given[:1] == ["plot"]:  # argparse's "invalid choice" did not say where the plot comes from
        folders = " ".join(map(shlex.quote, given[1:])) or "<folders>"
        parser.error("there is no plot command: table writes the plot (sbibm.png) beside the table, e.g. "
                     + command_line("benchmarks/sbibm.py", "table", folders))
    args = parser.parse_args(argv)
    args.folders = [*getattr(args, "roots", []), *getattr(args, "folders", [])]  # table --root r, as run took it
    if args.command == "run":
        check_folder(args.root, "--root", may_be_missing=True)
        check_root(args.root)
        method, problem = method_from_args(args.rounds, args.region, args.margin)
        try:  # every job would fail the same way, or run other settings than its folder says (per_task, positional:
            # an amortised job composes its task's own settings too)
            problem = problem or extra_problem(args.extra, args.tasks, args.budgets, None, not method.sequential) \
                or sequential_problem(method, args.tasks, args.budgets, args.extra, BUDGETS)
        except Refused as environment:  # JAX_PLATFORMS=cuda on a CPU machine: argparse's line, not its usage text
            r.exit(2, f"{r.prog}: error: {environment}\n")
        if problem:
            r.error(problem)
        taken = [cell for task in args.tasks for budget in args.budgets  # named, not mkdir's FileExistsError
                 if (cell := args.root / method.folder(task, budget)).exists() and not cell.is_dir()]
        if taken:
            raise Refused(f"--root {args.root}: {taken[0]} is a file, where run keeps the job of that task and "
                             "budget; move it aside, or pass another --root")
        try:
            failed = run(args.root.absolute(), args.tasks, args.budgets, args.extra, grace_s=args.stop_grace,
                         method=method)
        except JobsStopped as stop:
            stopped(stop)
        except KeyboardInterrupt:  # between jobs (none was running): nothing to wait for
            stopped_between_jobs()
        except OSError as err:  # the runner's own writes on a full or read-only disk (named, not a traceback)
            unwritable(err, args.root, method)
        ended(failed, args.root, method)
    elif args.from_results is not None or not args.folders:
        if args.folders or args.from_results is None:  # which rows the table would hold is unclear
            t.error(f"pass job folders ({' '.join(map(str, args.folders))}) or --from-results {args.from_results}, "
                    "not both" if args.folders else "pass the job folders, or --from-results <sbibm_results.csv>")
        out = args.out if args.out is not None else args.from_results.parent
        check_folder(out, "--out", may_be_missing=True)
        print(table_from_results(args.from_results, out), end="")
    else:
        for folder in args.folders:
            check_folder(folder, "a folder argument")
        check_folder(args.out or args.folders[0], "--out" if args.out else "--out (by default the first folder)",
                     may_be_missing=True)
        print(table(args.folders, args.out or args.folders[0]), end="")


if __name__ == "__main__":
    fit_console()  # a console without UTF-8: a path's character escaped, never an UnicodeEncodeError
    said(main)

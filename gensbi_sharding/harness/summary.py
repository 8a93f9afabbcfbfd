"""The multirun summary: one row per job, one column per swept key, then what each job measured.

After ``python launch.py -m ...`` the ``SweepSummary`` Hydra callback reads every job's
``metrics.json`` and Hydra's record of its overrides (``<job>/.hydra/overrides.yaml``; its rows: ``sweep_rows``)
and writes into the sweep folder:

- ``sweep_summary.csv``: exact numbers, units in the column names (``_bytes``, ``_s``, ``_per_s``),
  never in exponent notation;
- ``sweep_summary.md``: the same rows with readable numbers (KB/MB, ms, C2ST ± its spread),
  which is also printed; a dry-run sweep is ranked by memory and by communication;
- ``sweep_summary.png``: the sweep plot (``harness.plots.plot_sweep``).

A key counts as swept when the sweep declared it (``rule=fsdp,tensor``, or
``hydra.sweeper.params`` of a preset) or when its value differs between jobs.
"""

from __future__ import annotations

import csv
import io
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from gensbi_sharding.harness.best_job import best_line
from gensbi_sharding.harness.console_lines import remember_stopped_sweep, summary_refused_line, sweep_end_line
from gensbi_sharding.harness.folder_gone import holds_lock, sweep_gone_note
from gensbi_sharding.harness.outputs import read_record, write_atomic
from gensbi_sharding.harness.processes import hears_process_0, several_processes
from gensbi_sharding.harness.summary_columns import (DRY_RUN_COLUMNS, TRAIN_COLUMNS, Column, key_cell,
                                                      provenance_columns, ranked_heading)
from gensbi_sharding.harness.summary_legend import legend, status_counts
from gensbi_sharding.harness.sweep_plan import (command_overrides, declared_resume, every_job, job_folders, job_order,
                                                sweep_jobs)
from gensbi_sharding.harness.sweep_rows import (NO_RECORD, declared_sweeps, not_run_rows, summary_rows, swept_keys,
                                               unrecorded_rows)
from gensbi_sharding.harness.units import is_number

__all__ = ["Column", "TRAIN_COLUMNS", "DRY_RUN_COLUMNS", "key_cell", "markdown_table", "write_summary",
           "refresh_sweep_summary", "SweepSummary", "continued_sweep_job", "refresh_job_sweep_summary",
           "sweep_end_written", "record_end", "clear_end", "best_said"]

log = logging.getLogger(__name__)
_END: list = []  # what this process's last SweepSummary.on_multirun_end wrote: a Summary, the OSError, or None


def markdown_table(headers: Sequence[str], cells: Sequence[Sequence[str]]) -> str:
    """A markdown table whose columns are padded to one width, so it reads in a terminal too."""
    cells = [[str(c).replace("|", "/").replace("\n", " ") for c in row] for row in cells]
    widths = [max([len(h)] + [len(row[i]) for row in cells]) for i, h in enumerate(headers)]
    line = lambda values: "| " + " | ".join(v.ljust(w) for v, w in zip(values, widths)) + " |"  # noqa: E731
    return "\n".join([line(headers), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
                     + [line(row) for row in cells])


def _table(rows: Sequence[dict[str, Any]], keys: Sequence[str], columns: Sequence[Column]) -> str:
    shown = [c for c in columns if c.title and (not c.optional or any(c.text(r["metrics"]) for r in rows))]
    # A measured column titled as a swept key (mesh=none,auto beside the mesh's shape) is named as in the CSV.
    headers = ["job", *keys, *(c.name if c.title in keys else c.title for c in shown)]
    cells = [[row["job"], *(key_cell(row, k) for k in keys), *(c.text(row["metrics"]) for c in shown)]
             for row in rows]
    return markdown_table(headers, cells)


def _ranked(rows: Sequence[dict[str, Any]], key: str) -> list[dict[str, Any]]:
    """Completed jobs by ``key``, smallest first, those whose model axis is idle after them; failed jobs last."""
    def rank(row):
        value, idle = row["metrics"].get(key), bool(row["metrics"].get("model_axis_idle"))
        return (row["metrics"].get("status") != "ok", idle, not is_number(value), value if is_number(value) else 0)
    return sorted(rows, key=rank)


@dataclass(frozen=True)
class Summary:
    """What ``write_summary`` wrote and the text it printed."""

    keys: list[str]
    rows: list[dict[str, Any]]
    text: str
    csv_path: Path
    md_path: Path
    png_path: Path | None
    legend: str = ""  # what the numbers measured, printed under the table (summary_legend)


def write_summary(sweep_dir: Path, declared: Sequence[str] = (), all_jobs: Sequence[Sequence[str]] = (),
                  folders: Sequence[str] | None = None) -> Summary | None:
    """Write ``sweep_summary.csv/.md/.png`` for the jobs under ``sweep_dir``; None if there are none.

    ``all_jobs`` (``sweep_plan.sweep_jobs``): every job the sweep declared; those that never
    started get a ``not run`` row, named by its folder in ``folders`` (``sweep_plan.job_folders``); those that
    started and left no ``metrics.json`` a ``no record`` row (``sweep_rows.unrecorded_rows``).
    """
    sweep_dir = Path(sweep_dir)
    rows = summary_rows(sweep_dir) + unrecorded_rows(sweep_dir, folders)  # a job started without a record: ran
    if not rows:
        return None
    order = job_order(folders)  # by job number: a job not run may sit between others
    rows = sorted(rows + not_run_rows(rows, all_jobs, folders), key=lambda row: order(row["job"]))
    for row in rows:  # -m train.resume=<a>,<b>: which run each job continued, else the rows read alike
        row["overrides"].update(declared_resume(all_jobs, folders, row["job"], declared, sweep_dir))
    keys = swept_keys(rows, declared)
    known = [row for row in rows if row["metrics"].get("status") not in ("not run", NO_RECORD)]  # what each job was
    dry = bool(known) and all(row["dry_run"] for row in known)
    columns = DRY_RUN_COLUMNS if dry else TRAIN_COLUMNS
    # status and error stay the last two columns, as before the provenance columns (read by position from the end)
    csv_columns = [*columns[:-2], *provenance_columns(keys, rows), *columns[-2:]]  # none repeating a swept key
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(["job", *keys, *(c.name for c in csv_columns)])
    for row in rows:
        writer.writerow([row["job"], *(key_cell(row, k) for k in keys),
                         *(c.exact(row["metrics"]) for c in csv_columns)])
    csv_path = write_atomic(sweep_dir / "sweep_summary.csv", buffer.getvalue())
    if dry:  # a dry-run sweep is for choosing: rank the configurations
        text = "\n\n".join(ranked_heading(title, rows) + _table(_ranked(rows, key), keys, columns)
                           for key, title in (("step_memory_bytes_per_device", "memory per device"),
                                              ("collective_bytes_per_step", "bytes of collectives per step")))
    else:
        text = _table(rows, keys, columns)
    md_path = write_atomic(sweep_dir / "sweep_summary.md", text + "\n")
    png_path = None
    try:
        from gensbi_sharding.harness.plots import plot_sweep

        png_path = plot_sweep(rows, keys, sweep_dir / "sweep_summary.png", dry_run=dry)
    except Exception as err:  # a plot must never cost the table
        log.warning("sweep plot not written: %s: %s", type(err).__name__, err)
    # what the numbers measured (state or step, compile in or out, batch, units): the console's, not the .md's table
    # (the batch sizes of the jobs that measured a step: a failed job's would name a batch no number was measured at)
    return Summary(keys, rows, text, csv_path, md_path, png_path,
                   legend([r for r in known if r["metrics"].get("status") == "ok"] or known, dry))


def refresh_sweep_summary(job_dir: Path) -> Summary | None:
    """Rebuild the summary of the sweep ``job_dir`` belongs to, after that job ran on its own.

    An unfinished job of a sweep is continued alone, in its own folder (the command
    ``sweep_hints.unfinished_jobs_hint`` prints); without this the sweep's table and plot would
    still show it preempted or failed. The swept keys are those the sweep declared (Hydra's
    ``multirun.yaml`` in the sweep folder).

    Parameters
    ----------
    job_dir : pathlib.Path
        The folder of the job that just ran.

    Returns
    -------
    Summary or None
        The rewritten summary; None when ``job_dir``'s parent is not a sweep folder
        (no ``multirun.yaml``) or holds no job metrics.
    """
    sweep_dir = Path(job_dir).absolute().parent
    saved = read_record(sweep_dir / "multirun.yaml")
    if not OmegaConf.is_dict(saved):  # no sweep folder, or its record damaged
        return None
    task, params = command_overrides(saved)
    declared, jobs = declared_sweeps(list(task or []), params), sweep_jobs(list(task or []), params)
    return write_summary(sweep_dir, declared, all_jobs=jobs, folders=job_folders(saved, jobs))


class SweepSummary(Callback):
    """Hydra callback: after a multirun, the summary table (printed) and its csv, md and png, then one
    line with the sweep's outcome (``console_lines.sweep_end_line``), as a single run ends with its own."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        self._started = time.monotonic()
        # folder_claim's callback, listed first, claimed the folder just now: its lock file, gone at the end, says the
        # folder was deleted or moved meanwhile (a callback that never saw the claim says nothing of it)
        self._claimed = holds_lock(Path(config.hydra.sweep.dir).absolute())

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        if hears_process_0(config):  # process 0 prints and writes it (not each process, on a shared disk)
            # but each says a folder moved mid-sweep in its exit code (sweep_lost: 1): process 1 exited 0 as 0 exited 1
            sweep_gone_note(Path(config.hydra.sweep.dir).absolute(), getattr(self, "_claimed", False))
            return
        record_end(None)
        sweep_dir = Path(config.hydra.sweep.dir).absolute()
        declared = declared_sweeps(*command_overrides(config))
        # A job that ended without a record (refused its folder before run() could write one) is a row too, 'not
        # run' (left out, the sweep would say "done: 1 ok, 0 failed" as it exits 1)
        try:
            if several_processes(config):  # the others' Hydra saved theirs too (their process_id), at any time before
                write_atomic(sweep_dir / "multirun.yaml", OmegaConf.to_yaml(config))  # its jobs: process 0's, last
            summary = write_summary(sweep_dir, declared, all_jobs=(jobs := every_job(config)),
                                    folders=job_folders(config, jobs))
        except OSError as err:  # a full or read-only disk: named, each job's outcome kept, no Hydra warning
            record_end(err)
            summary_refused_line(sweep_dir, err)
            return
        record_end(summary)
        if summary is None:
            log.warning("multirun finished with no job metrics under %s", sweep_dir)
            return
        statuses = [row["metrics"].get("status") for row in summary.rows]
        started = getattr(self, "_started", None)
        jobs = f"{len(summary.rows)} job{'s' * (len(summary.rows) != 1)}{status_counts(statuses)}"
        wall_s = None if started is None else time.monotonic() - started
        print(f"\nSweep summary ({jobs}), as in {summary.md_path.name}:\n{summary.text}\n{summary.legend}\n"
              + best_said(summary.rows)
              + sweep_end_line(statuses, wall_s, sweep_dir, summary.png_path is not None)
              + sweep_gone_note(sweep_dir, getattr(self, "_claimed", False)), flush=True)


def best_said(rows: list[dict]) -> str:
    """The line under the table a training sweep prints: which job scored best (the table said none, nor by what).

    Parameters
    ----------
    rows : list of dict
        The summary's rows (``SweepSummary.rows``: ``job``, ``metrics``).

    Returns
    -------
    str
        ``best_job.best_line(rows)`` and a newline, e.g. ``"best: job 2, C2ST 0.952\n"``; ``""`` where no job can be
        ranked (a dry run's, a sweep over tasks, no score).
    """
    return f"{line}\n" if (line := best_line(rows)) else ""


def sweep_end_written() -> list:
    """What this process's sweep wrote at its end (``SweepSummary.on_multirun_end``): ``[]`` where it did not write
    (no sweep ended here, or another process writes it), else one item: the ``Summary``, the ``OSError`` that
    refused it (its line printed) or None (no job left a record).

    Returns
    -------
    list
    """
    return list(_END)


def record_end(item: Summary | OSError | None) -> None:
    """Record what this process's sweep wrote at its end, as ``sweep_end_written`` then returns it.

    Parameters
    ----------
    item : Summary or OSError or None
        The ``Summary`` written, the ``OSError`` that refused it, or None (no job left a record).
    """
    _END[:] = [item]


def clear_end() -> None:
    """Forget the sweep's end: ``sweep_end_written`` returns ``[]``, as before any sweep ended in this process."""
    _END[:] = []


def continued_sweep_job() -> bool:
    """Whether this is a single run (Hydra's run mode), not a job of a running multirun.

    A running multirun's summary is written by Hydra's callback at its end.

    Returns
    -------
    bool
        True under Hydra's run mode (e.g. a sweep's job continued alone with ``hydra.run.dir``).
    """
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    return HydraConfig.initialized() and HydraConfig.get().mode == RunMode.RUN


def refresh_job_sweep_summary(out: Path) -> None:
    """Rebuild the summary of the sweep folder that holds the job folder ``out``, never raising.

    Parameters
    ----------
    out : Path
        The job's folder; its parent is the sweep folder. A failure is logged as a warning:
        the run's own files are written already.
    """
    try:
        summary = refresh_sweep_summary(out)
    except Exception as err:  # the run's own files are written; an index must never cost them
        log.warning("sweep summary of %s not rebuilt: %s: %s", out.parent, type(err).__name__, err)
        return
    if summary is not None:
        log.info("sweep summary rebuilt with this job's result: %s", summary.csv_path)
        if not continued_sweep_job():  # this job stopped a running sweep: launch.py ends the console with it
            remember_stopped_sweep(sweep_end_line([row["metrics"].get("status") for row in summary.rows], None,
                                                  out.absolute().parent, summary.png_path is not None))

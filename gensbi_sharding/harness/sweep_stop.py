"""The console lines of a sweep stopped between two of its jobs (a preemption signal held until a job ended, a Ctrl-C
there, or a disk too full for the next job's Hydra files): what happened, how to continue, and the sweep's outcome,
its summary rebuilt for the jobs so far.

Above ``summary`` (the summary it rebuilds) and ``sweep_continue`` (the continue hint): ``sweep_continue`` holding
it reached ``summary`` and, through it, every check the folder's verdict reads (an import cycle). The summary is
read through its module, as the function-level import there did at each call, so a stand-in for
``summary.refresh_sweep_summary`` (a test's Ctrl-C as the summary is written) is the one called.
"""

from __future__ import annotations

import signal
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gensbi_sharding.harness import summary
from gensbi_sharding.harness.console_lines import sweep_end_line
from gensbi_sharding.harness.sweep_continue import whole_sweep_hint

__all__ = ["stopped_between_jobs"]


def stopped_between_jobs(next_dir: Any, signum: int | None, ended: int, argv: Sequence[str], *,
                         made: bool = True) -> list[str]:
    """The console lines of a sweep a preemption signal or Ctrl-C stopped between two of its jobs, the next not started.

    A signal after a job ended (held by ``signal_hold`` until then) is the sweep's preemption: the next job is not
    started (it would only record ``status: preempted`` for a stop it never saw). The sweep's summary is
    written for the jobs so far, the next one and those after it ``not run``; so it is for a Ctrl-C there (Hydra's
    end-of-sweep summary never comes, and the sweep's files would still hold the jobs of an earlier run of it).

    Parameters
    ----------
    next_dir : path-like
        The folder Hydra made for the job that does not start, ``<sweep>/<job>``; or, ``made`` False (a Ctrl-C
        before Hydra made that folder), the folder of the job that ended last.
    signum : int or None
        The signal received; None for Ctrl-C.
    ended : int
        How many of the sweep's jobs this process ran, each recorded in its folder's ``metrics.json``.
    argv : sequence of str
        ``sys.argv`` of the command that started the sweep.
    made : bool, optional
        Whether ``next_dir`` is the next job's folder.

    Returns
    -------
    list of str
        What happened, how to continue (``whole_sweep_hint``) and the sweep's outcome line, in that order.
    """
    next_dir = Path(next_dir).absolute()
    stop = "interrupted by Ctrl-C" if signum is None else f"preempted by {signal.Signals(signum).name}"
    lines = [f"{stop} between the sweep's jobs: {ended} job(s) ended, each recorded in its folder's metrics.json; "
             + (f"job {next_dir.name} and those after it did not start" if made else "no later job started")]
    if hint := whole_sweep_hint(next_dir, argv, started=False):
        lines.append(hint)
    try:
        written = summary.refresh_sweep_summary(next_dir)
    except Exception as err:  # the jobs' own records are written; an index must never cost the stop its exit code
        written = None
        lines.append(f"sweep summary of {next_dir.parent} not rebuilt: {type(err).__name__}: {err}")
    if written is not None:
        lines.append(sweep_end_line([row["metrics"].get("status") for row in written.rows], None, next_dir.parent,
                                    written.png_path is not None))
    return lines

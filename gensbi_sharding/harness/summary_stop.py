"""The lines of a sweep told to stop (a preemption signal, Ctrl-C) after its last job ended, as its summary was written.

``launch.py`` holds SIGTERM, SIGUSR1 and SIGUSR2 outside a run (``signal_hold``): one that comes after a sweep's last
job ended, while Hydra's ``SweepSummary`` callback writes the summary table and plot, is held until the summary is
written (each file whole, under a temporary name then renamed) and was then forgotten: the sweep exited 0 with no
word, as if no notice had come. It is now answered as a preemption is: these lines, then exit 75 (130 for a Ctrl-C
the last job finished before answering, ``signal_hold.stop_after_run``); 0 where every job completed and the summary
is complete, as a completed run's exit is: a requeue would only be refused.
"""

from __future__ import annotations

import signal
from collections.abc import Sequence
from pathlib import Path

from gensbi_sharding.harness.summary import Summary, sweep_end_written

__all__ = ["summary_stop_lines"]


def summary_stop_lines(last_job: Path, signum: int, argv: Sequence[str], *,
                       rewrite: bool = False) -> tuple[list[str], bool]:
    """What a sweep stopped by ``signum`` at its end says: that every job ended, whether the summary is complete
    (or not written, and why), and what is left to run with its command (nothing, when every job completed).

    Parameters
    ----------
    last_job : pathlib.Path
        The folder of the sweep's last job, ``<sweep>/<job>``.
    signum : int
        The signal held (``signal.SIGINT`` for a Ctrl-C).
    argv : sequence of str
        ``sys.argv`` of the command that started the sweep.
    rewrite : bool, optional
        Write the summary again first: a Ctrl-C (``KeyboardInterrupt``) cut its writing short, the plot say.

    Returns
    -------
    lines : list of str
        The stop line, then the command that continues the sweep's unfinished jobs, if any.
    finished : bool
        Every job completed and the summary is complete: nothing is left for a requeue to do (which would be
        refused: "all jobs complete"), so a preemption notice ends it 0, as a completed run's does.
    """
    from gensbi_sharding.harness.outputs import read_metrics
    from gensbi_sharding.harness.sweep_continue import whole_sweep_hint

    sweep = Path(last_job).absolute().parent
    stop = "interrupted by Ctrl-C" if signum == signal.SIGINT else f"preempted by {signal.Signals(signum).name}"
    written = (sweep_end_written() or [None])[0]
    if rewrite:
        from gensbi_sharding.harness.summary import refresh_sweep_summary

        try:
            written = refresh_sweep_summary(Path(last_job))
        except KeyboardInterrupt:  # Ctrl-C again: what is there is named as such
            written = "cut short"
        except OSError as err:
            written = err
    if isinstance(written, Summary):
        files = "sweep_summary.csv/.md" + ("/.png" if written.png_path is not None else "")
        summary = f"the sweep's summary is complete ({files} in {sweep})"
        statuses = [row["metrics"].get("status") for row in written.rows]
    else:
        summary = ("the sweep's summary is not written (the error above says why and the command that writes it)"
                   if isinstance(written, OSError) and not rewrite else
                   f"the sweep's summary is not rewritten ({written}); {rewrite_command(sweep)}"
                   if rewrite and written is not None else f"no sweep summary was written in {sweep}")
        statuses = []
        for record in sorted(sweep.glob("*/metrics.json")):
            try:
                statuses.append(read_metrics(record).get("status"))
            except (OSError, ValueError, AttributeError):  # a damaged record: not a completed job
                statuses.append(None)
    done = bool(statuses) and all(status == "ok" for status in statuses)
    jobs = f"{len(statuses)} job{'s' * (len(statuses) != 1)}" if statuses else "jobs"
    lines = [f"{stop} at the sweep's end, after its last job: its {jobs} ended, each "
             f"recorded in its folder's metrics.json; {summary}; "
             + ("every job completed, so nothing is left to run" if done else "not every job completed")]
    if not done and (hint := whole_sweep_hint(Path(last_job).absolute(), argv, started=False)):
        lines.append(hint)
    return lines, done and isinstance(written, Summary)


def rewrite_command(sweep: Path) -> str:
    """"write it with: python -c '...'": the command that writes the summary of the sweep in ``sweep`` again."""
    import json
    import shlex

    jobs = sorted(Path(sweep).glob("*/metrics.json"))
    code = ("from gensbi_sharding.harness.summary import refresh_sweep_summary as again; "
            f"again({json.dumps(str(jobs[0].parent) if jobs else str(sweep), ensure_ascii=False)})")
    return f"write it with: python -c {shlex.quote(code)}"

"""What ``benchmarks/sbibm.py run`` says as it ends: stopped (and what the stopped job keeps), failed (and how to
retry), or every job done (and the command that makes their table)."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import NoReturn

from cli_args import command_line, not_a_script
from gensbi_sharding.harness.outputs import MAKE_ROOM
from sbibm_jobs import JobsStopped
from sbibm_method import Method
not_a_script(__name__, __file__)  # run as a script: name the one to run


def stopped(stop: JobsStopped) -> NoReturn:
    """Say which job a signal stopped and what running the command again does; exit with the runner's code."""
    job, status, code, saved = stop.args
    # Only a job that saved a checkpoint is continued: one stopped while it started, or before its first step
    # (status preempted, "nothing trained: no checkpoint to save"), saved nothing: "starts again".
    then = ("continues that job from its last checkpoint" if saved else
            "starts that job again (it had saved no checkpoint)")
    print(f"stopped {'by Ctrl-C' if code == 130 else 'by a signal'} during {job} (status {status}); run the "
          f"same command again: it {then}, then runs the jobs not started", file=sys.stderr)
    raise SystemExit(code) from None


def stopped_between_jobs() -> NoReturn:
    """Say that Ctrl-C came between jobs (none was running: nothing to wait for); exit 130."""
    print("stopped by Ctrl-C between jobs; run the same command again to run the jobs not finished",
          file=sys.stderr)
    raise SystemExit(130) from None


def unwritable(err: OSError, root: Path, method: Method) -> NoReturn:
    """Name the runner's own write a full or read-only disk refused, and what is kept; exit 1."""
    raise SystemExit(f"{err.filename or root} could not be written ({err.strerror or err}): the jobs that "
                     f"finished are kept in their folders under {root}; {MAKE_ROOM}, then run the "
                     "same command again: it skips the finished jobs and " + (  # (a sequential job keeps
                     "starts the stopped ones again" if method.sequential else  # no checkpoint to continue)
                     "continues the stopped ones")) from None


def ended(failed: list[str], root: Path, method: Method) -> None:
    """Exit 1 naming the jobs of ``failed`` (those that ran with other settings first) and how to retry them, or say
    that every job is done, with the command that makes their table and plot."""
    other = [f for f in failed if f.endswith("(other settings)")]
    if other:  # rerunning the same command would change nothing for these
        raise SystemExit(f"{len(other)} job(s) finished with other settings than asked: {', '.join(other)} (each "
                         "named above with the settings that differ); pass another --root for these settings, or "
                         "move those jobs aside" + (f"; {len(failed) - len(other)} other job(s) failed (each job's "
                                                    "launch.log says why)" if len(failed) > len(other) else ""))
    if failed:  # the others ran; rerunning `run` retries exactly these
        retry = ("change the arguments after -- that those errors name, as they say (as they are, those jobs fail "
                 "alike), and run the command again" if any(f.endswith("given after --)") for f in failed) else
                 "run the same command again")
        raise SystemExit(f"{len(failed)} job(s) failed: {', '.join(failed)} (each named above with its error; its "
                         f"launch.log has the rest); {retry} to retry them (" + (  # sequential: not "continued"
                         "a failed or stopped job is moved aside and started again: its rounds keep no checkpoint)"
                         if method.sequential else "a failed job is moved aside and rerun, a stopped one continued)"))
    # Said, not ended on a job's exit code; on stderr, as the runner's other advice (stdout: a line per job)
    print("every job done; their table and plot: " + command_line("benchmarks/sbibm.py", "table",
          shlex.quote(str(root))), file=sys.stderr)

"""What the processes of a ``distributed=local`` job ended with: each one's refusal or last error, read from its
``process_<i>.log``, so that their parent says it once for all of them."""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path

from gensbi_sharding.harness.processes import LOCAL_CHILD_ENV

__all__ = ["refusals", "common_refusal", "child_refusal", "stuck_errors"]

# A process's refusal in its process_<i>.log: "[<time>][gensbi_sharding][ERROR] - [process 1/2] ConfigError: ..."
_REFUSAL = re.compile(r"\]\[ERROR\] - (?:\[process \d+/\d+\] )?(ConfigError: .*)$", re.M)
# An error in a process_<i>.log: a traceback's last line ("PermissionError: [Errno 1] ..."), as a background thread
# (Orbax's save) logs it.
_ERROR = re.compile(r"^(\w*(?:Error|Exception): .*)$", re.M)


def refusals(out: Path, codes: list[int], reported: str | None) -> dict[int, str]:
    """Rank -> the ``ConfigError`` each failed process of a ``distributed=local`` job ended with: process 0's as its
    metrics report it, the others' from their ``process_<i>.log`` (their consoles keep it off: the parent says it
    once, ``child_refusal``). A process killed, or ended by another error, is not listed.

    Parameters
    ----------
    out : pathlib.Path
        The job's folder.
    codes : list of int
        The processes' exit codes, by rank.
    reported : str or None
        The error process 0 recorded in ``metrics.json``.
    """
    found = {}
    for rank, code in enumerate(codes):
        if code in (0, None) or code < 0:
            continue
        # Each rank's own: a failed process with no log (its output went to the console) refused nothing (not the
        # rank before's refusal as its own).
        text = reported if rank == 0 and (reported or "").startswith("ConfigError: ") else None
        if rank:
            with contextlib.suppress(OSError):
                text = (_REFUSAL.findall((out / f"process_{rank}.log").read_text(errors="replace")) or [None])[-1]
        if text:
            found[rank] = text
    return found


def common_refusal(found: dict[int, str], codes: list[int]) -> str | None:
    """The one refusal of a job whose every failed process refused it alike (``refusals``), process 0's text; else
    None. Alike up to their figures: a measured one (the memory available) differs between processes.

    Parameters
    ----------
    found : dict of int to str
        ``refusals``' rank -> ``ConfigError`` text.
    codes : list of int
        The processes' exit codes, by rank.
    """
    failed = {rank for rank, code in enumerate(codes) if code}
    alike = len({re.sub(r"\d+(\.\d+)?", "#", text) for text in found.values()}) == 1
    return found[min(found)] if found and set(found) == failed and alike else None


def child_refusal(err: BaseException) -> dict[str, bool]:
    """``extra=`` of a job's last error line: a refusal (``ConfigError``) in a ``distributed=local`` process goes to
    its ``process_<i>.log`` only, for the parent reports it once for all of them (it came once per process and once
    from the parent). Other errors, and every error of a job of one process, reach the console.

    Parameters
    ----------
    err : BaseException
        What ended the job.
    """
    return {"parent_reports": bool(os.environ.get(LOCAL_CHILD_ENV)) and type(err).__name__ == "ConfigError"}


def stuck_errors(out: Path, processes: int) -> str:
    """What the processes of a job the run bound killed logged last as an error: why they never reached a step.

    Named beside "local processes killed after distributed.run_timeout_s=240 s", which alone reads as a slow run
    where a save failed on process 0 (its checkpoint folder turned read-only) and left every process waiting in
    Orbax's barriers for it.

    Parameters
    ----------
    out : pathlib.Path
        The job's folder (``process_<i>.log``).
    processes : int
        How many processes the job had.

    Returns
    -------
    str
        ``"; they were stuck, not slow: process 0 logged PermissionError: ..."``; "" where none logged an error.
    """
    found = []
    for rank in range(processes):
        with contextlib.suppress(OSError):
            if errors := _ERROR.findall((out / f"process_{rank}.log").read_text(errors="replace")):
                found.append(f"process {rank} logged {errors[-1].strip()}")
    return f"; they were stuck, not slow: {'; '.join(found)}" if found else ""

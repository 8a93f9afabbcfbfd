"""A failed job's recorded error, read for a sweep's refusal: ``error_cause`` (up to the commands it names, and a note
where the job's weights failed their evaluation, ``FAILED_WEIGHTS``).

Below ``weights_failure`` (which writes that error, and re-exports both) and ``sweep_retyped`` (which reads it), so
that ``sweep_retyped`` no longer imports ``weights_failure``, whose hint imports ``sweep_hints``, which imports it.
Pure Python: no JAX.
"""

from __future__ import annotations

import re

__all__ = ["FAILED_WEIGHTS", "error_cause"]

#: What ``weights_failure_hint`` says of the checkpoint (``sweep_hints`` reads a job's error up to it: its cause).
FAILED_WEIGHTS = "holds the weights that failed"


def error_cause(error: str) -> tuple[str, str]:
    """A failed job's recorded ``error`` up to the commands it names, and the note a refused sweep gives that job.

    Parameters
    ----------
    error : str
        The job's ``metrics.json`` error.

    Returns
    -------
    (str, str)
        The cause (before "continue with:" or ``FAILED_WEIGHTS``); for a failure of its weights, a note that its
        command would fail alike and where the commands that get past it are, else "".
    """
    cause = re.split(f"continue with:|{FAILED_WEIGHTS}", error)[0]
    return cause, (" (its weights failed its evaluation, and would again: its metrics.json's error names the commands "
                   "that get past it)" if FAILED_WEIGHTS in error else "")

"""A failed job's recorded error, read for a sweep's refusal: ``error_cause`` (up to the command it names, and a note
where the job's weights failed their evaluation, ``FAILED_WEIGHTS``).

Below ``weights_failure`` (which writes that error, and re-exports ``FAILED_WEIGHTS``) and ``sweep_retyped`` (which
reads it), so that ``sweep_retyped`` no longer imports ``weights_failure``, whose hint imports ``sweep_hints``, which
imports it.
Pure Python: no JAX; ``continue_field`` (which imports nothing) its one import.
"""

from __future__ import annotations

from typing import Any

from gensbi_sharding.harness.continue_field import continue_of

__all__ = ["FAILED_WEIGHTS", "error_cause"]

#: What ``weights_failure_hint`` says of the checkpoint (``sweep_hints`` reads a job's error up to it: its cause).
FAILED_WEIGHTS = "holds the weights that failed"


def error_cause(record: dict[str, Any]) -> tuple[str, str]:
    """A failed job's recorded error up to the command it names, and the note a refused sweep gives that job.

    Parameters
    ----------
    record : dict
        The job's ``metrics.json``.

    Returns
    -------
    (str, str)
        The cause: its ``error`` before the words that lead to the command ``continue_field.continue_of`` reads
        (the last "; " before it: "; once that is fixed, continue with: ", "; ... run it again with: "), and before
        ``FAILED_WEIGHTS``; for a failure of its weights, a note that its command would fail alike and where the
        commands that get past it are, else "".
    """
    error = str(record.get("error") or "")
    # Cut where the command is, not at a wording of it: "run it again with: <command>" (a full disk, no checkpoint)
    # was read as the cause, so every override the command repeats counted as named by the error.
    cause = error
    if (command := continue_of(record)) and (at := error.rfind(command)) >= 0:
        lead = error.rfind("; ", 0, at)  # where the words leading to the command start
        cause = error[:lead if lead >= 0 else at]
    return cause.split(FAILED_WEIGHTS)[0], (
        " (its weights failed its evaluation, and would again: its metrics.json's error names the commands that get "
        "past it)" if FAILED_WEIGHTS in error else "")

"""The command that continues a stopped or failed run, as its ``metrics.json`` holds it: a value of its own.

sample.py's warnings and the sweep table found it by cutting the run's ``error`` at "continue with: ", text any
rewording of a stop's line broke without an error. Its writers (``run.record_stop``, ``stop_record``,
``stop_watchdog``) now set ``CONTINUE_FIELD`` beside the error that words it. Imports nothing: every reader may.
"""

from __future__ import annotations

from typing import Any

__all__ = ["CONTINUE_FIELD", "continue_of"]

#: ``metrics.json``'s field holding the command that continues the run (None: none does).
CONTINUE_FIELD = "continue_with"


def continue_of(record: dict[str, Any]) -> str:
    """The command that continues the run ``record`` (its ``metrics.json``) records; "" where none does.

    Parameters
    ----------
    record : dict
        A run's ``metrics.json``.

    Returns
    -------
    str
        Its ``CONTINUE_FIELD`` ("" where that is null); where the record has no such field, the command its error
        words after "continue with: ": a record of a version before the field (folders already on disk:
        test_own_observation and test_sample_unfinished_r73a pin it), or a ``distributed=local`` parent's line added
        to process 0's record.
    """
    if CONTINUE_FIELD in record:  # its writer's word, null included (none continues it): the text is not read
        return str(record[CONTINUE_FIELD] or "")
    return str(record.get("error") or "").partition("continue with: ")[2].strip()

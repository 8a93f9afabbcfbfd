"""Which signal stopped a ``distributed=local`` job: the one its parent received, not the one passed on.

The parent passes every stop on to its processes as SIGTERM (a second SIGINT would read as
a second Ctrl-C), and in them JAX's preemption service takes SIGTERM, so they saw only "a
preemption notice" even when the user pressed Ctrl-C. The parent writes the signal it
received into a file named by ``PARENT_SIGNAL_ENV`` before passing it on; the processes
word their stop by it.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Mapping
from pathlib import Path

__all__ = ["PARENT_SIGNAL_ENV", "record_parent_signal", "stop_signal"]

#: Set by ``distributed=local``'s parent for its processes: the file it writes the signal it received into.
PARENT_SIGNAL_ENV = "GENSBI_SHARDING_PARENT_SIGNAL_FILE"


def record_parent_signal(path: str | os.PathLike, signum: int) -> None:
    """In the parent, before passing ``signum`` on: write it where the processes read it (the first one stays)."""
    target = Path(path)
    if not target.read_text().strip():
        target.write_text(str(int(signum)))


def stop_signal(signum: int | None, environ: Mapping[str, str] | None = None) -> int | None:
    """The signal that stopped this process, as its user sent it.

    Parameters
    ----------
    signum : int or None
        The signal this process received (None: JAX's preemption service received it).
    environ : mapping, optional
        The environment (``os.environ``); in a ``distributed=local`` process it names the
        file of the parent's signal (``PARENT_SIGNAL_ENV``).

    Returns
    -------
    int or None
        SIGINT when this process or its parent got Ctrl-C; else the parent's signal when
        it recorded one, else ``signum``.
    """
    environ = os.environ if environ is None else environ
    path = environ.get(PARENT_SIGNAL_ENV)
    try:
        recorded = Path(path).read_text().strip() if path else ""
    except OSError:  # the parent is gone (it removes the file when its processes end)
        recorded = ""
    if signum == signal.SIGINT or not recorded:  # a terminal's Ctrl-C reaches the processes themselves too
        return signum
    return int(recorded)

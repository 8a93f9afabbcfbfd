"""Whether a sweep of several processes per job goes on to its next job: process 0's word, told to every process.

Between two jobs launch.py checks the next one (room for Hydra's files on the disk: ``hydra_room``). Process 0 checks,
and every process JAX joins hears its verdict before any of them starts the next job, so all stop at once, with the
same words and exit code: were process 0 to stop alone, the others would start the next job and die on the
coordinator process 0 took with it (JAX's shutdown barrier: an abort, exit 134).
"""

from __future__ import annotations

import sys
from collections.abc import Callable

__all__ = ["next_job_verdict"]


def next_job_verdict(check: Callable[[], list[str] | None]) -> list[str] | None:
    """``check()`` run by process 0, its first line told to every process JAX joins (a collective: every process of a
    multi-process sweep calls it after each job); without JAX joining several processes, ``check()`` alone.

    Parameters
    ----------
    check : callable
        Returns the lines that stop the sweep before its next job (the refusal first), or None where it goes on.

    Returns
    -------
    list of str or None
        Process 0's lines (its summary and continue command included); on another process, the refusal's line alone;
        None where the sweep goes on.
    """
    jax = sys.modules.get("jax")  # not imported: no job joined JAX (e.g. distributed=local's parent)
    if jax is None or not jax.distributed.is_initialized() or jax.process_count() < 2:
        return check()
    from gensbi_sharding.harness.folder_verdict import told_by_process_0

    first = jax.process_index() == 0
    lines = check() if first else None
    _, heard = told_by_process_0([], lines[0] if lines else "")
    if first or not heard:
        return lines
    return [heard]

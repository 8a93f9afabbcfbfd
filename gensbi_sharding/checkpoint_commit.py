"""An async checkpoint save's commit across JAX processes: a bounded wait for it, and the error naming a failed one.

Orbax commits a step on process 0 (renaming its temporary folder) while the other processes wait at a barrier. A
commit that fails there (the folder turned read-only) never reaches that barrier: the others waited out Orbax's
whole save timeout (20 minutes) and the job hung. ``commit_barrier`` bounds that one wait; ``failed_save`` is the
error ``CheckpointWriter`` raises at its next save, ``steps`` or ``close``, on every process."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import orbax.checkpoint as ocp

from gensbi_sharding.checkpoint_steps import committed_steps

__all__ = ["commit_barrier", "failed_save"]

# The key of Orbax's barrier after process 0's commit (its async checkpointer's), passed to its public
# ``AsyncOptions.barrier_sync_fn``. Only this barrier gets the short bound: the one before it waits for every
# process's writes, which may take long for a large state. Should Orbax rename it, Orbax's own timeout applies.
_COMMIT_BARRIER = "async_commit_complete"


def commit_barrier(timeout_s: float) -> Callable[..., None]:
    """Orbax's barrier between processes, its wait for process 0's commit bounded by ``timeout_s`` seconds.

    Parameters
    ----------
    timeout_s : float
        The longest wait for process 0's commit (a rename), > 0; Orbax's own timeout bounds every other wait.

    Returns
    -------
    callable
        A ``barrier_sync_fn(*, key, timeout_ms)`` for ``orbax.checkpoint.AsyncOptions`` (a no-op in one process).
    """
    sync = ocp.multihost.get_barrier_sync_fn()

    def barrier(*, key: str, timeout_ms: int) -> None:
        if _COMMIT_BARRIER in key:
            timeout_ms = min(timeout_ms, max(1, int(timeout_s * 1000)))
        sync(key=key, timeout_ms=timeout_ms)

    return barrier


def failed_save(err: BaseException, step: int | None, directory: Path, timeout_s: float) -> RuntimeError:
    """The error for a save of ``step`` in ``directory`` that raised ``err``: what happened, where, the fix.

    Parameters
    ----------
    err : BaseException
        What Orbax's save (``async_save=False``) or its wait for the save raised: process 0's ``OSError`` (a failed
        commit), another process's ``TimeoutError`` (process 0's commit did not finish within ``timeout_s``: slow, or
        failed), or any error of the background write.
    step : int or None
        The step being saved (``CheckpointWriter.last_saved``).
    directory : Path
        The checkpoints folder.
    timeout_s : float
        The bound of the wait for process 0's commit (``CheckpointWriter.commit_timeout_s``).

    Returns
    -------
    RuntimeError
        Naming the step, the folder, ``err``, the latest complete checkpoint (kept) and the fix; for a
        ``TimeoutError``, whether the step is complete now (committed late) and how to raise the bound.
    """
    steps = committed_steps(directory)  # Orbax's own record of each step's commit (CheckpointManager.all_steps)
    kept = (f"the latest complete checkpoint, {directory / str(steps[-1])}, is kept: resume from it" if steps
            else "no earlier checkpoint was saved")
    what = f"{type(err).__name__}: {err}".strip().rstrip(":")
    if isinstance(err, TimeoutError):  # the other processes: process 0's commit was slow, or failed
        bound = (f"process 0's commit did not finish within {timeout_s:g} s (CheckpointWriter.commit_timeout_s, the "
                 f"other processes' bound on waiting for it; {what}), so this process stopped waiting")
        raise_it = ("On a slow file system raise the bound before the writer is built, e.g. "
                    "CheckpointWriter.commit_timeout_s = 120")
        if step in steps:  # committed late: complete on disk, yet the processes no longer save in step
            return RuntimeError(f"checkpoint step {step} in {directory} is complete and kept ({directory / str(step)}: "
                                f"resume from it), yet {bound}. {raise_it}")
        return RuntimeError(f"checkpoint step {step} was not saved in {directory} within {timeout_s:g} s: {bound}; it "
                            "is not complete: process 0 may still be committing it (a slow file system) or its commit "
                            f"failed (process 0's log names why, e.g. the folder turned read-only); {kept}. {raise_it}")
    return RuntimeError(f"checkpoint step {step} was not saved in {directory}: writing or committing it failed "
                        f"({what}). Keep the checkpoint folder writable while the run saves (check its permissions, "
                        f"free space, 'chattr -i'); {kept}")

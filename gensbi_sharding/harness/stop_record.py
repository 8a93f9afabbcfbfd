"""The record of a run stopped by Ctrl-C: its status, and the checkpoint ``train.resume=auto`` continues from.

A first Ctrl-C stops the run at a step boundary, after a checkpoint (``Preempted`` names its step); a second stops it
at once, wherever it was, a checkpoint's save held until it ends (``interrupt_hold``): its record names the newest
committed checkpoint, the one a continued run starts from.
"""

from __future__ import annotations

import errno
import logging
import os
from pathlib import Path
from typing import Any

from gensbi_sharding.harness.continue_field import CONTINUE_FIELD

__all__ = ["record_interrupt", "record_resume_point", "failure_resume_hint", "failure_error", "failure_outcome",
           "record_failure_outcome", "output_refused_error", "at_once_error", "exception_text"]

log = logging.getLogger("gensbi_sharding")


def record_interrupt(metrics: dict[str, Any], error: str, start: float, folder: Any) -> None:
    """Record a run stopped by Ctrl-C (``status: interrupted``), say how to continue it, free its folder.

    Parameters
    ----------
    metrics : dict
        The run's metrics so far; ``status``, ``error`` and ``wall_s`` are set and written.
    error : str
        The stop, worded with the command that continues the run (if any).
    start : float
        ``time.perf_counter()`` at the run's start.
    folder : RunFolder
        Records the metrics and releases the folder's lock.
    """
    import time

    from gensbi_sharding.harness.console import stop_level

    metrics.update(status="interrupted", error=error, wall_s=time.perf_counter() - start)
    log.log(stop_level(), "%s", error)
    folder.record(metrics)
    folder.release()


def record_resume_point(metrics: dict[str, Any], out: Path) -> int | None:
    """Set ``stopped_at_step`` (and ``final_step``) of a run stopped at once to its newest committed checkpoint, and
    ``continue_field.CONTINUE_FIELD`` to the command that continues from it.

    A second Ctrl-C stops wherever the run was, a checkpoint's save held until it ends (``interrupt_hold``): the
    newest committed checkpoint is the one ``train.resume=auto`` continues from, never ``stopped_at_step: null``
    beside a committed checkpoint 4800.

    Parameters
    ----------
    metrics : dict
        The run's metrics so far; updated.
    out : pathlib.Path
        The run's folder (``<out>/checkpoints``).

    Returns
    -------
    int or None
        The step; None: no checkpoint committed.
    """
    from gensbi_sharding.checkpoint_steps import committed_steps

    from gensbi_sharding.harness.sweep_hints import continue_command

    steps = committed_steps(Path(out) / "checkpoints")
    saved = steps[-1] if steps else None
    metrics["stopped_at_step"] = saved
    # The command ``at_once_error`` words, as a value of its own: none where no checkpoint is there to continue from
    metrics[CONTINUE_FIELD] = None if saved is None else continue_command(out)
    if saved is not None:  # the step the checkpoint holds, as a finished run's final_step
        metrics["final_step"] = saved
    return saved


def at_once_error(out: Path, saved: int | None, cause: str = "") -> str:
    """The error of a run Ctrl-C stopped at once (a second Ctrl-C, or a worker it stopped), naming where it continues.

    The first Ctrl-C's line names the step it stopped at and its checkpoint (``Preempted``); this one said only
    "interrupted (Ctrl-C); continue with: ...", not that the run's work was saved up to step 4800.

    Parameters
    ----------
    out : pathlib.Path
        The run's folder.
    saved : int or None
        The step of its newest committed checkpoint (``record_resume_point``); None: none.
    cause : str, optional
        What the Ctrl-C ended with, where it was not the run itself (``"KeyboardInterrupt: ..."`` of a worker).

    Returns
    -------
    str
        ``"interrupted (Ctrl-C); stopped at once, saved up to step 4800 (<out>/checkpoints/4800); continue with:
        ..."``; without a checkpoint, ``"...; stopped at once, with no checkpoint to continue from"``.
    """
    from gensbi_sharding.harness.sweep_hints import continue_command

    stop = f"interrupted (Ctrl-C){f': {cause}' if cause else ''}; stopped at once"
    if saved is None:
        return f"{stop}, with no checkpoint to continue from"
    return (f"{stop}, saved up to step {saved} ({Path(out) / 'checkpoints' / str(saved)}); continue with: "
            f"{continue_command(out)}")


def failure_resume_hint(out: Path, before: list[int], err: BaseException) -> str:
    """How to continue a run that failed after it committed a checkpoint; "" where this attempt committed none.

    A run whose folder turned read-only (or full) mid-run, or whose evaluation failed, said only the error
    (``OSError: [Errno 30] Read-only file system: ...``), not that its checkpoints up to step 1150 were
    saved and that ``train.resume=auto`` continues from there once the cause is fixed. An earlier attempt's
    checkpoint is not named: its error may be what the same command meets again (a setting refused on resume).

    Parameters
    ----------
    out : pathlib.Path
        The run's folder (``<out>/checkpoints``).
    before : list of int
        The steps of ``<out>/checkpoints`` when the attempt started (``launch_record.step_folder_names``): a
        newest checkpoint among them is an earlier attempt's.
    err : BaseException
        The failure; a divergence (``FloatingPointError``) names its own checkpoint, the last finite one.

    Returns
    -------
    str
        ``"; checkpoint <folder>/checkpoints/<step> was saved before it: once that is fixed, continue with: ..."``.
    """
    from gensbi_sharding.harness.sweep_hints import continue_command

    newest = _saved_checkpoint(out, before, err)
    return "" if newest is None else (f"; checkpoint {newest} was saved before it: once that is fixed, continue with: "
                                      f"{continue_command(out)}")


def failure_error(out: Path, before: list[int], err: BaseException, *, dry_run: bool = False) -> str:
    """A failed run's error (``failure_outcome``'s text)."""
    return failure_outcome(out, before, err, dry_run=dry_run)[0]


def record_failure_outcome(metrics: dict[str, Any], out: Path, before: list[int], err: BaseException, *,
                           dry_run: bool = False) -> str:
    """Set a failed run's ``error`` and ``continue_field.CONTINUE_FIELD`` (``failure_outcome``) in ``metrics``;
    returns the error."""
    metrics["error"], metrics[CONTINUE_FIELD] = failure_outcome(out, before, err, dry_run=dry_run)
    return metrics["error"]


def failure_outcome(out: Path, before: list[int], err: BaseException, *,
                    dry_run: bool = False) -> tuple[str, str | None]:
    """A failed run's error and the command it offers to continue the run (None: it offers none).

    The error: ``output_refused_error``'s, else the exception and ``failure_resume_hint``'s; a failure
    that names a disk's refusal (a checkpoint save's on a full disk) and saved no checkpoint, the command that runs it
    again (not "no earlier checkpoint was saved" only: the same command would refuse the folder); an evaluation the
    weights failed (``weights_failure.SamplingError``), the commands that get past it, not the one that fails again;
    a dry run's, the command that runs it again in a new folder (``dry_run=true`` with ``train.resume`` is refused)."""
    from gensbi_sharding.harness.interrupt_lines import again_command
    from gensbi_sharding.harness.launch_record import step_folder_names
    from gensbi_sharding.harness.sweep_hints import continue_command
    from gensbi_sharding.harness.weights_failure import SamplingError, weights_failure_hint

    if (refused := output_refused_error(out, before, err, dry_run=dry_run)) is not None:
        # the command its words end with, as a value: a dry run's runs it again in a new folder
        return refused, again_command(out) if dry_run else continue_command(out)
    newest, command = _saved_checkpoint(out, before, err), None
    if isinstance(err, SamplingError) and (steps := step_folder_names(Path(out))):  # its command fails again
        hint = weights_failure_hint(out, steps[-1], err)  # an earlier attempt's checkpoint too: the same weights
    elif newest is None:
        disk = any(os.strerror(code) in str(err) for code in DISK_REFUSALS)
        # a dry run continues nothing: its command runs it again in a new folder, a value as every writer's is
        command = (again_command(out) if dry_run else continue_command(out)) if disk else None
        hint = f"; once that is fixed, run it again with: {command}" if disk else ""
    elif f"{newest}," in str(err):  # the save's own error named it kept: not said twice
        command = continue_command(out)
        hint = f"; once that is fixed, continue with: {command}"
    else:
        hint = failure_resume_hint(out, before, err)
        command = continue_command(out) if hint else None
    return f"{exception_text(err)}{hint}", command


def exception_text(err: BaseException) -> str:
    """``"<type>: <message>"`` on one line, a phrase the message repeats back to back said once.

    XLA wraps a failed collective once per dispatch level: a peer that died read "Error dispatching computation: "
    13 times over before "Gloo AllGather failed: ... Connection reset by peer", on the console and in metrics.json.
    """
    import re

    return re.sub(r"([A-Za-z][^:;\n]{2,80}: )\1+", r"\1", f"{type(err).__name__}: {err}")


#: What a disk says when it takes no more (full, over quota) or refuses writes (read-only, no permission).
#: A file over the file-size limit (``ulimit -f``: EFBIG, "File too large") is refused alike.
DISK_REFUSALS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM, errno.EFBIG}


def output_refused_error(out: Path, before: list[int], err: BaseException, *,
                         dry_run: bool = False) -> str | None:
    """A run's error where the disk refused one of its files (``DISK_REFUSALS``; the file named by ``write_atomic``):
    that file, what is kept (the newest checkpoint, the scores so far) and the command that continues the run (a
    dry run's: runs it again in a new folder); None for any other failure (``OSError: [Errno 28] No space left on
    device`` alone names no file)."""
    from gensbi_sharding.harness.interrupt_lines import again_command
    from gensbi_sharding.harness.outputs import room_fix
    from gensbi_sharding.harness.sweep_hints import continue_command

    if not isinstance(err, OSError) or err.errno not in DISK_REFUSALS or not err.filename:
        return None
    from gensbi_sharding.harness.launch_record import step_folder_names

    # Any attempt's newest checkpoint: the disk, not the run, failed, so the same command continues from it.
    path, steps = Path(err.filename), step_folder_names(Path(out))
    newest = Path(out) / "checkpoints" / str(steps[-1]) if steps else None
    kept = [f"checkpoint {newest}"] if newest is not None else []
    kept += ["the scores so far (c2st.csv)"] if path.name != "c2st.csv" and (Path(out) / "c2st.csv").is_file() else []
    fix = ("free space there" if err.errno in (errno.ENOSPC, errno.EDQUOT)
           else room_fix(err) if err.errno == errno.EFBIG else "make it writable")
    refused = f"{path.name} could not be written in {path.parent} ({err.strerror}), no partial file left"
    if dry_run:  # it saves no checkpoint, and its folder, holding this failure's record, takes no dry run again
        return f"{refused}: {fix}, then run it again with: {again_command(out)}"
    return (f"{refused}; {' and '.join(kept) + ' kept' if kept else 'no checkpoint was saved'}: {fix}, then "
            f"{'continue' if newest is not None else 'run it again'} with: {continue_command(out)}")


def _saved_checkpoint(out: Path, before: list[int], err: BaseException) -> Path | None:
    """This attempt's newest checkpoint (``failure_resume_hint``), or None."""
    from gensbi_sharding.harness.launch_record import step_folder_names

    # From the folder names, not Orbax: its listing is a collective of every process, and one process's failure is
    # not the others' (one process listing alone aborts them all, SIGABRT); it would start JAX's backend too.
    steps = step_folder_names(Path(out))
    # Compared by step, not file time: an earlier attempt may have saved within the clock's rounding of this start.
    if not steps or steps[-1] in before or isinstance(err, FloatingPointError):
        return None
    return Path(out) / "checkpoints" / str(steps[-1])

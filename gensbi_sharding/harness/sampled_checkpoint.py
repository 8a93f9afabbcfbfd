"""The checkpoint ``sample.py`` (and ``sample_posterior``) reads, named for who samples: a damaged one (the library's
refusal advises training, "resume from another step folder", "start without it"; a sampler's fix is another step folder
of the run to sample), or a folder with none: a sweep's, a run still training, a sequential job's, a stopped run's."""

from __future__ import annotations

import os
import shlex
from pathlib import Path
from typing import Any

from gensbi_sharding.harness.moved_folder import continue_in
from gensbi_sharding.harness.paste_command import command_for
from gensbi_sharding.harness.unfinished_run import training_run
from gensbi_sharding.messages import clipped

__all__ = ["DamagedCheckpoint", "arrays_read", "for_sampler", "lost_step_metadata", "no_checkpoint", "rescored_from",
           "saved_items",
           "sweep_refusal"]


class DamagedCheckpoint(FileNotFoundError):
    """A step folder whose items cannot be read: no argument was mistyped (``sample.py`` exits 1, not argparse's 2)."""


_DAMAGE = (KeyError, ValueError, AttributeError, OSError)  # what a lost or cut file raises, as the library reads it
READ_BYTES = 256 << 20  # the most of a checkpoint's arrays held in host memory at once while they are checked
SEQUENTIAL = "sequential.json"  # benchmarks/sequential.py's job record: sbibm_method.RECORD is this name, imported


def _in_parts(names: dict) -> list[list[str]]:
    """``names`` (``{path: its array's metadata}``) in runs of at most ``READ_BYTES`` (an array larger: alone)."""
    import numpy as np

    parts, size = [[]], 0
    for name, array in names.items():
        try:  # a dtype NumPy does not know (a PRNG key's) or a plain scalar's metadata: counted as 8 bytes each
            nbytes = int(np.prod(array.shape)) * np.dtype(array.dtype).itemsize
        except (AttributeError, TypeError):
            nbytes = 8 * int(np.prod(getattr(array, "shape", ())))
        if parts[-1] and size + nbytes > READ_BYTES:
            parts, size = [*parts, []], 0
        parts[-1].append(name)
        size += nbytes
    return parts


def _read_arrays(step_dir: Path) -> None:
    """Read every array of ``step_dir`` into host memory, ``READ_BYTES`` at a time, as a restore reads it (its metadata
    reads with the data files gone or cut short); ``FileNotFoundError`` as the library's for a damaged folder, its
    ``reason`` set. Not all at once: a 1.2 GB checkpoint's whole arrays would be held on the host before the model."""
    import numpy as np
    import orbax.checkpoint as ocp

    from gensbi_sharding.checkpoint_items import flat_by_path, item_handlers, nest_by_path

    # A PyTree handler: its restore_args read each array as NumPy, needing neither the model nor a mesh. Every item
    # is read: of one left unread, Orbax warns on the console.
    try:
        with ocp.Checkpointer(ocp.CompositeCheckpointHandler(**item_handlers(saving=True))) as reader:
            names = flat_by_path(reader.metadata(step_dir).item_metadata["arrays"].tree)
            for part in _in_parts(names):  # each part's arrays dropped before the next is read
                host = nest_by_path(dict.fromkeys(part, ocp.RestoreArgs(restore_type=np.ndarray)))
                reader.restore(step_dir, args=ocp.args.Composite(
                    arrays=ocp.args.PyTreeRestore(item=host, restore_args=host, partial_restore=True),
                    meta=ocp.args.JsonRestore(), config=ocp.args.JsonRestore()))
    except Exception as raised:  # lost data: Orbax's bare Exception, raised from TensorStore's ValueError
        err = raised if isinstance(raised, _DAMAGE) else raised.__cause__ or raised.__context__
        if not isinstance(err, _DAMAGE):
            raise
        damaged = FileNotFoundError(f"checkpoint {step_dir} is damaged: its 'arrays' item cannot be read "
                                    f"({type(err).__name__}: {clipped(err)})")
        damaged.reason = str(damaged)  # as the library's (checkpoint.restore): for_sampler words the fix
        raise damaged from None


def _intact_other(step_dir: Path) -> Path | None:
    """The newest other complete step folder beside ``step_dir`` whose config, info and arrays read, None if none does
    (not config and info only: a folder whose arrays' data files are gone must not be named to sample)."""
    from gensbi_sharding.checkpoint import committed_steps, saved_config, saved_info

    for step in reversed(committed_steps(step_dir.parent)):
        other = step_dir.parent / str(step)
        if other == step_dir:
            continue
        try:
            saved_config(other), saved_info(other), _read_arrays(other)
        except (FileNotFoundError, ValueError):
            continue
        return other
    return None


def for_sampler(err: FileNotFoundError, step_dir: Path, *, flags: bool, x_o: Any = None) -> FileNotFoundError:
    """``err`` reworded for who samples (a ``DamagedCheckpoint``) where it names ``step_dir`` damaged, else ``err``.

    Parameters
    ----------
    err : FileNotFoundError
        Raised reading ``step_dir``'s items (``saved_config``, ``saved_info``, a restore).
    step_dir : Path
        The step folder being sampled.
    flags : bool
        Name the fix as ``sample.py``'s command line (True) or as a ``sample_posterior`` call.
    x_o : Any, optional
        The observation argument: its file, if it is one, goes into the command named.

    Returns
    -------
    FileNotFoundError
        A ``DamagedCheckpoint`` naming the step folder to sample instead (or that none is left), or ``err`` itself.
    """
    reason = getattr(err, "reason", None)  # the library's damaged-checkpoint refusal without its training advice
    if reason is None:
        return err
    other = _intact_other(step_dir)
    if other is None:
        fix = ("no other step folder of its run holds a readable checkpoint, so nothing there can be sampled: "
               "train the run again and sample its new folder")
    elif flags:
        observation = shlex.quote(os.fspath(x_o)) if isinstance(x_o, (str, os.PathLike)) else "<x_o.npy>"
        fix = (f"sample the run's newest intact step instead (sample.py samples the step folder it is given): "
               f"{command_for('sample.py')} {shlex.quote(str(other))} {observation} with the same options")
    else:
        fix = f"sample the run's newest intact step instead: sample_posterior({str(other)!r}, x_o, ...)"
    return DamagedCheckpoint(f"{reason}; {fix}")


def saved_items(step_dir: Path, *, flags: bool, x_o: Any = None) -> tuple[dict, dict]:
    """``(saved config, saved info)`` of ``step_dir``; damaged: ``for_sampler``'s ``DamagedCheckpoint``.

    Parameters
    ----------
    step_dir : Path
        A complete step folder (``find_checkpoint``'s).
    flags, x_o : bool, Any
        As ``for_sampler``.
    """
    from gensbi_sharding.checkpoint import saved_config, saved_info

    try:  # for sample.py, not the library's advice for training ("resume from another step folder"), exit 2
        return saved_config(step_dir), saved_info(step_dir)
    except FileNotFoundError as err:
        raise for_sampler(err, step_dir, flags=flags, x_o=x_o) from None


def arrays_read(step_dir: Path, *, flags: bool, x_o: Any = None) -> None:
    """Read every array of ``step_dir`` before any model is built (else a folder whose data files are gone passes the
    checks, the model is built, and its restore fails); damaged: ``for_sampler``'s ``DamagedCheckpoint``.

    Parameters
    ----------
    step_dir : Path
        A complete step folder (``find_checkpoint``'s).
    flags, x_o : bool, Any
        As ``for_sampler``.
    """
    try:
        _read_arrays(step_dir)
    except FileNotFoundError as err:
        raise for_sampler(err, step_dir, flags=flags, x_o=x_o) from None


def sweep_refusal(folder: Path) -> FileNotFoundError:
    """``sample.py``'s refusal of the sweep folder ``folder``, naming its jobs with a checkpoint by number."""
    from gensbi_sharding.harness.best_job import best_note
    from gensbi_sharding.harness.runs_below import sweep_jobs

    jobs = sweep_jobs(folder)  # by number, not as strings ("0, 1, 10, 11, 2")
    return FileNotFoundError(f"{folder} is a sweep's folder, one run per job: " + (
        f"sample one job's, {best_note(jobs)}" if jobs
        else "none of its jobs saved a checkpoint (a dry run saves none)"))


def _sequential_fix(folder: Path) -> str:
    """What to sample instead of the sequential job ``folder``: the amortised job of its cell in its
    ``benchmarks/sbibm.py`` root where that saved a checkpoint, else the ``launch.py`` command training one."""
    from gensbi_sharding.checkpoint import CHECKPOINT_SUBDIR, committed_steps

    cell, _, method = folder.parent.name.partition("_sequential-")  # <root>/<task>_<budget>_sequential-.../job
    if method and committed_steps(folder.parent.parent / cell / folder.name / CHECKPOINT_SUBDIR):
        return f"sample the amortised job of its task and budget instead: {folder.parent.parent / cell / folder.name}"
    try:  # the job's settings, as benchmarks/sequential.py wrote them: launch.py's overrides
        settings = [line[2:] for line in (folder / ".hydra" / "overrides.yaml").read_text().splitlines()
                    if line.startswith("- ")]
    except OSError:
        settings = []
    command = " ".join(map(shlex.quote, settings or ["experiment=sbibm", "data=<task>"]))
    return f"train an amortised run to sample ({command_for()} {command}) and sample its folder"


def lost_step_metadata(folder: Path) -> bool:
    """Whether the run folder, checkpoints folder or step folder ``folder`` holds a step saved whole but for its Orbax
    step metadata (``unconfirmed_steps``): ``find_checkpoint``'s refusal then names it and its fix, the run's status
    says nothing more (a run that trained and saved)."""
    from gensbi_sharding.checkpoint_steps import CHECKPOINT_SUBDIR, unconfirmed_steps

    return bool(unconfirmed_steps(folder / CHECKPOINT_SUBDIR) or unconfirmed_steps(folder) or (
        folder.name.isdigit() and int(folder.name) in unconfirmed_steps(folder.parent)))


def rescored_from(previous: dict) -> str | None:
    """The checkpoint a run's record ``previous`` (metrics.json) scored again, where that run trained no step and
    resumed from a checkpoint still there (continued at its checkpoint's step to be scored again, it saves none of its
    own: its folder has no checkpoints/); None otherwise. Read by ``sample.py`` of its folder and by ``train.resume``
    of it (``resume.resume_step_dir``), so both name that checkpoint instead of "its checkpoints are gone"."""
    scored = previous.get("resumed_from") if previous.get("steps") == 0 else None
    return scored if scored and Path(scored).is_dir() else None


def no_checkpoint(run_dir: Any, folder: Path, err: FileNotFoundError) -> FileNotFoundError:
    """``sample.py``'s refusal of ``run_dir`` (resolved: ``folder``), which holds no complete checkpoint (``err``,
    ``find_checkpoint``'s), saying why where its folder does: a sequential job's, a stopped, dry or training run's."""
    from gensbi_sharding.checkpoint import CHECKPOINT_SUBDIR
    from gensbi_sharding.harness.outputs import read_metrics
    from gensbi_sharding.harness.runs_below import runs_note

    if getattr(err, "unconfirmed", None):  # a newer step lost its metadata: said, not the older one sampled silently
        return FileNotFoundError(f"run folder {os.fspath(run_dir)!r}: {err}")
    given = f"run folder {os.fspath(run_dir)!r} has no checkpoint to sample"
    if below := runs_note(folder, refusal=err):  # outputs/, a date's folder, an sbibm.py root: the runs err named
        return FileNotFoundError(f"{given}{below}")  # below named, the folder once
    if (reason := getattr(err, "reason", None)) is not None:  # a step folder, none complete beside it (not "start
        return FileNotFoundError(f"{given}: {reason}: pass the folder of a run that saved a complete step, or, if its "
                                 "run is still training, sample it after its first save")  # without it", training's)
    if lost_step_metadata(folder):  # ``err`` names the fix: its run did train
        return FileNotFoundError(f"{given}: {err}")
    if (folder / SEQUENTIAL).is_file():  # its rounds keep none: no "saved no complete checkpoint"
        return FileNotFoundError(f"{given}: it is a sequential job's folder (benchmarks/sequential.py), whose rounds "
                                 "train a network per observation and keep neither weights nor samples, only their "
                                 f"C2ST scores ({folder / 'c2st.csv'}); {_sequential_fix(folder)}")
    metrics, why = folder / "metrics.json", ""
    if metrics.is_file():
        previous = read_metrics(metrics)
        status, resume = previous.get("status"), continue_in(previous, folder)  # its folder now, moved or not
        if status in ("preempted", "interrupted") and resume:  # the fix is to continue it
            return FileNotFoundError(f"{given}: its run was stopped ({status}) before its first checkpoint; continue "
                                     f"it, {resume}, and sample this folder once it has saved one")
        if status == "ok" and (scored := rescored_from(previous)):  # resumed only to be scored again: it saves none
            return FileNotFoundError(f"{given}: its run trained nothing and saved no checkpoint: it scored the one it "
                                     f"resumed from again, {scored}; pass that checkpoint instead of {folder}")
        why = ("; it holds a dry run (dry_run=true saves no checkpoint)" if "dry_run" in previous else
               f"; its run (status {status}) saved no complete checkpoint in {folder / CHECKPOINT_SUBDIR}")
    elif (writer := training_run(folder)) is not None:  # it trains: wait, not another folder
        why = (f"; its run is still training ({writer}) and has saved none yet: it saves one at its end, and every "
               "train.checkpoint_every steps if set; sample it then")
    return FileNotFoundError(f"{given}: {err}{why}" + ("" if "still training" in why else
                             ". Sampling needs a trained run's saved weights: pass the folder of a run that trained "
                             f"({command_for()} ... writes checkpoints/ into its folder)"))

"""What ``train.resume=auto`` says where the run's folder holds no checkpoint: a sweep's job that never ran starts
in one short line; the advice on continuing a run stays for a run that may have meant another folder or lost its
checkpoint.

The advice, "no checkpoint in <job> yet, starting fresh (to continue an unfinished run: hydra.run.dir=<its
folder>; to train a finished one further: ...)", does not apply to a job not yet started of a sweep stopped by Ctrl-C
and continued with the command it printed: that job never ran.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["fresh_start_words", "ran_before"]

#: The files an attempt that reached its folder's claim leaves (``metrics.json``; ``checkpoints/``; its files set
#: aside by the next attempt as ``<name>.attempt<N><suffix>``; its ``jax_enable_x64`` record, set aside alike).
#: Not Hydra's own record: Hydra writes it for a job it then never starts (``not_started.mark_not_started``).
_TRACES = ("metrics.json", "checkpoints", "*.attempt*", ".hydra/x64.attempt*")


def ran_before(out: Any) -> bool:
    """Whether an earlier attempt ran in the folder ``out`` (claimed it: ``_TRACES``), as far as its files tell.

    Parameters
    ----------
    out : path-like
        A run's folder, as this attempt found it once claimed.

    Returns
    -------
    bool
    """
    out = Path(out)
    return any(next(out.glob(pattern), None) is not None for pattern in _TRACES)


def fresh_start_words(out: Any) -> str:
    """What ``train.resume=auto`` says, after "train.resume=auto: ", where ``out`` holds no checkpoint.

    A sweep's job (its folder's parent holds Hydra's ``multirun.yaml``) that never ran before (``ran_before``):
    "job 1 of the sweep has not run before: starting it fresh" (a folder not named by a number: "the sweep's job
    in <folder>/ ..."). Otherwise the advice, which then may apply: a run that ran and lost its checkpoint, or one
    run in a new folder where the user meant an earlier run's.

    Parameters
    ----------
    out : path-like
        The run's folder.

    Returns
    -------
    str
    """
    out = Path(out)
    if (out.parent / "multirun.yaml").is_file() and not ran_before(out):
        # Hydra names a job's folder by its number unless hydra.sweep.subdir says otherwise ("job job of the sweep")
        job = f"job {out.name} of the sweep" if out.name.isdigit() else f"the sweep's job in {out.name}/"
        return f"{job} has not run before: starting it fresh"
    return (f"no checkpoint in {out} yet, starting fresh (to continue an unfinished run: hydra.run.dir=<its folder>; "
            "to train a finished one further: train.resume=<its folder> and a new hydra.run.dir)")

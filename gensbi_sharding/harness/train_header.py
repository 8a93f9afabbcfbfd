"""The training phase's console header, apart from ``progress`` (which imports tqdm): ``run_steps`` imports it, and a
refused command imports ``run_steps`` before it is refused, so tqdm and asyncio were imported for nothing."""

from typing import Any

__all__ = ["train_header"]


def train_header(cfg: Any, start: int, resume_dir: Any, trains: bool, why: str | None = None) -> str:
    """The training phase's header, ``"[5/7] train: steps 0..3000, global batch 64"``; for a resumed run that trains
    nothing, which says so and why, not the steps it will not run (was "steps 10200..20000" before "nothing trained:
    early stopping had ended training ...").

    Parameters
    ----------
    cfg : DictConfig
        The run's config (``train.steps``, ``data.batch_size``).
    start : int
        The step training starts from (the resumed checkpoint's, else 0).
    resume_dir : path-like or None
        The checkpoint resumed from.
    trains : bool
        Whether any step will run.
    why : str, optional
        Why none will: ``"early stopping"`` (it had ended training at ``start``) or ``"train.steps"`` (reached).

    Returns
    -------
    str
    """
    resumed = f"resumed from step {start} ({resume_dir})" if resume_dir else ""
    if trains:
        return (f"[5/7] train: steps {start}..{cfg.train.steps}, global batch {cfg.data.batch_size}"
                + (f", {resumed}" if resumed else ""))
    cause = ("early stopping had ended training there" if why == "early stopping" else
             f"train.steps={cfg.train.steps} is reached")
    return f"[5/7] train: nothing to train, {resumed or f'at step {start}'}: {cause}"

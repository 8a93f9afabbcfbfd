"""What ``sample.py`` says when the run it samples has not finished training: stopped, failed, or still training.

``sample.py`` samples a stopped run's newest checkpoint, as documented. It said only "sampling checkpoint
<run>/checkpoints/1 (step 1)": a run Ctrl-C'd during its first steps (of ``train.steps=2000``) gave 10,000 samples
of a barely trained network, written as the run's posterior, with nothing saying the run had stopped or how to finish
it. A warning now names the run's status, the step against its ``train.steps`` and the command that continues it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["unfinished_note"]


def unfinished_note(step_dir: Path, cfg: Any) -> str | None:
    """The warning for sampling ``step_dir`` of a run that has not finished; None for a finished run.

    Parameters
    ----------
    step_dir : Path
        The checkpoint step folder sampled, ``<run>/checkpoints/<step>``.
    cfg : DictConfig or Mapping
        The run's saved config (its ``train.steps``).

    Returns
    -------
    str or None
        E.g. ``"<run> stopped (status interrupted) at step 1 of train.steps=2000: these samples are of a posterior
        trained 1 of its 2000 steps; to finish it: python launch.py ... train.resume=auto hydra.run.dir=<run>, then
        sample again"``. None where the run ended (status ok: early stopping too), where the step is not
        under ``train.steps`` (a run trained further in place), or where its folder is not a run's.
    """
    from gensbi_sharding.harness.outputs import read_metrics
    from gensbi_sharding.harness.sampled_checkpoint import training_run

    run = step_dir.parent.parent if step_dir.parent.name == "checkpoints" else None
    steps = (cfg.get("train") or {}).get("steps")  # a checkpoint CheckpointWriter saved with a config of its own
    if run is None or not isinstance(steps, int) or not step_dir.name.isdigit() or int(step_dir.name) >= steps:
        return None
    step = int(step_dir.name)
    trained = f"at step {step} of train.steps={steps}: these samples are of a posterior trained {step} of its " \
              f"{steps} steps, not the run's result"
    try:
        record = read_metrics(run / "metrics.json")
    except (OSError, ValueError):  # no record (a run still training or killed) or a damaged one
        if (writer := training_run(run)) is not None:
            return f"{run}'s run is still training ({writer}); its newest checkpoint is {trained}: sample it again " \
                   "when it ends"
        return None
    status = record.get("status")
    if status == "ok":
        return None
    resume = str(record.get("error") or "").partition("continue with: ")[2].strip()
    from gensbi_sharding.harness.override_grammar import hydra_override

    fix = f"to finish it: {resume}, then sample again" if resume else ("to finish it, continue it with train.resume="
                                                                      f"auto {hydra_override('hydra.run.dir', run)} "
                                                                      "and the run's own overrides")
    return f"{run} stopped (status {status}) {trained}; {fix}"

"""An evaluation that failed for the trained weights' sake, and the commands that get past it.

Too few posterior draws inside the prior's support, or draws holding NaN or inf, are the weights' doing: the command
that continues the run samples the very same weights again and fails the same way (so no "once that is fixed, continue
with: <that command>": the fix its error names, ``data.theta_transform=support``, is refused on resume, as it
changes what the saved arrays mean). ``weights_failure_hint`` names what does get past it: training those weights
further in the run's folder (a larger ``train.steps``), or a new run in a new folder (the prior's bijection; a lower
``train.learning_rate`` for draws that are not finite).
"""

from __future__ import annotations

import shlex
from pathlib import Path

from gensbi_sharding.harness.failed_weights import FAILED_WEIGHTS
from gensbi_sharding.harness.paste_command import command_for
from gensbi_sharding.harness.units import is_int

__all__ = ["SamplingError", "weights_failure_hint", "further_steps", "FAILED_WEIGHTS"]


class SamplingError(RuntimeError):
    """Posterior draws the trained weights cannot give: ``outside`` (fewer than ``posterior.MIN_ACCEPTANCE`` inside the
    prior's support), else not finite."""

    def __init__(self, message: str, *, outside: bool):
        super().__init__(message)
        self.outside = outside


def _new_folder(run_dir: Path, tag: str, multirun: bool) -> Path:
    """``<run_dir>-<tag>`` (a sweep's job: ``<sweep>-<job>-<tag>``, beside the sweep, where its table never reads it),
    numbered past those that exist (a used folder would be refused in turn)."""
    sweep = run_dir.parent if multirun or (run_dir.parent / "multirun.yaml").is_file() else None
    base, copy = (sweep.with_name(f"{sweep.name}-{run_dir.name}") if sweep else run_dir), 1
    while (folder := base.with_name(f"{base.name}-{tag}" + (f"-{copy}" if copy > 1 else ""))).exists():
        copy += 1
    return folder


def _launched_train(out: Path, step: int) -> dict:
    """The ``train`` settings the run was launched with: its Hydra record, else the checkpoint's saved config (a run
    from Python); {} when neither reads."""
    from omegaconf import OmegaConf

    from gensbi_sharding.harness.outputs import read_record

    recorded = read_record(out / ".hydra" / "config.yaml")
    if OmegaConf.is_dict(recorded) and OmegaConf.is_dict(recorded.get("train")):
        try:
            return OmegaConf.to_container(recorded.train, resolve=True)
        except Exception:  # noqa: BLE001 (an interpolation of Hydra's own, unset here): the values as written
            return OmegaConf.to_container(recorded.train, resolve=False)
    try:
        from gensbi_sharding.checkpoint import saved_config

        return dict(saved_config(out / "checkpoints" / str(step)).get("train") or {})
    except (OSError, ValueError, TypeError):
        return {}


def further_steps(out: Path, step: int) -> tuple[dict[str, int], str]:
    """The ``train`` settings that train the weights of checkpoint ``step`` further than the run asked, and what they
    do.

    ``train.steps``: twice the larger of ``step`` and the ``train.steps`` the run was launched with (not twice
    ``step``, which for a run early stopping ended, at step 300 of 1,000, names 600: fewer steps than it asked for).
    A larger ``train.steps`` redraws the cosine schedule to end there, so the learning rate jumps at ``step``: said,
    with both rates. ``train.patience=0`` too where early stopping ended the run: it would end it again at a validation
    without a new best (in the command printed, not asked for in words only).

    Parameters
    ----------
    out : Path
        The run's folder.
    step : int
        The step of its newest checkpoint.

    Returns
    -------
    (dict, str)
        The settings, e.g. ``{"steps": 2000, "patience": 0}``, and a note (", ..." or "" when the run's settings do not
        read).
    """
    from gensbi_sharding.harness.schedule import learning_rate_schedule

    train = _launched_train(out, step)
    asked = train.get("steps") if is_int(train.get("steps")) else step
    target = 2 * max(step, asked)
    settings = {"steps": target}
    note = f" (twice the train.steps={asked} it was launched with: it stopped early at step {step})" * (step < asked)
    patience = ""
    if is_int(train.get("patience")) and train["patience"] and step < asked:
        settings["patience"] = 0
        patience = (f"; train.patience=0: early stopping (train.patience={train['patience']}) would end it again at a "
                    "validation without a new best")
    try:
        rates = [learning_rate_schedule(learning_rate=float(train["learning_rate"]), steps=steps,
                                        schedule=str(train.get("schedule", "cosine")),
                                        warmup_steps=int(train.get("warmup_steps", 0))) for steps in (asked, target)]
    except (KeyError, TypeError, ValueError):  # settings that do not read: the step count alone
        return settings, note + patience
    old, new = (float(rate(step) if callable(rate) else rate) for rate in rates)
    if train.get("schedule", "cosine") == "cosine":
        note += (f"; its cosine schedule is redrawn to end at step {target}: the learning rate at step {step} goes "
                 f"from {old:.3g} to {new:.3g}, then decays to 0")
    return settings, note + patience


def weights_failure_hint(out: Path, step: int, err: SamplingError) -> str:
    """What gets a run past ``err``, whose weights (checkpoint ``step`` in ``out``) the same command samples again.

    Parameters
    ----------
    out : Path
        The run's folder.
    step : int
        The step of its newest checkpoint, whose weights failed.
    err : SamplingError
        The failure.

    Returns
    -------
    str
        ``"; checkpoint <out>/checkpoints/<step> holds the weights that failed, which the same command would sample
        again: ..."`` with the command that trains them further (``further_steps``) and, for draws outside
        the prior, the one that trains afresh through its bijection in a new folder; for draws not finite, a new folder
        with a lower ``train.learning_rate``. From Python (no Hydra job), the ``cfg`` settings that do so.
    """
    from gensbi_sharding.harness.override_grammar import hydra_override
    from gensbi_sharding.harness.sweep_hints import SEARCH_PATH, hydra_job_overrides, job_command, with_search_path

    out = Path(out).absolute()
    settings, note = further_steps(out, step)
    overrides, multirun = hydra_job_overrides()
    fresh_dir = _new_folder(out, "support" if err.outside else "lower-lr", multirun)
    lead = f"; checkpoint {out / 'checkpoints' / str(step)} {FAILED_WEIGHTS}, which the same command "
    if overrides is None:  # run(cfg) from Python
        further = ("run(cfg) with " + "".join(f"cfg.train.{k}={v}, " for k, v in settings.items())
                   + f"cfg.train.resume='auto' and cfg.output_dir={str(out)!r} set in omegaconf.open_dict(cfg)")
        fresh = ("a new run(cfg) with cfg.data.theta_transform='support'" if err.outside else
                 "run(cfg) with") + f"{' and' if err.outside else ''} cfg.output_dir={str(fresh_dir)!r}"
    else:
        typed = tuple(f"train.{k}=" for k in settings)  # each as the command sets it, typed once
        further = job_command([*(o for o in overrides if not o.lstrip("+").startswith(typed)),
                               *(f"train.{k}={v}" for k, v in settings.items())], out, multirun=multirun)
        dropped = ("train.resume=", "hydra.", *(["data.theta_transform="] if err.outside else []))
        kept = [shlex.quote(o) for o in with_search_path(overrides) if not o.startswith(dropped)
                or o.startswith(SEARCH_PATH)]
        fresh = " ".join([command_for(), *kept, *(["data.theta_transform=support"] if err.outside else []),
                          *(["hydra.mode=RUN"] if multirun else []), hydra_override("hydra.run.dir", fresh_dir)])
    if err.outside:
        return (f"{lead}would sample again: train them further in this folder with: {further}{note}; or train afresh "
                f"through the prior's bijection in a new folder: {fresh}")
    return f"{lead}would sample again: retrain in a new folder, with a lower train.learning_rate added to: {fresh}"

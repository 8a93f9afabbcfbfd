"""Whether a checkpoint's saved config lets this run's config continue it: the two configs compared, nothing else.

Pure Python (JAX's backend stays unstarted: the run sets its device count later), so it runs twice: before Hydra
makes the run's folder (``resume_source``, through ``preflight`` and ``sweep_check``) and in the run itself
(``resume.check_resume_settings``, which then says what a changed schedule does: that evaluates the rates, JAX).
Checked in the run alone, a refused ``train.resume=<run> model.width=32`` would leave a folder (``.hydra/``,
``.run.lock``, ``launch.log``, ``error.txt``, ``metrics.json``) holding nothing but the refusal.
"""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from gensbi_sharding.harness.config import ConfigError
from gensbi_sharding.harness.held_out import config_value
from gensbi_sharding.harness.python_words import WITHOUT_RESUME, fix_said, in_python_words, said_as, setting
from gensbi_sharding.harness.resume_settings import damaged_here, run_x64
from gensbi_sharding.harness.saving_record import launched_with
from gensbi_sharding.harness.units import is_int
from gensbi_sharding.harness.x64_words import x64_fix, x64_on

__all__ = ["FIXED_BY_CHECKPOINT", "refuse_resume_settings"]

#: Settings a checkpoint's arrays hold only under: what the model's inputs and outputs mean (the
#: task and its transforms), and whether an EMA is saved beside the weights. A change of any of
#: them may still fit every shape, so it is checked before the restore, not left to it.
#: (key in the saved config, the override that sets it, what it decides)
FIXED_BY_CHECKPOINT = (("data.name", "data", "the task"), ("data.theta_transform", "data.theta_transform",
                       "the parameter space"), ("data.x_transform", "data.x_transform", "the data space"),
                       ("train.ema_decay", "train.ema_decay", "whether an EMA is saved"))


def refuse_resume_settings(step_dir: Path, cfg: DictConfig) -> None:
    """``ConfigError`` naming the overrides that match the checkpoint in ``step_dir`` when this run's config cannot
    continue it; returns where it can.

    Refused, all in one line: a ``model.*`` field (but ``model_switch.FREE_MODEL_FIELDS``) or a setting of
    ``FIXED_BY_CHECKPOINT`` that differs from the saved config (with a step beyond ``train.steps``, its
    ``train.steps`` too); a schedule the saved optimizer state cannot follow; alone, a step beyond ``train.steps``
    (its fix naming the ``train.steps`` that finishes the saved run, where it was unfinished).

    Parameters
    ----------
    step_dir : pathlib.Path
        The checkpoint's step folder (``resume.resume_step_dir``).
    cfg : DictConfig
        This run's config, without its ``hydra`` section.
    """
    from gensbi_sharding.checkpoint import saved_config, saved_info
    from gensbi_sharding.harness.model_switch import model_overrides
    from gensbi_sharding.harness.schedule import schedule_refusal

    try:  # its meta item too (schedule_refusal's saved_info): a step that lost only that was the library's words
        saved, now, _ = saved_config(step_dir), OmegaConf.to_container(cfg, resolve=True), saved_info(step_dir)
    except FileNotFoundError as damaged:
        raise damaged_here(damaged.reason, step_dir) if cfg.train.resume == "auto" and hasattr(damaged, "reason") \
            else damaged
    if cfg.train.resume == "auto":  # its arrays, before simulating (not the library's fix, which this folder's run
        from gensbi_sharding.harness.step_items import step_damage  # does not take, said by the restore)

        if (why := step_damage(step_dir, json_items=False)) is not None:
            raise damaged_here(f"checkpoint {step_dir} is damaged: {why}", step_dir)
    fix, this, what = [], [], []
    for key, override, decides in FIXED_BY_CHECKPOINT:
        old, new = config_value(saved, key), config_value(now, key)
        if old is None or old == new or (key == "train.ema_decay" and (old > 0) == (new > 0)):
            continue  # an older checkpoint without the key, or another EMA decay: both fine
        fix.append(f"{override}={old}")
        this.append(f"{override}={new}")
        what.append(decides)
    # A checkpoint beyond train.steps: named with the others, saving a second try; alone, refused last
    beyond = [f"train.steps={step_dir.name}"] if step_dir.name.isdigit() and int(step_dir.name) > cfg.train.steps \
        else []
    fresh, limit = said_as(*WITHOUT_RESUME), setting("train.steps", cfg.train.steps)  # in the caller's words
    if model := model_overrides(step_dir, cfg.model, also=[*fix, *beyond]):  # before the restore: shapes may fit
        held = f", and {' '.join(fix)} (this run: {' '.join(this)}) decide {', '.join(what)}" if fix else ""
        raise ConfigError(f"{model}The saved weights compute that model, not this one{held}; or start a new run "
                          f"{fresh}{launched_with(step_dir)}")
    if fix:
        at = f" (it is at step {step_dir.name}, beyond {limit})" if beyond else ""
        raise ConfigError(f"checkpoint {step_dir} was saved with {' '.join(fix)} (this run: {' '.join(this)}), "
                          f"which decides {', '.join(what)}: its arrays mean nothing otherwise; "
                          f"{fix_said([*fix, *beyond])}{at}, or start a new run {fresh}{launched_with(step_dir)}")
    refused = schedule_refusal(saved, now, saved_info(step_dir)) or _x64_refusal(step_dir, cfg.train.steps)
    if refused is not None:
        raise ConfigError(f"checkpoint {step_dir} {refused}{launched_with(step_dir)}")  # schedule: "another optimizer"
    if beyond:  # only its step refused; run(cfg) from Python: in the settings it sets
        with in_python_words():
            saved_steps, at = config_value(saved, "train.steps"), int(step_dir.name)
            # An unfinished run's own train.steps, which the run warned of before it refused this (now refused first)
            finish = f" ({setting('train.steps', saved_steps)} finishes the run that saved it)" if \
                is_int(saved_steps) and saved_steps > at else ""
            raise ConfigError(f"{setting('train.resume', cfg.train.resume)} is at step {at}, beyond "
                              f"{setting('train.steps', cfg.train.steps)}; set {setting('train.steps', at)} to "
                              f"evaluate it, or more to train further{finish}")



def _x64_refusal(step_dir: Path, steps: int) -> str | None:
    """Why a checkpoint whose run recorded ``jax_enable_x64`` (its ``metrics.json``) cannot be trained on to ``steps``
    under the other setting; None where they agree, its run recorded none, or nothing is left to train (``steps`` at
    or below its step: evaluated only, as before). Resumed without a word, its sbibm task would be simulated anew under
    the other precision (other draws: another training and validation set), the saved best validation loss compared
    with the new set's, so that 20 more steps of experiment=quick would be thrown away for the saved step's."""
    if step_dir.name.isdigit() and steps <= int(step_dir.name):  # nothing left to train: no other data to refuse
        return None
    saved, where = run_x64(step_dir)
    on = x64_on()
    if saved is None or saved == on:
        return None
    said = {True: "on", False: "off"}
    # Set from Python (jax.config.update before run(cfg)) where the variable says otherwise: the variable is no fix
    # there ("unset JAX_ENABLE_X64" would name a variable never set)
    fix = x64_fix(saved, on)
    return (f"was trained with JAX_ENABLE_X64 {said[saved]} ({where}jax_enable_x64 {str(saved).lower()}), this run "
            f"has it {said[on]}: the task's simulations and "
            f"losses differ under it, so it would train on other data and judge its validation losses against the "
            f"saved best on another set; {fix} to train it further, or start a new run {said_as(*WITHOUT_RESUME)}")

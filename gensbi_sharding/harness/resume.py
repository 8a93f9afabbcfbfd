"""Where a run resumes from, and whether it may: the checkpoint ``train.resume`` names, checked before any work.

``resume_point`` finds the step folder (``train.resume=auto``: the run's own newest); ``check_resume_settings`` refuses,
before simulating, settings under which the saved arrays mean something else, naming the overrides that match.
"""

from __future__ import annotations

import logging
import shlex
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from gensbi_sharding.harness.best_job import best_note
from gensbi_sharding.harness.config import ConfigError
from gensbi_sharding.harness.console import EVERY_PROCESS
from gensbi_sharding.harness.fresh_start import fresh_start_words
from gensbi_sharding.harness.model_switch import switched_model_fix
from gensbi_sharding.harness.hints import override_literal
from gensbi_sharding.harness.saving_record import saving_overrides
from gensbi_sharding.harness.runs_below import runs_note, sweep_jobs
from gensbi_sharding.harness.override_grammar import hydra_override
from gensbi_sharding.harness.python_words import in_python_words
from gensbi_sharding.harness.resume_settings import compute_dtype_note, refuse_resume_settings
from gensbi_sharding.harness.resume_command import launch_dir, requeued_step

__all__ = ["resume_step_dir", "resume_point", "check_resume_settings", "saved_statistics", "model_overrides"]

log = logging.getLogger("gensbi_sharding")


def resume_step_dir(cfg: DictConfig) -> Path | None:
    """The checkpoint step folder ``train.resume`` points at (relative to the launch folder)."""
    if not cfg.train.resume:
        return None
    from gensbi_sharding.checkpoint import CHECKPOINT_SUBDIR, find_checkpoint
    from gensbi_sharding.harness.resume_command import resumed_metrics
    from gensbi_sharding.harness.sampled_checkpoint import SEQUENTIAL, lost_step_metadata

    folder = launch_dir() / Path(cfg.train.resume).expanduser()
    if (folder / "multirun.yaml").is_file():  # a sweep's folder: its checkpoints are its jobs'
        jobs, named = sweep_jobs(folder), lambda job: hydra_override("train.resume", job)  # best-scoring first
        raise ConfigError(f"{hydra_override('train.resume', folder)} is a sweep's folder: " + (
            f"resume one of its jobs, {best_note(jobs, named)}" if jobs else
            "none of its jobs saved a checkpoint (a dry run saves none): start a new run without train.resume"))
    if (writer := _writing_run(folder)) is not None:
        raise ConfigError(writer)
    try:
        return find_checkpoint(cfg.train.resume, base_dir=launch_dir())
    except FileNotFoundError as err:
        if lost := getattr(err, "unconfirmed", None):  # a step newer than the newest complete one lost its metadata
            raise ConfigError(f"{hydra_override('train.resume', cfg.train.resume)}: {lost}"
                              f"{_source_gone(folder.resolve())}") from None
        metrics = folder / "metrics.json"  # a run's folder that saved no checkpoint: say why
        gone = _source_gone(folder) if lost_step_metadata(folder) else ""  # the step to resume, by its path
        said = _lost_here(folder.resolve()) or str(err) if gone else f"{err}, as train.resume=<folder>"  # not parent
        if not metrics.is_file():  # the override named, not a bare "checkpoint path ..."
            said = getattr(err, "reason", said) if (below := runs_note(folder, "train.resume", err)) else said
            raise ConfigError(f"{hydra_override('train.resume', cfg.train.resume)}: {said}"
                              f"{below}{gone}; or leave train.resume out to start fresh") from None
        if gone:  # ``err`` names the step and the fix (was, status ok: "holds a completed run whose checkpoints are
            raise FileNotFoundError(f"{said}{gone}; or start a new run without train.resume") from None  # gone ...")
        status = (previous := resumed_metrics(metrics, cfg.train.resume)).get("status")
        why = ("is a sequential job's folder (benchmarks/sequential.py), whose rounds keep no checkpoint: start a new "
               "run without train.resume" if (folder / SEQUENTIAL).is_file() else  # none were kept
               "holds a dry run (dry_run=true saves no checkpoint): start a new run without train.resume"
               if "dry_run" in previous else f"holds a completed run whose checkpoints are gone (no complete "
               f"step folder in {folder / CHECKPOINT_SUBDIR}): start a new run without train.resume"
               if status == "ok" else f"holds a run that saved no complete checkpoint (status {status}): " + (
                   f"resume the checkpoint it continued, {hydra_override('train.resume', previous['resumed_from'])}, "
                   "or start a new run without train.resume" if previous.get("resumed_from") else  # none continued:
                   "start a new run without train.resume"))  # there is no "run it failed to continue"
        raise FileNotFoundError(f"{err}; {folder} {why}") from None


def _lost_here(step: Path) -> str | None:
    """"<step> is not a complete checkpoint (...)" where ``step`` is a step folder that lost its Orbax step metadata
    beside a complete one (``find_checkpoint`` then says to pass its parent, refused: a newer step lost it); else None.
    Worded from the folders, not ``find_checkpoint``'s message cut at "; pass its parent"."""
    from gensbi_sharding.checkpoint_steps import committed_steps, unconfirmed_steps

    if not (step.name.isdigit() and int(step.name) in unconfirmed_steps(step.parent) and committed_steps(step.parent)):
        return None
    return (f"{step} is not a complete checkpoint (its items are there, but not Orbax's step metadata, the record of "
            "its commit (deleted, or left out of a copy): copy the step folder again whole from where it was saved)")


def _source_gone(folder: Path) -> str:
    """What to do where the step ``folder`` designates lost its Orbax step metadata and the folder it was copied from
    is gone (``find_checkpoint``'s fix, copying it again, then cannot be followed): resume the newest complete step
    beside it, named, or, where there is none, say so."""
    from gensbi_sharding.checkpoint_steps import CHECKPOINT_SUBDIR, committed_steps

    checkpoints = folder.parent if folder.name.isdigit() and not (folder / CHECKPOINT_SUBDIR).is_dir() else (
        folder / CHECKPOINT_SUBDIR if (folder / CHECKPOINT_SUBDIR).is_dir() else folder)
    steps = committed_steps(checkpoints)
    return "; if the folder it was copied from is gone, " + (
        f"resume the newest complete step left, {hydra_override('train.resume', checkpoints / str(steps[-1]))}" if steps
        else f"no complete step is left in {checkpoints} to resume")


def _writing_run(folder: Path) -> str | None:
    """Why ``train.resume=<folder>`` (a run's folder, its checkpoints/ or one step) cannot be read now: another
    process holds that run's lock, saving and deleting checkpoints (``train.keep``): the newest step, picked, may
    be deleted before it is read ("checkpoint path '<run>/checkpoints/1400' does not exist; pass a run dir")."""
    from filelock import FileLock, Timeout
    from hydra.core.hydra_config import HydraConfig

    from gensbi_sharding.harness.folder_lock import FolderLock

    run = next((f for f in (folder, folder.parent, folder.parent.parent) if (f / FolderLock.LOCK).is_file()), None)
    own = Path(HydraConfig.get().runtime.output_dir).resolve() if HydraConfig.initialized() else None
    if run is None or run.resolve() == own:  # this job's own folder: its lock is this job's (distributed=local's
        return None  # processes too, whose parent holds it)
    try:
        with FileLock(run / FolderLock.LOCK, timeout=0, is_singleton=True):  # this process's own: re-entered
            return None
    except Timeout:
        pass
    return (f"{hydra_override('train.resume', folder)}: a run is still writing in {run} ({FolderLock(run).holder()}), "
            "and deletes older checkpoints as it saves new ones, so the one picked may be gone before it is read; "
            "wait for that run to end, or copy its newest complete step folder (mkdir -p <copy>/checkpoints; cp -r "
            f"{shlex.quote(str(run / 'checkpoints'))}/<step> <copy>/checkpoints/) and give train.resume=<copy>")


def resume_point(cfg: Any, out: Any) -> Any:
    """The checkpoint step folder a run resumes from, or None to start fresh.

    ``train.resume=auto``: the newest complete checkpoint in the run's own folder
    (requeued with the same command and ``hydra.run.dir``), None if there is none yet.
    Any other value: the folder ``train.resume`` points at (``resume_step_dir``), or where the run's own folder
    holds a checkpoint saved continuing that same run, that one (``requeued_step``). Either way resolved
    (symlinks, ``..``): ``resumed_from`` in ``metrics.json`` keeps naming the checkpoint restored after a
    symlinked folder (``hydra.run.dir=runs/latest``) points elsewhere.
    """
    from gensbi_sharding.checkpoint import CHECKPOINT_SUBDIR, committed_steps

    if cfg.train.resume != "auto":
        if (own := requeued_step(out, cfg.train.resume)) is None:
            with in_python_words():  # run(cfg) from Python: its refusals in the settings it sets
                return resume_step_dir(cfg)
        log.info("train.resume=%s: %s already holds its own checkpoint (step %d) of this continuation, as after a "
                 "requeue: resuming from it", cfg.train.resume, out, own)
        return (Path(out) / CHECKPOINT_SUBDIR / str(own)).resolve()
    steps = committed_steps(out / CHECKPOINT_SUBDIR)
    # a sweep's job never run before (continued after a Ctrl-C) starts in one short line: there is nothing to advise
    log.info("train.resume=auto: %s", f"resuming from step {steps[-1]}" if steps else fresh_start_words(out))
    return (out / CHECKPOINT_SUBDIR / str(steps[-1])).resolve() if steps else None


def check_resume_settings(step_dir: Path, cfg: DictConfig) -> None:
    """Before simulating: ``resume_settings.refuse_resume_settings`` (the overrides that match the checkpoint in
    ``step_dir``), then a changed schedule or compute dtype is said (a warning when the saved run was unfinished)."""
    from gensbi_sharding.checkpoint import saved_config
    from gensbi_sharding.harness.schedule import schedule_change_note

    refuse_resume_settings(step_dir, cfg)
    saved, now = saved_config(step_dir), OmegaConf.to_container(cfg, resolve=True)
    for note in filter(None, (said(saved, now, int(step_dir.name)) for said in (schedule_change_note,
                                                                                  compute_dtype_note))):
        log.log(logging.WARNING if note[1] else logging.INFO, "%s", note[0], extra=EVERY_PROCESS)  # allowed, but said


def saved_statistics(step_dir: Path | None) -> dict | None:
    """The z-score statistics saved with the checkpoint in ``step_dir`` (None: a fresh run, or a checkpoint
    saved before they were, whose run then recomputes them from its own simulations, with a warning)."""
    if step_dir is None:
        return None
    from gensbi_sharding.checkpoint import saved_info
    from gensbi_sharding.harness.simulation_data import NORMALIZATION

    statistics = saved_info(step_dir).get(NORMALIZATION)
    if statistics is None:
        log.warning("checkpoint %s holds no z-score statistics (saved by an earlier version): they are recomputed "
                    "from this run's simulations, the same only if seed and data.* are as when it was saved",
                    step_dir, extra=EVERY_PROCESS)
    return statistics


#: Model fields a resumed run may change: how it is built and the compute dtype. Every other one decides what
#: the saved weights compute, even where all shapes fit (Flux1's rope base, or the heads one width is cut into).
FREE_MODEL_FIELDS = ("init", "dtype")


def model_overrides(step_dir: Path, model_cfg: DictConfig, command: list[str] | None = None,
                    also: list[str] | tuple = ()) -> str:
    """"the checkpoint was saved with model.width=128 (this run: model.width=32): add ...".

    When the saved sizes come from a preset the saving run chose and this one did not (``experiment=quick``),
    the preset leads: "saved under experiment=quick, which gives model.width=32 model.depth=1 (this run: ...):
    add experiment=quick (or model.width=32 model.depth=1)", with the values this run types over it added.
    ``command``: this run's overrides (Hydra's ``overrides.task``; None: read from Hydra, and no preset named
    outside a Hydra app). ``also``: other overrides the resume needs (``data.theta_transform=support``), added to
    each fix named, so that one refusal names them all.
    """
    from gensbi_sharding.checkpoint import saved_config

    saved = saved_config(step_dir).get("model") or {}
    now = OmegaConf.to_container(model_cfg, resolve=True)
    more = "".join(f" {o}" for o in also)
    if saved.get("name", now.get("name")) != now.get("name"):  # the model, and the sizes it leaves differing
        return switched_model_fix(step_dir, saved, now.get("name"), command, more)
    differ = {k: v for k, v in saved.items() if k not in FREE_MODEL_FIELDS and now.get(k) != v}
    if not differ:
        return ""
    typed = lambda keys: " ".join(f"model.{k}={override_literal(differ[k])}" for k in keys)  # noqa: E731
    fix, this = typed(differ), " ".join(f"model.{k}={override_literal(now.get(k))}" for k in differ)
    presets, rest, searched, steps = _presets_giving(step_dir, differ, command)
    if not presets:
        return f"the checkpoint was saved with {fix} (this run: {this}): add {fix}{more}. "
    # A preset's train.steps short of the checkpoint's step: was refused in turn, a second try ("is at step 40,
    # beyond train.steps=20"); its step evaluates it. The rest: this run types other values of them, which win over
    # the preset (model.width=64).
    short = [f"train.steps={step_dir.name}"] if steps is not None and str(steps).isdigit() and \
        step_dir.name.isdigit() and int(steps) < int(step_dir.name) else []
    added = dict.fromkeys([*searched, *presets, *typed(rest).split(), *short, *also])  # each once
    return (f"the checkpoint was saved under {' '.join(presets)}{' with' if rest else ', which gives'} {fix} "
            f"(this run: {this}): add {' '.join(added)} (or {fix}{more}). ")


def saved_model_choice(step_dir: Path, name: str) -> str:
    """``model=<name>``; or the preset of one's own the saving run chose for it, with the search path that finds it
    (``'hydra.searchpath=[file://.../my_conf]' model=my_flux1``; was ``model=flux1``, whose sizes were refused next)."""
    from hydra.core.hydra_config import HydraConfig

    from gensbi_sharding.harness.sweep_hints import search_path_of

    searched, overrides = saving_overrides(step_dir) or ([], [])
    picked = [o for o in overrides if o.split("=", 1)[0] == "model"][-1:]
    if not picked or picked[0] == f"model={name}":
        return f"model={name}"
    this = search_path_of(HydraConfig.get().overrides.hydra) if HydraConfig.initialized() else []
    return " ".join([*(shlex.quote(o) for o in searched if o not in this), picked[0]])


def _presets_giving(step_dir: Path, differ: dict[str, Any], command: list[str] | None
                    ) -> tuple[list[str], list[str], list[str], Any]:
    """The group choices of the run that saved ``step_dir`` this run lacks (``experiment=quick``), when added to
    this run's overrides they give some of the saved ``differ`` values, the keys they leave differing, and the
    saving run's search path where this run needs it to find them (shell-quoted), and the ``train.steps`` they give
    (None: unknown); ``([], keys, [], None)`` where none helps or either command is unknown. Checked by composing: a
    value this run types (``model.width=128``) still wins over the preset. Only the choices that give a value are
    named: the saving run's ``rule=tensor`` gives none, and adding it would move a run resumed under ``rule=fsdp``
    back onto the saving run's rule."""
    from gensbi_sharding.harness.override_keys import option_groups
    from gensbi_sharding.harness.sweep_hints import search_path_of

    record, this_search = saving_overrides(step_dir), []
    if command is None:
        from hydra.core.hydra_config import HydraConfig

        command = [str(o) for o in HydraConfig.get().overrides.task] if HydraConfig.initialized() else None
        this_search = search_path_of(HydraConfig.get().overrides.hydra) if HydraConfig.initialized() else []
    if record is None or command is None or any(o.startswith("--config-") for o in record[0]):
        return [], list(differ), [], None  # (its presets in a config folder of its own: not composed here)
    choices = [o for o in record[1] if o not in command and "." not in o.split("=", 1)[0]]  # no group name has one
    groups = set(option_groups()) - {"sweep"} if choices else set()  # a sweep preset chooses no sizes of one job
    presets = [o for o in choices if o.split("=", 1)[0].lstrip("+~") in groups]
    kept = [o for o in command if not o.startswith(("hydra.", "train.resume="))]

    composed: dict[tuple[str, ...], dict | None] = {}  # chosen -> its model and train sections

    def left(chosen: list[str]) -> list[str] | None:  # the keys still differing with ``chosen`` added
        sections = composed[tuple(chosen)] = composed_sections(tuple([*record[0], *kept, *chosen]))
        return None if sections is None else [k for k, v in differ.items() if sections["model"].get(k) != v]

    rest = left(presets) if presets else None
    if rest is None or len(rest) == len(differ):
        return [], list(differ), [], None
    for preset in list(presets):  # drop each choice the others give the same without
        fewer = [p for p in presets if p != preset]
        if fewer and left(fewer) == rest:
            presets = fewer
    searched = [shlex.quote(o) for o in record[0] if o not in this_search]  # composed only if it adds a folder
    found = not searched or composed_sections(tuple([*this_search, *kept, *presets])) is not None  # without it
    return presets, rest, [] if found else searched, composed[tuple(presets)]["train"].get("steps")


def composed_sections(overrides: tuple[str, ...]) -> dict | None:
    """The ``model`` and ``train`` sections ``overrides`` compose to, by name (inside Hydra's app, its config folder
    and primary config, ``--config-name``; else ``conf/config.yaml``)."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.hydra_config import HydraConfig

    from gensbi_sharding.harness.config import register_configs
    from gensbi_sharding.harness.groups import CONF

    register_configs()  # conf/model/*.yaml pull in the schemas it stores
    name = OmegaConf.select(HydraConfig.get(), "job.config_name", default=None) if HydraConfig.initialized() else None
    try:
        if GlobalHydra.instance().is_initialized():
            cfg = compose(name or "config", overrides=list(overrides))
        else:
            with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
                cfg = compose("config", overrides=list(overrides))
        return {section: OmegaConf.to_container(cfg[section], resolve=True) for section in ("model", "train")}
    except Exception:  # a hint is worth no failure: the values themselves are named instead
        return None

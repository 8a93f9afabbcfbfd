"""``validate(cfg)``: what the typed schema cannot say (ranges, choices, registered names, the rule table).

Raised as ``ConfigError`` naming the key, its value and the override that fixes it.
"""

from __future__ import annotations

import re

from omegaconf import DictConfig, OmegaConf

from gensbi_sharding.harness.composed_defaults import suggested_default
from gensbi_sharding.harness.config import ConfigError, TrainConfig, require
from gensbi_sharding.harness.distributed_checks import check_distributed
from gensbi_sharding.harness.groups import chosen_options
from gensbi_sharding.harness.held_out import val_pairs_problem
from gensbi_sharding.harness.known_fields import check_known_fields
from gensbi_sharding.harness.hints import mesh_spec_fix, override_literal
from gensbi_sharding.harness.config_schema import check_schema
from gensbi_sharding.harness.config_values import check_lists, check_numbers, interpolation_problem
from gensbi_sharding.harness.factory_keywords import own_data_problem
from gensbi_sharding.harness.model_checks import check_model
from gensbi_sharding.harness.name_hints import registered_name_problem
from gensbi_sharding.harness.python_words import in_python_words, said_as, setting
from gensbi_sharding.harness.refusal import Refusal, rephrased
from gensbi_sharding.harness.rule_config import (MESH_AXES, activation_axes_problem, check_table_against_mesh,
                                                 partition_axis_from_config, rule_table)
from gensbi_sharding.harness.tasks import (NUM_OBSERVATIONS, REFERENCE_SAMPLES, TASKS, num_samples_problem,
                                           ode_steps_problem)

__all__ = ["validate", "dry_run_resume_problem", "scored_observations"]


def validate(cfg: DictConfig) -> None:
    """Check what the types cannot: ranges, choices, registered names and the rule table.

    Raises
    ------
    ConfigError
        Naming the first bad key, its value and the override that fixes it (a message that names none gets
        the key's default as the command composes it, ``suggested_default``: never the value refused).
    """
    try:
        _validate(cfg)
        problem = registered_name_problem(cfg, chosen_options())  # model.name, data.name, rule.name
        if problem is None and cfg.eval.enabled and not cfg.dry_run and cfg.data.name not in TASKS:
            # Evaluation reads sbibm's observations and reference samples by the task's name: refused after
            # training, naming sbibm's tasks ("e.g. data=slcp"), which is no fix for a data set of one's own.
            problem = Refusal(f"data.name={cfg.data.name} is a data set of your own, not an sbibm task: the "
                              "evaluation (posterior samples scored by C2ST) reads sbibm's observations and reference "
                              "posterior samples, which it has none of", "eval.enabled=false",
                              after=" to train it (checkpoints and losses are written as usual)")
        if problem is None:  # GenSBI checks these sections only after simulating; they need model.name's fields
            check_model(cfg.model, traced=cfg.mesh.spec is not None and not cfg.dry_run, dry_run=cfg.dry_run)
            problem = own_data_problem(cfg.data.name)  # before the run's folder is made
    except ConfigError as err:
        raise ConfigError(_with_fix(err.args[0] if err.args else str(err), cfg)) from None  # a Refusal keeps its fix
    require(problem is None, problem)


def dry_run_resume_problem(cfg: DictConfig) -> str | None:
    """The one-line refusal of ``dry_run=true`` together with a ``train.resume``; None when not both.

    A dry run compiles one step and trains nothing, so it continues no run; it would otherwise ignore ``train.resume``
    and write its record over the resumable one.
    """
    resume = OmegaConf.select(cfg, "train.resume", default=None)
    if not OmegaConf.select(cfg, "dry_run", default=False) or resume is None:
        return None
    return (f"{said_as('dry_run=true', 'cfg.dry_run=True')} with {setting('train.resume', resume)}: a dry run trains "
            "nothing, continues no run and never writes into a run's folder; "
            f"{said_as('drop train.resume', 'set cfg.train.resume=None')} (a dry run in another "
            f"{said_as('hydra.run.dir', 'cfg.output_dir')}), or "
            f"{said_as('drop dry_run=true', 'set cfg.dry_run=False')} to continue the run")


def scored_observations(cfg: DictConfig) -> tuple[list[int], str | None]:
    """The observations evaluation scores, and a one-line note when ``data.num_observation`` is not one of them.

    ``eval.observations``, when set, lists every observation scored (over data.num_observation); null: that one.
    """
    observations = list(cfg.eval.observations or [cfg.data.num_observation])
    if cfg.data.num_observation in observations:
        return observations, None
    return observations, Refusal(f"eval.observations={override_literal(observations)} is scored, not "
                                 f"data.num_observation={cfg.data.num_observation}: eval.observations, when set, "
                                 f"lists every observation scored (add {cfg.data.num_observation} to it",
                                 "eval.observations=null", how=", or set ", after=" to score data.num_observation)")


def _with_fix(message: str, cfg: DictConfig) -> str:
    """``message`` + "; e.g. <key>=<default>" when it names a ``key=value`` but no override to type.

    The default is the one the command composes (``experiment=quick``'s data.batch_size=64), not the schema's 256,
    which a preset may have changed; and where the preset's value is the one refused, it is not offered as the fix
    (``suggested_default`` offers neither). Read in launch.py's words (a ``Refusal``'s ``shown``), which a Python
    caller's (``cfg.dry_run=False``) would answer otherwise."""
    launch = (f"{message.reason}{message.how}{message.shown}{message.after}" if isinstance(message, Refusal)
              and message.shown is not None and message.fix is not None else message)
    if re.search(r"(e\.g\.|set|add|use|pass|give|pick|choose) [a-z_]+\.[a-z0-9_.]+=", launch):
        return message
    named = re.match(r"([a-z_]+)\.([a-z0-9_]+)=", message)
    if not named:
        return message
    path = ".".join(named.groups())
    found, default = suggested_default(cfg, path)
    return Refusal(message, f"{path}={override_literal(default)}", how="; e.g. ") if found else message


def _folds_refusal(cfg: DictConfig, reason: str = "") -> Refusal:
    """eval.num_samples below 2 * eval.c2st_folds, with a fix that passes: 2 * folds samples where the task has that
    many reference samples, else the most it has and the folds they support (so no "set eval.num_samples=12000", then
    "set eval.num_samples=10000", still below 2 * 6000: advice that never passes). ``reason``: another refusal's
    reason of eval.num_samples (above the reference samples), which the same fix answers."""
    folds, samples = cfg.eval.c2st_folds, cfg.eval.num_samples
    reason = reason or f"eval.num_samples={samples} must be >= 2 * eval.c2st_folds (eval.c2st_folds={folds})"
    if cfg.data.name not in TASKS or not cfg.eval.enabled or 2 * folds <= REFERENCE_SAMPLES:
        return Refusal(reason, f"eval.num_samples={2 * folds}")
    return Refusal(reason, (f"eval.num_samples={REFERENCE_SAMPLES}", f"eval.c2st_folds={REFERENCE_SAMPLES // 2}"),
                   after=f" (task {cfg.data.name!r} has {REFERENCE_SAMPLES} reference posterior samples per "
                   "observation for C2ST, so at most that many samples and half as many folds)")


def _data_shards(cfg: DictConfig) -> int:
    """The shards the split rounds over, as far as the config tells before JAX starts: ``data.shards``, else one per
    process where the processes are written (``distributed.num_processes``, or ``distributed=local``'s count)."""
    if cfg.data.shards is not None:
        return max(int(cfg.data.shards), 1)
    distributed = cfg.get("distributed") or {}
    if distributed.get("mode", "none") == "none":
        return 1
    return max(int(distributed.get("num_processes") or distributed.get("local_processes") or 1), 1)


def _validate(cfg: DictConfig) -> None:
    problem = interpolation_problem(cfg) or dry_run_resume_problem(cfg)  # first: the checks below read resolved values
    require(problem is None, problem or "")
    check_schema(cfg)  # a config loaded untyped (a run's .hydra/config.yaml) and edited: its types and keys first
    check_lists(cfg)
    check_numbers(cfg)
    check_known_fields(cfg)
    require(cfg.mesh.spec in (None, "auto", "dict"),
           Refusal(f"mesh.spec={override_literal(cfg.mesh.spec)} is not one of null, auto, dict",
                   mesh_spec_fix(cfg.mesh.spec), how="; e.g. "))
    require(cfg.mesh.model_axis >= 1, f"mesh.model_axis={cfg.mesh.model_axis} must be >= 1")
    axis, spec = cfg.mesh.model_axis, cfg.mesh.spec or "none"  # the fix checked against the devices (checked_fix)
    require(cfg.mesh.spec == "dict" or (axis == 1 and cfg.mesh.devices is None), Refusal("mesh.model_axis / mesh."
            "devices need the dict form", ("mesh.spec=dict", f"mesh.model_axis={axis}"), how=": use ",
            shown=f"mesh=dict mesh.model_axis={axis}",
            after=f" instead of {said_as(f'mesh={spec}', setting('mesh.spec', cfg.mesh.spec))}"))
    require(cfg.model.init in ("sharded", "eager"),
           f"model.init={override_literal(cfg.model.init)} is not one of sharded, eager")
    for key in ("num_simulations", "batch_size", "num_observation"):
        require(cfg.data[key] >= 1, f"data.{key}={cfg.data[key]} must be >= 1")
    require(0.0 < cfg.data.val_fraction < 1.0,
           f"data.val_fraction={cfg.data.val_fraction} must lie strictly between 0 and 1")
    problem = val_pairs_problem(cfg.data.num_simulations, cfg.data.val_fraction, cfg.data.batch_size,
                                shards=_data_shards(cfg))
    require(problem is None, problem or "")
    require(cfg.train.steps >= 1, f"train.steps={cfg.train.steps} must be >= 1")
    require(cfg.eval.batch_size >= 1, Refusal(f"eval.batch_size={cfg.eval.batch_size} must be >= 1",
                                              "eval.batch_size=2048", how="; e.g. "))
    # Before simulating: the batch shuffler refuses a negative seed only after the simulation.
    require(cfg.seed >= 0, Refusal(f"seed={cfg.seed} must be >= 0", "seed=0", how="; e.g. "))
    require(cfg.train.log_every >= 1, f"train.log_every={cfg.train.log_every} must be >= 1")
    require(cfg.train.learning_rate > 0, f"train.learning_rate={cfg.train.learning_rate} must be > 0")
    require(cfg.train.checkpoint_every >= 0,
           f"train.checkpoint_every={cfg.train.checkpoint_every} must be >= 0 (0: only at the end)")
    require(cfg.train.keep >= 1, f"train.keep={cfg.train.keep} must be >= 1")
    # One condition per message, each with the fix that passes it
    require(cfg.eval.c2st_folds >= 2, Refusal(f"eval.c2st_folds={cfg.eval.c2st_folds} must be >= 2 (cross-validation "
                                              "needs two folds)", "eval.c2st_folds=2"))
    require(cfg.eval.num_samples >= 2 * (folds := cfg.eval.c2st_folds), _folds_refusal(cfg))
    require((problem := ode_steps_problem(cfg.eval.ode_steps)) is None, problem or "")  # bounded
    problem = num_samples_problem(cfg.data.name, cfg.eval)  # before any folder
    if problem:  # its fix as data (the most samples); where that is below 2 * folds, both lowered
        reason, fix = problem.rsplit("; set ", 1)
        problem = _folds_refusal(cfg, reason) if 2 * folds > REFERENCE_SAMPLES else Refusal(reason, fix)
    require(problem is None, problem or "")
    if cfg.data.name in TASKS:  # another data source's observations are its own to check
        require(1 <= cfg.data.num_observation <= NUM_OBSERVATIONS, Refusal(
            f"data.num_observation={cfg.data.num_observation} is out of range: sbibm task {cfg.data.name!r} has "
            f"observations 1..{NUM_OBSERVATIONS}", "data.num_observation=1",
            after=f" (or another of 1..{NUM_OBSERVATIONS})"))
    observations = override_literal(list(cfg.eval.observations or []))  # as typed: [1,2], not Python's [1, 2]
    require(all(1 <= o <= 10 for o in cfg.eval.observations or ()) and cfg.eval.observations != [],
           Refusal(f"eval.observations={observations} must list sbibm observations 1..10", "eval.observations=[1,2,3]",
                   how=", e.g. ", after=", or be null for data.num_observation"))
    unique = list(dict.fromkeys(cfg.eval.observations or ()))
    require(len(unique) == len(cfg.eval.observations or ()),
            Refusal(f"eval.observations={observations} lists an observation twice (it would be scored and averaged "
                    "twice)", f"eval.observations=[{','.join(map(str, unique))}]"))
    require(cfg.eval.c2st_jobs >= 1 or cfg.eval.c2st_jobs == -1,
           f"eval.c2st_jobs={cfg.eval.c2st_jobs} must be >= 1, or -1 for one per core")
    require(cfg.train.schedule in ("cosine", "constant"),
           f"train.schedule={override_literal(cfg.train.schedule)} is not one of cosine, constant")
    require(0 <= cfg.train.warmup_steps < cfg.train.steps,
           f"train.warmup_steps={cfg.train.warmup_steps} must lie in 0..train.steps-1 ({cfg.train.steps - 1})")
    require(0.0 <= cfg.train.ema_decay < 1.0,
            Refusal(f"train.ema_decay={cfg.train.ema_decay} must lie in [0, 1) (0: no EMA)", "train.ema_decay=0.999",
                    how=", e.g. "))
    for key in ("val_every", "patience"):
        require(cfg.train[key] >= 0, f"train.{key}={cfg.train[key]} must be >= 0 (0: off)")
    every = max(1, min(250, cfg.train.steps // 4))
    # (val_every >= steps is let through: a short run of a preset with patience, e.g. experiment=sbibm train.steps=100)
    require(cfg.train.patience == 0 or cfg.train.val_every > 0, Refusal(
        f"train.patience={cfg.train.patience} needs validations during training, but train.val_every=0 validates "
        "only after the last step", f"train.val_every={every}",
        after=f", or {setting('train.patience', 0)} for no early stopping"))
    require(cfg.train.val_draws >= 1, f"train.val_draws={cfg.train.val_draws} must be >= 1")
    resume = cfg.train.resume
    # An unset shell variable (train.resume=$CKPT) must not start a fresh run without a word.
    with in_python_words():  # run(cfg) from Python: in the settings it sets, not launch.py's overrides
        auto = setting("train.resume", "auto")
        require(resume is None or str(resume).strip() != "",
                f"{setting('train.resume', resume, typed=f'train.resume={resume!r}')} is empty: pass {auto} (this "
                "run's folder), a run or checkpoint folder, or "
                f"{said_as('leave it out', 'set cfg.train.resume=None')} to start fresh")
        require(resume is None or str(resume) == "auto" or str(resume).strip().lower() != "auto",
                f"{setting('train.resume', resume)} is read as a folder name; to continue from this run's own "
                f"folder, pass {auto} (lower case)")
    require(cfg.data.theta_transform in ("support", "none"),
           f"data.theta_transform={override_literal(cfg.data.theta_transform)} is not one of support, none")
    require(cfg.data.x_transform in ("none", "log"),
           f"data.x_transform={override_literal(cfg.data.x_transform)} is not one of none, log")
    require(cfg.train.weight_decay >= 0, f"train.weight_decay={cfg.train.weight_decay} must be >= 0")
    # AdamW's decay is decoupled and scaled by the rate (w <- w - lr * (update + weight_decay * w)): at lr * wd >= 1
    # it flips the weights' signs each step instead of shrinking them, and above 2 they grow until the loss is NaN.
    # Refused where the decay is the larger factor (it is the cause); a rate far too large diverges in training,
    # whose error names the rate (its tests drive divergence by one: 1e25 at the default decay).
    lr, decay = cfg.train.learning_rate, cfg.train.weight_decay
    fix = f"train.weight_decay={min(TrainConfig.weight_decay, 0.1 / lr):g}"  # the default where it passes
    require(lr * decay < 1 or decay <= lr, Refusal(
        f"train.weight_decay={decay:g} with train.learning_rate={lr:g}: AdamW multiplies every weight by 1 - "
        f"learning_rate * weight_decay = {1 - lr * decay:.3g} per step, which must lie above 0 (at 0 or below the "
        "weights flip sign each step instead of shrinking, below -1 they grow until the loss is NaN)", fix,
        how="; e.g. ", after=" (or a lower train.learning_rate)"))
    require(cfg.data.shards is None or cfg.data.shards >= 1,
           f"data.shards={cfg.data.shards} must be >= 1, or null for one per process")
    require(cfg.devices.cpu_count is None or cfg.devices.cpu_count >= 1,
           f"devices.cpu_count={cfg.devices.cpu_count} must be >= 1")
    check_distributed(cfg)
    name, table = rule_table(cfg.rule)
    activation = OmegaConf.to_container(cfg.activation)
    try:  # keys and strategy
        partition_axis_from_config(activation, table, None)
    except ValueError as err:
        raise ConfigError(rephrased(err.args[0] if err.args else str(err), lead="activation: ")) from None
    if cfg.mesh.spec is not None:  # the mesh's axes are known now: refused before devices start and data is simulated
        check_table_against_mesh(name, table, MESH_AXES)
        fields = {k: v for k, v in activation.items() if k != "strategy"}
        problem = activation_axes_problem(fields, MESH_AXES) if activation.get("strategy") != "none" else None
        require(problem is None, rephrased(problem or "", lead="activation: "))

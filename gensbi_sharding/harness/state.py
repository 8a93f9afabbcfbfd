"""The train state of a run: model and optimizer, built in one place, placed by the plan, maybe resumed.

``builder`` is the one function that builds the model and its optimizer; sharded
initialisation, eager construction and the dry run all call it. Placement reads one
plan of the library (``harness.model_plan``): its fallbacks go into the log
and ``metrics.json``, and ``strict=true`` turns them into an error. A resumed run
restores onto the *current* mesh and rule (or onto one device with ``mesh=none``): the
restore target is planned from the live state, never read from the checkpoint (where from, and whether
it may: ``harness.resume``). A run's checkpoint (``checkpoint_tree``) holds its early-stopping state too,
best weights included.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from omegaconf import DictConfig, OmegaConf

from gensbi_sharding.harness.config import ConfigError
from gensbi_sharding.harness.console import EVERY_PROCESS
from gensbi_sharding.harness.factory_keywords import model_builder
from gensbi_sharding.harness.held_out import held_out_changes
from gensbi_sharding.harness.held_out_fix import held_out_warning, keep_split_overrides
from gensbi_sharding.harness.saving_record import launched_with
from gensbi_sharding.harness.model_checks import ACTIVATION_FIELDS_READ
from gensbi_sharding.harness.model_plan import sharded_init_traces, model_plan, trace_model
from gensbi_sharding.harness.model_switch import model_overrides
from gensbi_sharding.harness.rule_config import as_rule, partition_axis_from_config

if TYPE_CHECKING:  # annotations only: launch.py's start imports this module without JAX (test_start_imports)
    from jax.sharding import Mesh
    from gensbi_sharding.activations import PartitionAxis
    from gensbi_sharding.rules import Rule
    from gensbi_sharding.sharding import Plan

__all__ = ["TrainState", "builder", "build_state", "partition_axis_for", "checkpoint_tree", "BEST", "EARLY_STOPPING"]

log = logging.getLogger("gensbi_sharding")

#: Key of the best weights in a run's checkpoint (``checkpoint_tree``).
BEST = "best"
#: Key of the early-stopping scalars (``validation.EarlyStopping.scalars()``) in a checkpoint's ``info``.
EARLY_STOPPING = "early_stopping"


@dataclasses.dataclass
class TrainState:
    model: Any
    optimizer: Any
    plan: Plan | None  # the model's gensbi_sharding.Plan (None without a mesh)
    key: Any  # the base PRNG key, replicated
    start_step: int = 0
    ema: Any = None  # harness.ema.EMA of the parameters, placed like them; None: train.ema_decay=0
    early_stopping: Any = None  # validation.EarlyStopping restored from the checkpoint; None: start afresh
    val_afresh: bool = False  # resumed onto other held-out pairs or draws: its validation losses do not compare
    # The activation fields the model reads and their mesh axes (``activation_axes_read``): a mesh axis only they
    # split is in use too, so the placement block does not call it idle.
    activation_axes: dict = dataclasses.field(default_factory=dict)
    counts_steps: bool = True  # whether the optimizer state counts steps (saved with each checkpoint: COUNTS_STEPS)
    resumed_from: Path | None = None  # the checkpoint restored: finite, one to go back to if training diverges

    @property
    def nodes(self) -> tuple:
        """What is trained and checkpointed: ``(model, optimizer[, ema])``."""
        return (self.model, self.optimizer) if self.ema is None else (self.model, self.optimizer, self.ema)

    @property
    def sampled(self) -> int:
        """Index in ``nodes`` of the weights validated and sampled (``StepFunctions.weights``): the EMA if any."""
        return 0 if self.ema is None else 2

    @property
    def fallbacks(self) -> dict[str, str]:
        """Variables the rule could not split: path -> reason."""
        return dict(self.plan.fallbacks) if self.plan is not None else {}


def builder(cfg: DictConfig, *, dim_theta: int, dim_x: int, partition_axis: PartitionAxis | None,
            counted: bool = False) -> Callable[[], tuple]:
    """``build() -> (model, optimizer)``: the model of ``cfg.model`` and its AdamW optimizer.

    ``build`` makes its own ``nnx.Rngs(cfg.seed)``, so it can be traced (sharded
    initialisation, the dry run) as often as needed and always gives the same values.
    ``counted``: an optimizer state that counts steps whatever ``cfg.train.schedule``, as the checkpoint restored
    next holds one (``schedule.saved_counts_steps``), so a cosine run continued with ``train.schedule=constant``
    is not refused as saved "with another optimizer".
    """
    from flax import nnx

    from gensbi_sharding.harness.train import make_optimizer

    build_model = model_builder(cfg, dim_theta=dim_theta, dim_x=dim_x, partition_axis=partition_axis)
    tx = make_optimizer(learning_rate=cfg.train.learning_rate, weight_decay=cfg.train.weight_decay, counted=counted,
                        steps=cfg.train.steps, schedule=cfg.train.schedule, warmup_steps=cfg.train.warmup_steps)

    def build():
        model = build_model()
        return model, nnx.Optimizer(model, tx, wrt=nnx.Param)

    return build


def build_state(cfg: DictConfig, *, dim_theta: int, dim_x: int, mesh: Mesh | None, rule_name: str,
                table: dict, resume_dir: Path | None, sampling: bool = False) -> TrainState:
    """Build, place (and maybe restore) the model, its AdamW optimizer and the EMA of its weights.

    ``sampling``: ``resume_dir`` is read only to sample its weights (``sample.py``), and the log says so, not
    "resumed from" and "early stopping starts afresh" (training's words, and no training follows).
    """
    import jax

    import gensbi_sharding as gs
    from gensbi_sharding import checkpoint
    from gensbi_sharding.harness.ema import EMA
    from gensbi_sharding.harness.schedule import counts_steps, saved_counts_steps

    rule = as_rule(rule_name, table)
    partition_axis = partition_axis_for(cfg, table, mesh)
    # The optimizer state's form, counting steps or not: the checkpoint's (else it would not restore), or this run's.
    counted = counts_steps(OmegaConf.to_container(cfg.train)) if resume_dir is None else saved_counts_steps(
        checkpoint.saved_config(resume_dir), checkpoint.saved_info(resume_dir))
    build = builder(cfg, dim_theta=dim_theta, dim_x=dim_x, partition_axis=partition_axis, counted=counted)
    if mesh is None:
        model, optimizer = build()
        plan = None
    elif cfg.model.init == "sharded":  # each variable computed, then placed: the whole model never on one device
        plan = model_plan(trace_model(build, cfg, needed_by=sharded_init_traces), mesh, rule, strict=cfg.strict)
        model, optimizer = gs.init_sharded(build, mesh, rule, warn=False)
    else:  # planned from the built model: a constructor that cannot be traced works here
        model, optimizer = build()
        plan = model_plan(model, mesh, rule, strict=cfg.strict)
        gs.place((model, optimizer), gs.plan_shardings((model, optimizer), mesh, rule))
    replicated = None if mesh is None else jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())
    # Made by a jitted function, not device_put: typed keys cannot be put onto other processes' devices.
    key = jax.jit(lambda: jax.random.key(cfg.seed), out_shardings=replicated)()
    # Copies of the placed parameters, carrying their annotations: placed by the plan of the same rule.
    ema = EMA(model, cfg.train.ema_decay) if cfg.train.ema_decay > 0 else None
    if ema is not None and mesh is not None:
        gs.place(ema, gs.plan_shardings(ema, mesh, rule))
    state = TrainState(model, optimizer, plan, key, ema=ema, activation_axes=activation_axes_read(cfg, partition_axis),
                       counts_steps=counted)
    if resume_dir is not None:
        try:
            _restore(state, resume_dir, mesh, rule, cfg, sampling)
        except ValueError as err:  # the saved variables do not fit: name the overrides that fit them
            raise ConfigError(f"{model_overrides(resume_dir, cfg.model)}{err}{launched_with(resume_dir)}") from None
        except FileNotFoundError as err:  # array data lost, which the check before the folder does not read
            if not hasattr(err, "reason") or sampling:  # (checkpoint.step_damage): the fix this folder's run takes
                raise
            from gensbi_sharding.harness.resume_settings import damaged_here

            if cfg.train.resume == "auto":  # the library's "resume from another step folder" is not this run's fix
                raise damaged_here(err.reason, resume_dir) from None
            # Not "start without it": the same command without train.resume is refused this folder, its record
            raise FileNotFoundError(str(err).replace(": start without it", ": start without train.resume, in another "
                                                     "hydra.run.dir (this one records this refusal)")) from None
    return state


def partition_axis_for(cfg: DictConfig, table: dict, mesh: Mesh | None):
    """The activation ``PartitionAxis`` the ``activation`` config gives on ``mesh`` (None: no constraints)."""
    try:
        axes = partition_axis_from_config(OmegaConf.to_container(cfg.activation), table, mesh)
    except ValueError as err:
        raise ConfigError(f"activation: {err}") from None
    if axes is not None:
        # Only the fields the model reads: Flux1's log claimed "head_axis: 'model'" under rule=tensor, never applied.
        read = ACTIVATION_FIELDS_READ.get(cfg.model.name)
        log.info("activation partition axes%s: %s", "" if read is None else f" (those model={cfg.model.name} reads)",
                 activation_axes_read(cfg, axes))
    return axes


def activation_axes_read(cfg: DictConfig, axes: Any) -> dict[str, Any]:
    """``{field: mesh axes}`` of the ``PartitionAxis`` ``axes`` (None: none) that ``cfg.model`` reads and splits."""
    read = ACTIVATION_FIELDS_READ.get(cfg.model.name)  # a model of the user's: every field counts
    return {} if axes is None else {k: v for k, v in axes._asdict().items()
                                    if v is not None and (read is None or k in read)}


def checkpoint_tree(state: Any, best: Any) -> dict:
    """What a run's checkpoint holds: the split train state (``"0"``, ``"1"``[, ``"2"``]) and ``BEST``.

    ``best`` is the best weights so far, or the current ones before a validation found one
    (``best_step`` None in the ``EARLY_STOPPING`` info): one layout, so the restore target
    is always the same. The train state keeps the names it has when saved alone, so a
    checkpoint without early-stopping state still restores it (``_restore``).
    """
    return {**{str(index): node for index, node in state.items()}, BEST: best}


def _restore(state: TrainState, step_dir: Path, mesh: Mesh | None, rule: Rule, cfg: DictConfig, sampling: bool) -> None:
    import jax
    from flax import nnx

    from gensbi_sharding import checkpoint
    from gensbi_sharding.harness.validation import EarlyStopping

    train_state = checkpoint.abstract_state_for(state.nodes, mesh, rule)
    info = checkpoint.saved_info(step_dir)
    scalars = info.get(EARLY_STOPPING)
    target = train_state
    if scalars is not None:  # the best weights: the same target (shardings) as the weights they copy
        target = checkpoint_tree(train_state, train_state[state.sampled])
    restored = checkpoint.restore(step_dir, target, key_sharding=state.key.sharding)
    if scalars is None:  # e.g. written by CheckpointWriter.save without info, or an earlier version
        if not sampling:  # a sample starts no early stopping
            log.warning("early stopping starts afresh: the checkpoint %s holds no early-stopping state (best "
                        "weights, validation losses), so its weights count as the best so far", step_dir,
                        extra=EVERY_PROCESS)
    else:
        best = restored.state[BEST]
        restored.state = nnx.State({index: restored.state[str(index)] for index in train_state})
        # The held-out pairs follow the effective shard count (data.shards=null: one per process), not the raw value.
        now = OmegaConf.to_container(cfg, resolve=True)
        changed = held_out_changes(restored.config, info, now, jax.process_count())
        if changed:  # a best loss on other held-out pairs would never be beaten, or be beaten by chance
            log.warning("%s", held_out_warning(changed, keep_split_overrides(restored.config, now), sampling=sampling),
                        extra=EVERY_PROCESS)
            scalars, state.val_afresh = None, True
        else:  # patience is the run's own setting (train_with_checkpoints sets it), not the checkpoint's
            state.early_stopping = EarlyStopping.resumed(patience=0, scalars=scalars, best_weights=best)
    nnx.update(state.nodes, restored.state)
    state.key, state.start_step, state.resumed_from = restored.key, restored.step, Path(restored.path)
    # No rule places anything without a mesh (sample.py's default): naming one there read as a placement.
    where = (f"placed by rule {rule.name!r} on mesh {dict(mesh.shape)}" if mesh is not None
             else "on one device (no mesh)")
    best_step = None if scalars is None else scalars["best_step"]
    if sampling:  # what is sampled, decided as own_observation samples it: the best weights where a validation ran
        kept = state.early_stopping.kept_best_step() if scalars is not None else None
        log.info("sampling checkpoint %s (step %d), %s; %s", restored.path, restored.step, where,
                 "its newest weights" if kept is None else f"the weights of its best validation (step {kept})")
        return
    log.info("resumed from %s at step %d, %s%s", restored.path, restored.step, where, "" if scalars is None else
             "; early stopping: " + ("no validation yet" if best_step is None else
                                     f"best step {best_step}, {len(scalars['history'])} validation(s)"))

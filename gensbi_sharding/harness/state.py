"""The train state of a run: model and optimizer, placed by the rule, maybe resumed.

Placement goes through the contract (``shard_model`` for a built-in rule,
``shard_model_by_table`` for a table of the user's), so the harness places
exactly as the library does; ``strict=true`` turns its fallbacks into an error.
A resumed run restores onto the *current* mesh and rule: the restore target is
built from the live (model, optimizer) and the current plan, never from the
shardings the checkpoint was saved with.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import warnings
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from gensbi_sharding.harness.config import ConfigError

__all__ = ["TrainState", "build_state", "place", "resume_step_dir", "partition_axis_for",
           "is_builtin", "honors_annotations"]

log = logging.getLogger("gensbi_sharding")


@dataclasses.dataclass
class TrainState:
    model: Any
    optimizer: Any
    fallbacks: dict[str, str]  # path -> why the rule could not split it
    key: Any  # the base PRNG key, replicated
    start_step: int = 0


def resume_step_dir(cfg: DictConfig) -> Path | None:
    """The checkpoint step folder ``train.resume`` points at (relative to the launch folder)."""
    if not cfg.train.resume:
        return None
    from gensbi_sharding.checkpoint import find_checkpoint

    return find_checkpoint(cfg.train.resume, base_dir=_launch_dir())


def build_state(cfg: DictConfig, *, dim_theta: int, dim_x: int, mesh: Any, rule_name: str,
                table: dict, resume_dir: Path | None) -> TrainState:
    """Build, place (and maybe restore) the model and its AdamW optimizer."""
    import jax
    import optax
    from flax import nnx

    from gensbi_sharding.harness.registry import get_model

    factory = get_model(cfg.model.name)
    hparams = {k: v for k, v in OmegaConf.to_container(cfg.model).items() if k not in ("name", "init")}
    hparams["partition_axis"] = partition_axis_for(cfg, table, mesh)
    tx = optax.adamw(cfg.train.learning_rate, weight_decay=cfg.train.weight_decay)

    def build():  # builds its own Rngs: init_sharded traces it, so it must hold no outside state
        return factory(dim_theta=dim_theta, dim_x=dim_x, rngs=nnx.Rngs(cfg.seed), **hparams)

    if cfg.model.init == "sharded" and mesh is not None:
        # Every variable is created at its placement: no device ever holds a whole split variable.
        from gensbi_sharding import init_optimizer_sharded, init_sharded

        fallbacks = _planned_fallbacks(nnx.eval_shape(build), mesh, rule_name, table, strict=cfg.strict)
        with _fallback_warnings_to_log():
            model = init_sharded(build, mesh, rule_name if is_builtin(rule_name, table) else table)
        optimizer = init_optimizer_sharded(model, tx, wrt=nnx.Param)
    else:
        model = build()
        fallbacks = place(model, mesh, rule_name, table, strict=cfg.strict)
        optimizer = nnx.Optimizer(model, tx, wrt=nnx.Param)
        place(optimizer, mesh, rule_name, table, strict=False)
    replicated = None if mesh is None else jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())
    # Made by a jitted function, not device_put: typed keys cannot be put onto other processes' devices.
    key = jax.jit(lambda: jax.random.key(cfg.seed), out_shardings=replicated)()
    state = TrainState(model, optimizer, fallbacks, key)
    if resume_dir is not None:
        try:
            _restore(state, resume_dir, mesh, rule_name, table)
        except ValueError as err:  # the saved variables do not fit: name the overrides that fit them
            raise ConfigError(f"{_model_overrides(resume_dir, cfg.model)}{err}") from None
    return state


def _model_overrides(step_dir: Path, model_cfg: DictConfig) -> str:
    """"the checkpoint was saved with model.width=128 (this run: model.width=32): add ...". """
    from gensbi_sharding.checkpoint import saved_config

    saved = saved_config(step_dir).get("model") or {}
    now = OmegaConf.to_container(model_cfg, resolve=True)
    if saved.get("name", now.get("name")) != now.get("name"):
        return f"the checkpoint holds model={saved['name']} (this run: model={now.get('name')}): add model={saved['name']}. "
    differ = {k: v for k, v in saved.items() if k != "init" and now.get(k) != v}
    if not differ:
        return ""
    fix = " ".join(f"model.{k}={v}" for k, v in differ.items())
    this = " ".join(f"model.{k}={now.get(k)}" for k in differ)
    return f"the checkpoint was saved with {fix} (this run: {this}): add {fix}. "


def partition_axis_for(cfg: DictConfig, table: dict, mesh: Any):
    """The activation ``PartitionAxis`` the ``activation`` config gives on ``mesh`` (None: no constraints)."""
    from gensbi_sharding.activations import partition_axis_from_config

    try:
        axes = partition_axis_from_config(OmegaConf.to_container(cfg.activation), table, mesh)
    except ValueError as err:
        raise ConfigError(f"activation: {err}") from None
    if axes is not None:
        log.info("activation partition axes: %s", {k: v for k, v in axes._asdict().items() if v is not None})
    return axes


def _restore(state: TrainState, step_dir: Path, mesh: Any, rule_name: str, table: dict) -> None:
    from flax import nnx

    from gensbi_sharding import checkpoint

    if mesh is None:
        raise ConfigError("train.resume needs a mesh to restore onto; use mesh=auto or mesh=dict")
    target = checkpoint.abstract_state_for((state.model, state.optimizer), mesh, table,
                                           honor_annotations=honors_annotations(rule_name, table))
    restored = checkpoint.restore(step_dir, target, key_sharding=state.key.sharding)
    nnx.update((state.model, state.optimizer), restored.state)
    state.key, state.start_step = restored.key, restored.step
    log.info("resumed from %s at step %d, placed by rule %r on mesh %s", restored.path, restored.step,
             rule_name, dict(mesh.shape))


def is_builtin(rule_name: str, table: dict) -> bool:
    """Whether ``table`` is exactly the contract's rule ``rule_name`` (placed by ``shard_model``)."""
    from gensbi_sharding import RULES

    return rule_name in RULES and table == dict(RULES[rule_name])


def honors_annotations(rule_name: str, table: dict) -> bool:
    """The contract's "replicated" ignores annotations (and never warns); every other table reads them."""
    return not (is_builtin(rule_name, table) and rule_name == "replicated")


def place(node: Any, mesh: Any, rule_name: str, table: dict, *, strict: bool) -> dict[str, str]:
    """Place ``node`` under the rule; returns the fallbacks (path -> reason).

    Raises
    ------
    ConfigError
        With ``strict``, listing every variable the rule cannot split.
    """
    import gensbi_sharding as gs

    if mesh is None:
        return {}
    fallbacks = _planned_fallbacks(node, mesh, rule_name, table, strict=strict)
    with _fallback_warnings_to_log():
        if is_builtin(rule_name, table):
            gs.shard_model(node, mesh, rule_name)
        else:
            gs.shard_model_by_table(node, mesh, table)
    return fallbacks


def _planned_fallbacks(node: Any, mesh: Any, rule_name: str, table: dict, *, strict: bool) -> dict[str, str]:
    """The variables the rule cannot split (concrete or abstract node); an error under strict."""
    import gensbi_sharding as gs

    _, fallbacks = gs.plan_shardings(node, mesh, table,
                                           honor_annotations=honors_annotations(rule_name, table))
    if strict and fallbacks:
        listed = "; ".join(f"{p} ({r})" for p, r in fallbacks.items())
        raise ConfigError(f"strict=true and rule {rule_name!r} cannot split {len(fallbacks)} "
                          f"variable(s): {listed}. Fix the annotation or dimension, or set strict=false")
    return fallbacks


@contextlib.contextmanager
def _fallback_warnings_to_log():
    """The contract's one fallback warning goes into the job's log; other warnings pass through."""
    from gensbi_sharding import ExperimentalRuleWarning, ShardingFallbackWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    for w in caught:
        if issubclass(w.category, ShardingFallbackWarning):
            log.warning("%s", w.message)
        elif not issubclass(w.category, ExperimentalRuleWarning):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)


def _launch_dir() -> str | None:
    from hydra.core.hydra_config import HydraConfig
    from hydra.utils import get_original_cwd

    return get_original_cwd() if HydraConfig.initialized() else None

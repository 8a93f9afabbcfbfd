"""Checkpoints that move between meshes: save under one (mesh, rule), restore under another.

Orbax items per step: arrays (train state, RNG key), meta (step, key types), config (JSON).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp
from flax import nnx
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from gensbi_sharding.checkpoint_steps import CHECKPOINT_SUBDIR, ITEMS, as_path, committed_steps, find_checkpoint
from gensbi_sharding.rules import Rule, RuleTable
from gensbi_sharding.sharding import abstract_state, check_node, is_int, is_node, plan_shardings

__all__ = ["CHECKPOINT_SUBDIR", "CheckpointWriter", "Restored", "abstract_state_for",
           "committed_steps", "find_checkpoint", "restore", "saved_config"]

_FORMAT = 1
_MAX_LISTED = 6  # mismatching variables quoted in full in an error


def _handlers() -> dict[str, Any]:
    """One Orbax handler per item (``ITEMS``: arrays, meta, config)."""
    return dict(zip(ITEMS, (ocp.StandardCheckpointHandler(), ocp.JsonCheckpointHandler(), ocp.JsonCheckpointHandler())))


class CheckpointWriter:
    """Save the train state every ``every`` steps (0: only on ``save``) and at the end, keeping the last ``keep``.

    ``config`` (the resolved config, JSON-serialisable) is stored with every checkpoint. With ``async_save``
    ``save`` returns once arrays are off the devices (the state may be donated); ``close`` waits for files.
    """

    def __init__(self, directory: str | os.PathLike, *, every: int = 0, keep: int = 2,
                 config: Mapping[str, Any] | None = None, async_save: bool = True):
        if not is_int(every) or every < 0:
            raise ValueError(f"every must be an integer >= 0, got {every!r}; pass 0 to save only at the end")
        if not is_int(keep) or keep < 1:
            raise ValueError(f"keep must be an integer >= 1, got {keep!r}; pass e.g. keep=2")
        if not isinstance(async_save, bool):
            raise TypeError(f"async_save={async_save!r:.60} must be True or False")
        if config is not None and not isinstance(config, Mapping):
            raise TypeError(f"config={config!r:.60} must be a mapping (the resolved config), e.g. "
                            "OmegaConf.to_container(cfg, resolve=True), or None")
        self.directory = as_path(directory, "directory").absolute()
        self.config = dict(config or {})
        try:
            json.dumps(self.config)
        except TypeError as err:
            raise ValueError(f"config must be JSON-serialisable ({err}); pass plain containers, "
                             "e.g. OmegaConf.to_container(cfg, resolve=True)") from None
        self.every, self.keep = every, keep
        options = ocp.CheckpointManagerOptions(max_to_keep=keep, cleanup_tmp_directories=True,
                                               enable_async_checkpointing=async_save)
        self._manager = ocp.CheckpointManager(self.directory, options=options, item_handlers=_handlers())
        self.last_saved: int | None = None

    def due(self, step: int) -> bool:
        """Whether ``maybe_save`` saves at ``step``."""
        return self.every > 0 and step % self.every == 0

    def maybe_save(self, step: int, state: Any, key: jax.Array) -> bool:
        """``save`` if ``due(step)``; returns whether it saved."""
        return self.due(step) and self.save(step, state, key)

    def save(self, step: int, state: Any, key: jax.Array) -> bool:
        """Save ``state`` (a pytree such as ``nnx.State``) and the RNG ``key`` as ``step``; False if already saved.

        Raises ``FloatingPointError``, writing nothing (no finite checkpoint is displaced), if a
        floating-point array holds NaN or inf; the message names the latest finite checkpoint.
        """
        if not is_int(step) or step < 0:
            raise ValueError(f"step={step!r} must be an integer >= 0 (the training step of the state)")
        if step == self.last_saved:
            return False
        if not is_node(state) and not (isinstance(state, Mapping) and state):
            raise TypeError(f"state={state!r:.60} must be an nnx.State (nnx.state(model)) or a mapping of arrays")
        if not (isinstance(key, jax.Array) and _is_key(key)):
            raise TypeError(f"key={key!r:.60} must be a typed JAX PRNG key, e.g. jax.random.key(0)")
        bad = _non_finite(state)
        if bad:
            latest = self.latest()
            raise FloatingPointError(
                f"the train state at step {step} is not finite ({len(bad)} array(s) hold NaN or inf, "
                f"e.g. {', '.join(bad[:3])}); it was not saved and displaces no checkpoint. "
                + (f"Last finite checkpoint: {latest}" if latest else "No earlier checkpoint was saved"))
        flat = {f"state/{name}": leaf for name, leaf in _flat(state).items()}
        flat["rng"] = key
        impls = {name: str(jax.random.key_impl(leaf)) for name, leaf in flat.items() if _is_key(leaf)}
        flat.update({name: jax.random.key_data(flat[name]) for name in impls})
        meta = {"format": _FORMAT, "step": int(step), "key_impls": impls}
        self._manager.save(int(step), force=True, args=ocp.args.Composite(
            arrays=ocp.args.StandardSave(_unflat(flat)), meta=ocp.args.JsonSave(meta),
            config=ocp.args.JsonSave(self.config)))
        self.last_saved = step
        return True

    def steps(self) -> list[int]:
        """Steps whose checkpoints are complete on disk (waits for pending writes)."""
        self._manager.wait_until_finished()
        return committed_steps(self.directory)

    def latest(self) -> Path | None:
        """The newest complete step folder (waits for pending writes); None if there is none."""
        steps = self.steps()
        return self.directory / str(steps[-1]) if steps else None

    def close(self) -> None:
        """Wait for pending writes and release the manager."""
        self._manager.wait_until_finished()
        self._manager.close()

    def __enter__(self) -> CheckpointWriter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def abstract_state_for(node: Any, mesh: Mesh | None, rule: str | RuleTable | Rule = "replicated") -> nnx.State:
    """The restore target: ``nnx.state(node)`` (or a factory's) as ``jax.ShapeDtypeStruct`` at the planned shardings.

    ``mesh=None``: this process's first device. Only shapes and dtypes of ``node`` are read.
    """
    check_node(node, "abstract_state_for", factory=True)
    abstract = node if is_node(node) else nnx.eval_shape(node)
    if mesh is not None:
        return plan_shardings(abstract, mesh, rule).abstract_state(abstract)
    device = jax.sharding.SingleDeviceSharding(jax.local_devices()[0])
    return abstract_state(abstract, lambda path, value: device if hasattr(value, "shape") else None)


@dataclasses.dataclass
class Restored:
    """A restored checkpoint; ``state`` has the structure and shardings of the target."""

    state: Any
    key: jax.Array
    step: int
    config: dict
    path: Path  # the step folder read


def restore(path: str | os.PathLike, abstract_state: Any, *, base_dir: str | os.PathLike | None = None,
            key_sharding: jax.sharding.Sharding | None = None) -> Restored:
    """Restore the checkpoint ``path`` designates (``find_checkpoint``) onto ``abstract_state``'s shardings.

    The RNG key goes to ``key_sharding`` (default: replicated). Raises, before any array is read,
    ``FileNotFoundError`` if ``path`` holds no complete checkpoint, ``ValueError`` if a target leaf has no
    sharding or variables are missing, extra, or differ in shape or dtype (named, with both shapes).
    """
    step_dir = find_checkpoint(path, base_dir)
    if not is_node(abstract_state) and not (isinstance(abstract_state, Mapping) and abstract_state):
        raise TypeError(f"abstract_state={abstract_state!r:.60} must be the restore target: build it with "
                        "checkpoint.abstract_state_for(model, mesh, rule)")
    with ocp.Checkpointer(ocp.CompositeCheckpointHandler(**_handlers())) as checkpointer:
        saved = _flat(checkpointer.metadata(step_dir).item_metadata["arrays"].tree)
        target = {f"state/{name}": leaf for name, leaf in _flat(abstract_state).items()}
        if "rng" in saved:
            target["rng"] = jax.ShapeDtypeStruct(saved["rng"].shape, saved["rng"].dtype,
                                                 sharding=key_sharding or _replicated_like(target))
        target = {name: _storage_target(name, leaf) for name, leaf in target.items()}
        _check_against(saved, target, step_dir)
        loaded = checkpointer.restore(step_dir, args=ocp.args.Composite(
            arrays=ocp.args.StandardRestore(_unflat(target)), meta=ocp.args.JsonRestore(),
            config=ocp.args.JsonRestore()))
    values, meta = _flat(loaded["arrays"]), loaded["meta"]
    for name, impl in meta.get("key_impls", {}).items():
        values[name] = jax.random.wrap_key_data(values[name], impl=impl)
    pairs, treedef = jax.tree_util.tree_flatten_with_path(abstract_state, is_leaf=_is_var)
    leaves = [values[f"state/{_key(keypath)}"] for keypath, _ in pairs]
    leaves = [old.replace(new) if _is_var(old) else new for (_, old), new in zip(pairs, leaves)]
    return Restored(state=jax.tree.unflatten(treedef, leaves), key=values.get("rng"),
                    step=int(meta["step"]), config=loaded["config"], path=step_dir)


def saved_config(path: str | os.PathLike, base_dir: str | os.PathLike | None = None) -> dict:
    """The config blob saved with the checkpoint ``path`` designates (no array is read; else as ``restore``)."""
    step_dir = find_checkpoint(path, base_dir)
    with ocp.Checkpointer(ocp.CompositeCheckpointHandler(**_handlers())) as checkpointer:
        return checkpointer.restore(step_dir, args=ocp.args.Composite(config=ocp.args.JsonRestore()))["config"]


def _is_var(x: Any) -> bool:
    return isinstance(x, nnx.Variable)


def _key(path: tuple) -> str:
    return jax.tree_util.keystr(path, simple=True, separator="/")


@jax.jit
def _finite_flags(leaves: list[jax.Array]) -> jax.Array:
    return jnp.stack([jnp.all(jnp.isfinite(leaf)) for leaf in leaves])


def _non_finite(state: Any) -> list[str]:
    """Names ("a/b/c") of the floating-point arrays of ``state`` holding NaN or inf."""
    flat = {name: leaf for name, leaf in _flat(state).items()
            if isinstance(leaf, jax.Array) and jnp.issubdtype(leaf.dtype, jnp.inexact)}
    if not flat:
        return []
    flags = np.asarray(_finite_flags(list(flat.values())))
    return [name for name, ok in zip(flat, flags) if not ok]


def _is_key(x: Any) -> bool:
    dtype = getattr(x, "dtype", None)
    return dtype is not None and jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key)


def _flat(tree: Any) -> dict[str, Any]:
    """``{"a/b/c": leaf}`` of a pytree; an ``nnx.Variable`` is a leaf, its value taken."""
    pairs = jax.tree_util.tree_leaves_with_path(tree, is_leaf=_is_var)
    return {_key(path): leaf.get_value() if _is_var(leaf) else leaf for path, leaf in pairs}


def _unflat(flat: Mapping[str, Any]) -> dict:
    """Nested dicts with string keys (what Orbax stores) from ``{"a/b/c": leaf}``."""
    out: dict = {}
    for name, leaf in flat.items():
        *parents, last = name.split("/")
        functools.reduce(lambda node, part: node.setdefault(part, {}), parents, out)[last] = leaf
    return out


def _storage_target(name: str, leaf: Any) -> jax.ShapeDtypeStruct:
    """What Orbax restores ``leaf`` from: itself, or its key data for a typed PRNG key."""
    if not isinstance(leaf, (jax.ShapeDtypeStruct, jax.Array)) or leaf.sharding is None:
        raise ValueError(f"restore target {name} is {type(leaf).__name__} without a sharding; build "
                         "the target with abstract_state_for(node, mesh, table)")
    shape = jax.eval_shape(jax.random.key_data, leaf) if _is_key(leaf) else leaf
    return jax.ShapeDtypeStruct(shape.shape, shape.dtype, sharding=leaf.sharding)


def _replicated_like(target: Mapping[str, Any]) -> jax.sharding.Sharding:
    for leaf in target.values():
        if isinstance(getattr(leaf, "sharding", None), NamedSharding):
            return NamedSharding(leaf.sharding.mesh, P())
    return jax.sharding.SingleDeviceSharding(jax.local_devices()[0])


def _check_against(saved: Mapping[str, Any], target: Mapping[str, Any], step_dir: Path) -> None:
    problems = [f"{n}: missing from the checkpoint" for n in target if n not in saved]
    problems += [f"{n}: in the checkpoint, not in the model" for n in saved if n not in target]
    for name in (n for n in target if n in saved):
        s, t = saved[name], target[name]
        if tuple(s.shape) != tuple(t.shape) or s.dtype != t.dtype:
            problems.append(f"{name}: saved {tuple(s.shape)} {s.dtype}, target {tuple(t.shape)} {t.dtype}")
    if problems:
        more = len(problems) - _MAX_LISTED
        listed = "; ".join(problems[:_MAX_LISTED]) + (f"; and {more} more" if more > 0 else "")
        raise ValueError(f"checkpoint {step_dir} does not fit the current model, {len(problems)} variable(s) "
                         f"differ: {listed}. Build the model with the hyperparameters saved in {step_dir / 'config'}")

"""What a checkpoint's items hold: one Orbax handler per item of ``checkpoint_steps.ITEMS``, the arrays named by
their paths (flat and nested), which of them are not finite, the JSON items as plain data, and the checks of what
``CheckpointWriter.save`` takes (``checked_step``, ``check_state_and_key``)."""

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp
import tensorstore as ts
from flax import traverse_util

from gensbi_sharding.checkpoint_steps import ITEMS
from gensbi_sharding.messages import shown
from gensbi_sharding.nodes import is_int, is_node, is_prng_key, is_scalar, named_leaves, non_node_part

__all__ = ["check_state_and_key", "checked_json", "checked_step", "flat_by_path",
           "item_handlers", "nest_by_path", "non_finite", "stored_dtype"]


def item_handlers(saving: bool = False) -> dict[str, Any]:
    """One Orbax handler per item of ``ITEMS``; saving registers scalars and, on CPU, no replica-parallel saving."""
    arrays = ocp.StandardCheckpointHandler()
    if saving:
        th, parallel = ocp.type_handlers, None if jax.default_backend() != "cpu" else False  # None: Orbax's default
        arrays = ocp.PyTreeCheckpointHandler(type_handler_registry=th.create_type_handler_registry(
            *((kind, th.ScalarHandler()) for kind in (int, float, complex, np.number, np.bool_)),
            (np.ndarray, th.NumpyHandler()), (jax.Array, th.ArrayHandler(use_replica_parallel=parallel))))
    return dict(zip(ITEMS, (arrays, ocp.JsonCheckpointHandler(), ocp.JsonCheckpointHandler())))


def flat_by_path(tree: Any) -> dict[str, Any]:
    """``{"a/b/c": leaf}`` in leaf order, a variable by its value's leaves; ``ValueError`` if two get one name."""
    named = named_leaves(tree)
    flat, alike = dict(named), Counter(name.replace(".", "/") for name, _ in named)
    # A key holding "/" ({"x/y": ...}) beside a nested one ({"x": {"y": ...}}) names two leaves alike; "." in Orbax.
    clash = next((name for name, _ in named if any(name.rsplit("/", i)[0] in flat for i in range(
        1, name.count("/") + 1))), None) or next((name for name, _ in named if alike[name.replace(".", "/")] > 1), None)
    if clash:
        raise ValueError(f"two leaves of the state are named {clash!r} or one inside the other: a dict key holding "
                         "'/' or '.' beside a nested key (checkpoints name each leaf by its path joined with '/', "
                         "Orbax its arrays with '.'); rename that key, e.g. 'x/y' -> 'x_y'")
    return flat


def nest_by_path(flat: Mapping[str, Any]) -> dict:
    """Nest ``{"a/b/c": leaf}`` into ``{"a": {"b": {"c": leaf}}}`` (what Orbax stores), inverting ``flat_by_path``."""
    return traverse_util.unflatten_dict(dict(flat), sep="/")


def non_finite(flat: dict[str, Any], inf_allowed: set[str] = frozenset()) -> list[str]:
    """Names of the floating-point leaves of ``flat`` holding NaN or inf (those in ``inf_allowed``: NaN); one process's
    CPU arrays read in place (a compiled check took 0.5 s), others by one compiled check every process agrees on."""
    device = {name: leaf for name, leaf in flat.items()
              if isinstance(leaf, jax.Array) and jnp.issubdtype(leaf.dtype, jnp.inexact)}
    fine = lambda name, a: ~np.isnan(a) if name in inf_allowed else np.isfinite(a)  # noqa: E731
    if jax.process_count() == 1 and all(d.platform == "cpu" for v in device.values() for d in v.sharding.device_set):
        flags = [all(fine(name, np.asarray(shard.data)).all() for shard in v.addressable_shards
                     if shard.replica_id == 0) for name, v in device.items()]
    else:
        flags = (np.asarray(_finite_flags(list(device.values()), tuple(n in inf_allowed for n in device))) if device
                 else [])
    bad = {name for name, ok in zip(device, flags) if not ok} | {  # NumPy and scalars: checked on the host
        name for name, leaf in flat.items() if (isinstance(leaf, np.ndarray) or is_scalar(leaf))
        and jnp.issubdtype(np.asarray(leaf).dtype, jnp.inexact) and not fine(name, leaf).all()}
    return [name for name in flat if name in bad]


@jax.jit(static_argnums=1)
def _finite_flags(leaves: list[jax.Array], nan_only: tuple[bool, ...]) -> jax.Array:
    """One bool per leaf: all its values finite, or not NaN (``nan_only``) (one compiled reduction, one transfer)."""
    return jnp.stack([jnp.all(~jnp.isnan(leaf) if n else jnp.isfinite(leaf)) for leaf, n in zip(leaves, nan_only)])


def _check_str_keys(value: Any, where: str) -> None:
    # Hydra's ListConfig too, read by index (iterating one raises with no full_key)
    items = value.items() if isinstance(value, Mapping) else ((i, value[i]) for i in range(len(value))) if _listlike(
        value) else ()
    for key, item in items:
        if isinstance(value, Mapping) and not isinstance(key, str):
            raise ValueError(f"{where} has the key {key!r} ({type(key).__name__}); JSON keys are str: use {str(key)!r}")
        _check_str_keys(item, f"{where}[{key!r}]")  # (its ??? then named by full_key)


def _listlike(value: Any) -> bool:  # a ListConfig too; not bytes, a Sequence JSON would have saved as ints
    return isinstance(value, Sequence) and not isinstance(value, (str, bytes, bytearray, memoryview))


def checked_json(value: Any, name: str, example: str, label: str | None = None) -> dict:
    """``value`` (``config`` or ``info``) as plain JSON data, what a restore gives back, or the error naming it."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise TypeError(f"{name}={shown(value)} must be a mapping ({example}) or None")
    try:
        _check_str_keys(value, name)  # JSON would turn 1 into "1" (and two keys into one) without a word
    except Exception as err:  # OmegaConf's, reading a value: '???' (MissingMandatoryValue), an interpolation to nothing
        if (key := getattr(err, "full_key", None)) is None or not type(err).__module__.startswith("omegaconf"):
            raise
        raise ValueError(f"{name}: {key} cannot be read ({str(err).splitlines()[0]}): give it a value (an override "
                         f"{key}=...) or drop it, then pass OmegaConf.to_container(cfg, resolve=True)") from None
    try:
        return json.loads(json.dumps(dict(value), allow_nan=False, default=lambda o: dict(o) if isinstance(  # Hydra's
            o, Mapping) else list(o) if _listlike(o) else json.JSONEncoder().default(o)))  # DictConfig too
    except (TypeError, ValueError) as err:
        raise ValueError(f"{label or f'{name}={shown(value, 80)}'} must be JSON-serialisable ({err}); pass plain str, "
                         "int, float, bool, None, lists and dicts with str keys, e.g. float(x) or x.tolist() for an "
                         "array, None for NaN or inf, OmegaConf.to_container(cfg, resolve=True) for a config") from None


def stored_dtype(dtype: Any) -> bool:
    """Whether TensorStore (Orbax's array storage) has a data type for ``dtype``: none for uint4, uint2, float8_e4m3."""
    try:
        return bool(ts.dtype(np.dtype(dtype).name))
    except (ValueError, TypeError):
        return False


def checked_step(step: Any) -> int:
    """``step`` as an int (a 0-d integer array too: ``optimizer.step[...]``); else ``ValueError`` naming it."""
    whole = isinstance(step, (jax.Array, np.ndarray)) and step.ndim == 0 and jnp.issubdtype(step.dtype, jnp.integer)
    step = int(step) if whole else step
    if not is_int(step) or step < 0:
        raise ValueError(f"step={shown(step)} must be an integer >= 0 (the training step of the state), e.g. "
                         "int(optimizer.step[...])")
    return int(step)  # np.int64 too: due returns a bool, not np.bool_


def check_state_and_key(state: Any, key: Any) -> None:
    """Refuse ``CheckpointWriter.save``'s ``state`` unless a node or non-empty mapping, ``key`` unless a typed key."""
    if not is_node(state) and not (isinstance(state, Mapping) and state):
        raise TypeError(f"state={shown(state)} must be an nnx.State (nnx.state(model)) or a mapping of arrays"
                        f"{non_node_part(state)}")
    if not (isinstance(key, jax.Array) and is_prng_key(key)):
        # jax.random.PRNGKey's raw key data: wrapping keeps the caller's stream; only the default key size wraps
        size = jax.random.key_data(jax.random.key(0)).shape[-1]
        raw = getattr(key, "dtype", None) == np.uint32 and tuple(np.shape(key))[-1:] == (size,)
        raise TypeError(f"key={shown(key)} must be a typed JAX PRNG key, e.g. jax.random.key(0)" + (
            "; this one is raw uint32 key data (jax.random.PRNGKey's): pass jax.random.wrap_key_data(key)"
            if raw else ""))
    if jax.process_count() > 1 and key.is_fully_addressable:  # else Orbax's "Cannot serialize host local ..."
        raise ValueError(
            f"key={shown(key)} is on this process's devices alone, and a job of {jax.process_count()} processes "
            "saves one key for all; place it on the mesh, replicated, alike on every process: key = "
            "jax.random.wrap_key_data(gensbi_sharding.host_to_global_array(jax.random.key_data(key), "
            "partition=jax.sharding.PartitionSpec(), mesh=mesh), impl=jax.random.key_impl(key))")  # an rbg key too

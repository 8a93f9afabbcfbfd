"""Checkpoints that move between meshes: save under one (mesh, rule), restore under another.

Imported on its own (Orbax). Restoring is here; saving in ``checkpoint_save`` (``CheckpointWriter``), the on-disk
layout and complete steps in ``checkpoint_steps``. ``path, base_dir`` below are as ``find_checkpoint`` takes them."""

import dataclasses
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp
from flax import nnx
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from gensbi_sharding.checkpoint_fixes import check_against
from gensbi_sharding.checkpoint_lock import continued
from gensbi_sharding.checkpoint_save import CheckpointWriter
from gensbi_sharding.checkpoint_items import flat_by_path, item_handlers, nest_by_path
from gensbi_sharding.checkpoint_steps import (CHECKPOINT_SUBDIR, committed_steps, damage_behind, find_checkpoint,
                                              read_json, reasoned, step_damage)
from gensbi_sharding.factory import refuse_in_factory, refuse_traced, trace_factory
from gensbi_sharding.messages import clipped, shown
from gensbi_sharding.rules import Rule, RuleTable, resolve_rule
from gensbi_sharding.nodes import (abstract_state, array_leaves, check_node, is_node, is_prng_key, is_scalar,
                                   node_state, path_key, value_leaves)
from gensbi_sharding.specs import spec_misfit
from gensbi_sharding.sharding import plan_shardings
from gensbi_sharding.write_probe import check_array_path

__all__ = ["CHECKPOINT_SUBDIR", "CheckpointWriter", "Restored", "abstract_state_for",
           "committed_steps", "find_checkpoint", "restore", "saved_config", "saved_info", "step_damage"]

def abstract_state_for(node: Any, mesh: Mesh | None, rule: str | RuleTable | Rule = "replicated") -> nnx.State:
    """The restore target: ``nnx.state(node)`` as ``jax.ShapeDtypeStruct`` leaves at their planned shardings (scalar
    variables stay values).

    Parameters
    ----------
    node : NNX node or zero-argument factory
        The model (and optimizer) as built for this run; only shapes and dtypes are read (a factory is traced).
    mesh : jax.sharding.Mesh or None
        None: every array on this process's first device (``rule`` checked, not read).
    rule : str or RuleTable or Rule, default "replicated"
        The rule to restore under, whatever the checkpoint was saved under.

    Returns
    -------
    nnx.State

    Raises
    ------
    TypeError, ValueError
        ``node`` or ``mesh`` of another type; a bad ``rule`` (``resolve_rule``) or factory (``init_sharded``'s).
    """
    check_node(node, "abstract_state_for", factory=True)
    resolve_rule(rule)  # checked without a mesh too: a typo would fail only on one
    abstract = node if is_node(node) else nnx.merge(*trace_factory(node, "abstract_state_for"))
    if mesh is not None:
        return plan_shardings(abstract, mesh, rule).abstract_state(abstract)
    device = jax.sharding.SingleDeviceSharding(jax.local_devices()[0])  # arrays (a pytree's too), not scalars
    return abstract_state(abstract, lambda path, value: device if array_leaves(value) else None)


@dataclasses.dataclass
class Restored:
    """A restored checkpoint.

    Attributes
    ----------
    state : nnx.State or mapping
        The train state, with the structure and shardings of the restore target.
    key : jax.Array or None
        The typed RNG key saved with it (at ``key_sharding``); None if none was.
    step : int
    config, info : dict
        As given to ``CheckpointWriter`` and ``CheckpointWriter.save`` (``{}`` if none was).
    path : pathlib.Path
        The step folder read.
    """

    state: Any
    key: jax.Array | None  # None: no key was saved
    step: int
    config: dict
    path: Path
    info: dict = dataclasses.field(default_factory=dict)


def restore(path: str | os.PathLike, abstract_state: Any, *, base_dir: str | os.PathLike | None = None,
            key_sharding: jax.sharding.Sharding | None = None) -> Restored:
    """Restore the checkpoint ``path`` designates onto ``abstract_state``'s shardings, whatever it was saved under.

    Parameters
    ----------
    path, base_dir : str or os.PathLike (base_dir also None, the default)
    abstract_state : nnx.State or non-empty mapping
        ``abstract_state_for(model, mesh, rule)``; every array leaf needs a sharding (a node: its ``nnx.state``). The
        whole state as saved: of a saved ``(model, optimizer)``, restore both, then keep ``restored.state[0]``.
    key_sharding : jax.sharding.Sharding or None, default None
        Where the RNG key goes; None: replicated on the target's mesh (or its one device; else this process's first).

    Returns
    -------
    Restored
        ``state`` (``abstract_state``'s structure, placed), ``key``, ``step``, ``config``, ``info``.

    Raises
    ------
    FileNotFoundError, TypeError, ValueError, RuntimeError
        No complete checkpoint, or a damaged step folder (its ``reason`` attribute: the words without the fix); an
        argument of another type (or a path ``""``); a target leaf without a sharding or one (``key_sharding`` too)
        that cannot split it; variables missing, extra or of another shape or dtype; a step folder whose path
        TensorStore misreads (``\\``, ``[x]``); a call under ``jax.jit`` (any JAX transformation).
    """
    refuse_in_factory("restore", "build the model first, then restore into it: nnx.update(model, restore(path, "
                      "abstract_state_for(model, mesh, rule)).state)")
    refuse_traced("restore", "reads files and places arrays once, outside any step: restore before the step function, "
                  "nnx.update(model, restore(path, abstract_state_for(model, mesh, rule)).state)")
    step_dir, named = _located(path, base_dir)
    check_array_path(step_dir, "checkpoint", saving=False)
    if key_sharding is not None and not isinstance(key_sharding, jax.sharding.Sharding):
        raise TypeError(f"key_sharding={shown(key_sharding, 80)} must be a jax.sharding.Sharding or None, e.g. "
                        "NamedSharding(mesh, PartitionSpec()) (a replicated key)")
    if not is_node(abstract_state) and not (isinstance(abstract_state, Mapping) and abstract_state):
        raise TypeError(f"abstract_state={shown(abstract_state)} must be the restore target: build it with "
                        "checkpoint.abstract_state_for(model, mesh, rule)")
    whole, abstract_state = node_state(abstract_state), node_state(abstract_state, False)  # nnx.state, none sown
    sown = {f"state/{name}" for name in set(flat_by_path(whole)) - set(flat_by_path(abstract_state))}  # kept as is
    with ocp.Checkpointer(ocp.CompositeCheckpointHandler(**item_handlers())) as checkpointer:
        metadata = _read(step_dir, "'arrays'", lambda d: checkpointer.metadata(d).item_metadata["arrays"].tree, named)
        saved = flat_by_path(metadata)
        target = {f"state/{name}": leaf for name, leaf in flat_by_path(abstract_state).items()}
        # Values holding no array (optax.masked's MaskedNode, None) are never saved.
        dataless = {name: target.pop(name) for name in [n for n, leaf in target.items() if not jax.tree.leaves(leaf)]}
        if "rng" in saved:
            sharding = key_sharding or _replicated_like(target)
            _check_fits("rng", tuple(saved["rng"].shape), sharding)  # before ShapeDtypeStruct's error, naming no fix
            target["rng"] = jax.ShapeDtypeStruct(saved["rng"].shape, saved["rng"].dtype, sharding=sharding)
        scalars = {name: leaf for name, leaf in target.items() if is_scalar(leaf)}
        # Typed keys come back as the target holds them (a raw uint32 key saved, a typed one wanted, or the reverse).
        impls = {name: _key_impl(leaf) for name, leaf in target.items() if is_prng_key(leaf)}
        target = {name: _storage_target(name, leaf) for name, leaf in target.items()}
        # Zero-size arrays are never saved (Orbax refuses them): built here at their target shardings.
        empty = {name: target.pop(name) for name in [n for n, t in target.items() if t.size == 0 and n not in saved]}
        pairs, treedef = jax.tree.flatten_with_path(abstract_state, is_leaf=lambda x: isinstance(x, nnx.Variable))
        kinds = {path_key(p): type(v) for p, v in pairs if isinstance(v, nnx.Variable)}
        check_against({name: m for name, m in saved.items() if name not in sown}, target, step_dir,
                      lambda: bool(_json_item("config", step_dir)), kinds)
        target.update({name: jax.ShapeDtypeStruct(m.shape, m.dtype, sharding=_replicated_like(target)) for name, m in
                       saved.items() if name in sown})  # older checkpoints saved them: read (Orbax reads all), dropped
        args = ocp.args.Composite(arrays=ocp.args.StandardRestore(nest_by_path(target)),
                                  meta=ocp.args.JsonRestore(), config=ocp.args.JsonRestore())
        loaded = _read(step_dir, "'arrays', 'meta' or 'config'", lambda d: checkpointer.restore(d, args=args), named)
    values, meta = {**flat_by_path(loaded["arrays"]), **dataless}, loaded["meta"]
    continued(step_dir.parent)  # a writer's first save there continues its steps: no warning
    values.update({name: jax.device_put(jnp.zeros(t.shape, t.dtype), t.sharding) for name, t in empty.items()})
    # A scalar comes back as the type its target holds (Orbax reads it as a 0-d NumPy array).
    values.update({name: type(leaf)(values[name].item()) for name, leaf in scalars.items()})
    impls.update({name: impl for name, impl in meta.get("key_impls", {}).items() if name == "rng"})
    for name, impl in impls.items():
        values[name] = jax.random.wrap_key_data(values[name], impl=impl)
    leaves = [_rebuilt(keypath, old, values) for keypath, old in pairs]
    return Restored(state=jax.tree.unflatten(treedef, leaves), key=values.get("rng"),
                    step=int(meta["step"]), config=loaded["config"], path=step_dir, info=meta.get("info", {}))


def _rebuilt(keypath: tuple, old: Any, values: Mapping[str, Any]) -> Any:
    """The restored leaf at ``keypath``: a value, or a variable (a pytree value rebuilt from its leaves)."""
    if not isinstance(old, nnx.Variable):
        return values[f"state/{path_key(keypath)}"]
    leaves = value_leaves(keypath, old.get_value())
    if len(leaves) == 1 and len(leaves[0][0]) == len(keypath):  # one value, not a pytree of arrays
        return old.replace(values[f"state/{path_key(keypath)}"])
    tree = jax.tree.structure(old.get_value())
    return old.replace(jax.tree.unflatten(tree, [values[f"state/{path_key(sub)}"] for sub, _ in leaves]))


def saved_config(path: str | os.PathLike, base_dir: str | os.PathLike | None = None) -> dict:
    """The config saved with the checkpoint ``path`` designates; no array is read.

    Parameters
    ----------
    path, base_dir : str or os.PathLike (base_dir also None, the default)

    Returns
    -------
    dict
        ``{}`` if none was saved.

    Raises
    ------
    TypeError, ValueError, FileNotFoundError
        As ``find_checkpoint`` (``path=3``: ``TypeError``); ``FileNotFoundError`` also for a damaged item (named).
    """
    return _json_item("config", *_located(path, base_dir))


def saved_info(path: str | os.PathLike, base_dir: str | os.PathLike | None = None) -> dict:
    """The ``info`` saved with the checkpoint ``path`` designates (``{}`` if none was), e.g. to choose the restore
    target; no array is read.

    Parameters
    ----------
    path, base_dir : str or os.PathLike (base_dir also None, the default)

    Returns
    -------
    dict

    Raises
    ------
    TypeError, ValueError, FileNotFoundError
        As ``saved_config``.
    """
    return _json_item("meta", *_located(path, base_dir)).get("info", {})


def _located(path: str | os.PathLike, base_dir: str | os.PathLike | None) -> tuple[Path, bool]:
    """``find_checkpoint(path, base_dir)``, and whether ``path`` named that step folder itself (not its run)."""
    step_dir = find_checkpoint(path, base_dir)  # the arguments checked: resolved as it resolves them
    base = Path(os.getcwd() if base_dir is None else base_dir).expanduser().absolute()
    return step_dir, (base / Path(path).expanduser()).resolve() == step_dir


def _json_item(item: str, step_dir: Path, named: bool = False) -> dict:
    return _read(step_dir, repr(item), lambda d: read_json(d, item), named)  # a damaged item named


def _read(step_dir: Path, items: str, read: Callable[[Path], Any], named: bool = False) -> Any:
    """``read(step_dir)``; a damaged step folder named with the newest other step that reads (``named``: as passed)."""
    try:
        return read(step_dir)
    except Exception as raised:
        if (err := damage_behind(raised)) is None:
            raise
    # Each other step checked whole (no array data read): the newest by name may be damaged too.
    others, unread = [s for s in committed_steps(step_dir.parent) if str(s) != step_dir.name], []
    while others and step_damage(step_dir.parent / str(others[-1])) is not None:
        unread.append(str(others.pop()))
    fix = (f"no other step folder can be read either (steps {', '.join(unread[::-1])}): start without it" if unread
           else "no other step folder is complete: start without it")
    if others:  # each damaged one newer than the step offered moves aside; an older one passed by name need not
        moved = [d for d in [step_dir, *(step_dir.parent / s for s in unread)] if int(d.name) > others[-1]]
        aside = (f"{', '.join(map(str, moved[:-1]))} and " if moved[1:] else "") + f"{moved[-1]} aside, e.g. to " + \
            ", ".join(f"{m}.damaged" for m in moved) if moved else ""
        # Moved aside, a step folder passed by name no longer exists: its parent then designates the newest step left.
        then = f"pass {step_dir.parent}, whose newest is then" if named else "the newest is"
        fix = f"resume from another step folder: {step_dir.parent / str(others[-1])} (or " + (
            f"move {aside}, and {then} {others[-1]})" if moved else f"pass {step_dir.parent}, whose newest it is)")
    raise reasoned(f"checkpoint {step_dir} is damaged: its {items} item cannot be read ({type(err).__name__}: "
                   f"{clipped(err)})", f"; {fix}") from None


def _storage_target(name: str, leaf: Any) -> jax.ShapeDtypeStruct:
    """What Orbax restores ``leaf`` from: itself, its key data for a typed PRNG key, a 0-d array for a scalar."""
    if is_scalar(leaf):
        return np.asarray(leaf)
    if not isinstance(leaf, (jax.ShapeDtypeStruct, jax.Array)) or leaf.sharding is None:
        raise ValueError(f"restore target {name.removeprefix('state/')} is {type(leaf).__name__} without a sharding; "
                         "build the target with abstract_state_for(node, mesh, rule) (mesh=None: on one device)")
    shape = jax.eval_shape(jax.random.key_data, leaf) if is_prng_key(leaf) else leaf
    _check_fits(name, shape.shape, leaf.sharding)
    return jax.ShapeDtypeStruct(shape.shape, shape.dtype, sharding=leaf.sharding)


def _check_fits(name: str, shape: tuple, sharding: jax.sharding.Sharding) -> None:
    """``ValueError`` unless ``sharding`` can split an array of ``shape`` (Orbax's error would read as damage)."""
    why = spec_misfit(sharding.spec, shape, sharding.mesh) if isinstance(sharding, NamedSharding) else None
    if why is not None:
        fix = ("key_sharding must fit the saved key's data" if name == "rng" else "build the target with "
               "abstract_state_for(node, mesh, rule), whose shardings fit")
        raise ValueError(f"restore target {name.removeprefix('state/')} (shape {tuple(shape)}) cannot be split as "
                         f"{sharding.spec}: {why}; {fix}, e.g. PartitionSpec()")


def _key_impl(leaf: Any) -> str:
    """The PRNG implementation's name of a typed key, abstract too (``jax.random.key_impl`` takes no abstract one)."""
    found = []
    jax.eval_shape(lambda key: found.append(str(jax.random.key_impl(key))), leaf)
    return found[0]


def _replicated_like(target: Mapping[str, Any]) -> jax.sharding.Sharding:
    """Replicated on the first target leaf's mesh or its one device, else on this process's first device."""
    for sharding in (getattr(leaf, "sharding", None) for leaf in target.values()):
        if isinstance(sharding, (NamedSharding, jax.sharding.SingleDeviceSharding)):
            return NamedSharding(sharding.mesh, P()) if isinstance(sharding, NamedSharding) else sharding
    return jax.sharding.SingleDeviceSharding(jax.local_devices()[0])

"""Whether a leaf can be placed as it is (rows, dtype, values, undonated, untraced: every placing function's checks),
how it is handed to a placement (``host_view``, ``in_memory_of``), and a bad row count's fix (``row_count_fix``)."""

import math
from typing import Any

import jax
import numpy as np

from gensbi_sharding.messages import shown
from gensbi_sharding.nodes import (array_leaves, check_no_module, check_unmasked, is_array, is_array_like,
                                   is_prng_key, leaf_name, placed_dtype, unheld_dtype_fix, value_of)

__all__ = ["check_same_rows", "check_numeric_leaves", "check_values", "check_placeable", "host_view", "in_memory_of",
           "row_count_fix", "unstacked_rows"]


def check_same_rows(batch: Any, what: str) -> int | None:
    """The leading size shared by the array leaves of ``batch`` with ``ndim > 0`` (None if none), else ValueError."""
    rows = {leaf_name(path): leaf.shape[0] for path, leaf in
            jax.tree_util.tree_leaves_with_path(batch) if is_array_like(leaf) and leaf.ndim > 0}
    sizes = list(rows.values())
    if len(set(sizes)) > 1:
        same = "every leaf of a batch needs the same number of rows"
        if unstacked := unstacked_rows(batch, what, same):  # its leaves' sizes are each row's, not the batch's
            raise ValueError(unstacked)
        named = ", ".join(f"{path} {size}" for path, size in rows.items())
        raise ValueError(f"{what} leaves have differing leading sizes {sizes} ({named}); {same}")
    return sizes[0] if sizes else None


def unstacked_rows(tree: Any, what: str, leaves_fix: str, divisor: int = 1, call: str = "{}",
                   of: str = "the data-parallel size") -> str | None:
    """The refusal of a list in ``tree`` of >= 2 arrays of one shape, rows never stacked (``[np.zeros(3)] * 8``), else
    None; the fix stacks them into ``call`` (``{}``), padded to a multiple of ``divisor`` (``of``) or ``leaves_fix``."""
    listed = jax.tree_util.tree_flatten_with_path(tree, is_leaf=_is_rows)[0]
    path, rows = next(((path, node) for path, node in listed if _is_rows(node)), (None, None))
    if rows is None:
        return None
    n, shape = len(rows), rows[0].shape
    where = what if not path else f"{what} {leaf_name(path)}"
    stacked, padded = "np.stack(rows)", divisor * -(-n // divisor)
    if padded != n:  # zero rows added below the real ones: np.pad keeps the dtype
        stacked = f"np.pad({stacked}, {[(0, padded - n)] + [(0, 0)] * len(shape)})"
    return (f"{where} is a {type(rows).__name__} of {n} arrays of shape {shape}, read as a pytree of {n} leaves, "
            f"each a batch of its own ({shape[0]} rows); if they are the {n} rows of one batch, stack them into one "
            f"array of shape {(n, *shape)}" + (f" and pad it to {padded} rows, a multiple of {of}, {divisor} (mask "
                                               "the padding out of a mean)" if padded != n else "") + ": " +
            (call.format(stacked) if not path else f"{stacked} in its place") +
            f"; if they are {n} leaves of one batch, {leaves_fix}")


def _is_rows(node: Any) -> bool:
    """A plain list or tuple (a NamedTuple names its fields) of >= 2 arrays with ``ndim > 0``, all of one shape."""
    return (type(node) in (list, tuple) and len(node) > 1 and all(is_array(x) and x.ndim for x in node)
            and len({x.shape for x in node}) == 1)


def check_numeric_leaves(tree: Any, what: str) -> None:
    """``TypeError`` naming a leaf no JAX array holds (a str, a torch tensor) or a Module; and ``check_placeable``."""
    check_no_module(tree, what)
    for path, leaf in jax.tree_util.tree_leaves_with_path(tree):
        name = leaf_name(path)
        check_placeable(leaf, f"{what} leaf {name} (shape {getattr(leaf, 'shape', ())})")
        if hasattr(leaf, "__array__") and not (is_array_like(leaf) or isinstance(leaf, np.generic)):
            raise TypeError(f"{what} leaf {name} is a {type(leaf).__name__}, an array-like that is no array: pass "
                            "np.asarray(it) (a torch tensor: .numpy())")


def check_values(variables: list[tuple[str, Any]], caller: str) -> None:
    """``ValueError`` (or ``check_placeable``'s error) naming ``caller`` and a variable whose array it cannot place."""
    for key, var in variables:
        for leaf in array_leaves(value_of(var)):
            if isinstance(leaf, jax.core.Tracer):
                raise ValueError(f"{caller} got {key} as a traced array: it places a model outside jax.jit and "
                                 "nnx.jit and every other JAX transformation (jax.grad, jax.vmap, ...; its arrays keep "
                                 "their shardings through the step): place it before the step function; inside one, "
                                 "pin activations with constrain(x, names, partition_axis)")
            check_placeable(leaf, f"{caller}: {key} (shape {leaf.shape})")


def check_placeable(leaf: Any, where: str) -> None:
    """``ValueError`` naming ``where`` if NumPy ``leaf`` holds a number its placed dtype cannot (JAX's cast would change
    it silently: 2**40 -> 0), ``TypeError`` if no JAX array holds its dtype, ``RuntimeError`` if it was donated."""
    check_unmasked(leaf, where)
    leaf = np.asarray(leaf) if isinstance(leaf, (np.number, np.bool_)) else leaf  # as its 0-d array: np.int64(2**40)
    if isinstance(leaf, np.ndarray) and not jax.numpy.isdtype(leaf.dtype, ("bool", "numeric")):
        raise TypeError(f"{where} has dtype {leaf.dtype}, which no JAX array holds: " + unheld_dtype_fix(leaf.dtype,
                        "pass numbers (e.g. integer codes, np.unique(x, return_inverse=True)[1]) or keep it out of the "
                        "tree"))
    if isinstance(leaf, jax.Array) and not isinstance(leaf, jax.core.Tracer) and leaf.is_deleted():
        raise RuntimeError(f"{where} was deleted: donated to a jitted step (donate_argnums) or .delete()d; pass the "
                           "arrays the step returned, e.g. state = step(state) then nnx.update(model, state)")
    if not (isinstance(leaf, np.ndarray) and leaf.size and leaf.dtype.kind in "iufc"):
        return
    narrow = np.dtype(placed_dtype(leaf.dtype))
    info = np.iinfo(narrow) if narrow.kind in "iu" else np.finfo(narrow)
    for part in (leaf.real, leaf.imag) if narrow.kind == "c" else (leaf,) if narrow != leaf.dtype else ():
        if not info.min <= part.min() <= part.max() <= info.max:  # NaN or inf too: looked at below, they stay so
            out = part[np.isfinite(part) & ((part < info.min) | (part > info.max))]
            with np.errstate(over="ignore"):
                changed = out[:1].astype(info.dtype)
            if out.size:
                raise ValueError(f"{where} holds {out[0]} ({leaf.dtype}), beyond {narrow}, the dtype JAX "
                                 f"places it as: the cast would change it silently (to {changed[0]}); enable 64-bit "
                                 "types at startup, jax.config.update('jax_enable_x64', True), or pass values that fit "
                                 f"{narrow}")


def host_view(leaf: Any, target: Any) -> Any:
    """``leaf`` for ``jax.device_put(..., target)``: a JAX array <= 1 MiB on one CPU device bound for a split sharding
    of local devices as a NumPy copy (JAX compiled a 0.1 s slicing program per shape and sharding; a view's shards kept
    its whole source alive), else as it is."""
    if (isinstance(leaf, jax.Array) and not isinstance(leaf, jax.core.Tracer) and not is_prng_key(leaf)
            and isinstance(target, jax.sharding.Sharding) and not target.is_fully_replicated
            and target.is_fully_addressable and len(leaf.sharding.device_set) == 1 and leaf.nbytes <= 2**20
            and next(iter(leaf.sharding.device_set)).platform == "cpu" and not jax.typeof(leaf).weak_type):
        return np.array(leaf)  # the same dtype and values
    return leaf


def in_memory_of(leaf: Any, target: jax.sharding.NamedSharding) -> jax.sharding.NamedSharding:
    """``target`` in the memory ``leaf`` is offloaded to (``pinned_host``) where its devices have one, else as is."""
    here = next(iter(leaf.sharding.addressable_devices), None) if isinstance(leaf, jax.Array) else None
    kind = leaf.sharding.memory_kind if here is not None else None
    there = {m.kind for device in list(target.addressable_devices)[:1] for m in device.addressable_memories()}
    return target.with_memory_kind(kind) if kind in there and kind != here.default_memory().kind else target


def row_count_fix(n: Any) -> str:
    """A bad row count as ``pad_for_mesh`` names it (an array by shape, not printed whole), with its fix."""
    if getattr(n, "ndim", 0):
        return f"an array of shape {n.shape}; pass n.shape[0]"
    if isinstance(n, jax.core.Tracer):
        return f"{n!r}; pass a static count (x.shape[0], or n in jax.jit's static_argnums)"
    if hasattr(n, "shape"):  # int(n) only where it keeps the value: not 10.5, True, -3 or NaN
        whole = ((is_array(n) or isinstance(n, np.generic)) and n.dtype.kind in "iuf" and math.isfinite(float(n))
                 and float(n).is_integer() and float(n) >= 0)
        return f"{n!r}; pass " + ("int(n)" if whole else "the whole row count, e.g. x.shape[0]")
    leaves = [leaf for leaf in jax.tree.leaves(n) if getattr(leaf, "ndim", 0)]  # a batch passed whole, to be padded
    if unstacked_rows(n, "n", "") and type(n) in (list, tuple):  # rows never stacked: the count is how many
        return (f"a {type(n).__name__} of {len(n)} arrays of shape {n[0].shape}; pad_for_mesh counts rows, it pads "
                f"nothing: if they are the rows of one batch, pass len(rows), {len(n)} (and stack them, np.stack(rows))"
                f", else their leading size, {n[0].shape[0]}")
    return shown(n) if not leaves else (f"a {type(n).__name__} of arrays; pad_for_mesh counts rows, it pads nothing: "
                                       f"pass their leading size, {leaves[0].shape[0]}")

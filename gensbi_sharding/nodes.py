"""Helpers every library module shares (node and array checks; path keys); importing from the package only messages."""

import contextlib
import inspect
from collections.abc import Callable, Collection, Iterable, Sequence
from typing import Any

import jax
import numpy as np
from flax import nnx

from gensbi_sharding.messages import shown


def is_int(x: Any) -> bool:
    """Python and NumPy integers, not ``bool``."""
    return isinstance(x, (int, np.integer)) and not isinstance(x, bool)


def is_array(x: Any) -> bool:
    """``jax.Array`` and ``numpy.ndarray`` only (not scalars)."""
    return isinstance(x, (jax.Array, np.ndarray))


def check_flag(value: Any, name: str) -> None:
    """``TypeError`` naming ``name`` unless ``value`` is a bool (NumPy's too): ``"no"`` is truthy, taken as True."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name}={shown(value, 40)} must be True or False")


def is_scalar(x: Any) -> bool:
    """Python and NumPy numbers and bools, kept as values (not ``np.str_`` or ``np.datetime64``)."""
    return isinstance(x, (bool, int, float, complex, np.number, np.bool_))


def is_prng_key(x: Any) -> bool:
    """Whether ``x`` has a typed PRNG key dtype (``jax.random.key``), not a raw ``uint32`` key."""
    return jax.dtypes.issubdtype(getattr(x, "dtype", None), jax.dtypes.prng_key)


def is_array_like(x: Any) -> bool:
    """An array (``is_array``) or an abstract one (``jax.ShapeDtypeStruct``): what a plan places."""
    return is_array(x) or isinstance(x, jax.ShapeDtypeStruct)


def value_of(var: nnx.Variable) -> Any:
    """``var.get_value()``; a ``ref=True`` one's read with no mesh set (a jitted read, which a mesh set refused)."""
    ref = isinstance(raw := var.get_raw_value(), jax.Ref) and not isinstance(raw, jax.core.Tracer)  # in jit: none set
    with jax.set_mesh(None) if ref else contextlib.nullcontext():
        return var.get_value()


def array_leaves(value: Any) -> list:
    """The arrays of a variable's value: itself, or the leaves of a pytree it holds (``{"mean": ...}``)."""
    return [leaf for leaf in jax.tree.leaves(value) if is_array_like(leaf)]


def keep_scalars(kept: Any, value: Any) -> Any:
    """``value`` with the scalars of ``kept`` (the same tree before a trace made them arrays) put back at any depth."""
    return value if kept is None else jax.tree.map(lambda k, v: k if is_scalar(k) else v, kept, value)


def check_value_leaves(values: Collection[tuple[str, Any]], caller: str) -> list[tuple[str, Any]]:
    """``values`` (``("a/b", value)`` pairs) as a list; ``TypeError`` naming a leaf neither array nor scalar (a str)."""
    for name, value in values:
        for keys, leaf in jax.tree_util.tree_leaves_with_path(value):
            where = path_key(keys, name)
            check_unmasked(leaf, f"{caller}: {where} (shape {np.shape(leaf)})")  # a traced factory's: JAX's words
            held = not isinstance(leaf, (np.ndarray, np.generic)) or jax.numpy.isdtype(leaf.dtype, ("bool", "numeric"))
            if not ((is_array_like(leaf) or is_scalar(leaf)) and held):  # datetime64: JAX's, Orbax's errors named none
                what = type(leaf).__name__ + (f" {shown(leaf, 40)}" if held else f" of dtype {leaf.dtype}")
                fix = unheld_dtype_fix(None if held else leaf.dtype, "keep other data as a plain attribute of the "
                                       "Module (static, in its graph, not its state)")
                raise TypeError(f"{caller}: {where} holds {what}; a variable's value, or each leaf of a pytree value, "
                                f"must be an array (JAX or NumPy) or a Python/NumPy number or bool: {fix}")
    return list(values)


def check_unmasked(leaf: Any, where: str) -> None:
    """``TypeError`` naming ``where`` if ``leaf`` is a NumPy masked array (JAX's "not supported" named no leaf)."""
    if isinstance(leaf, np.ma.MaskedArray):  # np.ma.masked too
        raise TypeError(f"{where} is a NumPy masked array, whose mask no JAX array holds: pass x.filled(value), and "
                        "the mask as a leaf of its own if a step needs it (np.ma.getmaskarray(x))")


def unheld_dtype_fix(dtype: Any, otherwise: str) -> str:
    """Fix for ``dtype`` no JAX array holds: native byte order if held so (FITS), a float128 cast, or ``otherwise``."""
    native = None if dtype is None else np.dtype(dtype).newbyteorder("=")
    if native is not None and native != np.dtype(dtype) and jax.numpy.isdtype(native, ("bool", "numeric")):
        return f"convert it to native byte order, x.astype(x.dtype.newbyteorder('=')) ({native.name})"
    wide = None if native is None else {"f": "float64", "c": "complex128"}.get(native.kind)
    return otherwise if wide is None else (f"cast it to {wide}, x.astype(np.{wide}) (placed as {placed_dtype(wide)}: "
                                           f"jax_enable_x64 keeps {wide})")


def value_leaves(path: tuple, value: Any) -> list[tuple[tuple, Any]]:
    """``[(path, value)]``, or for a pytree of arrays one ``(path + its keys, leaf)`` per leaf."""
    return [(path, value)] if is_array_like(value) or not array_leaves(value) else [
        (tuple(path) + tuple(sub), leaf) for sub, leaf in jax.tree_util.tree_leaves_with_path(value)]


def named_leaves(tree: Any) -> list[tuple[str, Any]]:
    """``("a/b/c", leaf)`` of each leaf of ``tree`` (a node's ``nnx.state``), as reports and checkpoints name it."""
    pairs = jax.tree_util.tree_leaves_with_path(node_state(tree), is_leaf=lambda x: isinstance(x, nnx.Variable))
    return [(path_key(sub), leaf) for path, x in pairs for sub, leaf in (
        value_leaves(path, value_of(x)) if isinstance(x, nnx.Variable) else [(path, x)])]  # "kernel", "stats/mean"


def path_key(keys: Sequence[Any], head: str = "") -> str:
    """A pytree key path or a graph path as ``"up/kernel"`` (below ``head``): plans', checkpoints' and messages' key."""
    return "/".join(filter(None, (head, jax.tree_util.keystr(tuple(keys), simple=True, separator="/"))))


def leaf_name(path: Sequence[Any]) -> str:
    """A batch leaf's key path as the batch functions' messages name it: ``"['x']"``, ``"<root>"`` for a bare array."""
    return jax.tree_util.keystr(tuple(path)) or "<root>"


def listing(items: Sequence[str], n: int = 3) -> str:
    """The first ``n`` of ``items`` joined by commas, then how many more: ``"a, b, c and 2 more"``."""
    return ", ".join(items[:n]) + (f" and {len(items) - n} more" if len(items) > n else "")


def is_node(node: Any, inner: bool = False) -> bool:
    """Whether ``node`` is an NNX node: a graph node, ``nnx.State``, or a non-empty tuple, list or dict of them."""
    if nnx.graph.is_graph_node(node) or isinstance(node, nnx.State):  # a Variable only inside one (alone: path "")
        return inner or not isinstance(node, nnx.Variable)
    items = list(node.values() if isinstance(node, dict) else node if isinstance(node, (tuple, list)) else ())
    return bool(items) and all(is_node(item, inner=True) for item in items)


def check_node(node: Any, caller: str, *, factory: bool = False, hint: str = "") -> None:
    """``TypeError`` naming ``caller`` unless ``is_node(node)`` (``factory``: or callable); ``hint`` ends."""
    if is_node(node):  # Flax 0.12 keeps an array attribute (self.buf = jnp.ones(3)) as state (iter_graph: or graphdef)
        name = next((path_key(p) for p, v in nnx.iter_graph(node) if is_array_like(v)), None)
        if name is not None:
            raise TypeError(f"{caller}: {name} is an array in no nnx.Variable (this library places variables): "
                            "hold it in one, nnx.Variable(value) or a subclass (nnx.BatchStat), read as variable[...] "
                            "(Flax's nnx.Conv(mask=m) keeps m so: conv.mask = nnx.Variable(conv.mask), its call reads "
                            "it alike)")
    elif not (factory and callable(node) and not isinstance(node, nnx.Variable)):  # a Variable is callable
        also = ", or a zero-argument factory building one" if factory else ""
        built = node is None and caller.endswith("(what the factory returned)")  # not shard_model's None: no return
        raise TypeError(f"{caller} takes an NNX graph node (a Module, nnx.Optimizer, nnx.State, or a tuple or "
                        f"dict of them{also}), got {type(node).__name__} {shown(node)}"
                        + ("; end the factory with `return` of the node it builds" if built else non_node_part(node))
                        + hint)


def non_node_part(node: Any) -> str:
    """Where a tuple, list or dict fails ``is_node``, as messages append it: ``"; its ['step'] is int 0, ..."``."""
    if node is None:  # `model = shard_model(model, ...)`: the name now holds what shard_model returned
        return ("; shard_model, shard_model_by_table and place return None, placing the node they are given in "
                "place: pass that node")
    if isinstance(node, nnx.Variable):
        return "; a bare nnx.Variable is a node's part: pass the Module holding it, or (variable,) or {'w': variable}"
    path, item = "", node
    while isinstance(item, (tuple, list, dict)) and item and not is_node(item):
        key, item = next(kv for kv in (item.items() if isinstance(item, dict) else enumerate(item))
                         if not is_node(kv[1]))
        path += f"[{key!r}]"
    return (f"; its {path} is {type(item).__name__} {shown(item, 40)}, no NNX node: keep other values "
            "(a step count, arrays) out of it") if path else ""


def module_like(x: Any) -> bool:
    """A graph node but a Variable: a Module, ``nnx.Optimizer``, ``nnx.Rngs``, ``nnx.List`` (not ``nnx.State``)."""
    return nnx.graph.is_graph_node(x) and not isinstance(x, nnx.Variable)


def node_state(tree: Any, sown: bool = True) -> Any:
    """``nnx.state(tree)`` if it holds a graph node, else ``tree``; ``sown=False``: no ``nnx.Intermediate`` (sow's)."""
    state = nnx.state(tree) if any(map(module_like, jax.tree.leaves(tree, is_leaf=module_like))) else tree
    return state if sown else jax.tree.map(lambda s: nnx.filter_state(s, nnx.Not(nnx.Intermediate)) if isinstance(
        s, nnx.State) else s, state, is_leaf=lambda x: isinstance(x, (nnx.State, nnx.Variable)))


def check_no_module(tree: Any, what: str) -> None:
    """``TypeError`` naming a Module, Variable or node holding variables in pytree ``tree``: jax.tree would copy it."""
    if found := [(p, x) for p, x in jax.tree_util.tree_leaves_with_path(tree, is_leaf=module_like) if isinstance(
            x, (nnx.Variable, nnx.Module)) or module_like(x) and any(isinstance(v, nnx.Variable) for _, v in
                                                                      nnx.iter_graph(x))]:
        raise TypeError(f"{what} {jax.tree_util.keystr(found[0][0]) or '<root>'} is an NNX {type(found[0][1]).__name__}"
                        ", which this would copy (shared variables untied), leaving it where it was: place a Module, "
                        "nnx.Optimizer or a tuple of them in place with shard_model(node, mesh, rule) (rule "
                        "'replicated': whole on every device)" + ("" if isinstance(found[0][1], nnx.Variable) else
                                                                  ", or pass nnx.state(node)"))


def array_variables(node: Any) -> list[tuple[str, Any]]:
    """``("a/b/c", variable)`` of each ``nnx.Variable`` of ``node`` holding arrays, in graph order: what plans place."""
    return [(path_key(path), var) for path, var in nnx.iter_graph(node)
            if isinstance(var, nnx.Variable) and array_leaves(value_of(var))]


def shape_of(value: Any) -> tuple:
    """A variable value's shape; of a pytree of arrays, its arrays' shapes."""
    return tuple(value.shape) if hasattr(value, "shape") else tuple(tuple(a.shape) for a in array_leaves(value))


def prefixes_holding(names: Sequence[str], paths: Iterable[str]) -> list[str]:
    """Every prefix ``p`` with ``f"{p}/{name}"`` in ``paths`` for all ``names``, sorted (``0``, ``opt_state/0/mu``)."""
    paths = set(paths)
    heads = sorted({path[:-len(names[0]) - 1] for path in paths if names and path.endswith("/" + names[0])})
    return [head for head in heads if all(f"{head}/{name}" in paths for name in names)]


def abstract_state(node: Any, sharding_for: Callable[[str, Any], jax.sharding.Sharding | None]) -> nnx.State:
    """``nnx.state(node)``, abstract at ``sharding_for(path, value)`` (None: kept as it is) and the placed dtype."""
    def abstract(path: tuple, var: nnx.Variable) -> nnx.Variable:
        sharding = sharding_for(path_key(path), value := value_of(var))
        return var.replace(value if sharding is None else jax.tree.map(
            lambda v: jax.ShapeDtypeStruct(v.shape, placed_dtype(v.dtype), sharding=sharding)
            if is_array_like(v) else v, value))
    return nnx.map_state(abstract, nnx.state(node))


def stored_bytes(count: int, dtype: Any) -> int:
    """Bytes of ``count`` elements of ``dtype`` as XLA stores them: sub-byte types (int4) packed, rounded up."""
    try:
        bits = jax.dtypes.itemsize_bits(dtype)
    except ValueError:  # PRNG keys, float0 (integer parameters' gradients): whole bytes
        bits = dtype.itemsize * 8
    return -(-count * bits // 8)


def placed_dtype(dtype: Any) -> Any:
    """The dtype an array of ``dtype`` has on a device: 64-bit types narrowed unless ``jax_enable_x64``."""
    return jax.dtypes.canonicalize_dtype(dtype, allow_extended_dtype=True)


def check_filter(wrt: Any) -> None:
    """``TypeError`` unless ``wrt`` is an nnx filter or nested lists/tuples of them: None, ``...``, a str, a bool, a
    type, a callable taking ``(path, value)`` (a Mesh, callable, reached Flax's TypeError naming no ``wrt``)."""
    filters = jax.tree.leaves(wrt, is_leaf=lambda f: not isinstance(f, (list, tuple)))  # Flax's nest
    if not all(f is None or f is ... or isinstance(f, (str, bool)) or callable(f) for f in filters):
        raise TypeError(f"wrt={shown(wrt)} must be an nnx filter, e.g. nnx.Param or (nnx.Param, nnx.BatchStat)")
    for f in filters:
        if isinstance(f, type) or not callable(f):  # a type is matched by isinstance, not called
            continue
        try:
            inspect.signature(f).bind(None, None)
        except TypeError as err:
            raise TypeError(f"wrt={shown(wrt)} holds {shown(f)}, a callable that cannot take (path, value) as an nnx "
                            f"filter does ({err}): pass e.g. nnx.Param, or a def keep(path, value) -> bool") from None
        except ValueError:  # no signature to read (some builtins): Flax's call will tell
            pass

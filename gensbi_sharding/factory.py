"""Tracing a model's factory (``init_sharded``, ``abstract_sharded``, ``abstract_state_for``), refusing placing inside
it; in a trace, the mesh it runs on (``traced_mesh``, ``check_active_mesh``)."""

import contextvars
import inspect
import os
import re
import traceback
from collections.abc import Callable
from typing import Any

import flax.errors
import jax
import numpy as np
from flax import nnx
from jax.sharding import Mesh, PartitionSpec as P

from gensbi_sharding.messages import clipped, shown
from gensbi_sharding.nodes import check_node, check_value_leaves, is_array, is_scalar, keep_scalars, path_key

_FLAG_OFF = type("EagerShardingOff", (int,), {})(0)  # Flax's eager_sharding off (0 == False), not a user's False
_LIBRARIES = tuple(os.path.dirname(m.__file__) + os.sep for m in (jax, flax))  # their frames: not the user's
_NOT_SCALAR = object()  # a leaf to jax.tree (no pytree node): trace_factory's stand-in for a traced leaf
_TRACING_FACTORY: contextvars.ContextVar[str | None] = contextvars.ContextVar("tracing_factory", default=None)
#: ``refuse_in_factory``'s fixes: an input placed inside the constructor; the model placed there (its own placing).
INPUT_IN_FACTORY = ("an input placed on the mesh's devices cannot enter it: build the sample input unplaced inside the "
                    "factory (a NumPy or jnp array: jnp.ones((8, dim))), or build the model eagerly and {eager}")
MODEL_IN_FACTORY = "drop the call: {result} is laid out by its plan (another layout: another rule)"
#: Where a traced value is placed: a jitted step's, or an eager jax.grad/vmap's (its arrays are tracers too).
UNDER_TRANSFORM = "under a JAX transformation (jax.jit, jax.grad, ...)"
# Per caller of trace_factory: what it does with the constructor, what it returns, how to build the model eagerly and
# do the same (the fixes' words hold for each).
_ABSTRACT_WORK = "traces the model itself, holding no values, and lays it out by its plan"
#: Run as written (shard_model places in place and returns None: ``shard_model(factory(), ...)`` lost the model).
PLACE_EAGERLY = ("place it: model = factory(); shard_model(model, mesh, rule) (a rule table: model = factory(); "
                 "shard_model_by_table(model, mesh, rule); in the harness: model.init=eager)")
_CALLERS = {"init_sharded": ("builds the model itself, on one device, then places it by its plan", "the model",
                             PLACE_EAGERLY), "abstract_sharded": (_ABSTRACT_WORK, "the abstract model", PLACE_EAGERLY),
            "abstract_state_for": (_ABSTRACT_WORK, "the abstract state",
                                   "pass the built model: abstract_state_for(factory(), mesh, rule)")}


def refuse_in_factory(name: str, fix: str) -> None:
    """``ValueError`` naming ``name`` and ``fix`` (``{caller}``, ``{result}``, ``{eager}``) in a traced factory."""
    if (caller := _TRACING_FACTORY.get()) is not None:
        work, result, eager = _CALLERS[caller]
        raise ValueError(f"{name} called inside the model's constructor while {caller} traces it: {caller} {work}; "
                         + fix.format(caller=caller, result=f"{result} {caller} returns", eager=eager))


def refuse_traced(name: str, fix: str) -> None:
    """``RuntimeError`` naming ``name`` and ``fix`` in a JAX transformation, not a traced factory (checkpoint I/O)."""
    if _TRACING_FACTORY.get() is None and under_transform():  # JAX's, Orbax's words, or a good checkpoint "damaged"
        raise RuntimeError(f"{name} called under a JAX transformation (jax.jit, nnx.jit, jax.vmap, ...): it {fix}")


def under_transform() -> bool:
    """Whether a JAX transformation traces the caller, an eager ``jax.grad``/``vmap`` too (``get_mesh`` refuses)."""
    try:
        jax.sharding.get_mesh()
    except ValueError:
        return True
    return False


def build_unplaced(factory: Callable[[], Any]) -> Any:
    """``factory()`` with Flax's eager sharding off: Flax-style annotations stay logical names, not mesh axes."""
    default = nnx.using_eager_sharding()
    with nnx.use_eager_sharding(_FLAG_OFF):
        node = factory()
    # A variable the flag set keeps Flax's default if unannotated: it is pytree metadata, compared with factory()'s.
    for _, var in nnx.iter_graph(node):
        if isinstance(var, nnx.Variable) and var.get_metadata().get("eager_sharding") is _FLAG_OFF:
            var.set_metadata("eager_sharding", "out_sharding" not in var.get_metadata() and default)
    return node


# JAX's words for an array's method or attribute asked of a tracer, its ConcretizationTypeError's second line; not
# tolist(), tobytes(), __dlpack__(): those read its values, which ensure_compile_time_eval can give
_ASKED = re.compile(r"The '?(?!tolist|tobytes|__dlpack__)\w+(\(\))?'? (method|attribute|property) (was called|is not "
                    r"available) on traced array")


def _asks_built(caller: str, ask: str) -> str:
    """The refusal of a constructor asking a traced array what only a built one has (``ask``: JAX's words)."""
    return (f"{caller} traces the constructor, which asks an array it computed for what only a built array has ({ask})"
            f"; leave that until the model is built, or build it eagerly and {_CALLERS[caller][2]}")


def check_no_arguments(factory: Callable[[], Any]) -> None:
    """``ValueError`` unless ``factory`` can be called with no arguments (a class: its ``__init__``), before tracing."""
    if isinstance(factory, (jax.sharding.Mesh, jax.sharding.AbstractMesh)):  # callable: a context decorator
        raise ValueError(f"factory is a mesh, {shown(factory)}: the factory goes first, the mesh second, e.g. "
                         "(lambda: Model(rngs=nnx.Rngs(0)), mesh, rule)")
    try:  # a class: its __init__ (a Module's own signature is (*args, **kwargs), its metaclass's)
        (inspect.signature(factory.__init__).bind(None) if isinstance(factory, type)
         else inspect.signature(factory).bind())
    except TypeError as err:
        name = repr(factory.__name__) if isinstance(getattr(factory, "__name__", None), str) else shown(factory)
        raise ValueError(f"factory {name} must be callable with no arguments ({err}); bind them: "
                         "lambda: factory(...)") from None
    except ValueError:  # no signature to inspect (some builtins): calling it will tell
        pass


def trace_factory(factory: Callable[[], Any], caller: str = "init_sharded", flags: dict | None = None) -> tuple:
    """``factory()``'s graphdef and abstract state, scalars kept, ``ref``/``hijax`` variables plain (paths: ``flags``);
    ``ValueError`` naming ``caller`` if the constructor reads a traced value or takes arguments."""
    check_no_arguments(factory)
    found = {}

    def build():
        try:
            node = build_unplaced(factory)
        except flax.errors.TraceContextError as error:  # Flax's names neither the caller nor the fix
            raise ValueError(f"{caller} traces the factory, which changed an NNX object made outside it, e.g. an "
                             f"nnx.Rngs ({clipped(error, 160)}); make it inside the factory: "
                             "lambda: Model(..., rngs=nnx.Rngs(0)), not lambda: Model(..., rngs=rngs)") from error
        check_node(node, f"{caller} (what the factory returned)")
        kinds = {kind: {p for p, v in nnx.iter_graph(node) if isinstance(v, nnx.Variable) and getattr(v, kind)}
                 for kind in ("ref", "hijax")}
        (flags if flags is not None else {}).update(kinds)
        graphdef, state = nnx.split(nnx.with_vars(node, ref=False, hijax=False) if any(kinds.values()) else node)
        values = check_value_leaves([(path_key(p), v.get_value()) for p, v in nnx.to_flat_state(state)], caller)
        found.update(node=node, graphdef=graphdef, scalars={p: jax.tree.map(
            lambda leaf: leaf if is_scalar(leaf) else _NOT_SCALAR, v) for p, v in values})
        return jax.tree.map(lambda leaf: 0 if is_scalar(leaf) else leaf, state)  # keep_scalars puts them back

    token = _TRACING_FACTORY.set(caller)  # refuse_in_factory refuses while it is set
    try:
        state = jax.eval_shape(build)
    except (jax.errors.ConcretizationTypeError, jax.errors.TracerArrayConversionError,  # TracerBoolConversionError
            jax.errors.TracerIntegerConversionError) as error:  # is a ConcretizationTypeError
        if ask := next((line for line in str(error).splitlines() if _ASKED.match(line)), None):  # w.devices()
            raise ValueError(_asks_built(caller, ask)) from error  # is no value read: ensure_compile_time_eval fails
        where = next((f" in {frame.f_code.co_qualname} ({frame.f_code.co_filename}:{line})" for frame, line in
                      reversed(list(traceback.walk_tb(error.__traceback__)))  # the innermost frame not JAX's or Flax's:
                      if not frame.f_code.co_filename.startswith(_LIBRARIES)), "")  # GenSBI's Flux1Params.__post_init__
        raise ValueError(f"{caller} traces the constructor, which reads a value it computed ({type(error).__name__}"
                         f": {str(error).splitlines()[0]}){where}; compute that value under "
                         "jax.ensure_compile_time_eval() if it depends on no random draw, or build it eagerly and "
                         f"{_CALLERS[caller][2]}") from error
    except AttributeError as error:  # w.block_until_ready(), w.sharding: JAX's words named no caller, no fix
        if "traced array" not in str(error):
            raise
        raise ValueError(_asks_built(caller, str(error).splitlines()[0])) from error
    except ValueError as error:  # JAX's cache compares states' metadata: an array there fails once a trace is cached
        odd = next(((path_key(p), k, "is" if is_array(m) else "holds") for p, v in nnx.iter_graph(found["node"])
                    if isinstance(v, nnx.Variable) for k, m in v.get_metadata().items()
                    if any(map(is_array, jax.tree.leaves(m)))), None) if "node" in found else None  # [x], {"a": x} too
        if odd is None:
            raise
        raise TypeError(f"{caller} traces the factory, and {odd[0]}'s metadata {odd[1]!r} {odd[2]} an array, which a "
                        "trace's state holds as metadata, compared by equality (JAX's caches, nnx.jit of a model built "
                        "anew, refuse it): hold it as a tuple, tuple(x.tolist()), or as a value, "
                        "nnx.Variable(x)") from error
    finally:
        _TRACING_FACTORY.reset(token)
    for path, var in nnx.to_flat_state(state):
        var.set_value(keep_scalars(found["scalars"].get(path_key(path)), var.get_value()))
    return found["graphdef"], state


def check_concrete(leaves: Any) -> None:
    """``ValueError`` if a leaf of ``(name, leaf)`` pairs is abstract (JAX's error named no leaf)."""
    if (name := next((n for n, leaf in leaves if isinstance(leaf, jax.ShapeDtypeStruct)), None)) is not None:
        raise ValueError(f"init_sharded: the factory built an abstract model ({name} is a jax.ShapeDtypeStruct, as "
                         "nnx.eval_shape's), holding no values; pass one that builds it: lambda: Model(..., "
                         "rngs=nnx.Rngs(0)) (for a dry run: abstract_sharded(factory, mesh, rule))")


def check_active_mesh(mesh: Mesh, caller: str) -> None:
    """In a trace, ``ValueError`` if the active mesh has another layout than ``mesh``, or other devices or their order
    (JAX's "Received incompatible devices for jitted computation" named no fix)."""
    active = jax.sharding.get_abstract_mesh()
    if active.empty:
        return
    fix = ("is active (jax.set_mesh or mesh_context), the one the step is traced on: pass that one, or call the step "
           "under this one: `with mesh_context(mesh):`")
    if (dict(active.shape), tuple(active.axis_names)) != (dict(mesh.shape), mesh.axis_names):
        raise ValueError(f"{caller} {UNDER_TRANSFORM} was given mesh {dict(mesh.shape)} while mesh "
                         f"{dict(active.shape)} " + fix)
    given, traced_on = mesh.device_ids.ravel().tolist(), traced_mesh()
    if traced_on is not None and (on := traced_on.device_ids.ravel().tolist()) != given:
        raise ValueError(f"{caller} {UNDER_TRANSFORM} was given mesh {dict(mesh.shape)} on devices {given} while that "
                         f"layout on devices {on} " + fix)


_ON_ACTIVE_MESH = jax.jit(lambda: np.float32(0), out_shardings=P())  # one function: its trace is kept


def traced_mesh() -> Mesh | None:
    """The active concrete mesh in a trace (get_mesh refuses there), read off a lowered program (~0.1 ms); or None."""
    try:
        return _ON_ACTIVE_MESH.lower().out_info.sharding.mesh
    except (ValueError, RuntimeError):  # an abstract mesh only (jax.sharding.use_abstract_mesh): no devices to read
        return None

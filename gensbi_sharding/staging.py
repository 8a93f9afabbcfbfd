"""Split a traced constructor into eager scalar work and per-variable programs.

``init_sharded`` traces a model's constructor once. The equations with tiny results (RNG
key splits, counters, scales) run eagerly here, exactly as eager construction runs them.
What remains of a variable is a jaxpr taking those scalars. If it is elementwise in its
draws (``elementwise_in``), ``run_at`` evaluates it at the variable's sharding with the
program boundaries of eager execution (one per top-level equation, each nested ``jit`` one
program) and its random bits written out elementwise (``random_bits``), so each draw is
one fused loop writing its shards. Programs are shared by equal equations (the kernels
of every block compile once).

These helpers read JAX's jaxpr data structures through ``jax.extend.core``.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import jax
import numpy as np
from jax.extend import core as jcore

from gensbi_sharding import random_bits

__all__ = ["run_scalar_work", "residual", "evaluate", "draws_fuse", "elementwise_in", "run_at"]

# Results with at most this many elements are computed eagerly (keys are 0-d, legacy keys 2).
EAGER_ELEMENTS = 16
# Jitted programs shared by all calls, keyed by equation and output sharding (LRU).
_MAX_PROGRAMS = 256
_PROGRAMS: OrderedDict[tuple, Callable] = OrderedDict()


def read(atom: Any, env: dict) -> Any:
    return atom.val if isinstance(atom, jcore.Literal) else env[atom]


def _bind(eqn: jcore.JaxprEqn, args: list) -> list:
    with eqn.ctx.manager:
        out = eqn.primitive.bind(*args, **eqn.primitive.get_bind_params(eqn.params))
    return out if eqn.primitive.multiple_results else [out]


def run_scalar_work(traced: jcore.ClosedJaxpr) -> tuple[dict, dict]:
    """Evaluate the small equations eagerly, in order; ``(known values, producer of the rest)``."""
    jaxpr = traced.jaxpr
    known, producer = dict(zip(jaxpr.constvars, traced.consts)), {}
    for index, eqn in enumerate(jaxpr.eqns):
        if (all(math.prod(v.aval.shape) <= EAGER_ELEMENTS for v in eqn.outvars) and not eqn.effects
                and all(isinstance(a, jcore.Literal) or a in known for a in eqn.invars)):
            if all(isinstance(v, jcore.DropVar) for v in eqn.outvars):
                continue
            known.update(zip(eqn.outvars, _bind(eqn, [read(a, known) for a in eqn.invars])))
        else:
            producer.update((v, index) for v in eqn.outvars)
    return known, producer


def residual(jaxpr: jcore.Jaxpr, out: Any, known: dict, producer: dict, path: str) -> jcore.Jaxpr:
    """The equations ``out`` still needs, as a jaxpr whose inputs are known scalars."""
    keep, stack, seen = set(), [out], set()
    while stack:
        var = stack.pop()
        if isinstance(var, jcore.Literal) or var in seen or var in known:
            continue
        seen.add(var)
        keep.add(producer[var])
        stack.extend(jaxpr.eqns[producer[var]].invars)
    eqns = [jaxpr.eqns[i] for i in sorted(keep)]
    # Inputs in order of first use, so equal computations print (and compile) alike.
    inputs = list(dict.fromkeys(a for e in eqns for a in e.invars
                                if not isinstance(a, jcore.Literal) and a in known))
    info = jcore.DebugInfo("init_sharded", path, tuple(f"scalar{i}" for i in range(len(inputs))), (path,))
    return jcore.Jaxpr([], inputs, [out], eqns, frozenset().union(*(e.effects for e in eqns)), info)


def evaluate(jaxpr: jcore.Jaxpr, consts: list, *args: Any) -> list:
    """``jaxpr_as_fun``, with nested ``jit`` calls inlined and Threefry draws fusible.

    A ``random_bits`` equation that ``random_bits.can_fuse`` accepts becomes
    ``random_bits.threefry_bits`` (the same bits); anything else binds as traced.
    """
    env = dict(zip(jaxpr.constvars, consts)) | dict(zip(jaxpr.invars, args))
    for eqn in jaxpr.eqns:
        out = _apply(eqn, [read(a, env) for a in eqn.invars])
        env.update((v, x) for v, x in zip(eqn.outvars, out) if not isinstance(v, jcore.DropVar))
    return [read(v, env) for v in jaxpr.outvars]


def _apply(eqn: jcore.JaxprEqn, ins: list) -> list:
    """One equation of ``evaluate``."""
    name, params = eqn.primitive.name, eqn.params
    if name == "random_bits" and random_bits.can_fuse(ins[0], params["bit_width"], params["shape"]):
        return [random_bits.threefry_bits(jax.random.key_data(ins[0]), params["bit_width"], params["shape"])]
    if name in ("jit", "pjit") and isinstance(params.get("jaxpr"), jcore.ClosedJaxpr):
        return evaluate(params["jaxpr"].jaxpr, params["jaxpr"].consts, *ins)
    return _bind(eqn, ins)


def draws_fuse(jaxpr: jcore.Jaxpr, args: list) -> bool:
    """Whether ``evaluate(jaxpr, [], *args)`` replaces every ``random_bits`` it meets."""
    return not _draws_left(jax.make_jaxpr(lambda *a: evaluate(jaxpr, [], *a))(*args).jaxpr)


def _draws_left(jaxpr: jcore.Jaxpr) -> bool:
    return (any(eqn.primitive.name == "random_bits" for eqn in jaxpr.eqns)
            or any(_draws_left(sub) for sub in jcore.subjaxprs(jaxpr)))


def elementwise_in(jaxpr: jcore.Jaxpr, shape: tuple[int, ...]) -> bool:
    """Whether every array ``jaxpr`` computes has ``shape`` and comes elementwise from draws.

    Then each element is computed alone, from its own counter, by the same operations in
    any layout. Nested ``jit`` calls may also hold size-1 values (broadcast scalars).
    """
    return all(_elementwise_eqn(eqn, shape) and all(v.aval.shape == shape for v in eqn.outvars)
               for eqn in jaxpr.eqns)


def _elementwise_eqn(eqn: jcore.JaxprEqn, shape: tuple[int, ...]) -> bool:
    name = eqn.primitive.name
    if name in ("jit", "pjit"):
        inner = eqn.params.get("jaxpr")
        return isinstance(inner, jcore.ClosedJaxpr) and all(
            _elementwise_eqn(e, shape) and all(v.aval.shape == shape or math.prod(v.aval.shape) == 1
                                               for v in e.outvars)
            for e in inner.jaxpr.eqns)
    if name == "random_bits":
        return tuple(eqn.params["shape"]) == shape
    return name in _ELEMENTWISE


# Elementwise primitives whose results were seen not to depend on the layout: exact
# ones (arithmetic, bits, comparisons, sqrt) and those of the initialisers scanned
# (erf, erf_inv). Transcendental ones (tanh, logistic, exp, log, pow, ...) rounded
# differently on small blocks, so variables using them are computed eagerly.
_ELEMENTWISE = frozenset("""
    add sub mul div rem max min neg abs sign floor ceil round nextafter integer_pow square
    sqrt rsqrt erf erf_inv is_finite
    convert_element_type bitcast_convert_type reduce_precision stop_gradient copy copy_p
    shift_left shift_right_logical shift_right_arithmetic and or xor not
    eq ne lt le gt ge select_n clamp broadcast_in_dim random_wrap random_unwrap
""".split())


def run_at(jaxpr: jcore.Jaxpr, args: list, sharding: jax.sharding.Sharding) -> jax.Array:
    """Evaluate an ``elementwise_in`` jaxpr with every value at ``sharding``.

    One program per top-level equation, as eager execution dispatches them (so XLA fuses,
    and rounds, exactly what it fuses eagerly); each nested ``jit`` is one program in
    which the draws are fused (``evaluate``).
    """
    env = dict(zip(jaxpr.invars, args))
    last_use = {a: i for i, eqn in enumerate(jaxpr.eqns) for a in eqn.invars if not isinstance(a, jcore.Literal)}
    for index, eqn in enumerate(jaxpr.eqns):
        # An intermediate used for the last time is donated when an output can take its
        # buffer: XLA writes the next value there instead of holding two such arrays.
        free = [v.aval for v in eqn.outvars]
        donate = []
        for i, a in enumerate(eqn.invars):
            if (not isinstance(a, jcore.Literal) and a not in jaxpr.invars and a not in jaxpr.outvars
                    and last_use[a] == index and sum(b is a for b in eqn.invars) == 1 and a.aval in free):
                free.remove(a.aval)
                donate.append(i)
        # Literals go in as arguments, as eager execution passes Python scalars, so XLA
        # does not fold them into the program (it rewrites pow(x, 2.0) as x * x).
        ins = [a.val if isinstance(a, jcore.Literal) else env[a] for a in eqn.invars]
        env.update(zip(eqn.outvars, _program(eqn, sharding, tuple(donate))(*ins)))
        for i in donate:
            del env[eqn.invars[i]]
    return read(jaxpr.outvars[0], env)


def _program(eqn: jcore.JaxprEqn, sharding: jax.sharding.Sharding, donate: tuple) -> Callable:
    """One equation as a jitted program with its outputs at ``sharding``, shared by equal equations."""
    # Parameters by value where they are plain data, else by identity (nested programs
    # with their constants, callbacks): the cache holds the equation, so no id is reused.
    key = (eqn.primitive, tuple(a.aval for a in eqn.invars), tuple(v.aval for v in eqn.outvars),
           _param_key(eqn.params), sharding, donate,
           jax.config.jax_threefry_partitionable, jax.config.jax_enable_x64)
    compiled = _PROGRAMS.pop(key, None) or jax.jit(lambda *ins: _apply(eqn, list(ins)), donate_argnums=donate,
                                                   out_shardings=[sharding] * len(eqn.outvars))
    _PROGRAMS[key] = compiled
    if len(_PROGRAMS) > _MAX_PROGRAMS:
        _PROGRAMS.popitem(last=False)
    return compiled


def _param_key(value: Any) -> Any:
    if isinstance(value, (str, int, float, bool, complex, type(None), np.dtype, jax.core.ShapedArray)):
        return repr(value), type(value)
    if isinstance(value, (tuple, list)):
        return type(value), tuple(_param_key(v) for v in value)
    if isinstance(value, dict):
        return tuple((k, _param_key(v)) for k, v in sorted(value.items()))
    return id(value)

"""Split a traced constructor into eager scalar work and one compiled program per variable.

``init_sharded`` traces a model's constructor once. The equations with tiny results (RNG
key splits, counters, scales) run eagerly here, exactly as eager construction runs them;
what remains of each variable is a jaxpr taking those scalars, compiled once for all
variables it prints alike (the kernels of every block) and evaluated with random bits
written out elementwise (``random_bits``), so each draw is one fused loop.

These helpers read JAX's jaxpr data structures through ``jax.extend.core``.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import jax
from jax.extend import core as jcore

from gensbi_sharding import random_bits

__all__ = ["run_scalar_work", "residual", "evaluate", "draws_fuse", "program"]

# Results with at most this many elements are computed eagerly (keys are 0-d, legacy keys 2).
EAGER_ELEMENTS = 16
# Jitted programs shared by all calls, keyed by full printed jaxpr and output sharding (LRU).
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


def evaluate(jaxpr: jcore.Jaxpr, consts: list, *args: Any, fuse: bool = True) -> list:
    """``jaxpr_as_fun``; with ``fuse``, nested ``jit`` calls inlined and Threefry draws fusible.

    With ``fuse``, a ``random_bits`` equation that ``random_bits.can_fuse`` accepts becomes
    ``random_bits.threefry_bits`` (the same bits); anything else binds as traced.
    """
    if not fuse:
        return jcore.jaxpr_as_fun(jcore.ClosedJaxpr(jaxpr, consts))(*args)
    env = dict(zip(jaxpr.constvars, consts)) | dict(zip(jaxpr.invars, args))
    for eqn in jaxpr.eqns:
        ins = [read(a, env) for a in eqn.invars]
        name, params = eqn.primitive.name, eqn.params
        if name == "random_bits" and random_bits.can_fuse(ins[0], params["bit_width"], params["shape"]):
            out = [random_bits.threefry_bits(jax.random.key_data(ins[0]), params["bit_width"],
                                             params["shape"])]
        elif name in ("jit", "pjit") and isinstance(params.get("jaxpr"), jcore.ClosedJaxpr):
            out = evaluate(params["jaxpr"].jaxpr, params["jaxpr"].consts, *ins, fuse=True)
        else:
            out = _bind(eqn, ins)
        env.update((v, x) for v, x in zip(eqn.outvars, out) if not isinstance(v, jcore.DropVar))
    return [read(v, env) for v in jaxpr.outvars]


def draws_fuse(jaxpr: jcore.Jaxpr, args: list) -> bool:
    """Whether ``evaluate(jaxpr, [], *args)`` replaces every ``random_bits`` it meets."""
    return not _draws_left(jax.make_jaxpr(lambda *a: evaluate(jaxpr, [], *a))(*args).jaxpr)


def _draws_left(jaxpr: jcore.Jaxpr) -> bool:
    return (any(eqn.primitive.name == "random_bits" for eqn in jaxpr.eqns)
            or any(_draws_left(sub) for sub in jcore.subjaxprs(jaxpr)))


def program(jaxpr: jcore.Jaxpr, out_sharding: jax.sharding.Sharding, fuse: bool) -> Callable:
    """``jax.jit`` of ``evaluate(jaxpr, fuse=fuse)`` with one output sharding, shared by equal jaxprs."""
    # Every parameter printed; the RNG flags change lowerings that JAX caches per jaxpr.
    key = (jaxpr.pretty_print(custom_pp_eqn_rules=False), out_sharding, fuse,
           jax.config.jax_threefry_partitionable, jax.config.jax_enable_x64)
    compiled = _PROGRAMS.pop(key, None) or jax.jit(lambda *args: evaluate(jaxpr, [], *args, fuse=fuse),
                                                   out_shardings=[out_sharding])
    _PROGRAMS[key] = compiled
    if len(_PROGRAMS) > _MAX_PROGRAMS:
        _PROGRAMS.popitem(last=False)
    return compiled

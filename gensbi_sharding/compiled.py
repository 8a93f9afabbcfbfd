"""The dry run: an abstract placed model, and what its compiled step costs per device.

``abstract_sharded(factory, mesh, rule)`` gives the model with ``jax.ShapeDtypeStruct``
values carrying their shardings (``init_optimizer_sharded`` turns it into an abstract
optimizer); lower and compile a step on them (``jitted.lower(*args).compile()``), then
``compiled_report(compiled)``: XLA's memory analysis and the program's collectives,
both read from the SPMD-partitioned program, so every number is per device.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import jax
from flax import nnx
from jax.sharding import AxisType, Mesh, NamedSharding

from gensbi_sharding.init import _array_leaves, _check_factory, _resolve_rule
from gensbi_sharding.sharding import ExperimentalRuleWarning, ShardingFallbackWarning, plan_shardings

__all__ = ["COLLECTIVES", "abstract_sharded", "compiled_report", "collectives_in_hlo", "hlo_shape_bytes"]

COLLECTIVES: tuple[str, ...] = ("all-gather", "all-reduce", "reduce-scatter", "all-to-all",
                                "collective-permute")

# "%name = <result shape> <op>(" for each collective, synchronous or the "-done" half of an
# async pair ("-start" is skipped: its result tuple also holds the operands).
_OP = re.compile(r"=\s*(?P<shape>\S.*?)\s+(?P<op>" + "|".join(COLLECTIVES)
                 + r")(?P<half>-start|-done)?\(")
_ARRAY = re.compile(r"\b(?P<dtype>pred|token|[a-z]+\d+[a-z0-9]*)\[(?P<dims>[\d,]*)\]")
_BITS = re.compile(r"^(?:bf|f|s|u|c)(\d+)")


def abstract_sharded(factory: Callable[[], Any], mesh: Mesh | None,
                     rule: str | Mapping = "replicated") -> Any:
    """``nnx.eval_shape(factory)`` with each value a ``jax.ShapeDtypeStruct`` carrying its sharding.

    Nothing is allocated: for lowering and compiling a step (dry runs) or ``describe``.
    Shardings and warnings are those of ``init_sharded``; ``mesh=None`` gives no shardings.

    Raises
    ------
    ValueError
        As ``init_sharded``.
    """
    _check_factory(factory)
    table, honor = _resolve_rule(rule)
    abstract = nnx.eval_shape(factory)
    if mesh is None:
        return abstract
    specs, fallbacks = plan_shardings(abstract, mesh, table, honor_annotations=honor)
    graphdef, state = nnx.split(abstract)
    for path, var in _array_leaves(state):
        value = var.get_value()
        sharding = NamedSharding(mesh, specs[path])
        var.set_value(jax.ShapeDtypeStruct(value.shape, value.dtype, sharding=sharding))
    # The texts of shard_model's warnings (sharding._place), which cannot run on abstract values.
    if isinstance(rule, str) and rule != "replicated":
        warnings.warn(f"sharding rule {rule!r} is experimental: placements are checked, but the "
                      "contract gives no convergence guarantee", ExperimentalRuleWarning, stacklevel=2)
    if any(t == AxisType.Explicit for t in getattr(mesh, "axis_types", ())):
        warnings.warn(f"mesh axes {tuple(mesh.axis_names)} include AxisType.Explicit; only Auto axes are "
                      "supported, placements follow the Auto semantics", UserWarning, stacklevel=2)
    if fallbacks:
        label = f"rule {rule!r}" if isinstance(rule, str) else "custom rule table"
        warnings.warn(f"{len(fallbacks)} variable(s) replicated instead of split under {label} on mesh "
                      f"{dict(mesh.shape)}: " + "; ".join(f"{p} ({r})" for p, r in fallbacks.items()),
                      ShardingFallbackWarning, stacklevel=2)
    return nnx.merge(graphdef, state)


def hlo_shape_bytes(shape: str) -> int:
    """Bytes of an HLO result shape: one array (``f32[8,16]{1,0}``) or a tuple of arrays.

    ``pred`` counts 1 byte per element, ``token`` none, sub-byte types round up.

    Raises
    ------
    ValueError
        If an element type is not recognised.
    """
    total = 0
    for match in _ARRAY.finditer(shape):
        dtype, dims = match["dtype"], match["dims"]
        count = 1
        for d in filter(None, dims.split(",")):
            count *= int(d)
        if dtype == "token":
            continue
        if dtype == "pred" or dtype.startswith("f8"):
            bits = 8
        else:
            found = _BITS.match(dtype)
            if found is None:
                raise ValueError(f"unknown HLO element type {dtype!r} in shape {shape!r}")
            bits = int(found[1])
        total += -(-count * bits // 8)
    return total


def collectives_in_hlo(text: str) -> dict[str, dict[str, int]]:
    """Count and bytes (of each op's result) of every collective in an HLO module's text.

    Returns ``{op: {"count": n, "bytes": b}}`` for each op of ``COLLECTIVES``. An op
    inside a loop body is counted once, as it appears in the program.
    """
    out = {op: {"count": 0, "bytes": 0} for op in COLLECTIVES}
    for line in text.splitlines():
        match = _OP.search(line)
        if match is None or match["half"] == "-start":
            continue
        out[match["op"]]["count"] += 1
        out[match["op"]]["bytes"] += hlo_shape_bytes(match["shape"])
    return out


def compiled_report(compiled: Any) -> dict[str, Any]:
    """Per-device memory and collectives of a compiled program (``jax.stages.Compiled``).

    Returns
    -------
    dict
        ``memory``: ``argument_bytes``, ``output_bytes``, ``temp_bytes``,
        ``alias_bytes``, ``generated_code_bytes`` and ``total_bytes`` (arguments +
        outputs + temporaries - aliased), from ``compiled.memory_analysis()``; None
        where the backend gives no analysis. ``collectives``: as
        ``collectives_in_hlo(compiled.as_text())``. ``collective_bytes``: their sum.

    Raises
    ------
    ValueError
        If ``compiled`` has no ``as_text`` (pass ``jitted.lower(*args).compile()``).
    """
    if not callable(getattr(compiled, "as_text", None)):
        raise ValueError(f"expected a compiled program, got {type(compiled).__name__}; "
                         "pass jax.jit(f).lower(*args).compile()")
    collectives = collectives_in_hlo(compiled.as_text())
    return {"memory": _memory(compiled), "collectives": collectives,
            "collective_bytes": sum(c["bytes"] for c in collectives.values())}


def _memory(compiled: Any) -> dict[str, int] | None:
    try:
        stats = compiled.memory_analysis()
    except NotImplementedError:
        return None
    if stats is None:
        return None
    memory = {"argument_bytes": stats.argument_size_in_bytes, "output_bytes": stats.output_size_in_bytes,
              "temp_bytes": stats.temp_size_in_bytes, "alias_bytes": stats.alias_size_in_bytes,
              "generated_code_bytes": stats.generated_code_size_in_bytes}
    memory["total_bytes"] = (memory["argument_bytes"] + memory["output_bytes"] + memory["temp_bytes"]
                             - memory["alias_bytes"])
    return {key: int(value) for key, value in memory.items()}

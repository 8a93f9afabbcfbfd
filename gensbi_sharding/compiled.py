"""What a compiled step costs per device: memory from XLA's analysis, collectives counted in its HLO text.
Works on ``jax.jit(f).lower(*args).compile()`` of abstract state (``abstract_sharded``): nothing is allocated."""

import math
import re
from typing import Any

__all__ = ["compiled_report", "collectives_in_hlo", "hlo_shape_bytes"]

#: The HLO collective ops counted, in the names XLA prints (synchronous or as ``-start``/``-done`` pairs).
COLLECTIVES: tuple[str, ...] = ("all-gather", "all-reduce", "reduce-scatter", "all-to-all", "ragged-all-to-all",
                                "collective-permute", "collective-broadcast")

# "%name = <result shape> <op>(", synchronous or an async pair's "-done" ("-start"'s result holds the operands).
_OP = re.compile(r"=\s*(?P<shape>\S.*?)\s+(?P<op>" + "|".join(COLLECTIVES) + r")(?:-done)?\(")
_ARRAY = re.compile(r"\b(?P<dtype>pred|token|[a-z]+\d+[a-z0-9]*)\[(?P<dims>[\d,<=?]*)\]")  # f32[<=8]: dynamic
_BITS = re.compile(r"^(?:bf|f|s|u|c)(\d+)")


def hlo_shape_bytes(shape: str) -> int:
    """Bytes of an HLO result shape: ``"(bf16[4], pred[3], s4[3])"`` -> 13; a dynamic dimension at its bound (an upper
    bound: ``f32[<=8]`` -> 32); ``ValueError`` for an unknown type or an unbounded dimension (``f32[?]``)."""
    total = 0
    for match in _ARRAY.finditer(shape):
        if "?" in match["dims"]:  # else it would count as 0 bytes, unsaid
            raise ValueError(f"unbounded dynamic dimension in HLO shape {shape!r}: its bytes have no bound")
        dtype, count = match["dtype"], math.prod(int(d.removeprefix("<=")) for d in match["dims"].split(",") if d)
        found = _BITS.match(dtype)  # f8e4m3fn and the like too: 8 bits
        if found is None and dtype not in ("pred", "token"):
            raise ValueError(f"unknown HLO element type {dtype!r} in shape {shape!r}")
        total += -(-count * (int(found[1]) if found else 8 if dtype == "pred" else 0) // 8)
    return total


def collectives_in_hlo(text: str) -> dict[str, dict[str, int]]:
    """``{op: {"count": n, "bytes": b}}`` per device for each op of ``COLLECTIVES`` in HLO text, counted statically:
    a result of dynamic shape (``f32[<=8]``, ``ragged-all-to-all``'s buffers) at its bound, so an upper bound."""
    out = {op: {"count": 0, "bytes": 0} for op in COLLECTIVES}
    for match in filter(None, map(_OP.search, text.splitlines())):
        out[match["op"]]["count"] += 1
        out[match["op"]]["bytes"] += hlo_shape_bytes(match["shape"])
    return out


def compiled_report(compiled: Any) -> dict[str, Any]:
    """Report the per-device memory and the collectives of a compiled program.

    Parameters
    ----------
    compiled : jax.stages.Compiled
        ``jax.jit(f).lower(*args).compile()``; anything with ``as_text()`` and ``memory_analysis()``.

    Returns
    -------
    dict
        ``"memory"``: bytes per device from ``memory_analysis()`` (``argument_bytes``, ``output_bytes``,
        ``temp_bytes``, ``alias_bytes``, ``generated_code_bytes``, ``total_bytes`` = argument + output + temp - alias),
        None if the backend gives none; ``"collectives"``: ``collectives_in_hlo``; ``"collective_bytes"``: their sum.

    Raises
    ------
    ValueError
        ``compiled`` not a compiled program, or its HLO has an unknown element type.
    """
    if not all(callable(getattr(compiled, name, None)) for name in ("as_text", "memory_analysis")):
        lowered = callable(getattr(compiled, "compile", None))
        fix = "call its .compile()" if lowered else "pass jax.jit(f).lower(*args).compile()"
        raise ValueError(f"expected a compiled program, got {type(compiled).__name__}; {fix}")
    collectives = collectives_in_hlo(compiled.as_text())
    try:
        stats = compiled.memory_analysis()
    except NotImplementedError:
        stats = None
    memory = None if stats is None else {f"{name}_bytes": int(getattr(stats, f"{name}_size_in_bytes"))
                                         for name in ("argument", "output", "temp", "alias", "generated_code")}
    if memory is not None:
        memory["total_bytes"] = (sum(memory[f"{n}_bytes"] for n in ("argument", "output", "temp"))
                                 - memory["alias_bytes"])
    return {"memory": memory, "collectives": collectives,
            "collective_bytes": sum(c["bytes"] for c in collectives.values())}

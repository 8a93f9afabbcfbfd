"""What a compiled step costs per device: memory from XLA's analysis, collectives counted in its HLO text.
Works on ``jax.jit(f).lower(*args).compile()`` of abstract state (``abstract_sharded``): nothing is allocated."""

import math
import re
from typing import Any

__all__ = ["compiled_report", "collectives_in_hlo", "hlo_shape_bytes"]

#: The HLO collective ops counted, in the names XLA prints (synchronous or as ``-start``/``-done`` pairs).
COLLECTIVES: tuple[str, ...] = ("all-gather", "all-reduce", "reduce-scatter", "all-to-all", "ragged-all-to-all",
                                "collective-permute", "collective-broadcast")

#: Bytes one device sends per byte of the op's result, in a group of ``n`` devices, by the ring algorithms whose
#: "bus bandwidth" factors NCCL's tests document (github.com/NVIDIA/nccl-tests, doc/PERFORMANCE.md): an all-reduce
#: sends 2(n-1)/n of its result, an all-gather (n-1)/n of the whole it gathers, a reduce-scatter (n-1) times the
#: share it keeps, an all-to-all what it does not keep; a permute or broadcast sends its result once.
_SENT_PER_RESULT_BYTE = {"all-reduce": lambda n: 2 * (n - 1) / n, "all-gather": lambda n: (n - 1) / n,
                         "reduce-scatter": lambda n: n - 1, "all-to-all": lambda n: (n - 1) / n,
                         "ragged-all-to-all": lambda n: (n - 1) / n, "collective-permute": lambda n: 1.0,
                         "collective-broadcast": lambda n: (n - 1) / n}

# "%name = <result shape> <op>(", synchronous or an async pair's "-done" ("-start"'s result holds the operands).
_OP = re.compile(r"=\s*(?P<shape>\S.*?)\s+(?P<op>" + "|".join(COLLECTIVES) + r")(?P<done>-done)?\((?P<args>.*)")
_NAME = re.compile(r"^\s*(?:ROOT\s+)?%?(?P<name>[\w.\-]+)\s*=")
_COMPUTATION = re.compile(r"^(?:ENTRY\s+)?%?(?P<name>[\w.\-]+)\s*\(.*\{\s*$")
_CALLS = re.compile(r"\b(?P<how>body|condition|to_apply|calls|true_computation|false_computation)=%?(?P<name>[\w.\-]+)"
                    r"|\bbranch_computations=\{(?P<names>[^}]*)\}")
_TRIPS = re.compile(r'"known_trip_count":\{"n":"(\d+)"\}')
# A replica group as XLA prints it: explicit ({{0,1},{2,3}}), iota ([groups,size]<=[...]) or by mesh axes
# (mesh['axis_0'=4,'axis_1'=2] {'axis_0'}, a part of an axis as {'axis_0':(1)2}); ``{}`` is every device.
_GROUPS = re.compile(r"replica_groups=(?:\{\{(?P<first>[\d,]*)\}|\[\d+,(?P<size>\d+)\]<="
                     r"|mesh\[(?P<axes>[^\]]*)\]\s*\{(?P<over>[^}]*)\}|(?P<all>\{\}))")
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


def _runs_per_step(lines: list[str]) -> list[int]:
    """How many times each line runs per call of the entry computation: a while loop's body as often as XLA's
    ``known_trip_count`` says (once where it knows none), called computations as often as their callers."""
    owner, calls, current = [], {}, None  # calls: callee -> [(caller, times)]
    for line in lines:
        if (head := _COMPUTATION.match(line)) and not line[:1].isspace():
            current = head["name"]
            calls.setdefault(current, [])
        owner.append(current)
        for ref in _CALLS.finditer(line):
            trips = _TRIPS.search(line) if ref["how"] == "body" else None
            for name in [ref["name"]] if ref["name"] else re.findall(r"%?([\w.\-]+)", ref["names"]):
                calls.setdefault(name, []).append((current, int(trips[1]) if trips else 1))
    memo: dict[str | None, int] = {}

    def runs(name: str | None, seen: frozenset = frozenset()) -> int:
        if name not in memo:  # the entry, and text outside computations, run once
            callers = [(c, t) for c, t in calls.get(name, []) if c not in seen and c != name]
            memo[name] = sum(runs(c, seen | {name}) * t for c, t in callers) if callers else 1
        return memo[name]
    return [runs(name) for name in owner]


def _group_size(line: str, devices: int) -> int:
    found = _GROUPS.search(line)
    if found is None or found["all"]:
        return devices
    if found["first"] is not None:
        return len([d for d in found["first"].split(",") if d])
    if found["size"]:
        return int(found["size"])
    sizes = dict(re.findall(r"'([^']+)'=(\d+)", found["axes"]))  # {'x':(1)4}: a sub-axis of x of size 4
    return math.prod(int(part or sizes.get(axis, 1)) for axis, part in re.findall(r"'([^']+)'(?::\(\d+\)(\d+))?",
                                                                                    found["over"]))


def collectives_in_hlo(text: str) -> dict[str, dict[str, int]]:
    """``{op: {"count": n, "bytes": b}}`` per op of ``COLLECTIVES`` in ``compiled.as_text()``: ``n`` runs per step
    (every branch of a conditional: an upper bound), ``b`` the bytes one device sends (``_SENT_PER_RESULT_BYTE`` of
    each result, an empty group every device); ``ValueError`` as ``hlo_shape_bytes``."""
    out = {op: {"count": 0, "bytes": 0} for op in COLLECTIVES}
    lines = text.splitlines() or [""]  # the first: the module's header
    devices = math.prod(int(m[1]) if (m := re.search(rf"\b{key}=(\d+)", lines[0])) else 1
                        for key in ("num_partitions", "replica_count"))
    by_name = {m["name"]: line for line in lines if (m := _NAME.match(line))}
    for line, runs in zip(lines, _runs_per_step(lines)):
        if (match := _OP.search(line)) is None:
            continue
        start = next((by_name[n] for n in re.findall(r"%?([\w.\-]+)", match["args"]) if n in by_name), line)
        n = _group_size(start if match["done"] else line, devices)
        out[match["op"]]["count"] += runs
        sent = hlo_shape_bytes(match["shape"]) * _SENT_PER_RESULT_BYTE[match["op"]](n)
        out[match["op"]]["bytes"] += round(runs * sent)
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

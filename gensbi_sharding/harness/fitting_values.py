"""The largest model settings that fit, for the memory check's advice (``memory_check``'s "lower it, e.g. ...").

The advice halved the settings until they fit and offered that: ``model.width=300`` with 10 MB was told
``model.width=64`` where a width of 119 fits by the same estimate (a user took half the model the machine holds).
Here the halving only brackets the answer; each setting is then raised again, one at a time, to the largest value
the estimate still fits, no higher than where it started (the preset's default). Pure Python: the caller gives the
estimate.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from gensbi_sharding.harness.units import is_int, is_number

__all__ = ["largest_fitting", "HALVINGS"]

HALVINGS = 12  # at most 2**12 smaller: a setting 4096 times too big is offered no value (split, do not shrink)
_FLOAT_STEPS = 12  # a float is bisected to 1/4096 of its bracket, then rounded down to two significant digits


def largest_fitting(size: Callable[[dict], int], values: dict, available: int) -> tuple[dict | None, tuple | None]:
    """``(values that fit, None)`` or ``(None, (the smallest tried, its bytes))``.

    Parameters
    ----------
    size : callable
        The estimate: bytes that settings ``{key: value}`` need; it raises for settings no model can be built with.
    values : dict
        The settings to start from (numbers are lowered; anything else is kept as it is).
    available : int
        The bytes they must fit in.

    Notes
    -----
    The settings are halved together (integers down to 1) until they fit; an exception there is the caller's
    (it names no value). Then each number is raised alone, by bisection between its fitting value and its
    starting one, to the largest that fits with the others as found: a value the estimate refuses, or the model
    cannot be built with, counts as not fitting.
    """
    start, bytes_ = values, size(values)
    for _ in range(HALVINGS):
        smaller = {k: (max(v // 2, 1) if is_int(v) else v / 2) if is_number(v, finite=False) else v
                   for k, v in values.items()}
        if bytes_ <= available or smaller == values:
            break
        bytes_, values = size(smaller), smaller
    if bytes_ > available:
        return None, (values, bytes_)
    for key, top in start.items():
        if is_number(top, finite=False) and values[key] != top:
            values = {**values, key: _raise(size, values, key, top, available)}
    return values, None


def _raise(size: Callable[[dict], int], values: dict, key: str, top: int | float, available: int) -> int | float:
    """The largest value of ``key`` in ``[values[key], top]`` that fits with the other ``values``."""
    def fits(value):
        try:
            return size({**values, key: value}) <= available
        except Exception:  # a value the model cannot be built with does not fit
            return False

    low, high = values[key], top  # low fits; high is tried first (the others lowered may leave it room)
    if fits(high):
        return high
    if is_int(low):
        while high - low > 1:
            middle = (low + high) // 2
            low, high = (middle, high) if fits(middle) else (low, middle)
        return low
    for _ in range(_FLOAT_STEPS):
        middle = (low + high) / 2
        low, high = (middle, high) if fits(middle) else (low, middle)
    scale = 10.0 ** (math.floor(math.log10(low)) - 1)  # two significant digits, rounded down: a value to type
    return max(float(f"{math.floor(low / scale) * scale:.12g}"), values[key])  # below low: fits as low does

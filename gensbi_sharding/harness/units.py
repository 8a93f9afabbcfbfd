"""Numbers as people read them: bytes in KB/MB/GB, rates without exponents, C2ST with its spread.

Used by the console block, the sweep table and the plots, so a number reads the same everywhere.
Decimal units (1 KB = 1000 B), as ``describe()`` prints them.
"""

from __future__ import annotations

import math
import numbers
import re
from typing import Any

__all__ = ["format_bytes", "format_count", "format_seconds", "format_c2st", "c2st_spread", "is_number", "is_int",
           "compact_value"]


def is_number(value: Any, *, finite: bool = True) -> bool:
    """A finite int or float, Python's or NumPy's (not a bool, not None, not NaN); ``finite=False``: inf and NaN too
    (a size setting to compare or halve, whose finiteness another check refuses).

    ``numbers.Real``, as ``is_int`` reads ``numbers.Integral``: every integer ``is_int`` takes is a number here too
    (``int | float`` left ``np.int64`` out, so ``largest_fitting`` never halved a NumPy size)."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and (not finite or math.isfinite(value))


def is_int(value: Any) -> bool:
    """A Python or NumPy integer, not a bool: the harness's one integer check (imports no NumPy, no JAX).

    ``numbers.Integral`` holds ``int`` and NumPy's integer types; ``bool`` is an ``int`` to Python, never a count.
    """
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def format_bytes(n: Any) -> str:
    """``1234567`` -> ``"1.2 MB"``; ``512`` -> ``"512 B"``; not a number -> ``""``."""
    if not is_number(n):
        return ""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if round(abs(n) / scale, 1) >= 1:  # by the shown digit: 999,999 B is "1.0 MB", never "1000.0 KB"
            return f"{n / scale:.1f} {unit}"
    return f"{int(n)} B"


def format_count(n: Any) -> str:
    """``13512.3`` -> ``"13,512"``: an integer with thousands separators, never an exponent."""
    return f"{n:,.0f}" if is_number(n) else ""


def format_seconds(s: Any) -> str:
    """``0.0134`` -> ``"13.4 ms"``, ``52.31`` -> ``"52.3 s"``, ``4000`` -> ``"66.7 min"``."""
    if not is_number(s):
        return ""
    if round(abs(s), 1) < 1:  # by the shown digit, as format_bytes: 0.99996 s is "1.0 s", never "1000.0 ms"
        return f"{s * 1e3:.1f} ms" if round(abs(s) * 1e3, 1) >= 1 else f"{s * 1e6:.1f} us"
    return f"{s:.1f} s" if round(s, 1) < 600 else f"{s / 60:.1f} min"


def format_c2st(mean: Any, std: Any = None) -> str:
    """``(0.6123, 0.0112)`` -> ``"0.612 ± 0.011"``; without a spread ``"0.612"``; none: ``""``."""
    if not is_number(mean):
        return ""
    return f"{mean:.3f} ± {std:.3f}" if is_number(std) else f"{mean:.3f}"


def c2st_spread(metrics: dict[str, Any]) -> float | None:
    """The spread a C2ST is reported with: the standard deviation over observations when several
    were scored (sbibm reports that one), else over the classifier's folds; None without one."""
    for key in ("c2st_sd_observations", "c2st_sd_folds"):
        if is_number(metrics.get(key)):
            return float(metrics[key])
    return None


def compact_value(text: Any) -> str:
    """A value as a sweep's table, plot and refusals show it: Hydra records a swept ``1e12`` as
    ``1000000000000.0``; a decimal float whose exponent form is 3 or more characters shorter is shown so (``1e12``,
    ``2.5e-9``: the same number, which an override reads as the same float); ``True``/``False``/``None`` as typed
    (``true``, ...; Hydra records Python's spelling); any other text as it is."""
    text = {"True": "true", "False": "false", "None": "null"}.get(str(text), str(text))
    if not re.fullmatch(r"[+-]?\d+\.\d+(e[+-]?\d+)?", text):  # ints, bools, names, nan/inf stay as they are
        return text
    value = float(text)
    short = next(s for p in range(17) if float(s := f"{value:.{p}e}") == value)
    mantissa, exponent = short.split("e")
    short = f"{mantissa}e{int(exponent)}"
    return short if len(short) + 3 <= len(text) else text

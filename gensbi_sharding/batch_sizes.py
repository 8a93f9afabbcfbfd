"""The valid batch sizes nearest a refused one, for every batch-size message: pure Python, so the command-line
checks run it before JAX is imported (``numbers.Integral`` holds NumPy's integers)."""

import numbers

from gensbi_sharding.messages import shown

__all__ = ["nearest_batch_sizes"]


def nearest_batch_sizes(requested: int, multiple: int, at_most: int | None = None) -> tuple[int, ...]:
    """The valid batch sizes next to ``requested``, nearest first (ties: smaller): the multiples of ``multiple`` just
    below and above it within ``[multiple, at_most]``; ``(requested,)`` if valid, ``()`` if ``at_most < multiple``.

    Parameters
    ----------
    requested, multiple : int
        The batch size asked for (rows); what a valid size is a multiple of (the data-parallel size).
    at_most : int, optional
        The largest usable size (e.g. the training pairs).

    Returns
    -------
    tuple of int
        At most two sizes, in rows.

    Raises
    ------
    TypeError, ValueError
        An argument not an integer (bools are not); ``requested < 1`` or ``multiple < 1``.
    """
    given = {"requested": requested, "multiple": multiple} | ({} if at_most is None else {"at_most": at_most})
    for name, value in given.items():
        if not isinstance(value, numbers.Integral) or isinstance(value, bool):
            raise TypeError(f"nearest_batch_sizes: {name}={shown(value)} must be an integer (rows)")
    if multiple < 1 or requested < 1:  # else a negative request is answered (multiple,), as if valid
        name, value, what, fix = ("multiple", multiple, "the data-parallel size", abs(multiple) or 1) if multiple < 1 \
            else ("requested", requested, "a batch size, rows", multiple)  # -8: a sign slipped; the multiple is valid
        raise ValueError(f"nearest_batch_sizes: {name}={value} must be >= 1 ({what}), e.g. {name}={fix}")
    requested, multiple = int(requested), int(multiple)
    largest = int(at_most) // multiple * multiple if at_most is not None else max(requested, multiple) + multiple
    if largest < multiple:
        return ()
    clamp = lambda b: min(max(b, multiple), largest)  # noqa: E731
    candidates = {clamp(requested // multiple * multiple), clamp(-(-requested // multiple) * multiple)}
    return tuple(sorted(candidates, key=lambda b: (abs(b - requested), b)))

"""How a simulation budget splits into training and held-out pairs, per data shard: the arithmetic alone.

``harness.data`` splits the simulations so; the run's checks (``sweep_check``, the check of a refusal's suggested
value) read the sizes before any simulation. Here, not in ``harness.data``, which imports the library (JAX): a
command refused with ``data.batch_size`` or ``train.steps`` needs no JAX to say which value passes.
Pure Python.
"""

from __future__ import annotations

__all__ = ["split_sizes", "shard_train_rows", "simulations_for", "held_out_pairs"]


def split_sizes(n: int, val_fraction: float) -> tuple[int, int]:
    """``(n_train, n_val)`` of ``n`` >= 2 simulations: at least one pair on each side."""
    n_val = min(max(int(round(val_fraction * n)), 1), n - 1)
    return n - n_val, n_val


def held_out_pairs(num_simulations: int, val_fraction: float, shards: int = 1) -> int:
    """Held-out pairs of ``num_simulations`` split over ``shards`` data shards, as ``harness.data`` splits them.

    Each shard takes ``num_simulations // shards`` simulations (the first ``num_simulations % shards`` one more)
    and rounds its own held-out share (``split_sizes``), so the total is not ``round(val_fraction *
    num_simulations)``: 1000 simulations at 0.01 over 8 shards hold out 8 pairs, not 10.

    Parameters
    ----------
    num_simulations : int
        ``data.num_simulations``, the whole budget.
    val_fraction : float
        ``data.val_fraction``, in (0, 1).
    shards : int, optional
        The data shards (``data.shards``, or one per process); default 1.

    Returns
    -------
    int
        The held-out pairs over every shard (before any non-finite drop); a shard of fewer than 2 holds none.
    """
    base, extra = divmod(num_simulations, shards)
    sizes = [base + 1] * extra + [base] * (shards - extra)
    return sum(split_sizes(n, val_fraction)[1] for n in sizes if n >= 2)


def shard_train_rows(num_simulations: int, val_fraction: float, shards: int) -> int:
    """Training pairs of the smallest of ``shards`` data shards (before any non-finite drop)."""
    smallest = num_simulations // shards
    return split_sizes(smallest, val_fraction)[0] if smallest >= 2 else 0


def simulations_for(rows: int, num_simulations: int, val_fraction: float, shards: int) -> int:
    """The smallest ``data.num_simulations`` from ``num_simulations`` up whose every one of ``shards`` shards
    trains on ``rows`` pairs (``shard_train_rows``, which grows with it: bisected, as the fraction held out
    may leave 1 pair in 10,000)."""
    if shard_train_rows(num_simulations, val_fraction, shards) >= rows:
        return num_simulations
    low, high = num_simulations // shards, max(num_simulations // shards, 2) * 2
    while shard_train_rows(high * shards, val_fraction, shards) < rows:
        low, high = high, high * 2
    while high - low > 1:  # shard_train_rows(low * shards) < rows <= shard_train_rows(high * shards)
        middle = (low + high) // 2
        low, high = (low, middle) if shard_train_rows(middle * shards, val_fraction, shards) >= rows else (middle, high)
    return high * shards

"""``SimulationData``: a task's simulated pairs and the maps to and from the model's z-scored space.

The model works in an unconstrained, z-scored space: ``theta`` goes through the
inverse of the bijection onto the prior's support (``data.theta_transform=support``),
``x`` optionally through ``log`` (``data.x_transform=log``, for positive data spanning
decades), then both are z-scored with training statistics of every process
(``global_stats``, one all-gather). Samples come back through the forward bijection,
so none can leave a bounded prior (with ``data.theta_transform=none`` the sampler rejects
those that do, ``harness.posterior``). Importing this module never starts JAX's backend.
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any, Optional

import numpy as np

from gensbi_sharding.harness.tasks import to_constrained, to_unconstrained, transform_x

__all__ = ["SimulationData", "global_stats", "NORMALIZATION", "STAT_FIELDS"]

#: Key of the z-score statistics in a checkpoint's ``info``: they fix what the saved weights' inputs and
#: outputs mean, so a resumed run normalises with them, whatever data it simulates.
NORMALIZATION = "normalization"
#: The statistics' fields of ``SimulationData``.
STAT_FIELDS = ("theta_mean", "theta_std", "x_mean", "x_std")


@dataclasses.dataclass(frozen=True, eq=False)
class SimulationData:
    """Simulated pairs of one task, raw (not z-scored), with z-score statistics.

    Arrays are numpy float32; ``n_train + n_val`` is this process's budget.

    Attributes
    ----------
    name : str
        sbibm task name.
    theta_train, x_train : ndarray, (n_train, dim_theta), (n_train, dim_x)
    theta_val, x_val : ndarray, (n_val, dim_theta), (n_val, dim_x)
        Held-out pairs, disjoint from the training pairs.
    observation : ndarray, (dim_x,)
        The observed data the posterior is conditioned on.
    reference_samples : ndarray, (N, dim_theta)
        Reference posterior samples for ``observation`` (N = 10000 in sbibm).
    theta_mean, theta_std, x_mean, x_std : ndarray, (dim_theta,) or (dim_x,)
        Statistics of the training split only, over all processes, in the
        transformed space (after ``theta_bijection.inv`` / ``x_transform``). A zero
        std is stored as 1, so a constant feature passes through instead of dividing by 0.
    theta_bijection : numpyro Transform or None
        Map from R^dim_theta onto the prior's support; None: identity.
    x_transform : str
        "none" or "log".
    dropped_non_finite : int
        Simulations dropped because theta or x held NaN or inf (or the transforms sent
        them to infinity), over all processes; they count against the budget, as in sbibm.
    val_pairs : int or None
        Held-out pairs, over all processes; None (a data set of your own that leaves it out): this
        process's ``len(theta_val)``.
    """

    name: str
    theta_train: np.ndarray
    x_train: np.ndarray
    theta_val: np.ndarray
    x_val: np.ndarray
    observation: np.ndarray
    reference_samples: np.ndarray
    theta_mean: np.ndarray
    theta_std: np.ndarray
    x_mean: np.ndarray
    x_std: np.ndarray
    theta_bijection: Any = None
    x_transform: str = "none"
    dropped_non_finite: int = 0
    val_pairs: Optional[int] = None

    def __post_init__(self) -> None:
        # Was 0 when left out: the console read "val loss ... over 0 pairs" for held-out pairs it had just used.
        if self.val_pairs is None:
            object.__setattr__(self, "val_pairs", len(self.theta_val))

    @property
    def dim_theta(self) -> int:
        """Number of parameters."""
        return self.theta_train.shape[1]

    @property
    def dim_x(self) -> int:
        """Number of data features."""
        return self.x_train.shape[1]

    # The four maps take numpy or jax arrays of shape (..., dim) and keep their type.
    def normalize_theta(self, theta: Any) -> Any:
        """``(theta_bijection.inv(theta) - theta_mean) / theta_std``."""
        return (to_unconstrained(self.theta_bijection, theta) - self.theta_mean) / self.theta_std

    def denormalize_theta(self, z: Any) -> Any:
        """Inverse of ``normalize_theta``: sampler output back to parameter units, inside the support."""
        return to_constrained(self.theta_bijection, z * self.theta_std + self.theta_mean)

    def normalize_x(self, x: Any) -> Any:
        """``(x_transform(x) - x_mean) / x_std``."""
        return (transform_x(self.x_transform, x) - self.x_mean) / self.x_std

    def denormalize_x(self, z: Any) -> Any:
        """Inverse of ``normalize_x``."""
        return transform_x(self.x_transform, z * self.x_std + self.x_mean, inverse=True)

    def statistics(self) -> dict[str, list[float]]:
        """The z-score statistics as JSON-ready lists (float32 values round-trip exactly)."""
        return {name: [float(v) for v in getattr(self, name)] for name in STAT_FIELDS}

    def with_statistics(self, saved: dict) -> SimulationData:
        """A copy normalising with ``saved`` (``statistics()`` of the data a checkpoint was trained on).

        Raises
        ------
        ValueError
            If ``saved`` lacks a field or a field's length is not this data's dimension.
        """
        sizes = {"theta_mean": self.dim_theta, "theta_std": self.dim_theta, "x_mean": self.dim_x, "x_std": self.dim_x}
        for name, size in sizes.items():
            if len(saved.get(name) or ()) != size:
                raise ValueError(f"saved z-score statistics {name}={saved.get(name)!r} do not have the "
                                 f"{size} entries of this task's {'theta' if name[0] == 't' else 'x'}")
        return dataclasses.replace(self, **{name: np.asarray(saved[name], np.float32) for name in STAT_FIELDS})

    def normalized(self, split: str = "train") -> tuple[np.ndarray, np.ndarray]:
        """``(theta, x)`` of ``split`` ("train" or "val"), z-scored, float32."""
        if split not in ("train", "val"):
            raise ValueError(f"split must be 'train' or 'val', got {split!r}")
        theta, x = (self.theta_train, self.x_train) if split == "train" else (self.theta_val, self.x_val)
        return (np.asarray(self.normalize_theta(theta), dtype=np.float32),
                np.asarray(self.normalize_x(x), dtype=np.float32))



def global_stats(counts: list[int], arrays: list[np.ndarray], process_count: int
                 ) -> tuple[list[int], ...]:
    """Totals of ``counts`` and (mean, std) of each ``(n, d)`` array, over every process's rows.

    One all-gather carries everything. Means and stds are float32 (d,); a zero std is 1.

    Parameters
    ----------
    counts : list of int
        This process's counts, summed over processes.
    arrays : list of ndarray, each (n, d)
        This process's rows; each array's statistics cover every process's rows.
    process_count : int
        Processes sharing the data; above 1, ``jax.process_count()`` must equal it for
        the all-gather, else the statistics cover this process only (with a warning).

    Returns
    -------
    tuple
        ``(totals, (mean, std), ...)``: the summed counts (list of int), then one
        ``(mean, std)`` pair of float32 (d,) arrays per array.

    Warns
    -----
    UserWarning
        When ``process_count`` differs from the number of processes JAX runs.
    """
    # Each process's count, mean and sum of squared deviations from that mean (two passes, float64), combined
    # over processes by Chan et al.'s pairwise rule: E[x^2] - E[x]^2 cancels catastrophically for data far from 0
    # (x ~ 1e8 +- 1: a std of 0 or 2 where 1 is right), these do not.
    parts = [np.asarray(counts, dtype=np.float64)]
    for a in arrays:
        a64 = a.astype(np.float64)
        mean = a64.mean(0) if len(a64) else np.zeros(a64.shape[1])
        parts += [[a64.shape[0]], mean, ((a64 - mean) ** 2).sum(0)]
    rows = np.concatenate(parts)[None]  # one row per process
    if process_count > 1:
        import jax

        if jax.process_count() == process_count:
            from jax.experimental import multihost_utils
            # As raw 32-bit words: the all-gather places its input on devices, which without jax_enable_x64 hold
            # float32 (a std 6 % off for x ~ 1000 +- 1 on 2 processes, when sums of squares were gathered)
            words = np.asarray(multihost_utils.process_allgather(rows[0].view(np.uint32)))
            rows = np.ascontiguousarray(words).view(np.float64).reshape(process_count, -1)
        else:
            warnings.warn(f"process_count={process_count} but JAX runs {jax.process_count()} "
                          "process(es): z-score statistics cover this process's share only",
                          UserWarning, stacklevel=3)
    totals, offset, stats = [int(round(c)) for c in rows[:, :len(counts)].sum(0)], len(counts), []
    for a in arrays:
        d = a.shape[1]
        n, means = rows[:, offset:offset + 1], rows[:, offset + 1:offset + 1 + d]
        squares = rows[:, offset + 1 + d:offset + 1 + 2 * d]
        offset += 1 + 2 * d
        mean = (n * means).sum(0) / n.sum()
        std = np.sqrt((squares + n * (means - mean) ** 2).sum(0) / n.sum())
        stats.append((mean.astype(np.float32), np.where(std > 0, std, 1.0).astype(np.float32)))
    return (totals, *stats)

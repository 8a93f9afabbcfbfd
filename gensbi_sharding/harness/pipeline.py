"""The data pipeline of a run: simulation shards -> global, placed batches.

The simulation budget is cut into ``shards`` data shards (by default one per JAX
process). Each shard simulates its share with its own seed stream and shuffles
with its own stream; a global batch is the concatenation, in shard order, of
``batch_size // shards`` rows from each shard. A process owns the shards of its
rank and turns its rows into global arrays with ``host_to_global_array``; a single
process owns them all and places them with ``shard_batch``. So a one-process run
with ``data.shards=2`` sees exactly the global batches of a two-process run.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np

from gensbi_sharding.harness.config import ConfigError
from gensbi_sharding.harness.data import SimulationData, iterate_batches
from gensbi_sharding.harness.registry import get_data
from gensbi_sharding import batch_size_divisor, check_batch_divisible, shard_batch

__all__ = ["Pipeline", "build_pipeline", "check_global_batch"]


@dataclasses.dataclass
class Pipeline:
    """Batches ready for the train step, and what evaluation needs."""

    sims: SimulationData  # this process's first shard, with the global z-score statistics
    train_batches: Iterator[dict]
    val_batches: list[dict]
    local_batch_size: int


def build_pipeline(data_cfg: Any, *, seed: int, mesh: Any, shards: int | None = None,
                   skip: int = 0) -> Pipeline:
    """Simulate, normalise and batch the data set named by ``data_cfg.name``.

    ``skip`` global batches are drawn and dropped (unplaced) first, so a resumed run
    continues the very batch stream it was interrupted in.

    Raises
    ------
    ConfigError
        If the batch size does not split over the shards or the data-parallel devices;
        the message names the value and the ``data.*`` override that fixes it.
    """
    import jax

    processes, rank = jax.process_count(), jax.process_index()
    shards = shards or processes
    batch = data_cfg.batch_size
    if shards % processes:
        raise ConfigError(f"data.shards={shards} must be a multiple of the {processes} processes")
    if batch % shards:
        raise ConfigError(f"data.batch_size={batch} does not split over {shards} data shards "
                          f"(one per process); use a multiple of {shards}")
    if processes == 1:
        check_global_batch(batch, mesh)
    elif mesh is not None and (batch // processes) % max(batch_size_divisor(mesh) // processes, 1):
        step = processes * max(batch_size_divisor(mesh) // processes, 1)
        raise ConfigError(
            f"data.batch_size={batch} gives each of the {processes} processes {batch // processes} rows, "
            f"not divisible by its {batch_size_divisor(mesh) // processes} data-parallel devices; "
            f"set data.batch_size={max(step, round(batch / step) * step)}")
    own = range(rank * shards // processes, (rank + 1) * shards // processes)
    factory = get_data(data_cfg.name)
    with warnings.catch_warnings():
        # Emulated shards in one process: their statistics are combined just below.
        warnings.filterwarnings("ignore", message="process_count=", category=UserWarning)
        parts = [factory(num_simulations=data_cfg.num_simulations, val_fraction=data_cfg.val_fraction,
                     seed=seed, num_observation=data_cfg.num_observation,
                         process_index=s, process_count=shards) for s in own]
    if processes == 1 and shards > 1:  # emulated shards: statistics over all of them
        parts = _with_stats_of(parts)
    local = batch // shards
    streams = [iterate_batches(*part.normalized("train"), batch_size=local, seed=seed * 7919 + s,
                               mesh=None, place=False) for s, part in zip(own, parts)]
    place = _placer(mesh, processes)

    def train_batches():
        for _ in range(skip):
            for stream in streams:
                next(stream)
        while True:
            yield place(_concat([next(stream) for stream in streams]))

    val = [part.normalized("val") for part in parts]
    n_val = min(len(theta) for theta, _ in val) // local
    val_batches = [place(_concat([{"theta": t[i * local:(i + 1) * local], "x": x[i * local:(i + 1) * local]}
                                  for t, x in val])) for i in range(n_val)]
    return Pipeline(parts[0], train_batches(), val_batches, local * len(parts))


def check_global_batch(batch: int, mesh: Any) -> None:
    """``ConfigError`` naming ``data.batch_size=<nearest valid>`` if the batch does not split over the mesh."""
    try:
        check_batch_divisible({"rows": np.empty((batch, 0))}, mesh, "train")
    except ValueError as err:
        divisor = batch_size_divisor(mesh)
        fix = max(divisor, round(batch / divisor) * divisor)
        raise ConfigError(f"{err}; set data.batch_size={fix}") from None


def _placer(mesh: Any, processes: int):
    if mesh is None:
        return lambda batch: batch
    if processes == 1:
        return lambda batch: shard_batch(batch, mesh)
    from gensbi_sharding import DataPartitionType, host_to_global_array

    return lambda batch: host_to_global_array(batch, partition=DataPartitionType.DATA, mesh=mesh)


def _concat(batches: list[dict]) -> dict:
    if len(batches) == 1:
        return batches[0]
    return {key: np.concatenate([b[key] for b in batches]) for key in batches[0]}


def _with_stats_of(parts: list[SimulationData]) -> list[SimulationData]:
    def stats(a):
        std = a.std(0, dtype=np.float64)
        return a.mean(0, dtype=np.float64).astype(np.float32), np.where(std > 0, std, 1).astype(np.float32)

    theta_mean, theta_std = stats(np.concatenate([p.theta_train for p in parts]))
    x_mean, x_std = stats(np.concatenate([p.x_train for p in parts]))
    return [dataclasses.replace(p, theta_mean=theta_mean, theta_std=theta_std, x_mean=x_mean, x_std=x_std)
            for p in parts]

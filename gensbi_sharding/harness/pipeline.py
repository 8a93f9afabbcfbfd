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
import math
import warnings
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from gensbi_sharding.harness.config import ConfigError
from gensbi_sharding.harness.data import iterate_batches, shard_train_rows, simulations_for
from gensbi_sharding.harness.held_out import MIN_VAL_PAIRS
from gensbi_sharding.harness.hints import batch_size_problem, mesh_alternatives
from gensbi_sharding.harness.own_data import agreed_shards, check_factory_result
from gensbi_sharding.harness.registry import get_data
from gensbi_sharding.harness.simulation_data import SimulationData, global_stats
from gensbi_sharding.harness.split_rows import held_out_pairs
from gensbi_sharding.harness.tasks import TASKS, to_unconstrained, transform_x
from gensbi_sharding import batch_size_divisor, shard_batch

if TYPE_CHECKING:  # annotations only: launch.py's start imports this module without JAX (test_start_imports)
    from jax.sharding import Mesh
    from omegaconf import DictConfig

__all__ = ["Pipeline", "build_pipeline", "check_batch_config"]


@dataclasses.dataclass
class Pipeline:
    """Batches ready for the train step, and what evaluation needs."""

    sims: SimulationData  # this process's first shard, with the global z-score statistics
    train_batches: Iterator[dict]
    # Every held-out pair, in batches of the training batch size: the last one is padded,
    # and each batch's "weight" (B,) is 1 for a real pair and 0 for padding.
    val_batches: list[dict]
    local_batch_size: int
    val_pairs: int = 0  # held-out pairs over all shards, each counted once
    dropped_non_finite: int = 0  # simulations dropped for NaN/inf, over all shards (each shard counts its own)


def build_pipeline(data_cfg: Any, *, seed: int, mesh: Mesh | None, shards: int | None = None,
                   skip: int = 0, statistics: dict | None = None, mesh_cfg: DictConfig | None = None) -> Pipeline:
    """Simulate, normalise and batch the data set named by ``data_cfg.name``.

    ``skip`` global batches are drawn and dropped (unplaced) first, so a resumed run
    continues the very batch stream it was interrupted in. ``statistics``
    (``SimulationData.statistics()`` saved with a checkpoint) replace the ones of the
    data simulated here: a resumed model keeps the input and output scales it was
    trained with, also when it trains further on another simulation budget.

    Raises
    ------
    ConfigError
        If the batch size does not split over the shards and the data-parallel devices,
        or exceeds the training pairs (checked before simulating, and again after
        non-finite simulations are dropped); the message names the value and the one
        ``data.batch_size`` (or ``data.num_simulations``) that fixes every constraint, and the
        meshes that keep the batch size (``hints.mesh_alternatives``; ``mesh_cfg``: the run's ``mesh``).
    """
    import jax

    processes, rank = jax.process_count(), jax.process_index()
    per_process = shards is None
    shards = shards or processes
    if shards % processes:
        raise ConfigError(f"data.shards={shards} must be a multiple of the {processes} processes; "
                          f"set data.shards={processes * max(round(shards / processes), 1)}")
    check_batch_config(data_cfg, mesh, shards=shards, per_process=per_process, processes=processes, mesh_cfg=mesh_cfg)
    own = range(rank * shards // processes, (rank + 1) * shards // processes)
    factory = get_data(data_cfg.name)

    def made() -> list:  # this process's shards; a refusal on any one process ends every process (agreed_shards)
        with warnings.catch_warnings():
            # Emulated shards in one process: their statistics are combined just below.
            warnings.filterwarnings("ignore", message="process_count=", category=UserWarning)
            return [check_factory_result(factory(
                num_simulations=data_cfg.num_simulations, val_fraction=data_cfg.val_fraction, seed=seed,
                num_observation=data_cfg.num_observation, theta_transform=data_cfg.theta_transform,
                x_transform=data_cfg.x_transform, process_index=s, process_count=shards), data_cfg.name,
                x_transform=data_cfg.x_transform) for s in own]

    parts = agreed_shards(made, data_cfg.name, num_simulations=data_cfg.num_simulations, shards=shards)
    # Each shard's count of its own drops, summed over every shard below: the first shard's holds the
    # total only where its factory gathered one, so a factory of one's own counting its own shard's would misreport
    dropped = sum(p.dropped_non_finite for p in parts)
    if shards > processes:  # several shards per process: statistics over all of them, every process's
        parts = _with_stats_of(parts, processes)
    if statistics is not None:
        try:
            parts = [part.with_statistics(statistics) for part in parts]
        except ValueError as err:
            raise ConfigError(f"train.resume: {err}; start a new run without train.resume") from None
    # Non-finite simulations may have shrunk a shard: check the batch against the pairs left.
    # The sizes are agreed over processes, so every process decides alike. The held-out pairs are counted
    # here, not read from a factory's val_pairs: one of one's own may leave it out, or count one process's.
    train_rows, val_rows, val_pairs, dropped = _across_processes(min(len(p.theta_train) for p in parts),
                                                                 max(len(p.theta_val) for p in parts),
                                                                 sum(len(p.theta_val) for p in parts), dropped)
    if val_pairs == 0:  # only a factory of one's own gets here: the config checks keep load_task's split non-empty
        raise ConfigError(f"data={data_cfg.name}'s factory returned no held-out pairs (theta_val, x_val empty) for "
                          f"data.val_fraction={data_cfg.val_fraction}: the run would train unvalidated, with no best "
                          "checkpoint; split its simulations with split_sizes(n, val_fraction) (harness/data.py), "
                          "as load_task does")
    # An sbibm task's split (load_task's) is held to the minimum by the config checks, before simulating; a factory
    # of one's own may keep any count aside, whatever data.val_fraction says, so its count is checked here. The fix
    # named is the split, not a larger data.val_fraction: the config checks passed this one, so the factory ignores it
    if data_cfg.name not in TASKS and val_pairs < MIN_VAL_PAIRS:
        raise ConfigError(f"data={data_cfg.name}'s factory returned {val_pairs} held-out pairs (theta_val, x_val) "
                          f"for data.val_fraction={data_cfg.val_fraction} of data.num_simulations="
                          f"{data_cfg.num_simulations}, fewer than the {MIN_VAL_PAIRS} a run validates on (the best "
                          "weights and early stopping would follow noise); split its simulations with "
                          "split_sizes(n, val_fraction) (harness/data.py), as load_task does: that holds out "
                          f"{held_out_pairs(data_cfg.num_simulations, data_cfg.val_fraction, shards)} here")
    problem = batch_size_problem(data_cfg.batch_size, shards=shards, data_parallel=batch_size_divisor(mesh),
                                 dropped=dropped, train_rows=train_rows, per_process=per_process)
    if problem:
        raise ConfigError(problem + mesh_alternatives(data_cfg.batch_size, shards=shards, train_rows=train_rows,
                                                      mesh=mesh, mesh_cfg=mesh_cfg))
    local = data_cfg.batch_size // shards
    streams = [iterate_batches(*part.normalized("train"), batch_size=local, seed=seed * 7919 + s,
                               mesh=None, place=False) for s, part in zip(own, parts)]
    place = _placer(mesh, processes)

    def train_batches():
        for _ in range(skip):
            for stream in streams:
                next(stream)
        while True:
            yield place(_concat([next(stream) for stream in streams]))

    # Each held-out pair's index (shard s's pairs after s * val_rows): validation draws a pair's (t, z) by it, not by
    # its row in a batch, which data.batch_size sets (validation.held_out_indexed)
    val = [_padded(*part.normalized("val"), val_rows, local, first=s * val_rows) for s, part in zip(own, parts)]
    val_batches = [place(_concat([{key: v[key][i * local:(i + 1) * local] for key in v} for v in val]))
                   for i in range(len(val[0]["weight"]) // local)]
    return Pipeline(parts[0], train_batches(), val_batches, local * len(parts), val_pairs=val_pairs,
                    dropped_non_finite=dropped)


def check_batch_config(data_cfg: Any, mesh: Mesh | None, *, shards: int, per_process: bool = False,
                       processes: int = 1, mesh_cfg: DictConfig | None = None) -> None:
    """``ConfigError`` unless ``data.batch_size`` fits the shards, the mesh and the training pairs.

    Uses the sizes ``data.num_simulations`` and ``data.val_fraction`` give before any
    simulation; the message names the one ``data.batch_size`` that fixes everything and,
    where the user chose ``data.shards``, the nearest shard count that keeps the batch size, and the
    meshes that keep it (``hints.mesh_alternatives``; ``mesh_cfg``: the run's ``mesh`` config).
    """
    vf = data_cfg.val_fraction
    rows = shard_train_rows(data_cfg.num_simulations, vf, shards)
    problem = batch_size_problem(data_cfg.batch_size, shards=shards, data_parallel=batch_size_divisor(mesh),
                                 train_rows=rows, per_process=per_process,
                                 budget=lambda need: simulations_for(need, data_cfg.num_simulations, vf, shards))
    if problem and not per_process:
        # A shard count typed by hand (data.shards=5000) is as likely the mistake as the batch size.
        fits = [s for s in range(processes, data_cfg.batch_size + 1, processes) if data_cfg.batch_size % s == 0
                and batch_size_problem(data_cfg.batch_size, shards=s, data_parallel=batch_size_divisor(mesh),
                                      train_rows=shard_train_rows(data_cfg.num_simulations, vf, s)) is None]
        if fits:
            other = min(fits, key=lambda s: (abs(s - shards), s))
            problem += f", or keep data.batch_size={data_cfg.batch_size} and set data.shards={other}"
    if problem:
        raise ConfigError(problem + mesh_alternatives(data_cfg.batch_size, shards=shards, train_rows=rows, mesh=mesh,
                                                      mesh_cfg=mesh_cfg))


def _placer(mesh: Mesh | None, processes: int):
    if mesh is None:
        return lambda batch: batch
    if processes == 1:
        return lambda batch: shard_batch(batch, mesh)
    from gensbi_sharding import DataPartitionType, host_to_global_array

    # Every batch has one shape by construction: the processes' agreement is checked on the first only,
    # since the check is a blocking collective that would stall every step's dispatch.
    checked = []

    def place(batch):
        placed = host_to_global_array(batch, partition=DataPartitionType.DATA, mesh=mesh,
                                      check_processes=not checked)
        checked.append(True)
        return placed
    return place


def _concat(batches: list[dict]) -> dict:
    if len(batches) == 1:
        return batches[0]
    return {key: np.concatenate([b[key] for b in batches]) for key in batches[0]}


def _with_stats_of(parts: list[SimulationData], processes: int) -> list[SimulationData]:
    # In the model's space: the statistics of the transformed rows, as load_task computes them (global_stats).
    theta = np.concatenate([to_unconstrained(p.theta_bijection, p.theta_train) for p in parts])
    x = np.concatenate([transform_x(p.x_transform, p.x_train) for p in parts])
    val_pairs = sum(p.val_pairs for p in parts)  # the drops: each shard keeps its own count (build_pipeline sums)
    # several processes: each saw only its own shards, and one set of statistics serves all (a set per shard would
    # normalise each process's batches differently and fail the checkpoint's save, its values unalike)
    _, (theta_mean, theta_std), (x_mean, x_std) = global_stats([], [theta, x], processes)
    return [dataclasses.replace(p, theta_mean=theta_mean, theta_std=theta_std, x_mean=x_mean, x_std=x_std,
                                val_pairs=val_pairs) for p in parts]


def _padded(theta: np.ndarray, x: np.ndarray, rows: int, local: int, first: int = 0) -> dict[str, np.ndarray]:
    """``theta``, ``x``, a 0/1 ``weight`` and each pair's ``index`` (``first`` on; padding 0), zero-padded to
    ``rows`` rounded up to whole batches."""
    total = -(-rows // local) * local
    pad = total - len(theta)
    weight = np.concatenate([np.ones(len(theta), np.float32), np.zeros(pad, np.float32)])
    index = np.concatenate([np.arange(first, first + len(theta)), np.zeros(pad)]).astype(np.int32)
    return {"theta": np.pad(theta, ((0, pad), (0, 0))), "x": np.pad(x, ((0, pad), (0, 0))), "weight": weight,
            "index": index}


def _across_processes(smallest: int, largest: int, *counts: int) -> tuple[int, ...]:
    """``(min of smallest, max of largest, sum of each count)`` over every process (one all-gather; as given on
    one)."""
    import jax

    if jax.process_count() == 1:
        return smallest, largest, *counts
    from jax.experimental import multihost_utils

    every = np.asarray(multihost_utils.process_allgather(np.array([smallest, largest, *counts], np.int64)))
    return int(every[:, 0].min()), int(every[:, 1].max()), *(int(c) for c in every[:, 2:].sum(0))

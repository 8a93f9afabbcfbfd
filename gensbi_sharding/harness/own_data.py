"""What a registered data factory returned, checked before anything trains on it.

A data set of one's own (``@register_data``) is any callable: its result reaches the pipeline and the dry run
unchecked otherwise, where a wrong type, a 1-D array or a NaN surfaced far from its cause (an ``AttributeError``
on ``dropped_non_finite``, a broadcasting error inside ``normalize_theta``, "training diverged ... lower
train.learning_rate" for a NaN the factory kept). Each check names the factory, the field and the fix.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable
from typing import Any

import numpy as np

from gensbi_sharding.harness.config import ConfigError
from gensbi_sharding.harness.simulation_data import STAT_FIELDS, SimulationData
from gensbi_sharding.harness.units import is_int

__all__ = ["check_factory_result", "check_shards", "agreed_shards"]

_DOCS = "docs/gensbi_models.md#a-model-or-data-set-of-your-own-in-the-harness"
_TEXT_BYTES = 2048  # of a process's refusal, gathered with the shards' digests (a multiple of 4: uint32 words)
_SEEDS = ("simulate num_simulations // process_count pairs with a seed stream of (seed, process_index), as load_task "
          "does")


def check_factory_result(data: Any, name: str, *, x_transform: str | None = None) -> SimulationData:
    """``data`` if it is a usable ``SimulationData`` for ``data=<name>``, else a ``ConfigError``.

    Parameters
    ----------
    data : Any
        What ``get_data(name)(...)`` returned.
    name : str
        The data set's registered name (``data.name``).
    x_transform : str, optional
        The run's ``data.x_transform``, which the factory was asked to apply; None: not checked.

    Returns
    -------
    SimulationData
        ``data`` with its arrays as NumPy float32, as ``SimulationData`` holds them (a factory may give lists,
        JAX arrays or other real dtypes).

    Raises
    ------
    ConfigError
        If ``data`` is not a ``SimulationData``; an array is not 2-D (rows, dim >= 1) of real numbers, the train and
        val splits disagree in rows or dims, ``observation`` is not ``(dim_x,)`` or a statistic not ``(dim,)``;
        a value is NaN or inf (the factory must drop such simulations, as ``load_task`` does, and count them in
        ``dropped_non_finite``, an int >= 0); a std is not > 0; or its ``x_transform`` is not the one asked for.
    """
    where = f"data={name}'s factory"
    if not isinstance(data, SimulationData):
        raise ConfigError(f"{where} returned {type(data).__name__}, not a SimulationData "
                          f"(gensbi_sharding.harness.simulation_data); return one, as load_task does ({_DOCS})")
    fields = [f"{var}_{split}" for split in ("train", "val") for var in ("theta", "x")] + ["observation", *STAT_FIELDS]
    for field in fields:  # as arrays: lists would fail at "unsupported operand type(s) for -"
        try:
            value = np.asarray(getattr(data, field))
        except ValueError as err:  # ragged rows
            raise ConfigError(f"{where} returned {field} that is no array ({err}): give a (rows, dim) NumPy array")
        if np.issubdtype(value.dtype, np.number) and not np.iscomplexobj(value):
            with np.errstate(over="ignore"):
                single = value.astype(np.float32)
            if (overflow := np.isfinite(value) & ~np.isfinite(single)).any():  # else named NaN or inf below
                raise ConfigError(f"{where} returned {field} with values beyond float32's range (e.g. "
                                  f"{value[overflow].flat[0]:.3g}; the largest is {np.finfo(np.float32).max:.3g}), "
                                  "which SimulationData holds: rescale them in the factory")
            data = dataclasses.replace(data, **{field: single})
    dims = {}
    for split in ("train", "val"):
        for var in ("theta", "x"):
            field = f"{var}_{split}"
            value = np.asarray(getattr(data, field))
            if value.ndim != 2 or not np.issubdtype(value.dtype, np.number) or np.iscomplexobj(value):
                raise ConfigError(f"{where} returned {field} of shape {value.shape} and dtype {value.dtype}: "
                                  f"give (rows, dim_{var}) real numbers{_array_fix(field, value, var)}")
            if value.shape[1] == 0:  # was taken: a model of no parameter (or no data) built and trained on nothing
                raise ConfigError(f"{where} returned {field} of shape {value.shape}: no {var} columns; give "
                                  f"(rows, dim_{var}) with dim_{var} >= 1, one column per "
                                  f"{'parameter' if var == 'theta' else 'feature'}")
            if dims.setdefault(var, value.shape[1]) != value.shape[1]:
                raise ConfigError(f"{where} returned {field} of {value.shape[1]} columns but {var}_train of "
                                  f"{dims[var]}: both splits hold the same dim_{var}")
            _finite(where, field, value, "drop those simulations in the factory and count them in "
                                         "dropped_non_finite, as load_task does")
        theta_rows, x_rows = (len(getattr(data, f"{var}_{split}")) for var in ("theta", "x"))
        if theta_rows != x_rows:
            raise ConfigError(f"{where} returned theta_{split} of {theta_rows} rows and x_{split} of {x_rows}: "
                              "one row per simulation in each")
    if len(data.theta_train) == 0:
        raise ConfigError(f"{where} returned no training pairs; raise data.num_simulations")
    for field, size in (("observation", dims["x"]), *((s, dims[s.split("_")[0]]) for s in STAT_FIELDS)):
        value = np.asarray(getattr(data, field))
        if value.shape != (size,):
            raise ConfigError(f"{where} returned {field} of shape {value.shape}: give ({size},), one value per "
                              f"column of {'x' if field == 'observation' or field[0] == 'x' else 'theta'}_train")
        _finite(where, field, value, "compute it from finite training rows (global_stats)")
        if field.endswith("_std") and not (value > 0).all():
            raise ConfigError(f"{where} returned {field} with entries <= 0 ({value.tolist()}): z-scoring divides "
                              "by it; store a zero std as 1, as global_stats does")
    dropped = data.dropped_non_finite  # summed over shards into metrics.json's non_finite_simulations
    if not is_int(dropped) or dropped < 0:
        # was: None or "3" a TypeError in the pipeline's sum, -5 or 2.5 written to metrics.json as the count
        raise ConfigError(f"{where} returned dropped_non_finite={dropped!r}: give the count of simulations it dropped "
                          "for NaN or inf, an int >= 0 (0 where none), as load_task does")
    data = dataclasses.replace(data, dropped_non_finite=int(dropped))
    if x_transform is not None and data.x_transform != x_transform:
        raise ConfigError(f"{where} returned x_transform={data.x_transform!r} for data.x_transform={x_transform}: "
                          f"pass the factory's x_transform keyword on to SimulationData(x_transform=...), or set "
                          f"data.x_transform={data.x_transform}")
    for split in ("train", "val"):  # the transforms (log, the bijection's inverse) can send finite values off
        if data.x_transform == "log" and (rows := int((np.asarray(getattr(data, f"x_{split}")) <= 0).any(1).sum())):
            # named apart: was "drop the simulations its x_transform ... cannot map" for most of a data set's rows
            raise ConfigError(f"{where} returned x_{split} with values <= 0 in {rows} row(s) of "
                              f"{len(getattr(data, f'x_{split}'))}, which data.x_transform=log cannot map (log needs "
                              "x > 0): set data.x_transform=none, or drop those simulations in the factory and count "
                              "them in dropped_non_finite, as load_task does")
        for field, value in zip((f"theta_{split}", f"x_{split}"), data.normalized(split)):
            _finite(where, f"{field} (z-scored, after its transforms)", value,
                    "drop the simulations its x_transform or theta_bijection cannot map, as load_task does")
    return data


def _array_fix(field: str, value: np.ndarray, var: str) -> str:
    """", e.g. <the change>" that makes ``value`` (a factory's ``field``) a (rows, dim) array of real numbers, its rank
    and its dtype changed together; for entries no float reads (text that is no number), ": <what to do instead>".
    Was "x_train[:, None] for one feature" for any refusal; then "x_train.astype(np.float32)" for any dtype, which
    raised pasted for text such as 'a' ("could not convert string to float")."""
    if value.ndim < 1:
        return f", e.g. one row per simulation, {field}.shape == (rows, dim_{var})"
    change, note = field, ""
    if value.ndim == 1:
        change, note = f"{field}[:, None]", f" for one {'parameter' if var == 'theta' else 'feature'}"
    elif value.ndim > 2:
        change, note = f"{field}.reshape(len({field}), -1)", ", one flat row per simulation"
    if np.iscomplexobj(value):
        return f", e.g. np.concatenate([{change}.real, {change}.imag], axis=1){note}, each part columns of its own"
    if not np.issubdtype(value.dtype, np.number):
        if (unread := _unreadable(value)) is not None:  # advice that would raise as it did here: what to do instead
            index, entry = unread
            return (f": {field}[{', '.join(map(str, index))}] is {entry!r}, which is no number (np.float32 cannot "
                    "read it); make each entry a number in the factory, e.g. a category its index in one list of "
                    "the categories, the same list for every split")
        change, note = f"{change}.astype(np.float32)", note or " in the factory"
    return f", e.g. {change}{note}"


def _unreadable(value: np.ndarray) -> tuple[tuple[int, ...], Any] | None:
    """The index and entry of ``value``'s first entry that ``float`` cannot read; None where ``astype(np.float32)``
    reads them all (numbers as text, bools, an object array of numbers)."""
    try:
        value.astype(np.float32)
        return None
    except (TypeError, ValueError):
        pass
    for index, entry in np.ndenumerate(value):  # stops at the first: the refusal names one
        try:
            float(entry)
        except (TypeError, ValueError):
            return index, entry.item() if isinstance(entry, np.generic) else entry
    return (0,) * value.ndim, value.flat[0]  # (float read each alone: named by the first)


def _finite(where: str, field: str, value: np.ndarray, fix: str) -> None:
    bad = ~np.isfinite(value)
    if bad.any():
        rows = int(bad.any(axis=1).sum()) if value.ndim == 2 else int(bad.sum())
        raise ConfigError(f"{where} returned {field} with NaN or inf in {rows} "
                          f"{'row(s)' if value.ndim == 2 else 'entries'} of {len(value)}: {fix}")


def check_shards(parts: list[SimulationData], name: str, *, num_simulations: int, shards: int) -> None:
    """``ConfigError`` if a factory ignored its ``process_index`` / ``process_count``: a shard holds more pairs
    than a share of ``num_simulations`` holds, or two shards hold the same simulations (those of every process
    compared: one all-gather, which every process calls).

    Parameters
    ----------
    parts : list of SimulationData
        This process's shards, as their factory calls returned them (checked by ``check_factory_result``).
    name : str
        The data set's registered name (``data.name``).
    num_simulations : int
        ``data.num_simulations``, the whole budget of every shard together.
    shards : int
        How many shards share it (``process_count`` of each factory call).

    Raises
    ------
    ConfigError
        Naming the shard, its pairs and its share, and the keywords to honour.
    """
    _check_shares(parts, name, num_simulations=num_simulations, shards=shards)
    _check_distinct(_every_digest(parts, count=len(parts), refusal="")[0], name, shards)


def agreed_shards(make: Callable[[], list], name: str, *, num_simulations: int, shards: int) -> list[SimulationData]:
    """This process's shards, ``make()`` (its factory calls, each checked by ``check_factory_result``), checked as
    ``check_shards`` checks them, with a refusal in any one process agreed by all in ``check_shards``' one all-gather.

    Every process raises the lowest refusing rank's error: a factory refused on one process only (its own shard: NaN,
    a wrong shape, a std of 0) would end that process, while the others wait for it in the all-gather until
    ``distributed.heartbeat_s`` runs out; all then killed (SIGABRT), the job's error naming no refusal.

    Parameters
    ----------
    make : callable
        ``make()`` -> this process's shards, as ``check_factory_result`` returned them.
    name, num_simulations, shards
        As ``check_shards``'.

    Returns
    -------
    list of SimulationData
        ``make()``'s shards, checked on every process.

    Raises
    ------
    ConfigError
        A refusal of any process (its message, naming the process in a job of several), or ``check_shards``'.
    Exception
        What ``make()`` raised on a process, re-raised there; the others raise ``RuntimeError`` naming it.
    """
    import jax

    try:
        parts, failure = make(), None
        _check_shares(parts, name, num_simulations=num_simulations, shards=shards)
    except Exception as err:  # every process reaches the all-gather below, refused or not
        if jax.process_count() == 1:
            raise
        parts, failure = [], err
    count = shards // jax.process_count()
    said = f"{'C' if type(failure).__name__ == 'ConfigError' else 'E'}{type(failure).__name__}: {failure}"
    digests, refusals = _every_digest(parts, count=count, refusal=said if failure is not None else "")
    if refused := [(rank, text) for rank, text in enumerate(refusals) if text]:
        rank, text = refused[0]
        where = f" (process {rank} of {jax.process_count()}: its data shards)"
        if text[0] == "C":  # every process says it alike: the parent names it once (child_errors.common_refusal)
            raise ConfigError(text[1:].split(": ", 1)[1] + where) from failure
        if failure is not None and rank == jax.process_index():
            raise failure
        raise RuntimeError(f"process {rank} of {jax.process_count()} failed making its data shards: {text[1:]}")
    _check_distinct(digests, name, shards)
    return parts


def _check_shares(parts: list[SimulationData], name: str, *, num_simulations: int, shards: int) -> None:
    """``ConfigError`` if a shard holds more pairs than a share of ``num_simulations`` holds (this process's)."""
    # A share may hold the remainder of an uneven split, wherever the factory puts it (load_task's first shards
    # take one pair each; a factory may give the last one all of it).
    share = num_simulations // shards + num_simulations % shards
    for part in parts:
        pairs = len(part.theta_train) + len(part.theta_val)
        if pairs > share:  # a data set of a fixed size read whole, or each shard the whole budget (both named:
            # "it ignores process_count" alone would be wrong for one shard)
            raise ConfigError(f"data={name}'s factory returned {pairs} pairs for a shard of data.num_simulations="
                              f"{num_simulations} over {shards} shard(s), more than a share holds ({share}): it "
                              f"ignores num_simulations or process_count; {_SEEDS} (a data set of a fixed size: set "
                              "data.num_simulations to its size, and give each shard its process_index-th share)")


def _check_distinct(digests: list[bytes], name: str, shards: int) -> None:
    """``ConfigError`` if two shards (of any process) hold the same training pairs."""
    first_of = {}  # every shard's training pairs, by digest: any two alike, of any process (not this one's only)
    for index, digest in enumerate(digests):
        if (first := first_of.setdefault(digest, index)) != index:
            raise ConfigError(f"data={name}'s factory returned the same simulations for shards {first} and {index} "
                              f"of {shards}: it ignores process_index, so those shards train on the same pairs; "
                              f"{_SEEDS}")


def _every_digest(parts: list[SimulationData], *, count: int, refusal: str) -> tuple[list[bytes], list[str]]:
    """A digest of each shard's training pairs, every process's ``count`` shards in order (zeros for a process that
    refused: it has none), and each process's ``refusal`` ("" for none; its first ``_TEXT_BYTES`` bytes): one
    all-gather, so every process gets the same lists and all refuse alike."""
    import jax

    words = np.zeros((count, 4), np.uint32)
    for index, part in enumerate(parts):
        digest = hashlib.sha256(np.ascontiguousarray(part.theta_train))
        digest.update(np.ascontiguousarray(part.x_train))
        words[index] = np.frombuffer(digest.digest()[:16], np.uint32)
    text = np.zeros(_TEXT_BYTES, np.uint8)
    said = refusal.encode()[:_TEXT_BYTES]
    text[:len(said)] = np.frombuffer(said, np.uint8)
    rows = np.concatenate([words.ravel(), text.view(np.uint32)])[None]  # this process's row
    if jax.process_count() > 1:  # 32-bit words: an all-gather without jax_enable_x64 keeps those whole
        from jax.experimental import multihost_utils

        rows = np.asarray(multihost_utils.process_allgather(rows)).reshape(-1, rows.shape[1])
    digests = [bytes(shard) for r in rows for shard in r[:4 * count].reshape(count, 4).view(np.uint8)]
    texts = [r[4 * count:].view(np.uint8).tobytes().rstrip(b"\0").decode(errors="ignore") for r in rows]
    return digests, texts

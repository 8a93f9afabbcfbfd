"""What a sweep table's numbers measured, said under it on the console (``sweep_summary.md`` stays a plain table).

Was: a training sweep's table gave ``params/device``, ``optimizer/device`` and ``step`` with no word of what they
are, so a user choosing "the fastest rule at a memory budget" read the state bytes as the step's memory (the step's,
batch and temporaries included, is what a dry-run sweep gives: 3.3 MB per device against 0.4 MB of state for fsdp on
8x1), could not tell whether compile was in ``step``, nor at which batch the speeds were measured; a dry-run sweep's
``memory/device`` did not say it was XLA's compiled step, nor the units (decimal: 1 KB = 1000 B). A training sweep
now has that ``memory/device`` too (``train.train`` records its compiled step's), said so here; and, since r75, the
dry run's ``collectives/step/device`` (the same step's collectives, counted alike), said so where a row has it.

The words for a job's status (``status_word``, ``status_counts``) live here, not in ``plots``: ``best_job`` and the
console's end line use them, and naming the best job needs no plotting module.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from gensbi_sharding.harness.units import is_int, is_number

__all__ = ["legend", "status_word", "status_counts"]


def _batches(rows: Sequence[Mapping[str, Any]]) -> str:
    """The global batch sizes the rows ran with, e.g. ``"256"`` or ``"256, 512"``; ``""`` where none is known."""
    sizes = []
    for row in rows:
        config = row.get("metrics", {}).get("config") or {}
        size = (config.get("data") or {}).get("batch_size") if isinstance(config, Mapping) else None
        if is_int(size) and size not in sizes:
            sizes.append(size)
    return ", ".join(f"{s:,}" for s in sorted(sizes))


def legend(rows: Sequence[Mapping[str, Any]], dry: bool) -> str:
    """The lines that say what a sweep table measured, its units and what it leaves out.

    Parameters
    ----------
    rows : sequence of mapping
        The summary's rows (``sweep_rows.summary_rows``), each with its job's ``metrics`` (``metrics.json``).
    dry : bool
        Whether the table is a dry-run sweep's (``summary.DRY_RUN_COLUMNS``), else a training sweep's.

    Returns
    -------
    str
        Lines starting ``"measured: "``, without a trailing newline.
    """
    batches = _batches(rows)
    batch = f" (global batch {batches}, data.batch_size)" if batches else ""
    units = "bytes in decimal units (1 KB = 1,000 B), each per device"
    if dry:
        return (f"measured: memory/device is XLA's compiled train step{batch} on one device (arguments + outputs + "
                "temporaries - donated buffers: the training state and a batch's shard), + best weights the copy "
                "early stopping keeps beside it; collectives/step/device the bytes a device sends in one step; "
                f"compile the step's compile time; nothing trained or timed; {units}")
    if not any(is_number(row.get("metrics", {}).get("step_memory_bytes_per_device")) for row in rows):
        memory = ("not the step's peak (its batch and temporaries: a dry-run sweep, the same command with "
                  "dry_run=true, gives that as memory/device)")  # a sweep recorded before r74: no such column
    else:
        memory = ("not the step's peak: memory/device is that, XLA's compiled train step on one device (the state, a "
                  "batch's shard and temporaries; not the sampler's, nor the best weights early stopping keeps beside "
                  "it), as a dry-run sweep (dry_run=true) gives it")
    if any(is_number(row.get("metrics", {}).get("collective_bytes_per_step")) for row in rows):  # since r75
        memory += ("; collectives/step/device the bytes a device sends in one step, its compiled step's collectives "
                   "counted as a dry-run sweep counts them (the same figure for the same job)")
    return (f"measured: params/device and optimizer/device are the training state a device holds, {memory}; step is "
            f"the median time per step{batch}, compile, validation and (where the run can) the first step's warm-up "
            "left out ('(warm-up incl.)' where not), samples/s the global batch over it; wall the whole job, compile "
            f"and scoring included; the CSV adds compile_s and data.batch_size; {units}")


def status_word(status: Any) -> str:
    """How a job that has no bar is marked: "" for a completed job, "failed" for one that failed
    (``error``, a damaged record), else its status as recorded (``not run``, ``preempted``, ...)."""
    if status == "ok":
        return ""
    return "failed" if status in (None, "error", "damaged") else str(status)


def status_counts(statuses: Sequence[Any], *, zero_failed: bool = True) -> str:
    """", 1 failed, 1 preempted, 1 not run" for the jobs' recorded statuses: each counted apart (a job never
    started, or preempted, is not a failed one), failed first; ", 0 failed" when none did, unless not
    ``zero_failed``."""
    counts = Counter(status_word(s) for s in statuses)
    failed = counts.pop("failed", 0)
    return (f", {failed} failed" if failed or zero_failed else "") + "".join(
        f", {n} {word}" for word, n in counts.items() if word)

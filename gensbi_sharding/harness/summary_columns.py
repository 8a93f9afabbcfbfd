"""The columns of the sweep summary: each measured field's CSV name and exact value, its table title and
readable value (``harness.summary`` writes them)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
import dataclasses
from dataclasses import dataclass
from typing import Any

from gensbi_sharding.harness.continue_field import continue_of
from gensbi_sharding.harness.units import (c2st_spread, compact_value, format_bytes, format_c2st, format_count,
                                            format_seconds, is_number)

__all__ = ["Column", "TRAIN_COLUMNS", "DRY_RUN_COLUMNS", "PROVENANCE_COLUMNS", "mesh_cell", "all_attempts_wall",
           "wall_cell", "c2st_cell", "c2st_folds", "c2st_samples", "error_cell", "ERROR_CELL", "ERROR_COLUMN",
           "IDLE_NOTE", "ranked_heading", "key_cell", "differing_settings", "provenance_columns"]


@dataclass(frozen=True)
class Column:
    """A measured column: its CSV name (exact value) and its table title (readable value); ``optional``: in the
    table only where a row's text is not empty."""

    name: str
    title: str
    text: Callable[[dict[str, Any]], str]
    exact: Callable[[dict[str, Any]], str]
    optional: bool = False


def _fixed(key: str, digits: int) -> Callable[[dict[str, Any]], str]:
    return lambda m: f"{m[key]:.{digits}f}" if is_number(m.get(key)) else ""


def _integer(key: str) -> Callable[[dict[str, Any]], str]:
    return lambda m: str(int(m[key])) if is_number(m.get(key)) else ""


def _plain(key: str) -> Callable[[dict[str, Any]], str]:
    return lambda m: "" if m.get(key) is None else str(m[key])


def _flag(key: str) -> Callable[[dict[str, Any]], str]:
    """A yes/no figure as the CSV writes it: ``true``/``false``, blank where the record lacks it."""
    return lambda m: "" if m.get(key) is None else str(bool(m[key])).lower()


def _config(key: str) -> Callable[[dict[str, Any]], str]:
    def exact(m: dict[str, Any]) -> str:
        value: Any = m.get("config") or {}
        for part in key.split("."):
            value = value.get(part) if isinstance(value, Mapping) else None
        return "" if value is None or isinstance(value, (Mapping, list)) else str(value)
    return exact


def mesh_cell(m: dict[str, Any]) -> str:
    """"8x1"; "none" for a run without a mesh; "" for a job that failed before its mesh existed."""
    if "mesh_shape" not in m:
        return ""
    return "x".join(map(str, m["mesh_shape"])) if m["mesh_shape"] else "none"


def all_attempts_wall(m: dict[str, Any]) -> float | None:
    """Seconds of a job's every attempt: a job continued after a preemption (``previous_attempts``) took its
    earlier attempts' time too; its ``wall_s`` is the last attempt's alone. None without a number."""
    walls = [m.get("wall_s"), *(a.get("wall_s") for a in m.get("previous_attempts") or [])]
    return sum(w for w in walls if is_number(w)) if is_number(m.get("wall_s")) else None


def wall_cell(m: dict[str, Any]) -> str:
    """``"12.3 s"``; a continued job: ``"50.0 s in 2 attempts"`` (all of them, not the last one's 29.8 s)."""
    attempts = 1 + len(m.get("previous_attempts") or [])
    total = format_seconds(all_attempts_wall(m))
    return f"{total} in {attempts} attempts" if total and attempts > 1 else total


def c2st_folds(m: dict[str, Any]) -> int | None:
    """How many folds the C2ST classifier was cross-validated over: the count of the first observation's fold scores,
    else the job's ``eval.c2st_folds``; None for a job with no C2ST (``eval.enabled=false``) or a record of neither."""
    if not is_number(m.get("c2st")):
        return None
    rows = m.get("c2st_observations") or [None]
    scores = rows[0].get("c2st_scores") if isinstance(rows[0], Mapping) else None
    if isinstance(scores, list) and scores:
        return len(scores)
    folds = _config("eval.c2st_folds")(m)
    return int(folds) if folds.isdigit() else None


def c2st_samples(m: dict[str, Any]) -> str:
    """The samples each side of the C2ST classifier (posterior and reference, ``n`` of each observation): ``"100"``,
    one per observation where they differ (``"100 50"``); "" for a job with no C2ST or no such record."""
    if not is_number(m.get("c2st")):
        return ""
    counts = [str(r["n"]) for r in m.get("c2st_observations") or [] if isinstance(r, Mapping) and "n" in r]
    return counts[0] if len(set(counts)) == 1 else " ".join(counts)


def c2st_cell(m: dict[str, Any]) -> str:
    """The C2ST and what its ± is a spread over, as the run's final line says it: one observation's folds,
    ``"0.612 ± 0.011 over 5 folds"``; several observations, ``"0.909 ± 0.024 over 3 obs."``. Was an unlabelled
    ``"0.612 ± 0.011"`` beside the next row's spread over observations: the fold spread read as the posterior's
    uncertainty (another C2ST seed moves the score by as much, findings r75c). A bare ``± x`` where no count is
    known."""
    text = format_c2st(m.get("c2st"), c2st_spread(m))
    if text and is_number(m.get("c2st_sd_observations")):
        text += f" over {len(m.get('c2st_observations') or [])} obs."
    elif "±" in text and (folds := c2st_folds(m)) is not None:
        text += f" over {folds} folds"
    return text


_MESH = Column("mesh_shape", "mesh", mesh_cell, mesh_cell)
_STATUS = Column("status", "status", _plain("status"), _plain("status"))
# How many variables the rule could not split and replicated instead (rule=tensor on a model axis its dimensions do not
# divide): a training sweep's rows too (not the dry-run table's alone, so a sweep over rules does not read the
# fallen-back job as split as its rule says); "" for a job that failed before placing its state.
_FALLBACKS = Column("fallbacks", "fallbacks", lambda m: str(len(m["fallbacks"])) if "fallbacks" in m else "",
                    lambda m: str(len(m["fallbacks"])) if "fallbacks" in m else "")
#: A row's record's key holding its continue command said for the job's folder as it is now, where that folder moved
#: since the job recorded it (``sweep_rows.said_here``); not in metrics.json.
SAID_HERE = "continue_said_here"
ERROR_CELL = 120  # characters of an error the markdown table shows; the CSV and metrics.json hold all of it


def error_cell(m: dict[str, Any]) -> str:
    """The error, cut to ``ERROR_CELL`` characters, never inside its continue command (a cut command
    would run something else): then the command (``continue_field.continue_of``) is left to the job's
    ``metrics.json``. Shown whole, the command names the job's folder as it is now (``SAID_HERE``): after ``mv`` of
    the sweep folder, the recorded one named the folder the job ran in."""
    error, command = m.get("error") or "", continue_of(m)
    at = error.rfind(command) if command else -1
    if at >= 0 and m.get(SAID_HERE):
        error, command = error[:at] + m[SAID_HERE] + error[at + len(command):], m[SAID_HERE]
    if len(error) <= ERROR_CELL:
        return error
    if at < 0:
        return error[:ERROR_CELL - 3] + "..."
    reason = error[:at]  # its words before the command: "...; continue with: "
    return (reason if len(reason) <= ERROR_CELL else reason[:ERROR_CELL - 3] + "...; continue with: ") + \
        "the command in its metrics.json"


ERROR_COLUMN = Column("error", "error", error_cell, lambda m: m.get("error") or "", optional=True)
# A model axis of size > 1 over which nothing is split (every variable the rule splits over it fell back, or it splits
# none): its devices repeat one another's work, so 0 B of collectives ranked such a job first, and its row read as a
# use of the whole mesh (not said in the job's log alone, ``placement_hints.idle_model_axis_hint``).
IDLE_NOTE = "idle: nothing split over it, its devices repeat the same work"
_IDLE = Column("model_axis_idle", "model axis", lambda m: IDLE_NOTE if m.get("model_axis_idle") else "",
               _flag("model_axis_idle"), True)


def _speed_cell(m: dict[str, Any]) -> str:
    """``"13,512"``; a speed of one step, its warm-up included: ``"3,100 (warm-up incl.)"``."""
    text = format_count(m.get("samples_per_s"))
    return f"{text} (warm-up incl.)" if text and m.get("speed_includes_warmup") is True else text


def ranked_heading(title: str, rows: Any) -> str:
    """The line above a dry-run sweep's table ranked by ``title``: smallest first, jobs whose model axis is idle
    after the others (their figures are of devices that repeat one another's work)."""
    idle = any(row["metrics"].get("model_axis_idle") for row in rows)
    return f"ranked by {title} (smallest first{'; jobs whose model axis is idle last' * idle}):\n"


# XLA's compiled train step per device (arguments + outputs + temporaries - donated buffers): the memory a job needs,
# the dry-run table's first column of the same name; the state columns after it are the part of it a device keeps.
_STEP_MEMORY = Column("step_memory_bytes_per_device", "memory/device",
                      lambda m: format_bytes(m.get("step_memory_bytes_per_device")),
                      _integer("step_memory_bytes_per_device"))

# What one device sends (the final line's "per step per device"), not the mesh's sum: said, as memory/device is. A
# training run's is its compiled step's, counted as the dry run counts it: the same figure to the byte for one job.
_COLLECTIVE_BYTES = Column("collective_bytes_per_step", "collectives/step/device",
                           lambda m: format_bytes(m.get("collective_bytes_per_step")),
                           _integer("collective_bytes_per_step"))

TRAIN_COLUMNS: tuple[Column, ...] = (
    _MESH, dataclasses.replace(_STEP_MEMORY, optional=True),  # a sweep recorded before r74 has none: no blank column
    Column("param_bytes_per_device", "params/device", lambda m: format_bytes(m.get("param_bytes_per_device")),
           _integer("param_bytes_per_device")),
    Column("opt_bytes_per_device", "optimizer/device", lambda m: format_bytes(m.get("opt_bytes_per_device")),
           _integer("opt_bytes_per_device")),
    dataclasses.replace(_COLLECTIVE_BYTES, optional=True),  # recorded since r75: an older sweep's has no blank column
    # CSV-only: the rest of what the plot's memory bar stacks (memory_parts), so its height reads back from the CSV
    *(Column(key, "", lambda m: "", _integer(key)) for key in (
        "ema_bytes_per_device", "best_weights_bytes_per_device", "state_bytes_per_device")),
    Column("median_step_s", "step", lambda m: format_seconds(m.get("median_step_s")), _fixed("median_step_s", 6)),
    Column("samples_per_s", "samples/s", _speed_cell, _fixed("samples_per_s", 1)),
    # One step timed (train.steps=1): its speed holds the first step's warm-up (~4x low); unsaid, read as steady.
    Column("speed_includes_warmup", "", lambda m: "", _flag("speed_includes_warmup")),
    # The held-out loss the console's last line prints: a sweep with eval.enabled=false (every data set of one's
    # own) would have no column of how well a job trained (speed and memory only, C2ST blank).
    Column("best_val_loss", "best val loss", _fixed("best_val_loss", 4), _fixed("best_val_loss", 6)),
    Column("final_train_loss", "", lambda m: "", _fixed("final_train_loss", 6)),
    Column("c2st", "C2ST", lambda m: c2st_cell(m), _fixed("c2st", 4)),
    Column("c2st_sd_folds", "", lambda m: "", _fixed("c2st_sd_folds", 4)),  # the table: in the C2ST cell
    # Over how many folds that sd is (the cell says it; the CSV held the sd alone, its count in metrics.json only)
    Column("c2st_folds", "", lambda m: "", lambda m: "" if (n := c2st_folds(m)) is None else str(n)),
    # And on how many samples a side (fewer read lower): rows of two sweeps at 100 and 10,000 read as alike
    Column("c2st_samples", "", lambda m: "", lambda m: c2st_samples(m)),
    Column("c2st_sd_observations", "", lambda m: "", _fixed("c2st_sd_observations", 4)),
    # Which observations, weights and step each C2ST scored: runs' scores differ by them.
    Column("c2st_observations", "", lambda m: "", lambda m: " ".join(
        str(r.get("observation")) for r in m.get("c2st_observations") or [] if isinstance(r, Mapping))),
    Column("c2st_weights", "", lambda m: "", _plain("c2st_weights")),
    Column("c2st_step", "", lambda m: "", _integer("c2st_step")),
    # CSV-only: the train step's compile (metrics.json's; near 0 where an earlier job of the process compiled it)
    Column("compile_s", "", lambda m: "", _fixed("compile_s", 3)),
    Column("wall_s", "", lambda m: "", _fixed("wall_s", 2)),  # this attempt's, as metrics.json has it
    Column("wall_s_all_attempts", "wall", wall_cell, lambda m: _fixed("s", 2)({"s": all_attempts_wall(m)})),
    _FALLBACKS, _IDLE, _STATUS, ERROR_COLUMN)

#: CSV-only, before status and error (but for a swept key of the name): what produced each row's numbers, so
#: rows of several sweeps compare (not only the swept keys: task, model, seed, budget, batch and rule of the others too;
#: step time, samples/s and memory/device depend on the batch, the bytes per device on the rule: `rule`, as the run
#: names it, `fsdp+overrides` under `rule.mlp=model`).
#: A job started from a checkpoint (train.resume) names it and its step: its step time, samples/s and losses are of
#: the steps after it alone (unsaid, the row would read as a fresh run's of train.steps steps).
PROVENANCE_COLUMNS: tuple[Column, ...] = tuple(Column(key, "", lambda m: "", _config(key)) for key in (
    "data.name", "model.name", "seed", "data.num_simulations", "data.batch_size", "train.steps")) + (
    Column("rule", "", lambda m: "", _plain("rule")), Column("final_step", "", lambda m: "", _integer("final_step")),
    Column("resumed_from_step", "", lambda m: "", _integer("resumed_from_step")),
    Column("resumed_from", "", lambda m: "", _plain("resumed_from")))

def provenance_columns(keys: Sequence[str], rows: Sequence[Mapping[str, Any]]) -> list[Column]:
    """``PROVENANCE_COLUMNS`` but those repeating a swept key: of its name (``seed``), or ``<group>.name`` of a swept
    group whose every job's option is that name (``-m data=slcp,two_moons``: ``data.name`` was a second column of the
    same values, as ``model.name`` under ``model=mlp,transformer``)."""
    def repeats(column: Column) -> bool:
        group = column.name.removesuffix(".name")
        return group != column.name and group in keys and all(
            column.exact(row.get("metrics", {})) in ("", key_cell(row, group)) for row in rows)
    return [c for c in PROVENANCE_COLUMNS if c.name not in keys and not repeats(c)]


DRY_RUN_COLUMNS: tuple[Column, ...] = (
    _MESH, _STEP_MEMORY,
    # Held beside the step by a training run (early stopping's copy of the best weights): not in XLA's figure.
    Column("best_weights_bytes_per_device", "+ best weights",
           lambda m: format_bytes(m.get("best_weights_bytes_per_device")), _integer("best_weights_bytes_per_device")),
    _COLLECTIVE_BYTES,
    Column("compile_s", "compile", lambda m: format_seconds(m.get("compile_s")), _fixed("compile_s", 3)),
    _FALLBACKS, _IDLE, _STATUS, ERROR_COLUMN)


def key_cell(row: Mapping[str, Any], key: str) -> str:
    """The value of ``key`` the job ran with: its override as typed, else its config's (a preset's
    ``train.steps`` from ``experiment=quick``, which no override names; for a group, the option Hydra composed, e.g.
    ``distributed`` of a job continued alone without the sweep's ``distributed=local``); "" when neither holds one."""
    if key in row["overrides"]:
        return compact_value(row["overrides"][key])  # Hydra's 1000000000000.0 for a typed 1e12: 1e12
    if key in row.get("choices", {}):
        return row["choices"][key]
    value: Any = row["metrics"].get("config") or {}
    for part in key.split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    if isinstance(value, list):  # eval.observations: as typed, [1,2,3]
        return "[" + ",".join(_leaf_text(v) for v in value) + "]"
    if isinstance(value, Mapping) or value is None:  # a config group's table: only its name is a value
        return ""
    return _leaf_text(value)


def _leaf_text(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else "null" if value is None else compact_value(value)


#: Settings that say how a job was run, not what it ran (a job continued alone records train.resume=auto;
#: a distributed=local job recorded before r61 holds its process 0's config, with the loopback port it chose).
_HOW_RUN = ("train.resume", "distributed.coordinator_address")


def _settings(config: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{dotted key: value}`` of every setting under ``config``; a list is one value."""
    flat: dict[str, Any] = {}
    for key, value in config.items():
        flat.update(_settings(value, f"{prefix}{key}.") if isinstance(value, Mapping) else {f"{prefix}{key}": value})
    return flat


def differing_settings(rows: Sequence[Mapping[str, Any]], keys: Sequence[str]) -> list[str]:
    """Settings whose values differ between the jobs' configs, other than ``keys`` and what lies under them.

    The same overrides compose another config once a config file is edited: a job continued after
    conf/experiment/quick.yaml's ``num_simulations`` changed ran on other data than its sweep's others, and its
    row read as theirs, with no column saying so (nor an override: each job typed the same ones).
    """
    configs = [_settings(row["metrics"]["config"]) for row in rows
               if isinstance(row.get("metrics", {}).get("config"), Mapping)]
    found: list[str] = []
    for key in dict.fromkeys(k for config in configs for k in config):
        if key in _HOW_RUN or any(key == k or key.startswith(f"{k}.") for k in keys):
            continue
        if len({repr(config.get(key)) for config in configs}) > 1:
            found.append(key)
    return found

"""What one run tells its user: a compact placement block, the full table, the final line.

The console gets a few lines per run (``placement_block``: mesh, rule, parameter count, bytes
per device, fallbacks and the largest variables left whole, and one line when the rule splits
nothing on this mesh, naming the override that does); ``sharding.txt`` and ``verbose=true``
get every variable (``variable_table``); the run ends with ``final_line``. The loss history
of a resumed run is joined to the run it continued (``joined_loss_history``).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np

from gensbi_sharding.harness.units import (c2st_spread, format_bytes, format_c2st, format_count, format_seconds,
                                          is_number)

__all__ = ["annotations_of", "left_whole", "splits_nothing_hint", "placement_block", "variable_table",
           "final_line", "last_window_mean", "LossHistory", "joined_loss_history", "write_losses"]


def annotations_of(nodes: dict[str, Any]) -> dict[str, tuple[str | None, ...] | None]:
    """``{"model/a/b": logical axes or None}`` for every variable of the named NNX nodes."""
    from flax import nnx

    from gensbi_sharding import logical_axes_of

    return {"/".join(map(str, path)): logical_axes_of(var) for path, var in nnx.to_flat_state(nnx.state(nodes))}


def _split_axes(table: dict[str, Any]) -> set[str]:
    """The mesh axes a rule table splits over."""
    return {axis for value in table.values() if value for axis in ((value,) if isinstance(value, str) else value)}


def left_whole(report: Any, annotations: dict[str, Any], table: dict[str, Any], fallbacks: dict[str, str],
               *, top: int = 3) -> list[tuple[str, int]]:
    """The largest model variables a splitting rule left whole, though its table would split them.

    That is the fallbacks (no annotation, a dimension that does not divide) and any other
    variable without logical axes. A variable whose annotated axes the table maps to nothing
    (``scale`` under tensor) is replicated on purpose and not listed.
    """
    if report.mesh is None or not _split_axes(table):
        return []
    whole = [v for v in report.variables if v.path.startswith("model/") and v.replicated and v.shape
             and (v.path.removeprefix("model/") in fallbacks or annotations.get(v.path) is None)]
    whole.sort(key=lambda v: (-v.nbytes, v.path))
    return [(v.path.removeprefix("model/"), v.nbytes) for v in whole[:top]]


def splits_nothing_hint(mesh_axis_sizes: dict[str, int] | None, table: dict[str, Any], rule_name: str,
                        mesh_choice: str) -> str | None:
    """One line when every mesh axis the rule splits over has size 1, naming the override that splits.

    E.g. ``mesh=auto rule=tensor`` on 8 devices: tensor splits over "model", which ``auto``
    makes of size 1, so nothing is split; ``mesh=dict mesh.model_axis=2`` splits.
    """
    used = _split_axes(table)
    if not mesh_axis_sizes or not used or any(mesh_axis_sizes.get(axis, 1) > 1 for axis in used):
        return None
    devices = int(np.prod(list(mesh_axis_sizes.values())))
    axes = " and ".join(f"{axis!r}" for axis in sorted(used))
    shape = " x ".join(f"{name}={size}" for name, size in mesh_axis_sizes.items())
    if devices < 2:
        fix = "there is one device: nothing can be split"
    elif used == {"data"}:
        fix = "to split, run with mesh=dict mesh.model_axis=1"
    else:
        fix = "to split, run with mesh=dict mesh.model_axis=2" if devices % 2 == 0 else \
            f"to split, run with mesh=dict mesh.model_axis={devices}"
    return (f"rule {rule_name} splits nothing here: it splits over {axes}, of size 1 on {shape} "
            f"(mesh={mesh_choice}); {fix}")


def placement_block(report: Any, *, rule_name: str, param_count: int, param_bytes: int, opt_bytes: int,
                    fallbacks: dict[str, str], whole: list[tuple[str, int]], hint: str | None,
                    verbose: bool = False) -> list[str]:
    """The console's few lines about placement (the full table: ``variable_table``)."""
    model_bytes = sum(v.nbytes for v in report.variables if v.path.startswith("model/"))
    opt_total = sum(v.nbytes for v in report.variables if v.path.startswith("optimizer/"))
    if report.mesh is None:
        lines = [f"no mesh (mesh=none): one device, nothing placed; {format_count(param_count)} parameters"]
    else:
        m = report.mesh
        shape = " x ".join(f"{name}={size}" for name, size in m.axis_sizes.items())
        processes = f", {m.n_processes} processes" if m.n_processes > 1 else ""
        lines = [f"mesh {shape} ({m.n_devices} devices{processes}), rule {rule_name}, "
                 f"{format_count(param_count)} parameters"]
    lines.append(f"per device: parameters {format_bytes(param_bytes)} (of {format_bytes(model_bytes)}), "
                 f"optimizer state {format_bytes(opt_bytes)} (of {format_bytes(opt_total)})")
    largest = ", ".join(f"{path} ({format_bytes(size)})" for path, size in whole)
    if fallbacks:
        lines.append(f"fallbacks: {len(fallbacks)} variable(s) the rule cannot split, replicated (reasons in the "
                     f"warning above and metrics.json); largest: {largest}")
    elif whole:
        lines.append(f"left whole without logical axes (missing annotation?): {largest}")
    elif report.mesh is not None:
        lines.append("fallbacks: none")
    if hint:
        lines.append(hint)
    lines.append("every variable's placement: sharding.txt" + ("" if verbose else " (verbose=true prints it here)"))
    return lines


def variable_table(report: Any, annotations: dict[str, Any], fallbacks: dict[str, str]) -> str:
    """Every variable: shape, dtype, logical axes, placement and bytes on its fullest device."""
    head = [str(report.mesh) if report.mesh else "no mesh: one device",
            f"state: {report.n_leaves} leaves, {report.n_scalars:,} scalars, {format_bytes(report.total_bytes)}; "
            f"per device at most {format_bytes(report.max_bytes_per_device)}", ""]
    columns = ("variable", "shape", "dtype", "logical axes", "placement", "per device")
    rows = [(v.path, str(v.shape), v.dtype, _axes_text(annotations.get(v.path)), v.placement,
             format_bytes(v.max_device_bytes)) for v in report.variables]
    widths = [max(len(c), *(len(r[i]) for r in rows)) if rows else len(c) for i, c in enumerate(columns)]
    lines = ["  ".join(text.ljust(w) for text, w in zip(row, widths)).rstrip() for row in [columns, *rows]]
    if fallbacks:
        lines += ["", "fallbacks (replicated: the rule cannot split them):"]
        lines += [f"  {path}: {reason}" for path, reason in fallbacks.items()]
    return "\n".join(head + lines) + "\n"


def _axes_text(axes: tuple[str | None, ...] | None) -> str:
    return "-" if axes is None else "(" + ", ".join(str(a) for a in axes) + ")"


def last_window_mean(losses: np.ndarray, window: int) -> float:
    """Mean train loss of the last logging window: what the progress bar showed last."""
    losses = np.asarray(losses, dtype=np.float64)
    size = len(losses) % window or window
    return float(losses[-size:].mean())


def final_line(metrics: dict[str, Any], out: Path) -> str:
    """One line that ends the run: its result, wall time, speed and output folder."""
    wall = format_seconds(metrics.get("wall_s"))
    if metrics.get("status") != "ok":
        trace = out / "error.txt"
        return f"{metrics.get('status', 'error')} after {wall}" + (f"; traceback in {trace}" if trace.exists() else "")
    if metrics.get("dry_run"):
        return (f"dry run done in {wall}: {format_bytes(metrics.get('step_memory_bytes_per_device'))} per device, "
                f"{format_bytes(metrics.get('collective_bytes_per_step'))} of collectives per step; outputs in {out}")
    c2st = format_c2st(metrics.get("c2st"), c2st_spread(metrics))
    if c2st and is_number(metrics.get("c2st_sd_observations")):  # the spread is over observations, not folds
        c2st += f" over {len(metrics.get('c2st_observations') or [])} observations"
    parts = [f"C2ST {c2st}"] if c2st else []
    if is_number(metrics.get("samples_per_s")):  # none when this attempt trained nothing (it evaluated)
        parts.append(f"{format_count(metrics['samples_per_s'])} samples/s")
    return f"done in {wall}: {', '.join(parts) or 'no training left'}; outputs in {out}"


@dataclasses.dataclass
class LossHistory:
    """A run's losses from step 1, resumed parts joined: what ``train_losses.npz`` holds."""

    step: np.ndarray  # (n,) int64, global step of each train loss
    losses: np.ndarray  # (n,) float32
    val_step: np.ndarray  # (m,) int64
    val_losses: np.ndarray  # (m,) float32
    resumed_at: np.ndarray  # (k,) int64, steps a resumed part started from

    def arrays(self) -> dict[str, np.ndarray]:
        return dataclasses.asdict(self)


def joined_loss_history(losses: np.ndarray, *, start_step: int, val_points: list[tuple[int, float]],
                        resume_dir: Path | None) -> LossHistory:
    """This run's losses (steps ``start_step + 1 ...``) after the earlier run's, when resuming.

    The earlier run's ``train_losses.npz`` is looked up in the run folder of the checkpoint
    resumed from (``<run>/checkpoints/<step>``: another folder, or this one under
    ``train.resume=auto``); only its steps up to ``start_step`` are kept (it may have trained
    past the checkpoint). Without it, the history starts at the resume.
    """
    steps = start_step + 1 + np.arange(len(losses), dtype=np.int64)
    val = [(int(s), float(v)) for s, v in val_points if is_number(v)]
    parts = [(steps, np.asarray(losses, np.float32), np.asarray([s for s, _ in val], np.int64),
              np.asarray([v for _, v in val], np.float32), np.asarray([start_step] if start_step else [], np.int64))]
    earlier = next((p / "train_losses.npz" for p in (resume_dir.parent.parent, resume_dir.parent)
                    if (p / "train_losses.npz").is_file()), None) if resume_dir is not None else None
    if earlier is not None:
        with np.load(earlier) as old:
            old_losses = old["losses"]
            old_steps = old["step"] if "step" in old else np.arange(1, len(old_losses) + 1)
            keep = old_steps <= start_step
            # A step this attempt validated again (its checkpoint was saved before its validation) counts once.
            vkeep = ((old["val_step"] <= start_step) & ~np.isin(old["val_step"], parts[0][2])
                     if "val_step" in old else None)
            parts.insert(0, (old_steps[keep], old_losses[keep],
                             old["val_step"][vkeep] if vkeep is not None else np.zeros(0, np.int64),
                             old["val_losses"][vkeep] if vkeep is not None else np.zeros(0, np.float32),
                             old["resumed_at"][old["resumed_at"] < start_step] if "resumed_at" in old
                             else np.zeros(0, np.int64)))
    return LossHistory(*(np.concatenate([part[i] for part in parts]) for i in range(5)))


def write_losses(out: Path, losses: np.ndarray, *, window: int, start_step: int, resume_dir: Path | None,
                 val_points: list[tuple[int, float | None]], title: str) -> LossHistory:
    """``train_losses.npz`` (the whole history, a resumed run joined to the earlier one) and ``losses.png``."""
    from gensbi_sharding.harness import outputs, plots

    history = joined_loss_history(losses, start_step=start_step, val_points=val_points, resume_dir=resume_dir)
    outputs.write_npz(out / "train_losses.npz", **history.arrays())
    plots.plot_losses(out / "losses.png", steps=history.step, losses=history.losses, window=window,
                      val_steps=history.val_step, val_losses=history.val_losses, resumed_at=history.resumed_at,
                      title=title)
    return history

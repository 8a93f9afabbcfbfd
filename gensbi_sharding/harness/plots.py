"""The pictures people look for: a run's loss curves and a sweep at a glance.

``plot_losses``: train loss per window (as the progress bar shows it) and validation loss
against the global step, a resumed run joined to the run it continued. ``plot_sweep``: per
job, state per device, collectives per step where recorded, step time and C2ST (a dry run: memory
and bytes of collectives), grouped by the swept keys. Both draw on a standalone Agg canvas (pyplot's global state is
untouched) and are written atomically (``outputs.write_atomic``).
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from gensbi_sharding.harness.agg_figure import agg_figure
from gensbi_sharding.harness.loss_windows import window_means, windows
from gensbi_sharding.harness.outputs import write_atomic
from gensbi_sharding.harness.summary_columns import key_cell  # the table's value of each key: the plot's too
from gensbi_sharding.harness.summary_legend import status_counts, status_word  # the table's words, kept here too
from gensbi_sharding.harness.units import c2st_spread, format_c2st, is_number

__all__ = ["window_means", "plot_losses", "memory_parts", "plot_sweep", "posterior_title", "status_word",
           "status_counts", "PARTIAL", "partial_note"]

#: Statuses of a job stopped with a checkpoint: what it measured before it stopped is drawn, marked partial.
PARTIAL = ("interrupted", "preempted")


def _figure(width: float, height: float, ncols: int = 1):
    fig = agg_figure(figsize=(width, height))
    return fig, fig.subplots(1, ncols, squeeze=False)[0]


def _save(fig, path: Path, title: str) -> Path:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=90, metadata={"Title": title})  # what the picture shows, findable
    return write_atomic(Path(path), buffer.getvalue())


#: The label of validation losses measured on other held-out pairs or draws than the last ones.
OTHER_PAIRS = "validation loss, earlier held-out pairs or draws (not comparable)"


def validation_lines(steps: Sequence[int], losses: Sequence[float],
                     sets: Sequence[int] = ()) -> list[tuple[np.ndarray, np.ndarray, str]]:
    """(steps, losses, label) per held-out set (``sets``: ``train_losses.npz``'s ``val_set``; empty: one set), in
    order: the last "validation loss", earlier ones ``OTHER_PAIRS``, so no line joins losses that do not compare
    (a resume on other pairs or draws starts early stopping afresh)."""
    steps, losses = np.asarray(steps, dtype=np.int64), np.asarray(losses, dtype=np.float64)
    sets = np.asarray(sets, dtype=np.int64) if len(sets) else np.zeros(len(steps), dtype=np.int64)
    return [(steps[sets == s], losses[sets == s], "validation loss" if s == sets.max() else OTHER_PAIRS)
            for s in np.unique(sets)]


def plot_losses(path: Path, *, steps: np.ndarray, losses: np.ndarray, window: int,
                val_steps: Sequence[int] = (), val_losses: Sequence[float] = (),
                resumed_at: Sequence[int] = (), title: str = "", val_sets: Sequence[int] = ()) -> Path:
    """``losses.png``: train loss per window and validation loss against the global step.

    Parameters are those of ``window_means`` plus the validation points (global step, loss, held-out set:
    ``validation_lines``), the steps resumed runs started from (a dotted vertical line each) and a title. A window
    holding fewer than ``window`` steps (the last, or the first after a resume whose earlier losses are not joined)
    is a hollow point labelled with its step count, so no point claims more steps than it averages.
    """
    ends, means, sizes = windows(steps, losses, window)
    fig, (ax,) = _figure(7, 4)
    full, short = np.flatnonzero(sizes == window).tolist(), sizes < window
    ax.plot(ends, means, marker="o", markersize=3, color="C0", markevery=full,
            label=f"train loss (mean of {window} step{'s' * (window != 1)})" if full else "train loss")
    ax.plot(ends[short], means[short], "o", markersize=5, color="C0", markerfacecolor="none",
            label="train loss, mean of a shorter window (its steps beside it)" if short.any() else None)
    for end, mean, size in zip(ends[short], means[short], sizes[short].tolist()):
        ax.annotate(f"{size} step{'s' * (size != 1)}", (end, mean), textcoords="offset points", xytext=(3, 3),
                    fontsize="x-small", color="C0")
    for i, (at, values, label) in enumerate(validation_lines(val_steps, val_losses, val_sets)):
        current = label != OTHER_PAIRS
        ax.plot(at, values, marker="s", markersize=4, color="C1", alpha=1.0 if current else 0.45,
                linestyle="-" if current else "--", label=label if current or i == 0 else None)
    for i, step in enumerate(resumed_at):
        ax.axvline(step, color="gray", linestyle=":", label="resumed" if i == 0 else None)
    ax.set_xlabel("step")
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # steps are whole: a 20-step run's axis read 19.25, 19.5
    ax.set_ylabel("flow-matching loss")
    positive = np.concatenate([means, np.asarray(val_losses, dtype=np.float64)])
    if len(positive) and np.all(positive > 0) and positive.max() / positive.min() > 20:
        ax.set_yscale("log")
    ax.grid(alpha=0.3)
    ax.legend()
    ax.set_title(title, fontsize="medium")
    fig.tight_layout()
    return _save(fig, path, title)


def posterior_title(*, task: str, observation: int, rule: str, mesh_shape: Sequence[int] | None,
                    c2st: float | None, c2st_sd: float | None = None, folds: int | None = None) -> str:
    """``"two_moons, observation 1 | rule tensor on mesh 4x2 | C2ST 0.612 ± 0.011 over 5 folds"``: the ± is the
    spread over the classifier's ``folds``, named as the run's final line names it (unnamed where ``folds`` is None)."""
    mesh = "x".join(map(str, mesh_shape)) if mesh_shape else "none"
    spread = f" over {folds} folds" if folds and is_number(c2st_sd) else ""
    score = f" | C2ST {format_c2st(c2st, c2st_sd)}{spread}" if is_number(c2st) else ""
    return f"{task}, observation {observation} | rule {rule} on mesh {mesh}{score}"


def partial_note(metrics: dict[str, Any], *, measured: bool = True) -> str:
    """How a stopped job is marked: "interrupted at step 5 of 8 (partial)" beside the figures it measured, or
    where it has none "interrupted at step 5 of 8; val loss 1.992" (its last figure); the status alone with no step."""
    status = str(metrics.get("status"))
    step = metrics.get("stopped_at_step", metrics.get("preempted_at_step", metrics.get("final_step")))
    if not is_number(step):
        return status
    total = ((metrics.get("config") or {}).get("train") or {}).get("steps")
    text = f"{status} at step {step}" + (f" of {total}" if is_number(total) else "")
    val = metrics.get("final_val_loss")
    return f"{text} (partial)" if measured else text + (f"; val loss {val:.3f}" if is_number(val) else "")


def _scale(values: Sequence[float]) -> tuple[float, str]:
    top = max([v for v in values if is_number(v)], default=0)
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if top >= scale:
            return scale, unit
    return 1.0, "B"


def memory_parts(metrics: dict[str, Any]) -> list[float | None]:
    """Bytes on a job's fullest device, stacked as the sweep plot draws them: parameters, optimizer
    state, the rest of the state (the EMA of the weights), and the copy of the best weights early
    stopping keeps, which a device holds too.

    The first three add up to ``state_bytes_per_device``, all four to the state-per-device panel's
    height; the rest is None when ``metrics`` has no whole-state figure or nothing beyond the first
    two, the best weights None in a folder written before they were counted.
    """
    parts = [metrics.get("param_bytes_per_device"), metrics.get("opt_bytes_per_device")]
    state, best = metrics.get("state_bytes_per_device"), metrics.get("best_weights_bytes_per_device")
    rest = state - sum(parts) if is_number(state) and all(map(is_number, parts)) else None
    return [*parts, rest if is_number(rest) and rest > 0 else None, best if is_number(best) and best > 0 else None]


def _c2st_floor(rows: Sequence[dict[str, Any]]) -> float:
    """The C2ST panel's lower limit: 0.4, or the tenth at least 0.02 below the lowest score less its spread.

    C2ST reads under 0.5 on few samples (``eval.num_samples=20``: 0.35); a fixed 0.4 hid such a job's bar and its
    error bar, with no "n/a" beside it: the job looked unmeasured."""
    lows = [r["metrics"]["c2st"] - (c2st_spread(r["metrics"]) or 0.0)
            for r in rows if is_number(r["metrics"].get("c2st"))]
    return max(0.0, min([0.4, *(np.floor(10 * (low - 0.02)) / 10 for low in lows)]))


def plot_sweep(rows: Sequence[dict[str, Any]], keys: Sequence[str], path: Path, *, dry_run: bool = False,
               title: str = "") -> Path:
    """``sweep_summary.png``: one panel per measure, one bar per job, grouped by the swept keys.

    Jobs are grouped on the x axis by every swept key but the last, and coloured by the last
    one (one swept key: one bar per value). A failed job is marked "failed" where its bar
    would be, one that never ran by its status ("not run"); one stopped with a checkpoint (``PARTIAL``)
    gets the bars it measured, faded and dashed, marked with the step it reached (``partial_note``). Train
    sweeps: state per device (parameters, with optimizer state stacked lighter, the EMA of
    the weights hatched and the best weights early stopping keeps cross-hatched: what a device
    holds), bytes of collectives per step where a job recorded them, median step time, C2ST with its spread and
    the 0.5 line (no job scored: the best validation loss instead). Dry runs: memory per device of one step (the best
    weights kept beside it cross-hatched) and bytes of collectives per step.

    Parameters
    ----------
    rows : sequence of dict
        ``harness.sweep_rows.summary_rows``: ``job``, ``overrides`` and ``metrics`` per job.
    keys : sequence of str
        The swept keys, in column order; the last one a job's overrides set colours the bars, the others group them.
    """
    # The last key typed as an override colours the bars (its legend shows bare values: 'fsdp'), a setting that differs
    # only in the jobs' configs labels the groups (as the colour, its legend would read '128', '256', unnamed)
    typed = [k for k in keys if any(k in row["overrides"] for row in rows)] or list(keys)
    hue_key = typed[-1] if keys else None
    group_keys = [k for k in keys if k != hue_key]
    label = lambda row: "\n".join(f"{k}={key_cell(row, k)}" for k in group_keys) or (  # noqa: E731
        "" if hue_key else f"job {row['job']}")
    groups = list(dict.fromkeys(label(row) for row in rows))
    hues = list(dict.fromkeys(key_cell(row, hue_key) for row in rows)) if hue_key else [""]
    if dry_run:
        panels = [("memory per device, one step", ["step_memory_bytes_per_device", "best_weights_bytes_per_device"],
                   True),
                  ("collectives per step, per device", ["collective_bytes_per_step"], True)]  # one device's
    else:  # eval.enabled=false (every data set of one's own): was a C2ST panel of "n/a" only, no measure of training
        quality = ("C2ST (0.5 = perfect)", ["c2st"]) if any(is_number(r["metrics"].get("c2st")) for r in rows) \
            else ("best validation loss", ["best_val_loss"])
        # The state a device keeps, not the compiled step the table's memory/device gives: one name, two figures
        panels = [("state per device", ["param_bytes_per_device", "opt_bytes_per_device", "ema"], True),
                  ("median step time (ms)", ["median_step_s"], False), (*quality, False)]
        if any(is_number(r["metrics"].get("collective_bytes_per_step")) for r in rows):  # recorded since r75
            panels.insert(1, ("collectives per step, per device", ["collective_bytes_per_step"], True))
    panel_width = min(10.0, max(3.8, 0.45 * len(rows) + 1.5))
    longest = 0.07 * max(map(len, "\n".join(groups).split("\n")))
    upright = longest > panel_width / len(groups)  # group names wider than their place (0.07 in a character): upright
    fig, axes = _figure(panel_width * len(panels), 4.2 + 0.3 * len(group_keys) + upright * longest, ncols=len(panels))
    width, slant = 0.8 / len(hues), {"rotation": 90} if upright else {}  # upright where level labels would overlap

    def measured(row: dict[str, Any], metric_keys: list[str]) -> list[Any]:
        # The state panel stacks the whole state (the EMA too): it once left the EMA out.
        return memory_parts(row["metrics"]) if "ema" in metric_keys else [row["metrics"].get(k) for k in metric_keys]

    partial_drawn = []  # jobs stopped with a checkpoint whose figures so far are drawn
    for ax, (panel, metric_keys, is_bytes) in zip(axes, panels):
        scale, unit = _scale([sum(v for v in measured(r, metric_keys) if is_number(v)) for r in rows]) if is_bytes \
            else (1e-3, "ms") if metric_keys == ["median_step_s"] else (1.0, "")
        named = set()  # each colour's first bar names it, so a colour absent from the first group is named too
        for row in rows:
            hue = key_cell(row, hue_key) if hue_key else ""
            x = groups.index(label(row)) + (hues.index(hue) - (len(hues) - 1) / 2) * width
            color = f"C{hues.index(hue) % 10}"
            values, status = measured(row, metric_keys), row["metrics"].get("status")
            partial = status in PARTIAL  # its figures so far are drawn faded and dashed, and say so
            if (status != "ok" and not partial) or not is_number(values[0]):
                status = (partial_note(row["metrics"], measured=False) if partial
                          else status_word(status))  # "not run", "preempted": not failures
                # At the panel's foot in axes coordinates: at the data's y=0 it fell below the C2ST panel's
                # 0.4-1.02 and, in a panel with no bar, outside its default limits.
                ax.text(x, 0.02, status or "n/a", rotation=90, ha="center", va="bottom", fontsize="small",
                        transform=ax.get_xaxis_transform(), color="red" if status == "failed" else "gray")
                continue
            if partial:  # what it reached, and that it did not finish, not a bare "interrupted"
                partial_drawn.append(row["job"])
                ax.text(x, 0.02, partial_note(row["metrics"]), rotation=90, ha="center", va="bottom",
                        fontsize="small", transform=ax.get_xaxis_transform(), color="black")
            bottom = 0.0
            for i, value in enumerate(values):
                if not is_number(value):
                    continue
                std = c2st_spread(row["metrics"]) if metric_keys == ["c2st"] else None
                # The EMA "//", the best weights early stopping keeps "xx" (memory_parts' 4th; a dry run's 2nd).
                hatch = {2: "//", 3: "xx"}.get(i) if "ema" in metric_keys else "xx" if i == 1 else None
                ax.bar(x, value / scale, width * 0.9, bottom=bottom, color=color,
                       alpha=(1.0 if i == 0 else 0.4) * (0.4 if partial else 1.0), hatch=hatch,
                       edgecolor=color if partial else None, linestyle="--" if partial else "-",
                       yerr=std if is_number(std) else None, capsize=3,
                       label=hue if (i == 0 and hue_key and hue not in named) else None)
                named.add(hue)
                bottom += value / scale
        if metric_keys == ["c2st"]:
            ax.axhline(0.5, color="gray", linestyle="--", linewidth=1)
            ax.set_ylim(_c2st_floor(rows), 1.02)
        ax.set_title(panel + (f" ({unit})" if is_bytes else ""), fontsize="medium")
        if "ema" in metric_keys:
            ax.set_ylabel("parameters (dark) + optimizer state (light) + EMA (//)\n+ best weights kept for early "
                          "stopping (xx)", fontsize="small")
        elif "best_weights_bytes_per_device" in metric_keys:
            ax.set_ylabel("one step (dark) + best weights kept for early stopping (xx)", fontsize="small")
        ax.set_xticks(range(len(groups)), groups, fontsize="small", **slant)
        ax.set_xlim(-0.5, len(groups) - 0.5)  # every job's place, also where no job drew a bar (text sets no limits)
        ax.grid(axis="y", alpha=0.3)
    handles, labels = axes[0].get_legend_handles_labels()
    if partial_drawn:
        from matplotlib.patches import Patch
        handles = [*handles, Patch(facecolor="lightgray", edgecolor="gray", linestyle="--")]
        labels = [*labels, "partial: a stopped job, so far"]
    counts = status_counts([r["metrics"].get("status") for r in rows], zero_failed=False)
    title = title or f"{len(rows)} job{'s' * (len(rows) != 1)}{counts}" + (f"; swept: {', '.join(keys)}" if keys
                                                                           else "")
    fig.suptitle(title)
    legend_height = 0.0
    if handles:  # no job drew a bar (a sweep stopped in its first job): no empty legend box
        # Below the panels, in a strip of its own: inside the memory panel it covered a bar (a stopped
        # sweep's second, its full height as tall as the first's) wherever matplotlib's "best" put it.
        legend = fig.legend(handles, labels, title=hue_key, fontsize="small", loc="lower center",
                            ncols=min(len(handles), 4))
        # The legend's own extent, laid out for the canvas's renderer: the same height a whole draw of the figure
        # (was) measured first, without drawing every panel one time more than the saved picture needs
        legend_height = (legend.get_window_extent(fig.canvas.get_renderer()).height / fig.bbox.height
                         + 0.02)  # tight_layout is approximate
    fig.tight_layout(rect=(0, legend_height, 1, 1))
    return _save(fig, path, title)

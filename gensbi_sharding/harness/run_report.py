"""What one run tells its user: a compact placement block, the full table, the final line.

The console gets a few lines per run (``placement_block``: mesh, rule, parameter count, bytes per device, fallbacks
and the largest variables left whole, and one line when the rule splits nothing on this mesh, naming the override that
does, or leaves its model axis idle, naming the two fixes); ``sharding.txt`` and ``verbose=true`` get every variable
(``variable_table``); the run ends with ``final_line``. The loss history is ``harness.loss_history``'s.
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from gensbi_sharding.harness.console import DETAILS
from gensbi_sharding.harness.native_notes import idle_axis_said
from gensbi_sharding.harness.console_lines import log_c2st_mean, mesh_step_line, model_step_line  # step lines
from gensbi_sharding.harness.summary_columns import c2st_folds
from gensbi_sharding.harness.placement_hints import idle_model_axis_hint, left_whole, splits_nothing_hint
from gensbi_sharding.harness.units import (c2st_spread, format_bytes, format_c2st, format_count, format_seconds,
                                          is_number)
from gensbi_sharding.harness.x64_words import x64_by_variable, x64_fix

if TYPE_CHECKING:  # a JAX type only: imported where JAX already is
    from jax.sharding import Mesh

__all__ = ["annotations_of", "placement_block", "variable_table", "final_line", "state_figures", "report_placement",
           "mesh_step_line", "model_step_line", "log_c2st_mean", "x64_warning"]

log = logging.getLogger("gensbi_sharding")


def x64_warning() -> bool:
    """Whether JAX computes in 64 bits (``JAX_ENABLE_X64``), warned: training then draws and adds otherwise, and
    its losses and C2ST are not those of the same run without it (so it is said and recorded)."""
    import jax

    if on := bool(jax.config.jax_enable_x64):
        # Set from Python, the variable unset: the fix is the Python call, not "unset JAX_ENABLE_X64"
        said = "JAX_ENABLE_X64 is on" if x64_by_variable() else "jax_enable_x64 is on (set from Python)"
        log.warning("%s: JAX computes in 64 bits where it can, so this run's losses and C2ST differ from the same "
                    "run's without it (metrics.json: jax_enable_x64); %s to compare", said, x64_fix(False))
    return on


def annotations_of(nodes: dict[str, Any]) -> dict[str, tuple[str | None, ...] | None]:
    """``{"model/a/b": logical axes or None}`` for every variable of the named NNX nodes."""
    from flax import nnx

    from gensbi_sharding import logical_axes_of

    return {"/".join(map(str, path)): logical_axes_of(var) for path, var in nnx.to_flat_state(nnx.state(nodes))}


def placement_block(report: Any, *, rule_name: str, param_count: int, param_bytes: int, opt_bytes: int,
                    fallbacks: dict[str, str], whole: list[tuple[str, int]], hint: str | None,
                    verbose: bool = False, others: dict[str, int] | None = None, ema_bytes: int | None = None,
                    best_bytes: int | None = None) -> list[str]:
    """The console's few lines about placement (the full table: ``variable_table``); ``others``: the model's
    variables that are not parameters (path -> bytes), counted apart from them and named from 1 % of their size;
    ``ema_bytes``, ``best_bytes``: per device, the EMA and the copy of the best weights early stopping keeps."""
    others = others or {}
    model_bytes = sum(v.nbytes for v in report.variables if v.path.startswith("model/")) - sum(others.values())
    opt_total = sum(v.nbytes for v in report.variables if v.path.startswith("optimizer/"))
    if report.mesh is None:
        lines = [f"no mesh (mesh=none): one device, nothing placed; {format_count(param_count)} parameters"]
    else:
        m = report.mesh
        shape = " x ".join(f"{name}={size}" for name, size in m.axis_sizes.items())
        processes = f", {m.n_processes} processes" if m.n_processes > 1 else ""
        lines = [f"mesh {shape} ({m.n_devices} device{'s' * (m.n_devices != 1)}{processes}), rule {rule_name}, "
                 f"{format_count(param_count)} parameters"]
    lines.append(f"per device: parameters {format_bytes(param_bytes)} (of {format_bytes(model_bytes)}), "
                 f"optimizer state {format_bytes(opt_bytes)} (of {format_bytes(opt_total)})"
                 + (f", EMA {format_bytes(ema_bytes)}" if ema_bytes else "")
                 + (f", best weights kept for early stopping {format_bytes(best_bytes)}" if best_bytes else ""))
    if sum(others.values()) * 100 >= model_bytes:  # said when it matters (not Simformer's 12 B of RNG state)
        largest_other = max(others, key=others.get)
        lines[-1] += (f"; not trained: {len(others)} other model variable(s), {format_bytes(sum(others.values()))} "
                      f"(largest: {largest_other}, {format_bytes(others[largest_other])})")
    largest = ", ".join(f"{path} ({format_bytes(size)})" for path, size in whole)
    if fallbacks:
        lines.append(f"fallbacks: {len(fallbacks)} variable(s) the rule cannot split, replicated (reasons in the "
                     f"warning above and metrics.json); largest: {largest}")
    elif whole:
        lines.append(f"left whole without logical axes (missing annotation?): {largest}")
    elif report.mesh is not None:
        lines.append("fallbacks: none")
    lines += [hint] if hint else []
    lines.append("every variable's placement: sharding.txt" + ("" if verbose else " (verbose=true prints it here)"))
    return lines


def variable_table(report: Any, annotations: dict[str, Any], fallbacks: dict[str, str],
                   best_bytes: int | None = None, rule_name: str | None = None) -> str:
    """Every variable: shape, dtype, logical axes, placement and bytes on its fullest device, under a head naming the
    rule and mesh; ``best_bytes``: per device, the copy of the best weights early stopping keeps (not in the table)."""
    head = [f"rule {rule_name}, " * bool(rule_name) + (str(report.mesh) if report.mesh else "no mesh: one device"),
            f"state: {report.n_leaves} leaves, {report.n_scalars:,} scalars, {format_bytes(report.total_bytes)}; "
            f"per device at most {format_bytes(report.max_bytes_per_device)}"]
    if best_bytes:  # on the device too, placed as the weights it copies
        copied = "ema" if any(v.path.startswith("ema/") for v in report.variables) else "model"
        head.append(f"plus the best weights early stopping keeps (a copy of the {copied} below, placed alike): "
                    f"{format_bytes(best_bytes)} per device")
    columns = ("variable", "shape", "dtype", "logical axes", "placement", "per device")
    rows = [(v.path, str(v.shape), v.dtype, _axes_text(annotations.get(v.path)), v.placement,
             format_bytes(v.max_device_bytes)) for v in report.variables]
    widths = [max(len(c), *(len(r[i]) for r in rows)) if rows else len(c) for i, c in enumerate(columns)]
    lines = ["  ".join(text.ljust(w) for text, w in zip(row, widths)).rstrip() for row in [columns, *rows]]
    if fallbacks:
        lines += ["", "fallbacks (replicated: the rule cannot split them):"]
        lines += [f"  {path}: {reason}" for path, reason in fallbacks.items()]
    return "\n".join(head + [""] + lines) + "\n"


def _axes_text(axes: tuple[str | None, ...] | None) -> str:
    return "-" if axes is None else "(" + ", ".join(str(a) for a in axes) + ")"


def final_line(metrics: dict[str, Any], out: Path) -> str:
    """One line that ends the run: its result, wall time, speed and output folder."""
    wall = format_seconds(metrics.get("wall_s"))
    if metrics.get("status") != "ok":
        if metrics.get("wall_s") is None:  # refused before it started (a sweep job's unresolvable ${...}): was
            return "not run: its config was refused before it started (the error above names the fix)"  # "0.0 us"
        return f"{metrics.get('status', 'error')} after {wall}" + (
            f"; traceback in {trace}" if (trace := out / "error.txt").exists() else "")
    if metrics.get("dry_run"):
        best = metrics.get("best_weights_bytes_per_device")  # held beside the step; an older folder lacks it
        return (f"dry run done in {wall}: {format_bytes(metrics.get('step_memory_bytes_per_device'))} per device"
                + (f" (+ {format_bytes(best)} of best weights kept for early stopping)" if best else "") + ", "
                f"{format_bytes(metrics.get('collective_bytes_per_step'))} of collectives per step per device; "
                f"outputs in {out}")
    c2st = format_c2st(metrics.get("c2st"), c2st_spread(metrics))
    rows = metrics.get("c2st_observations") or []
    if c2st and is_number(metrics.get("c2st_sd_observations")):  # the spread is over observations, not folds
        c2st += f" over {len(rows)} observation{'s' * (len(rows) != 1)}"
    elif c2st and "±" in c2st and (folds := c2st_folds(metrics)) is not None:
        # One observation: the ± is the classifier's spread over folds, as its [6/7] line says; "C2ST 0.891 ±
        # 0.024" alone read as the posterior's uncertainty (another C2ST seed moves it by as much: findings r75c).
        # Counted as the sweep table's cell counts them (one rule for both)
        c2st += f" over {folds} folds"
    acceptance = metrics.get("support_acceptance")
    if c2st and is_number(acceptance) and acceptance < 1:  # data.theta_transform=none: the rest were rejected
        c2st += f" ({acceptance:.0%} of draws inside the prior kept, the rest rejected)"
    parts = [f"C2ST {c2st}"] if c2st else []
    if is_number(metrics.get("samples_per_s")):  # none when this attempt trained nothing (it evaluated)
        # From the median step, as metrics.json has it: checkpoints, validations and stalls left out.
        earlier = metrics.get("training_figures_from_attempt")  # this attempt only evaluated: whose speed it is
        # One step timed (train.steps=1): its warm-up is in the figure (~4x low), said as metrics.json says it
        warm = metrics.get("speed_includes_warmup") is True
        parts.append(f"{format_count(metrics['samples_per_s'])} samples/s ({'one' if warm else 'median'} step"
                     + (f" of attempt {earlier}, which trained" if earlier else "")
                     + (", its warm-up included)" if warm else ")"))
    return f"done in {wall}: {', '.join(parts) or 'no training left'}; outputs in {out}"


def state_figures(nodes: dict[str, Any], mesh: Mesh | None, report: Any = None) -> dict[str, int]:
    """The parameter count and the bytes per device of parameters, the model's other variables, optimizer
    state, the EMA, the whole state, and the best weights early stopping keeps beside it.

    ``best_weights_bytes_per_device``: every training run validates (at the end at least) and keeps a
    copy of the weights it validates (the EMA, else the model) on the device, placed alike; it is no
    variable of the state, so ``state_bytes_per_device`` leaves it out.

    ``nodes``: ``{"model", "optimizer"[, "ema"]}``, concrete or abstract (the dry run's shapes at their
    shardings), so a dry run reports what the training run will; ``report``: ``describe(nodes, mesh)``
    if already made. Without a mesh the one device holds everything (abstract values carry no sharding).
    """
    import jax
    from flax import nnx

    from gensbi_sharding import describe

    def per_device(placed: Any) -> int:
        return placed.total_bytes if mesh is None else placed.max_bytes_per_device

    # Parameters only, as counted: a model's other variables (GenSBI's pos1d table of 5000 rows, never
    # trained) were reported as "parameters 382.9 KB" beside 15,729 float32 parameters (62.9 KB).
    params = nnx.state(nodes["model"], nnx.Param)
    others = nnx.state(nodes["model"], nnx.Not(nnx.Param))
    return dict(param_count=int(sum(np.prod(v.shape) for v in jax.tree.leaves(params))),
                param_bytes_per_device=per_device(describe(params, mesh)),
                other_model_bytes_per_device=per_device(describe(others, mesh)) if jax.tree.leaves(others) else 0,
                opt_bytes_per_device=per_device(describe(nnx.state(nodes["optimizer"]), mesh)),
                ema_bytes_per_device=per_device(describe(nodes["ema"], mesh)) if "ema" in nodes else 0,
                state_bytes_per_device=per_device(report or describe(nodes, mesh)),
                best_weights_bytes_per_device=per_device(describe(nodes.get("ema", nodes["model"]), mesh)))


def report_placement(metrics: dict[str, Any], ts: Any, mesh: Mesh | None, *, table: dict[str, Any], rule_name: str,
                     mesh_spec: str, verbose: bool) -> str:
    """A run's report of its placed state: placement metrics, the placement block, the full table.

    Parameters
    ----------
    metrics : dict
        The run's metrics, updated in place (fallbacks, parameter count, bytes per device, placements, ...).
    ts : harness.state.TrainState
        The built model, optimizer and EMA.
    mesh : jax.sharding.Mesh or None
    table : dict
        The rule table; ``rule_name`` its name.
    mesh_spec : str
        ``mesh.spec`` as typed ("none" for null), named in the hint of a rule that splits nothing or idles "model".
    verbose : bool
        Whether the console also shows every variable (``verbose=true``).

    Returns
    -------
    str
        Every variable's placement (``variable_table``), for ``sharding.txt``; logged in full to launch.log.
    """
    import jax
    from flax import nnx

    from gensbi_sharding import describe
    from gensbi_sharding.harness.model_plan import model_axes_that_split

    nodes = {"model": ts.model, "optimizer": ts.optimizer}
    if ts.ema is not None:
        nodes["ema"] = ts.ema  # a device holds it too
    report, annotations = describe(nodes, mesh), annotations_of(nodes)
    placements = {v.path.removeprefix("model/"): v.placement for v in report.variables if v.path.startswith("model/")}
    idle = idle_model_axis_hint((shape := dict(mesh.shape) if mesh else None), table, rule_name, mesh_spec,
                                ts.activation_axes, placed := any("'model'" in p for p in placements.values()),
                                None if placed else model_axes_that_split(ts.model, mesh, table))  # the summary's mark
    metrics.update(
        fallbacks=ts.fallbacks, **state_figures(nodes, mesh, report),
        state_leaf_count=len(jax.tree.leaves(nnx.state(ts.nodes))),
        placements=placements, start_step=ts.start_step, state_scalar_count=report.n_scalars,
        largest_replicated=dict(report.largest_replicated),
        left_whole=dict(left_whole(report, annotations, table, ts.fallbacks)),
        mesh_summary=dataclasses.asdict(report.mesh) if report.mesh else None, model_axis_idle=idle is not None)
    sharding_table = variable_table(report, annotations, ts.fallbacks, metrics["best_weights_bytes_per_device"],
                                    rule_name)
    other_paths = {"model/" + "/".join(map(str, path))
                   for path, _ in nnx.to_flat_state(nnx.state(ts.model, nnx.Not(nnx.Param)))}
    log.info("%s", "\n".join(placement_block(
        report, rule_name=rule_name, param_count=metrics["param_count"], fallbacks=ts.fallbacks,
        others={v.path: v.nbytes for v in report.variables if v.path in other_paths},
        param_bytes=metrics["param_bytes_per_device"], opt_bytes=metrics["opt_bytes_per_device"],
        ema_bytes=metrics["ema_bytes_per_device"], best_bytes=metrics["best_weights_bytes_per_device"],
        whole=list(metrics["left_whole"].items()),
        hint=splits_nothing_hint(shape, table, rule_name, mesh_spec) or idle_axis_said(idle),  # before XLA warns
        verbose=verbose)))
    logging.getLogger(DETAILS).info("every variable of the model and optimizer state:\n%s", sharding_table)
    return sharding_table

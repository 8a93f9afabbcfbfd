"""A run's files (metrics.json, sharding.txt, samples, plot) and the multirun summary.

Every file is written to a temporary name in its folder and renamed into place,
so a killed run never leaves a half-written file; a folder that already holds a
completed run is never written into again.
"""

from __future__ import annotations

import csv
import io
import json
import logging
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from hydra.experimental.callback import Callback
from omegaconf import DictConfig

__all__ = ["write_atomic", "write_json", "ensure_fresh", "SweepSummary", "RefuseCompletedRun", "summary_rows",
           "markdown_table", "SUMMARY_COLUMNS"]

log = logging.getLogger(__name__)

SUMMARY_COLUMNS = ("job", "rule", "mesh_shape", "model", "data", "param_bytes_per_device",
                   "opt_bytes_per_device", "median_step_s", "samples_per_s", "c2st", "status", "error")
DRY_RUN_COLUMNS = ("job", "rule", "mesh_shape", "model", "step_memory_bytes_per_device",
                   "collective_bytes_per_step", "compile_s", "status", "error")


def write_atomic(path: Path, data: bytes | str) -> Path:
    """Write ``data`` to ``path`` through a temporary file in the same folder and a rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def write_json(path: Path, obj: Any) -> Path:
    """``write_atomic`` of ``obj`` as indented JSON (NumPy scalars and arrays converted)."""
    # NaN and inf are not JSON: strict parsers (jq, browsers) reject them, so they become null.
    return write_atomic(path, json.dumps(_finite(obj), indent=2, default=_jsonable, allow_nan=False) + "\n")


def _finite(obj: Any) -> Any:
    if isinstance(obj, float | np.floating):
        return float(obj) if np.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_finite(v) for v in obj]
    return obj


def write_npz(path: Path, **arrays: np.ndarray) -> Path:
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return write_atomic(path, buffer.getvalue())


def ensure_fresh(out_dir: Path) -> None:
    """Refuse to run into a folder that already holds a completed run's metrics.

    Raises
    ------
    FileExistsError
        Naming the folder and its metrics.json.
    """
    out_dir = Path(out_dir)
    metrics = out_dir / "metrics.json"
    if metrics.exists():
        status = json.loads(metrics.read_text()).get("status", "unknown")
        raise FileExistsError(
            f"{metrics} already exists (status {status}): this folder holds an earlier run's outputs, "
            "which are never overwritten; choose another hydra.run.dir (or hydra.sweep.dir)")
    checkpoints = out_dir / "checkpoints"
    if checkpoints.is_dir() and any(checkpoints.iterdir()):
        raise FileExistsError(
            f"{checkpoints} holds an interrupted run's checkpoints; continue it in a new folder with "
            f"train.resume={out_dir} hydra.run.dir=<new folder>, or choose another hydra.run.dir")


def _jsonable(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, Path):
        return str(value)
    return str(value)


def summary_rows(sweep_dir: Path) -> list[dict[str, Any]]:
    """One row per job folder of ``sweep_dir`` holding a metrics.json, ordered by job number."""
    rows = []
    for metrics_path in sorted(Path(sweep_dir).glob("*/metrics.json"),
                               key=lambda p: (not p.parent.name.isdigit(), int(p.parent.name) if p.parent.name.isdigit() else 0, p.parent.name)):
        m = json.loads(metrics_path.read_text())
        rows.append({
            "job": metrics_path.parent.name,
            "rule": m.get("rule"),
            "mesh_shape": _mesh_cell(m),
            "model": m.get("model"),
            "data": m.get("data"),
            "param_bytes_per_device": m.get("param_bytes_per_device"),
            "opt_bytes_per_device": m.get("opt_bytes_per_device"),
            "median_step_s": m.get("median_step_s"),
            "samples_per_s": m.get("samples_per_s"),
            "c2st": m.get("c2st"),
            "status": m.get("status"),
            "error": m.get("error") or "",
            "step_memory_bytes_per_device": m.get("step_memory_bytes_per_device"),
            "collective_bytes_per_step": m.get("collective_bytes_per_step"),
            "compile_s": m.get("compile_s"),
            "dry_run": bool(m.get("config", {}).get("dry_run")),
        })
    return rows


def _ranked(rows: list[dict[str, Any]], key: str) -> list[dict[str, Any]]:
    """Completed jobs by ``key``, smallest first; failed jobs after them."""
    return sorted(rows, key=lambda r: (r["status"] != "ok", r.get(key) is None, r.get(key) or 0))


def _mesh_cell(metrics: dict[str, Any]) -> str:
    """"8x1", "none" for a run without a mesh, "" for a job that failed before its mesh existed."""
    if "mesh_shape" not in metrics:
        return ""
    return "x".join(map(str, metrics["mesh_shape"])) if metrics["mesh_shape"] else "none"


def markdown_table(rows: list[dict[str, Any]], columns=SUMMARY_COLUMNS) -> str:
    """Rows as a markdown table, floats rounded for reading."""
    def cell(v):
        if isinstance(v, float):
            return f"{v:.4g}"
        return "" if v is None else str(v).replace("|", "/")
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(cell(row.get(c)) for c in columns) + " |" for row in rows]
    return "\n".join(lines)


class SweepSummary(Callback):
    """Hydra callback: after a multirun, ``sweep_summary.csv`` and a markdown table."""

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        sweep_dir = Path(config.hydra.sweep.dir).absolute()
        rows = summary_rows(sweep_dir)
        if not rows:
            log.warning("multirun finished with no job metrics under %s", sweep_dir)
            return
        dry = all(row["dry_run"] for row in rows)
        columns = DRY_RUN_COLUMNS if dry else SUMMARY_COLUMNS
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
        write_atomic(sweep_dir / "sweep_summary.csv", buffer.getvalue())
        table = markdown_table(rows, columns)
        if dry:  # a dry-run sweep is for choosing: rank the configurations
            table = "\n\n".join(
                [f"ranked by {key} (smallest first):\n" + markdown_table(_ranked(rows, key), columns)
                 for key in ("step_memory_bytes_per_device", "collective_bytes_per_step")])
        write_atomic(sweep_dir / "sweep_summary.md", table + "\n")
        failed = sum(row["status"] != "ok" for row in rows)
        print(f"\nSweep summary ({len(rows)} jobs, {failed} failed): {sweep_dir / 'sweep_summary.csv'}\n{table}",
              flush=True)


class RefuseCompletedRun(Callback):
    """Hydra callback: stop before Hydra writes into a folder that holds a completed run.

    Hydra saves ``.hydra/*.yaml`` and opens the job's log before the task runs, so
    ``ensure_fresh`` inside ``run()`` alone comes too late to leave such a folder intact.
    """

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        _refuse_if_completed(Path(config.hydra.run.dir))

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        for metrics in sorted(Path(config.hydra.sweep.dir).glob("*/metrics.json")):
            _refuse_if_completed(metrics.parent)


def _refuse_if_completed(out_dir: Path) -> None:
    try:
        ensure_fresh(out_dir)
    except FileExistsError as err:
        # Hydra turns an Exception raised by a callback into a warning; SystemExit stops the run.
        print(f"error: {err}", file=sys.stderr, flush=True)
        raise SystemExit(1) from None

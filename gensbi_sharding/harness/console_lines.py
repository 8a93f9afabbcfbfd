"""Console lines a user reads at a run's and a sweep's milestones, in the user's own terms.

The mesh step names the resolved mesh and the overrides that asked for it (not the raw config
dict); the C2ST mean is said once; a sweep ends with one line naming its outcome and files, as a
single run ends with ``run_report.final_line``; a refused sweep folder is named as
``hydra.sweep.dir`` with the count of its completed jobs.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gensbi_sharding.harness.hints import override_literal
from gensbi_sharding.harness.outputs import room_fix
from gensbi_sharding.harness.units import format_c2st, format_seconds, is_number

if TYPE_CHECKING:  # JAX and OmegaConf types only: launch.py's checks import this module without JAX
    from jax.sharding import Mesh
    from omegaconf import DictConfig

__all__ = ["step_header", "evaluation_header", "mesh_step_line", "model_step_line", "log_c2st_mean", "sweep_end_line",
           "remember_stopped_sweep", "stopped_sweep_line", "completed_jobs_lead", "summary_refused_line"]

log = logging.getLogger("gensbi_sharding.harness.run")


def step_header(header: str, dry_run: bool = False) -> str:
    """``header`` (``"[2/7] mesh: ..."``) numbered as a dry run's step, ``"[2/3] mesh: ..."``, when ``dry_run``: a dry
    run runs devices, mesh and one compile (``"[3/3] dry run: ..."``), and was numbered as a training run ("[1/7]",
    "[2/7]", then none of the five steps it announced). The training run's header stays the literal in the source."""
    return re.sub(r"^\[(\d)/7\]", r"[\1/3]", header) if dry_run else header


def evaluation_header(num_samples: int, observations: Sequence[int], kept: Sequence[int],
                      weights: dict[str, Any]) -> str:
    """Step 6's header: ``"[6/7] sample + C2ST: 128 posterior samples per observation [3, 4] (weights: EMA at the best
    validation step 8), scored against the reference; [1, 2] kept: an earlier attempt scored them from the same
    weights"``. Was, on a job resumed after a stop during its evaluation, every observation named as drawn.

    Parameters
    ----------
    num_samples : int
        ``eval.num_samples``.
    observations : sequence of int
        The observations scored.
    kept : sequence of int
        Those whose earlier attempt's score is kept, not drawn again (``posterior.evaluate_observations``).
    weights : dict
        ``posterior.sampled_weights``: ``weights`` (which) and ``step``.

    Returns
    -------
    str
    """
    drawn = [k for k in observations if k not in kept]
    which = f"(weights: {weights['weights']} {weights['step']})"
    also = f"{list(kept)} kept: an earlier attempt scored {'them' if len(kept) > 1 else 'it'} from the same weights"
    if not drawn:
        return f"[6/7] sample + C2ST: nothing to draw {which}: {also}"
    return (f"[6/7] sample + C2ST: {num_samples} posterior samples per observation {drawn} {which}, scored against the "
            f"reference" + f"; {also}" * bool(kept))


def mesh_step_line(mesh_cfg: DictConfig, mesh: Mesh | None, dry_run: bool = False) -> str:
    """``"[2/7] mesh: data=8 x model=1 (8 devices; mesh=dict, mesh.model_axis=1)"``: the resolved mesh,
    then the overrides that asked for it; ``mesh=none`` says one device.

    Parameters
    ----------
    mesh_cfg : mapping
        The run's ``cfg.mesh`` (``spec``: None, "auto" or "dict"; ``model_axis``, ``devices``).
    mesh : jax.sharding.Mesh or None
        The mesh ``run_mesh`` resolved from it.
    dry_run : bool
        Numbered as a dry run's step (``step_header``).

    Returns
    -------
    str
    """
    if mesh is None:
        return step_header("[2/7] mesh: none (mesh=none): one device, nothing placed", dry_run)
    shape = " x ".join(f"{name}={size}" for name, size in dict(mesh.shape).items())
    asked = [f"mesh={mesh_cfg.get('spec')}"]
    if mesh_cfg.get("spec") == "dict":  # auto has no knob: all devices on "data"
        asked.append(f"mesh.model_axis={mesh_cfg.get('model_axis')}")
        if mesh_cfg.get("devices"):
            asked.append(f"mesh.devices={override_literal(list(mesh_cfg.get('devices')))}")  # as typed: [0,1]
    devices = f"{mesh.devices.size} device{'s' * (mesh.devices.size != 1)}"
    return step_header(f"[2/7] mesh: {shape} ({devices}; {', '.join(asked)})", dry_run)


def model_step_line(cfg: Any, rule_name: str, mesh: Mesh | None) -> str:
    """``"[4/7] model + optimizer: mlp, rule 'fsdp', init=sharded, AdamW(lr=0.003, cosine, warm-up 100 steps, weight
    decay 0.0001), EMA decay 0.999"``: what the run trains with; warm-up and weight decay where set, "no EMA" under
    ``train.ema_decay=0`` (not "EMA decay 0": the run keeps no EMA).

    Parameters
    ----------
    cfg : DictConfig
        The run's config (``model.name``, ``model.init``, ``train.*``).
    rule_name : str
        The sharding rule's name, as the run resolved it.
    mesh : jax.sharding.Mesh or None
        None: the model is built eagerly on one device, whatever ``model.init`` says.

    Returns
    -------
    str
    """
    train = cfg.train
    adamw = [f"lr={train.learning_rate:g}", train.schedule]
    adamw += [f"warm-up {train.warmup_steps} steps"] if train.warmup_steps else []
    adamw += [f"weight decay {train.weight_decay:g}"] if train.weight_decay else []
    ema = f"EMA decay {train.ema_decay:g}" if train.ema_decay > 0 else "no EMA"
    init = cfg.model.init if mesh is not None else "eager (no mesh)"
    return (f"[4/7] model + optimizer: {cfg.model.name}, rule {rule_name!r}, init={init}, AdamW({', '.join(adamw)}), "
            f"{ema}")


def log_c2st_mean(metrics: dict[str, Any]) -> None:
    """Log the C2ST mean over several scored observations; with one, its own line said it already.

    Parameters
    ----------
    metrics : dict
        The run's metrics after ``posterior.evaluate_observations`` (``c2st``, ``c2st_observations``).
    """
    scored = metrics.get("c2st_observations") or []
    if len(scored) > 1:
        log.info("C2ST %s over %d observations (0.5 = indistinguishable from the reference posterior)",
                 format_c2st(metrics.get("c2st"), metrics.get("c2st_sd_observations")), len(scored))


def sweep_end_line(statuses: Sequence[Any], wall_s: float | None, sweep_dir: Path, has_plot: bool) -> str:
    """The sweep's last console line: ``"sweep done in 136 s: 2 ok, 0 failed; sweep_summary.csv/.md/.png in
    <dir>"``; ``"sweep failed"`` when a job failed, ``"sweep stopped"`` when one was preempted, interrupted or
    never run.

    Parameters
    ----------
    statuses : sequence
        Each job's recorded status (``"not run"`` for a job never started).
    wall_s : float or None
        Seconds since the sweep started; None: unknown (left out).
    sweep_dir : pathlib.Path
        The sweep folder holding the summary files.
    has_plot : bool
        Whether ``sweep_summary.png`` was written.

    Returns
    -------
    str
    """
    from gensbi_sharding.harness.plots import status_counts, status_word

    words = [status_word(s) for s in statuses]
    ok = sum(s == "ok" for s in statuses)
    outcome = ("done" if ok == len(statuses) else "failed" if "failed" in words else "stopped")
    took = f" {'in' if outcome == 'done' else 'after'} {format_seconds(wall_s)}" if is_number(wall_s) else ""
    files = "sweep_summary.csv/.md" + ("/.png" if has_plot else "")
    return f"sweep {outcome}{took}: {ok} ok{status_counts(statuses)}; {files} in {sweep_dir}"


_STOPPED: list[str] = []  # the outcome line of the sweep this process's job stopped


def remember_stopped_sweep(line: str | None) -> None:
    """Keep ``line`` (``sweep_end_line`` of a sweep this process's job stopped) for ``stopped_sweep_line``.

    Parameters
    ----------
    line : str or None
        None forgets the line kept: ``stopped_sweep_line`` is None again, as before any sweep stopped.
    """
    _STOPPED[:] = [] if line is None else [line]


def stopped_sweep_line() -> str | None:
    """The outcome line of the sweep this process's job stopped (preempted, Ctrl-C), e.g. ``"sweep stopped:
    1 ok, 0 failed, 1 interrupted, 1 not run; sweep_summary.csv/.md/.png in <dir>"``; None for any other job.

    Returns
    -------
    str or None
        Said last by ``launch.py``, after the job's own line: Hydra's end-of-sweep summary never comes.
    """
    return _STOPPED[0] if _STOPPED else None


def completed_jobs_lead(sweep_dir: Path, job_dirs: Sequence[Path], refusal: str = "", jobs: int = 0,
                        folders: Sequence[str] | None = None) -> str:
    """``"hydra.sweep.dir=<dir>: 2 of its 2 jobs complete (0, 1); job 0: "``: the start of a refused
    multirun's error, before the first refused job's own reason; "" when none of its jobs completed (the
    reason alone says it: a damaged record, a job to continue).

    Parameters
    ----------
    sweep_dir : pathlib.Path
        The sweep folder the multirun was given.
    job_dirs : sequence of pathlib.Path
        Its job folders holding a ``metrics.json``.
    refusal : str
        The refused job's error, which starts with a path inside its folder (that job is named).
    jobs : int
        How many jobs the sweep has as Hydra's sweeper expands it (``sweep_plan.every_job``); 0: unknown (the job
        folders there are are counted). The folders alone undercount an interrupted sweep: "1 of its 2 jobs" for
        three jobs, one never started.
    folders : sequence of str, optional
        Each job's folder name (``sweep_plan.job_folders``); with ``jobs``, only this sweep's job folders are counted
        (so a 2-job sweep rerun into its 3-job earlier run's folder is not "2 of its 2 jobs complete (0, 2)").

    Returns
    -------
    str
    """
    from gensbi_sharding.harness.outputs import read_metrics
    from gensbi_sharding.harness.override_grammar import hydra_override  # as typed, a path with a space quoted

    def status(job: Path) -> Any:
        try:
            return read_metrics(job / "metrics.json").get("status")
        except (OSError, ValueError):  # a damaged record: not a completed job
            return None

    from gensbi_sharding.harness.sweep_plan import folder_of

    mine = {folder_of(number, folders) for number in range(jobs)} if jobs else None  # else: unknown, all counted
    from gensbi_sharding.harness.runs_below import job_number_key  # "0, 1, 2, ..., 10", not "0, 1, 10, 2"

    done = sorted((job.name for job in job_dirs if status(job) == "ok" and (mine is None or job.name in mine)),
                  key=job_number_key)
    if not done:
        return ""
    named = ", ".join(done[:5]) + (f", ... ({len(done) - 5} more)" if len(done) > 5 else "")
    refused = next((job.name for job in job_dirs if refusal.startswith(str(Path(job)) + "/")), None)
    n = max(jobs, len(done)) if jobs else len(job_dirs)
    return (f"{hydra_override('hydra.sweep.dir', sweep_dir)}: {len(done)} of its {n} job{'s' * (n != 1)} complete "
            f"({named}); " + (f"job {refused}: " if refused else ""))


def summary_refused_line(sweep_dir: Path, err: OSError) -> None:
    """Print a sweep's summary the disk refused (full, read-only): the file, that each job's outcome is kept, and the
    command that writes the summary (Hydra's own is a warning of the callback's OSError, no line ending the sweep)."""
    import json
    import shlex
    import sys

    from gensbi_sharding.harness.console import tagged

    jobs = sorted(Path(sweep_dir).glob("*/metrics.json"))
    # A job whose own record the full disk refused too (Hydra made its folder, .hydra in it): named, not said kept
    # (its folder holds no metrics.json to keep its outcome in).
    unrecorded = sorted((p.parent.name for p in Path(sweep_dir).glob("*/.hydra")
                         if not (p.parent / "metrics.json").is_file()), key=lambda name: (len(name), name))
    kept = "each job's outcome is kept in its folder's metrics.json" + (
        f", but for job{'s' * (len(unrecorded) > 1)} {', '.join(unrecorded)}, whose record the disk refused too (its "
        "error line above says how it ended)" if unrecorded else "")
    code = ("from gensbi_sharding.harness.summary import refresh_sweep_summary as again; "
            f"again({json.dumps(str(jobs[0].parent) if jobs else '', ensure_ascii=False)})")
    print(tagged("ERROR", f"{err.filename or sweep_dir} could not be written ({err.strerror or err}): the sweep's "
                 f"summary is not written, {kept}; {room_fix(err)}, then write the summary with: "
                 f"python -c {shlex.quote(code)}"), file=sys.stderr, flush=True)

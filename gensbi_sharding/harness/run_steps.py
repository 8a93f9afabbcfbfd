"""Steps 1-7 of ``run``, one after the other: devices, mesh, data, model, train, sample + C2ST, outputs."""

from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from gensbi_sharding.harness import console, loss_history, outputs, processes, python_words, run_folder, run_report
from gensbi_sharding.harness.config import ConfigError
from gensbi_sharding.harness.checked_fix import validate_every
from gensbi_sharding.harness.console_lines import evaluation_header, step_header
from gensbi_sharding.harness.config_checks import scored_observations
from gensbi_sharding.harness.distributed_checks import processes_config_problem
from gensbi_sharding.harness.dry_run import dry_run_metrics
from gensbi_sharding.harness.dry_run_stop import staged_check, stopped_during
from gensbi_sharding.harness.hints import overrides_named
from gensbi_sharding.harness.memory_check import check_fits
from gensbi_sharding.harness.model_checks import ignored_settings, platform_problem
from gensbi_sharding.harness.preemption import Preempted, PreemptionWatch
from gensbi_sharding.harness.train_header import train_header
from gensbi_sharding.harness.train_notes import at_steps_line, nothing_trained_line
from gensbi_sharding.harness.rule_config import as_rule, rule_table
from gensbi_sharding.harness.run_mesh import run_mesh
from gensbi_sharding.harness.units import format_bytes

__all__ = ["run_steps", "claim_first"]

log = logging.getLogger("gensbi_sharding")


def run_steps(cfg: DictConfig, out: Path, metrics: dict[str, Any], folder: run_folder.RunFolder,
              watch: PreemptionWatch) -> dict[str, Any]:
    """The steps of one job, in order: its figures go into ``metrics``; returns the metrics to record.

    Each step is logged ("[1/7] devices" .. "[7/7] outputs"; a dry run's "[1/3]" .. "[3/3]"); a failure raises,
    and ``run`` records it.
    """
    dist = cfg.distributed
    # Known before joining (distributed=local's processes): their first lines are tagged, only process 0's info lines
    # reach their one console (else each printed "[1/7]"); else one process (reset: an earlier run may have set it).
    several = dist.mode == "explicit" and dist.process_id is not None and (dist.num_processes or 0) > 1
    console.set_process(dist.process_id if several else 0, dist.num_processes if several else 1)
    with python_words.in_python_words(reword=False):  # run(cfg) from Python: its fixes as cfg's settings
        validate_every(cfg)
    # Accepted, yet the model (or its program) is the same without them.
    if (unused := ignored_settings(cfg.model, cfg.activation, cfg.mesh)) is not None:
        log.warning("%s", unused, extra=console.EVERY_PROCESS)
    rule_name, table = rule_table(cfg.rule)
    metrics.update(rule=rule_name, model=cfg.model.name, data=cfg.data.name)

    from gensbi_sharding.harness.devices import (configure_devices, initialize_distributed, job_peak_metrics,  # JAX:
                                                 peak_bytes_in_use, resolve_cpu_count)  # here, not at launch.py's start
    cpu_count, source = resolve_cpu_count(cfg.devices.cpu_count)
    log.info(step_header("[1/7] devices: cpu_count=%d (from %s), distributed=%s", cfg.dry_run), cpu_count, source,
             cfg.distributed.mode)
    initialize_distributed(dist.mode, coordinator_address=dist.coordinator_address,
                           num_processes=dist.num_processes, process_id=dist.process_id,
                           timeout_s=dist.timeout_s, heartbeat_s=dist.heartbeat_s)
    configure_devices(cpu_count, cfg.devices.platform)

    import jax
    from flax import nnx
    import gensbi_sharding as contract
    from gensbi_sharding.harness import plots, registry, train
    from gensbi_sharding import checkpoint
    from gensbi_sharding.harness.pipeline import build_pipeline
    from gensbi_sharding.harness.preemption import train_with_checkpoints
    from gensbi_sharding.harness.resume import check_resume_in_run, resume_point, saved_statistics
    from gensbi_sharding.harness.state import build_state
    from gensbi_sharding.harness.tasks import TASKS, check_evaluation

    if jax.process_count() > 1 and not folder.told and not os.environ.get(processes.LOCAL_CHILD_ENV):
        # distributed=auto: process 0 owns the folder, its refusal told to every process (else the others go on, to
        # collectives); explicit mode's first job: process 0 claimed before JAX joined them (claim_first), told here
        run_folder.claim_together(folder, watch)
    elif folder.owner is None and not folder.claimed:
        folder.claim()
    if jax.process_count() > 1:  # distributed=auto: known once JAX joined the processes
        console.set_process(jax.process_index(), jax.process_count())
    log.info("process %d of %d, %d device%s (%d local, %s)", jax.process_index(), jax.process_count(),
             jax.device_count(), "s" * (jax.device_count() != 1), jax.local_device_count(), jax.default_backend())
    metrics["jax_enable_x64"] = run_report.x64_warning()  # x64 trains otherwise: said, and recorded
    peak_before = peak_bytes_in_use()  # the process's: an earlier job of a multirun may have set it
    # on every process alike (none left waiting); the platform's, else at compile time; from Python in cfg's settings
    with python_words.in_python_words(reword=False):
        if (problem := processes_config_problem(cfg) or platform_problem(cfg.model, jax.default_backend())) is not None:
            raise ConfigError(problem)
    # A dry run's stop names its stage: it never trains, so not "before training"
    with stopped_during("setup") if cfg.dry_run else contextlib.nullcontext():
        watch.check()  # a signal during setup stops the run here, between its steps (nothing to save yet)
    mesh = run_mesh(cfg, source, rule_name, table)
    log.info("%s", run_report.mesh_step_line(cfg.mesh, mesh, dry_run=cfg.dry_run))  # resolved, as asked for
    metrics.update(mesh_shape=list(mesh.devices.shape) if mesh else None,
                   mesh_axes=list(mesh.axis_names) if mesh else None, device_count=jax.device_count(),
                   process_count=jax.process_count(), data_parallel_size=contract.batch_size_divisor(mesh),
                   devices_used=mesh.devices.size if mesh else 1)  # device_count: those JAX sees (8 for mesh=none)

    with python_words.in_python_words(reword=False):  # run(cfg) from Python: its fixes, logged too, as cfg's settings
        if cfg.dry_run:
            staged_check(watch.check)("setup")
            return dry_run_metrics(cfg, mesh, rule_name, table, stop_check=watch.check)
        check_fits(cfg, mesh, as_rule(rule_name, table))  # a model or budget too big: named before anything allocates
    watch.check()
    log.info("[3/7] data: %s, %d simulations", cfg.data.name, cfg.data.num_simulations)
    resume_dir = resume_point(cfg, out)
    start_step = int(resume_dir.name) if resume_dir else 0
    # Null until the checkpoint is restored: an attempt refused (or failing) before then resumed nothing.
    metrics.update(resumed_from_step=None, resumed_from=None)
    if resume_dir is not None:
        check_resume_in_run(resume_dir, cfg)  # run(cfg) from Python: its refusals in the settings it sets
    if resume_dir is not None and start_step == cfg.train.steps:  # e.g. to score it again with other eval.*
        log.info("%s", at_steps_line(start_step, cfg.eval.enabled))  # was "[6/7] ...: skipped" after "evaluating"
    registry.get_model(cfg.model.name)  # an unknown model fails here, before any simulation
    registry.get_data(cfg.data.name)
    observations, note = scored_observations(cfg)
    if cfg.eval.enabled and note:  # both set and disagreeing: say which one is scored
        log.info("%s", note)
    if cfg.eval.enabled and cfg.data.name in TASKS:  # what evaluation will need, checked before training
        check_evaluation(cfg.data, cfg.eval, observations)
    pipe = build_pipeline(cfg.data, seed=cfg.seed, mesh=mesh, shards=cfg.data.shards, skip=start_step,
                          statistics=saved_statistics(resume_dir), mesh_cfg=cfg.mesh)
    sims = pipe.sims
    metrics.update(val_pairs=pipe.val_pairs, non_finite_simulations=pipe.dropped_non_finite)
    watch.check()
    log.info("%s", run_report.model_step_line(cfg, rule_name, mesh))  # what it trains with, as set
    # run(cfg) from Python: a restore's refusal and held-out warning say their fixes as cfg's settings
    with overrides_named("model", cfg.model, ConfigError), python_words.in_python_words(reword=False):
        ts = build_state(cfg, dim_theta=sims.dim_theta, dim_x=sims.dim_x, mesh=mesh, rule_name=rule_name,
                         table=table, resume_dir=resume_dir)
        if resume_dir is not None:  # steps counts this attempt's steps, these where it started, final_step its end
            metrics.update(resumed_from_step=start_step, resumed_from=str(resume_dir))
        sharding_table = run_report.report_placement(metrics, ts, mesh, table=table, rule_name=rule_name,  # its hints
                                                     mesh_spec=cfg.mesh.spec or "none", verbose=cfg.verbose)
    if run_folder.is_writer():  # now, not at [7/7]: a run stopped or failed later has it too
        outputs.write_atomic(out / "sharding.txt", sharding_table)
    watch.check()
    functions, state = train.make_step_functions(ts.model, ts.optimizer, mesh, ema=ts.ema)
    mesh_text = "x".join(map(str, mesh.devices.shape)) if mesh is not None else "none"

    def joined(losses, val_points):  # the whole history: a resumed run's losses after the earlier run's
        return loss_history.joined_loss_history(losses, start_step=ts.start_step, val_points=val_points,
                                                resume_dir=resume_dir, val_afresh=ts.val_afresh,
                                                restored_val=ts.early_stopping.history if ts.early_stopping else ())

    def write_losses(history):  # plotted too
        if run_folder.is_writer():
            loss_history.write_losses(out, history, window=cfg.train.log_every,
                                      title=f"{cfg.data.name}, {cfg.model.name} | rule {rule_name} on mesh {mesh_text}"
                                      # the earlier steps may have run elsewhere (metrics.json: previous_attempts)
                                      + (f" from step {ts.start_step}" if resume_dir else ""))

    # The earlier attempt's losses in the resumed step's window: the progress bar's first loss is the uninterrupted
    # run's, as the final train loss is (else a run resumed at 400 of 405, log_every=30, showed 401-405's mean above
    # 'train loss ... (mean of the last 15 steps)')
    earlier, window_start = joined([], []), ts.start_step - ts.start_step % cfg.train.log_every
    try:
        # From this line on a signal stops the run at the first step boundary, after a checkpoint.
        with watch.at_step_boundaries():
            result, preempted = train_with_checkpoints(
                functions, state, pipe.train_batches, ts=ts, cfg=cfg, mesh=mesh, out=out, config=metrics["config"],
                watch=watch, val_batches=pipe.val_batches, progress=jax.process_index() == 0,
                statistics=sims.statistics(), window_head=earlier.losses[earlier.step > window_start],
                announce=lambda trains, why: log.info("%s", train_header(cfg, ts.start_step, resume_dir, trains, why)))
    except KeyboardInterrupt as interrupt:  # Ctrl-C: the curve so far, for the run that continues this one
        if getattr(interrupt, "losses", None) is not None:
            write_losses(joined(interrupt.losses, interrupt.val_history))
        raise
    # This attempt's validations: the earlier ones are in the earlier attempt's losses file.
    history = joined(result.losses, result.val_history[len(ts.early_stopping.history) if ts.early_stopping else 0:]
                     if result.val_history else [(ts.start_step + len(result.losses), result.val_loss)])
    write_losses(history)
    # The last logging window counted from step 0, over the joined history: a resumed run's figure is the
    # uninterrupted run's (windows counted from the resume would make it the mean of 1 step after a stop at
    # step 2999 of 3000).
    # None when this attempt trained nothing (resumed at train.steps to evaluate).
    _, means, sizes = loss_history.windows(history.step, history.losses, cfg.train.log_every)
    train_loss, window_steps = (float(means[-1]), int(sizes[-1])) if result.steps else (None, 0)
    trained = bool(result.steps)  # else nothing compiled or ran: null figures, never 0.0
    last_val = result.val_history[-1][1] if result.val_history else None  # as train loss is: the last (best_val_loss)
    metrics.update(compile_s=result.compile_s if trained else None, best_val_loss=result.val_loss,
                   median_step_s=result.median_step_s if trained else None,
                   samples_per_s=result.samples_per_s if trained else None, final_val_loss=last_val,
                   speed_includes_warmup=result.speed_includes_warmup if trained else None,  # one step: its warm-up
                   step_memory_bytes_per_device=result.step_memory_bytes_per_device if trained else None,  # dry run's
                   collective_bytes_per_step=result.collective_bytes_per_step if trained else None,  # dry run's too,
                   collectives=result.collectives if trained else None,  # as its report's "collectives" name them
                   steps=result.steps, final_step=ts.start_step + result.steps,
                   final_train_loss=train_loss, best_step=result.best_step,
                   stopped_early=result.stopped_early, val_history=result.val_history)
    if preempted:  # after the figures: a preempted attempt's record keeps what its steps measured
        step = ts.start_step + result.steps
        raise Preempted(watch.signum, step, out / checkpoint.CHECKPOINT_SUBDIR / str(step))
    if result.best_step is not None:
        log.info("validation: best %.4f at step %d%s", result.val_loss, result.best_step,
                 f", stopped early at step {ts.start_step + result.steps}" if result.stopped_early else "")
    val_text = "n/a" if last_val is None else f"{last_val:.4f}"
    if result.steps:
        log.info("compile %.2f s, step %.2f ms, %.0f samples/s%s; train loss %.4f (mean of the last %d step%s), "
                 "val loss %s over %d pairs", result.compile_s, 1e3 * result.median_step_s, result.samples_per_s,
                 " (one step timed: its warm-up included)" if result.speed_includes_warmup else "",
                 train_loss, window_steps, "s" * (window_steps != 1),
                 val_text, pipe.val_pairs)
    elif result.stopped_early:  # was "nothing left to train: ... step 75 of train.steps=300", naming no cause
        after = sum(step > result.best_step for step, _ in result.val_history)
        log.info("%s", nothing_trained_line(ts.start_step, after, result.best_step, cfg.train.patience, val_text,
                                            pipe.val_pairs, cfg.train.steps))
    else:
        log.info("nothing left to train: the checkpoint holds step %d of train.steps=%d; val loss %s over %d pairs",
                 ts.start_step, cfg.train.steps, val_text, pipe.val_pairs)

    model, optimizer, *ema = nnx.merge(functions.graphdef, result.state)
    from gensbi_sharding.harness.posterior import evaluate_observations, sampled_weights
    w = sampled_weights(metrics, ema=bool(ema)) if cfg.eval.enabled else {"weights": None, "step": None}  # none
    metrics.update(c2st=None, c2st_weights=w["weights"], c2st_step=w["step"])  # scored: null, not named unscored
    if cfg.eval.enabled:  # each observation's score joins c2st_observations as it is scored: a stop keeps them
        observations = list(cfg.eval.observations or [cfg.data.num_observation])
        graphdef, params, rest = nnx.split(model, nnx.Param, ...)
        metrics.update(evaluate_observations(
            sims=sims, velocity=lambda p, th, xx, t: nnx.merge(graphdef, p, rest)(th, xx, t),
            params=ema[0].param_state(model) if ema else params, observations=observations,
            num_samples=cfg.eval.num_samples, ode_steps=cfg.eval.ode_steps, n_folds=cfg.eval.c2st_folds,
            batch_size=cfg.eval.batch_size,  # rows integrated at once: the sampler's device memory
            seed=cfg.seed, mesh=mesh, n_jobs=cfg.eval.c2st_jobs, out=out, write=run_folder.is_writer(),
            plot=cfg.eval.plot, stop_check=watch.check_together, dtype=cfg.model.get("dtype", "float32"),
            scored=metrics.setdefault("c2st_observations", []),  # the header once it knows which are drawn:
            announce=lambda kept: log.info("%s", evaluation_header(cfg.eval.num_samples, observations, kept, w)),
            **sampled_weights(metrics, ema=bool(ema), one_process=jax.process_count() == 1),
            title=lambda k, c, sd: plots.posterior_title(task=cfg.data.name, observation=k, rule=rule_name,
                                                         mesh_shape=metrics["mesh_shape"], c2st=c, c2st_sd=sd,
                                                         folds=cfg.eval.c2st_folds)))
        run_report.log_c2st_mean(metrics)  # one observation: its own line above said it
    else:  # said, not left out: was, the console went from [5/7] to [7/7] without a word
        log.info("[6/7] sample + C2ST: skipped (eval.enabled=false; c2st null)")

    metrics.update(job_peak_metrics(peak_before, peak_bytes_in_use()))  # GPU/TPU: the allocator's; None on CPU
    if metrics["device_peak_bytes"] is not None:
        log.info("peak device memory %s", format_bytes(metrics["device_peak_bytes"]))
    elif metrics.get("device_peak_bytes_at_most") is not None:
        log.info("peak device memory at most %s (an earlier job in this process peaked higher: not measurable)",
                 format_bytes(metrics["device_peak_bytes_at_most"]))
    log.info("[7/7] outputs: %s", "written (the last line names their folder)" if run_folder.is_writer() else
             "process 0 writes them (its last line names their folder)")  # the folder once: in final_line's line
    return metrics


def claim_first(folder: run_folder.RunFolder, cfg: DictConfig, watch: PreemptionWatch) -> None:
    """Process 0's ``folder.claim()`` before JAX starts; a refusal is told to the other processes (``tell_refusal``).

    Raises
    ------
    Exception
        The claim's refusal (``ConfigError``, ``FileExistsError``, ``FolderInUseError``), on every process.
    """
    try:
        folder.claim()
    except Exception as refused:  # noqa: BLE001 - whatever refused it is told to the others, then raised here
        tell_refusal(cfg, refused, folder, watch)
        raise


def tell_refusal(cfg: DictConfig, refused: Exception, folder: Any = None, watch: Any = None) -> None:
    """Where process 0's folder was refused before JAX started and other processes are to join it
    (``distributed.mode=explicit``, ``num_processes`` > 1): join them all the same and tell them ``refused``
    (``run_folder.claim_together``, which they reach in ``run_steps``), so every process raises the same words at
    once (the others would wait in ``jax.distributed.initialize`` for process 0, gone, until
    ``distributed.timeout_s``). Else, or where they cannot be joined, nothing. Called by ``run(cfg)``'s claim and by
    launch.py's, in Hydra's callback (``folder_claim.RefuseCompletedRun``: no folder or watch there yet)."""
    from omegaconf import OmegaConf

    # A config without a distributed section (one of one's own, from Python) has no other process to tell (else
    # 'Missing key distributed' raised out of launch.py's callback after its refusal, in place of its SystemExit(1))
    dist = OmegaConf.select(cfg, "distributed", default=None)
    if dist is None or OmegaConf.select(dist, "mode", default=None) != "explicit" \
            or (OmegaConf.select(dist, "num_processes", default=None) or 0) < 2 \
            or os.environ.get(processes.LOCAL_CHILD_ENV):
        return
    from types import SimpleNamespace

    from gensbi_sharding.harness.devices import configure_devices, initialize_distributed, resolve_cpu_count
    from gensbi_sharding.harness.folder_verdict import quiet_join

    try:  # as run_steps joins them: the others wait there for this process, the coordinator's
        with quiet_join() if folder is None else contextlib.nullcontext():  # a callback's: its console kept clean
            initialize_distributed(dist.mode, coordinator_address=dist.coordinator_address,
                                   num_processes=dist.num_processes, process_id=dist.process_id,
                                   timeout_s=dist.timeout_s, heartbeat_s=dist.heartbeat_s)
            configure_devices(resolve_cpu_count(cfg.devices.cpu_count)[0], cfg.devices.platform)
            run_folder.claim_together(folder or SimpleNamespace(told=False),
                                      watch or SimpleNamespace(last_check_id=0), refused)
    except Exception as err:  # noqa: BLE001 - claim_together raises it on being told; any other: not told
        if err is not refused:
            log.debug("the refusal could not be told to the other processes: %s", err)

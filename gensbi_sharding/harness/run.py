"""``run(cfg)``: one job, as a flat, logged list of steps.

devices -> mesh -> rule -> data -> model (placed) -> optimizer (placed like the
model) -> train -> sample + C2ST -> outputs. Nothing reaches back up the chain.
A failure at any step ends the job with a one-line error (the traceback goes to
``error.txt`` in the job's folder, or to the console with ``debug=true``) and a
``metrics.json`` whose status is ``error``: in a multirun the next job still runs.
"""

from __future__ import annotations

import dataclasses
import logging
import time
import traceback
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from gensbi_sharding.harness import outputs
from gensbi_sharding.harness.config import ConfigError, check_table_against_mesh, mesh_spec, rule_table, validate
from gensbi_sharding.harness.devices import configure_devices, initialize_distributed

__all__ = ["run", "output_dir"]

log = logging.getLogger("gensbi_sharding")


def output_dir(cfg: DictConfig) -> Path:
    """The job's output folder: Hydra's, made absolute whatever ``hydra.job.chdir`` says."""
    from hydra.core.hydra_config import HydraConfig

    if HydraConfig.initialized():
        return Path(HydraConfig.get().runtime.output_dir).absolute()
    return Path(cfg.get("output_dir") or "outputs/run").absolute()


def run(cfg: DictConfig) -> dict[str, Any]:
    """Run one job described by ``cfg``; returns its metrics (``status`` "ok" or "error")."""
    out = output_dir(cfg)
    start = time.perf_counter()
    metrics: dict[str, Any] = {"status": "error", "config": OmegaConf.to_container(cfg, resolve=True)}
    try:
        outputs.ensure_fresh(out)
        if cfg.distributed.local_processes > 1 and cfg.distributed.process_id is None:
            from gensbi_sharding.harness.local_cluster import run_local_processes

            validate(cfg)
            metrics = run_local_processes(cfg, out)
        else:
            metrics.update(_run(cfg, out, metrics))
            metrics["status"] = "ok"
    except KeyboardInterrupt:
        metrics.update(status="interrupted", error="interrupted (Ctrl-C)")
        checkpoints = out / "checkpoints"
        hint = (f"; continue with train.resume={out} hydra.run.dir=<new folder>"
                if checkpoints.is_dir() and any(checkpoints.iterdir()) else "")
        log.error("interrupted%s", hint)
        metrics["wall_s"] = time.perf_counter() - start
        if not (out / "metrics.json").exists() and _is_writer():
            outputs.write_json(out / "metrics.json", metrics)
        raise
    except Exception as err:  # every failure ends this job cleanly; the sweep goes on
        if cfg.get("debug"):
            raise
        metrics["error"] = f"{type(err).__name__}: {err}"
        log.error("error: %s", metrics["error"])
        if not isinstance(err, FileExistsError):
            outputs.write_atomic(out / "error.txt", traceback.format_exc())
    metrics["wall_s"] = time.perf_counter() - start
    if not (out / "metrics.json").exists() and _is_writer():
        outputs.write_json(out / "metrics.json", metrics)
    return metrics


def _is_writer() -> bool:
    import jax
    from gensbi_sharding.harness.devices import backend_started

    return not backend_started() or jax.process_index() == 0


def _run(cfg: DictConfig, out: Path, metrics: dict[str, Any]) -> dict[str, Any]:
    for noisy in ("jax", "absl"):  # backend probing and orbax progress are noise here
        logging.getLogger(noisy).setLevel(logging.WARNING)
    validate(cfg)
    rule_name, table = rule_table(cfg.rule)
    metrics.update(rule=rule_name, model=cfg.model.name, data=cfg.data.name)

    log.info("[1/7] devices: cpu_count=%d, distributed=%s", cfg.devices.cpu_count, cfg.distributed.mode)
    dist = cfg.distributed
    initialize_distributed(dist.mode, coordinator_address=dist.coordinator_address,
                           num_processes=dist.num_processes, process_id=dist.process_id,
                           timeout_s=dist.timeout_s, heartbeat_s=dist.heartbeat_s)
    configure_devices(cfg.devices.cpu_count, cfg.devices.platform)

    import jax
    import numpy as np
    from flax import nnx

    import gensbi_sharding as contract
    from gensbi_sharding.harness import evaluate, registry, train
    from gensbi_sharding import checkpoint
    from gensbi_sharding.harness.pipeline import build_pipeline
    from gensbi_sharding.harness.state import build_state, resume_step_dir
    from gensbi_sharding import bytes_per_device, describe, partition_specs

    if jax.process_count() > 1:
        _tag_log_records(jax.process_index(), jax.process_count())
    log.info("process %d of %d, %d devices (%d local, %s)", jax.process_index(), jax.process_count(),
             jax.device_count(), jax.local_device_count(), jax.default_backend())

    log.info("[2/7] mesh: %s", OmegaConf.to_container(cfg.mesh))
    mesh = contract.resolve_mesh(mesh_spec(cfg.mesh))
    if mesh is not None:
        check_table_against_mesh(rule_name, table, tuple(mesh.axis_names))
    metrics.update(mesh_shape=list(mesh.devices.shape) if mesh else None,
                   mesh_axes=list(mesh.axis_names) if mesh else None, device_count=jax.device_count(),
                   data_parallel_size=contract.batch_size_divisor(mesh))

    if cfg.dry_run:
        return _dry_run(cfg, mesh, rule_name, table)

    log.info("[3/7] data: %s, %d simulations", cfg.data.name, cfg.data.num_simulations)
    resume_dir = resume_step_dir(cfg)
    start_step = int(resume_dir.name) if resume_dir else 0
    if start_step >= cfg.train.steps:
        raise ConfigError(f"train.resume={cfg.train.resume} is at step {start_step}, not below "
                          f"train.steps={cfg.train.steps}; raise train.steps to train further")
    registry.get_model(cfg.model.name)  # an unknown model fails here, before any simulation
    pipe = build_pipeline(cfg.data, seed=cfg.seed, mesh=mesh, shards=cfg.data.shards, skip=start_step)
    sims = pipe.sims
    if not pipe.val_batches:
        log.warning("no validation batch: the validation split is smaller than data.batch_size=%d; "
                    "final_val_loss will be null (raise data.num_simulations or data.val_fraction)",
                    cfg.data.batch_size)

    log.info("[4/7] model + optimizer: %s, rule %r, init=%s, AdamW(lr=%g)", cfg.model.name, rule_name,
             cfg.model.init, cfg.train.learning_rate)
    ts = build_state(cfg, dim_theta=sims.dim_theta, dim_x=sims.dim_x, mesh=mesh, rule_name=rule_name,
                     table=table, resume_dir=resume_dir)
    model, optimizer = ts.model, ts.optimizer
    report = describe((model, optimizer), mesh)
    log.info("model and optimizer state:\n%s", report)
    placements = partition_specs(model)
    param_bytes, opt_bytes = bytes_per_device(model), bytes_per_device(nnx.state(optimizer))
    params = nnx.state(model, nnx.Param)
    metrics.update(
        fallbacks=ts.fallbacks,
        param_count=int(sum(np.prod(v.shape) for v in jax.tree.leaves(params))),
        state_leaf_count=len(jax.tree.leaves(nnx.state((model, optimizer)))),
        param_bytes_per_device=max(param_bytes.values()) if param_bytes else 0,
        opt_bytes_per_device=max(opt_bytes.values()) if opt_bytes else 0,
        placements=placements, start_step=ts.start_step,
        state_scalar_count=report.n_scalars, state_bytes_per_device=report.max_bytes_per_device,
        largest_replicated=dict(report.largest_replicated),
        mesh_summary=dataclasses.asdict(report.mesh) if report.mesh else None)
    log.info("%d parameters; %s bytes/device of params, %s of optimizer state",
             metrics["param_count"], metrics["param_bytes_per_device"], metrics["opt_bytes_per_device"])

    log.info("[5/7] train: steps %d..%d, global batch %d", ts.start_step, cfg.train.steps, cfg.data.batch_size)
    functions, state = train.make_step_functions(model, optimizer, mesh)
    writer = checkpoint.CheckpointWriter(out / checkpoint.CHECKPOINT_SUBDIR, every=cfg.train.checkpoint_every,
                                         keep=cfg.train.keep, config=metrics["config"])
    try:
        result = train.train(functions, state, pipe.train_batches, steps=cfg.train.steps - ts.start_step,
                             key=ts.key, mesh=mesh, batch_size=cfg.data.batch_size,
                             log_every=cfg.train.log_every, val_batches=pipe.val_batches,
                             progress=jax.process_index() == 0, start_step=ts.start_step,
                             on_step=lambda step, st: writer.maybe_save(step, st, ts.key))
        writer.save(cfg.train.steps, result.state, ts.key)
    finally:
        writer.close()
    metrics.update(compile_s=result.compile_s, median_step_s=result.median_step_s,
                   samples_per_s=result.samples_per_s, final_train_loss=float(result.losses[-1]),
                   final_val_loss=result.val_loss, steps=result.steps)
    log.info("compile %.2f s, median step %.4f s, %.0f samples/s, train loss %.4f, val loss %s",
             result.compile_s, result.median_step_s, result.samples_per_s, result.losses[-1], result.val_loss)

    model, optimizer = nnx.merge(functions.graphdef, result.state)
    c2st = None
    if cfg.eval.enabled:
        log.info("[6/7] sample %d posterior draws, C2ST against the reference", cfg.eval.num_samples)
        graphdef, model_state = nnx.split(model)
        samples = evaluate.sample_posterior(
            lambda s, th, xx, t: nnx.merge(graphdef, s)(th, xx, t), sims.normalize_x(sims.observation),
            num_samples=cfg.eval.num_samples, num_steps=cfg.eval.ode_steps, seed=cfg.seed, mesh=mesh,
            dim_theta=sims.dim_theta, params=model_state)
        samples = sims.denormalize_theta(samples)
        reference = np.asarray(sims.reference_samples)
        c2st = evaluate.c2st(samples, reference, seed=cfg.seed, n_folds=cfg.eval.c2st_folds,
                             max_samples=cfg.eval.num_samples)
        log.info("C2ST %.3f (0.5 = indistinguishable from the reference posterior)", c2st)
        if _is_writer():
            outputs.write_npz(out / "posterior_samples.npz", samples=samples, reference=reference[:len(samples)])
            if cfg.eval.plot:
                evaluate.pair_plot(samples, reference, out / "posterior.png")
    metrics["c2st"] = c2st

    log.info("[7/7] outputs: %s", out)
    if _is_writer():
        text = "\n".join(f"{path}: {spec}" for path, spec in placements.items())
        outputs.write_atomic(out / "sharding.txt", text + "\n")
        outputs.write_npz(out / "train_losses.npz", losses=result.losses)
    return metrics


def _tag_log_records(index: int, count: int) -> None:
    """Prefix this process's log lines with its index: every process logs, to one console."""
    class Tag(logging.Filter):
        def filter(self, record):
            record.msg = f"[process {index}/{count}] {record.msg}"
            return True

    log.addFilter(Tag())


def _dry_run(cfg: DictConfig, mesh: Any, rule_name: str, table: dict) -> dict[str, Any]:
    """Compile the step for the mesh and rule; report memory and collectives, train nothing."""
    from gensbi_sharding.harness.data import task_dims
    from gensbi_sharding.harness.dry_run import dry_run
    from gensbi_sharding.harness.registry import get_data, get_model
    from gensbi_sharding.harness.state import partition_axis_for

    get_model(cfg.model.name), get_data(cfg.data.name)  # unknown names fail with the known ones
    if mesh is not None:
        from gensbi_sharding.harness.pipeline import check_global_batch

        check_global_batch(cfg.data.batch_size, mesh)
    dim_theta, dim_x = task_dims(cfg.data.name)
    log.info("[dry run] compile one train step: %s on %s, rule %r", cfg.model.name,
             dict(mesh.shape) if mesh is not None else "no mesh", rule_name)
    report = dry_run(cfg, mesh=mesh, rule_name=rule_name, table=table, dim_theta=dim_theta, dim_x=dim_x,
                     partition_axis=partition_axis_for(cfg, table, mesh))
    memory = report["memory"] or {}
    return {"dry_run": report, "fallbacks": report["fallbacks"], "compile_s": report["compile_s"],
            "step_memory_bytes_per_device": memory.get("total_bytes"),
            "collective_bytes_per_step": report["collective_bytes"]}

"""``dry_run=true``: what a (mesh, rule) choice costs per device, without training.

The model and its optimizer are built abstractly by the run's own builder
(``abstract_sharded``: shapes and dtypes at their planned shardings, no arrays), and
the real train step is lowered and compiled for those shardings. XLA's compiled memory analysis gives
the per-device bytes of arguments, outputs and temporaries; the compiled
program's text gives the collectives one step runs (count and bytes of
all-gather, all-reduce, reduce-scatter, all-to-all, collective-permute).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from omegaconf import DictConfig

from gensbi_sharding.harness.dry_run_sampler import sampler_line, sampler_memory
from gensbi_sharding.harness.dry_run_stop import staged_check
from gensbi_sharding.harness.python_words import in_python_words

if TYPE_CHECKING:  # annotations only: launch.py's start imports this module without JAX (test_start_imports)
    from jax.sharding import Mesh
    from gensbi_sharding.activations import PartitionAxis

__all__ = ["dry_run", "dry_run_metrics", "own_data_dims"]

log = logging.getLogger("gensbi_sharding")


def dry_run(cfg: DictConfig, *, mesh: Mesh | None, rule_name: str, table: dict, dim_theta: int,
            dim_x: int, partition_axis: PartitionAxis | None,
            stop_check: Callable[[], None] | None = None) -> dict[str, Any]:
    """Compile one train step for ``mesh`` and the rule; returns memory and collectives.

    ``stop_check`` (the run's ``PreemptionWatch.check``) is called between the stages (trace, build, lower, compile,
    report): a Ctrl-C or preemption signal heard during one (XLA's compile holds the main thread) stops the dry run
    at the stage's end, where it raises ``Preempted``; a dry run has no training steps to stop at.

    Raises
    ------
    StateDriftError
        When the step returns some state variable with another dtype or shape than it is
        given: training would fail at its second step.
    """
    import jax
    import jax.numpy as jnp
    from jax.sharding import NamedSharding, PartitionSpec as P

    from gensbi_sharding import (MODEL_AXIS, abstract_sharded, batch_axes, compiled_report, mesh_context,
                                 partition_specs)
    from gensbi_sharding.harness.run_report import state_figures
    from gensbi_sharding.harness.rule_config import as_rule
    from gensbi_sharding.harness.model_plan import dry_run_traces, model_axes_that_split, model_plan, trace_model
    from gensbi_sharding.harness.state import builder
    from gensbi_sharding.harness.ema import EMA
    from gensbi_sharding.harness.step_check import check_step_keeps_state
    from gensbi_sharding.harness.train import make_step_functions

    check = staged_check(stop_check)  # a stop names the stage it cut short, not "before training"
    rule = as_rule(rule_name, table)
    build = builder(cfg, dim_theta=dim_theta, dim_x=dim_x, partition_axis=partition_axis)
    with in_python_words(reword=False):  # run(cfg) from Python: a refusal's fix as cfg's settings
        plan = model_plan(trace_model(build, cfg, needed_by=dry_run_traces), mesh, rule, strict=bool(cfg.strict))
    fallbacks = dict(plan.fallbacks) if plan is not None else {}
    check("model trace")
    model, optimizer = abstract_sharded(build, mesh, rule, warn=False)
    ema = (abstract_sharded(lambda: EMA(build()[0], cfg.train.ema_decay), mesh, rule, warn=False)
           if cfg.train.ema_decay > 0 else None)  # placed as run.py places it: by the plan of the same rule
    functions, state = make_step_functions(model, optimizer, mesh, ema=ema)
    rows = cfg.data.batch_size
    row_sharding = None if mesh is None else NamedSharding(mesh, P(batch_axes(mesh) or None))
    batch = {"theta": jax.ShapeDtypeStruct((rows, dim_theta), jnp.float32, sharding=row_sharding),
             "x": jax.ShapeDtypeStruct((rows, dim_x), jnp.float32, sharding=row_sharding)}
    key = jax.eval_shape(lambda: jax.random.key(0))
    if mesh is not None:
        key = jax.ShapeDtypeStruct(key.shape, key.dtype, sharding=NamedSharding(mesh, P()))
    check("abstract build")
    start = time.perf_counter()
    with mesh_context(mesh):  # as training traces it (train.py): the model's activation constraints apply; was
        lowered = functions.train_step.lower(state, batch, key)  # left out, each warning of no active mesh
    # A step whose output state has other types than its input compiles, yet fails at its second
    # call: the dry run must refuse it as training would.
    check_step_keeps_state(state, lowered.out_info[0])
    check("lowering")
    compiled = lowered.compile()
    report = compiled_report(compiled)  # XLA's analysis of the compiled program: the compile's last part
    check("compile")  # heard during XLA's compile: its report is not the run's to print
    report.update(compile_s=time.perf_counter() - start, fallbacks=fallbacks)
    # The evaluation's program too: eval.num_samples rows after training, not data.batch_size (dry_run_sampler)
    report["sampler"] = sampler_memory(cfg, model, mesh, dim_theta=dim_theta, dim_x=dim_x) if cfg.eval.enabled else None
    check("sampler compile")
    # The state per device as a training run reports it, from the abstract shapes at their shardings:
    # the step's memory above adds the batch and XLA's temporaries.
    nodes = {"model": model, "optimizer": optimizer, **({"ema": ema} if ema is not None else {})}
    report["state"] = state_figures(nodes, mesh)
    report["placed_on_model"] = any(f"'{MODEL_AXIS}'" in spec for spec in partition_specs(model).values())
    report["model_axes_that_split"] = None if report["placed_on_model"] else model_axes_that_split(model, mesh, rule)
    _log(report)
    return report


def _log(report: dict[str, Any]) -> None:
    memory = report["memory"] or {}
    from gensbi_sharding.harness.units import format_bytes

    state = report["state"]
    lines = [f"{state['param_count']:,} parameters; per device: parameters "
             f"{format_bytes(state['param_bytes_per_device'])}, optimizer state "
             f"{format_bytes(state['opt_bytes_per_device'])} (the whole state"
             f"{', the EMA included' if state['ema_bytes_per_device'] else ', with no EMA under train.ema_decay=0'}: "
             f"{format_bytes(state['state_bytes_per_device'])}); training also keeps the best weights for early "
             f"stopping beside the step: {format_bytes(state['best_weights_bytes_per_device'])}", "",
             "dry run: one train step, per device (the best weights not included)",
             "| memory | bytes |", "|---|---|"]
    lines += [f"| {name.removesuffix('_bytes')} | {value} |" for name, value in memory.items()]
    # What one device sends per step (collectives_in_hlo's ring estimate), not the mesh's sum nor each op's result.
    lines += ["", "| collective | count | bytes sent per device |", "|---|---|---|"]
    lines += [f"| {op} | {c['count']} | {c['bytes']} |" for op, c in report["collectives"].items()]
    lines += [f"| total | {sum(c['count'] for c in report['collectives'].values())} | "
              f"{report['collective_bytes']} |", "", f"compile {report['compile_s']:.2f} s"]
    if report.get("sampler") is not None:
        lines += ["", sampler_line(report["sampler"], memory)]
    log.info("\n%s", "\n".join(lines))


def _real_run_fits(cfg: DictConfig, mesh: Mesh | None, rule_name: str, table: dict) -> None:
    """Logs the refusal a real run of ``cfg`` would meet on this host (``memory_check.check_fits``), if any.

    The dry run itself runs on (it sizes runs for larger machines); logged, so 25.2 GB per device reported on a
    23 GB host says that training here would be refused.
    """
    from gensbi_sharding.harness.config import ConfigError
    from gensbi_sharding.harness.memory_check import check_fits
    from gensbi_sharding.harness.rule_config import as_rule

    try:
        check_fits(cfg, mesh, as_rule(rule_name, table))
    except ConfigError as refused:  # the line is the whole change: the dry run's report and status stay as they were
        log.info("a real run on this host would be refused by its memory check (memory_check.check_fits): %s", refused)
    except Exception:  # e.g. devices that report no memory (a mocked GPU topology): nothing to compare, nothing said
        return


def own_data_dims(cfg: DictConfig) -> tuple[int, int]:
    """``(dim_theta, dim_x)`` of a registered data set that is no sbibm task: its factory run on 10 simulations, or
    on the run's ``data.num_simulations`` where it refuses so few.

    Parameters
    ----------
    cfg : DictConfig
        The run's config; ``data.name`` a data set registered with ``register_data``.

    Returns
    -------
    tuple of (int, int)
    """
    from gensbi_sharding.harness.own_data import check_factory_result
    from gensbi_sharding.harness.registry import get_data

    d = cfg.data

    def simulate(n):
        return get_data(d.name)(num_simulations=n, val_fraction=d.val_fraction, seed=cfg.seed,
                                num_observation=d.num_observation, theta_transform=d.theta_transform,
                                x_transform=d.x_transform, process_index=0, process_count=1)
    try:
        sims = simulate(min(10, d.num_simulations))
    except Exception:  # e.g. "needs at least 100 simulations, got 10": a budget the user never asked for
        sims = simulate(d.num_simulations)  # what training would simulate: its error is the user's own
    sims = check_factory_result(sims, d.name, x_transform=d.x_transform)
    return sims.dim_theta, sims.dim_x


def dry_run_metrics(cfg: DictConfig, mesh: Mesh | None, rule_name: str, table: dict,
                    stop_check: Callable[[], None] | None = None) -> dict[str, Any]:
    """The ``dry_run=true`` step of a run: compile the step for the mesh and rule; report memory and collectives.

    Checks the model and data names and the batch size first, then calls ``dry_run``; trains nothing.
    ``stop_check``: as ``dry_run`` takes it (a stop asked for during the dry run ends it, ``Preempted``).

    Returns
    -------
    dict
        The run's metrics of a dry run: ``dry_run`` (the whole report), ``fallbacks``,
        ``compile_s``, ``step_memory_bytes_per_device``, ``collective_bytes_per_step``, ``collectives`` (count
        and bytes per kind, ``{op: {"count", "bytes"}}``, as a training run records them; also ``dry_run.collectives``).
    """
    from gensbi_sharding.harness.data import task_dims
    from gensbi_sharding.harness.tasks import TASK_DIMS, TASKS
    from gensbi_sharding.harness.registry import get_data, get_model
    from gensbi_sharding.harness.native_notes import idle_axis_said
    from gensbi_sharding.harness.placement_hints import idle_model_axis_hint, splits_nothing_hint
    from gensbi_sharding.harness.state import activation_axes_read, partition_axis_for

    get_model(cfg.model.name), get_data(cfg.data.name)  # unknown names fail with the known ones
    if mesh is not None:
        import jax

        from gensbi_sharding.harness.pipeline import check_batch_config

        check_batch_config(cfg.data, mesh, shards=cfg.data.shards or jax.process_count(),
                           per_process=cfg.data.shards is None, processes=jax.process_count(), mesh_cfg=cfg.mesh)
    if cfg.data.name in TASKS:
        dim_theta, dim_x = TASK_DIMS.get(cfg.data.name) or task_dims(cfg.data.name)  # a dry run imports no sbibm_jax
    else:  # a data set of one's own: its dimensions are what its factory returns
        dim_theta, dim_x = own_data_dims(cfg)
    log.info("[3/3] dry run: compile one train step: %s on %s", cfg.model.name,
             f"{dict(mesh.shape)}, rule {rule_name!r}" if mesh is not None
             else f"no mesh (mesh=none): one device, nothing placed, rule {rule_name!r} unused")
    # As a training run's placement block says it: else tensor on (8, 1) reads as a choice of its own,
    # with figures equal to replicated's.
    shape, spec = dict(mesh.shape) if mesh is not None else None, cfg.mesh.spec or "none"
    partition_axis = partition_axis_for(cfg, table, mesh)
    hint = splits_nothing_hint(shape, table, rule_name, spec) or idle_axis_said(idle_model_axis_hint(
        shape, table, rule_name, spec, activation_axes_read(cfg, partition_axis)))  # said before XLA's warnings
    if hint:
        log.info("%s", hint)
    report = dry_run(cfg, mesh=mesh, rule_name=rule_name, table=table, dim_theta=dim_theta, dim_x=dim_x,
                     partition_axis=partition_axis, stop_check=stop_check)
    idle = idle_model_axis_hint(shape, table, rule_name, spec, activation_axes_read(cfg, partition_axis),
                                report["placed_on_model"], report["model_axes_that_split"])  # known once planned
    if idle and not hint:
        log.info("%s", idle)
    _real_run_fits(cfg, mesh, rule_name, table)
    staged_check(stop_check)("report")  # heard while the report was made: stopped, not "dry run done"
    memory = report["memory"] or {}
    return {"dry_run": report, "fallbacks": report["fallbacks"], "compile_s": report["compile_s"], **report["state"],
            "step_memory_bytes_per_device": memory.get("total_bytes"),
            "sampler_memory_bytes_per_device": (report["sampler"] or {}).get("memory", {}).get("total_bytes"),
            "collective_bytes_per_step": report["collective_bytes"], "model_axis_idle": idle is not None,
            # Top-level too, where a training run's metrics.json has them (was only under dry_run: one record
            # read at two paths); dry_run.collectives stays for readers of the older path.
            "collectives": report["collectives"]}

"""``dry_run=true``: what a (mesh, rule) choice costs per device, without training.

The model and its optimizer are built abstractly (``nnx.eval_shape``: shapes and
dtypes, no arrays), every variable gets the sharding the rule gives it
(``plan_shardings``, the contract's semantics), and the real train step is
lowered and compiled for those shardings. XLA's compiled memory analysis gives
the per-device bytes of arguments, outputs and temporaries; the compiled
program's text gives the collectives one step runs (count and bytes of
all-gather, all-reduce, reduce-scatter, all-to-all, collective-permute).
"""

from __future__ import annotations

import logging
import time
from typing import Any

from omegaconf import DictConfig, OmegaConf

__all__ = ["dry_run"]

log = logging.getLogger("gensbi_sharding")


def dry_run(cfg: DictConfig, *, mesh: Any, rule_name: str, table: dict, dim_theta: int,
            dim_x: int, partition_axis: Any) -> dict[str, Any]:
    """Compile one train step for ``mesh`` and the rule; returns memory and collectives."""
    import jax
    import jax.numpy as jnp
    import optax
    from flax import nnx
    from jax.sharding import NamedSharding, PartitionSpec as P

    from gensbi_sharding import batch_axes, compiled_report, plan_shardings
    from gensbi_sharding.harness.registry import get_model
    from gensbi_sharding.harness.train import make_step_functions
    from gensbi_sharding.harness.state import honors_annotations

    factory = get_model(cfg.model.name)
    hparams = {k: v for k, v in OmegaConf.to_container(cfg.model).items() if k not in ("name", "init")}
    tx = optax.adamw(cfg.train.learning_rate, weight_decay=cfg.train.weight_decay)

    def build():
        model = factory(dim_theta=dim_theta, dim_x=dim_x, rngs=nnx.Rngs(cfg.seed),
                        partition_axis=partition_axis, **hparams)
        return model, nnx.Optimizer(model, tx, wrt=nnx.Param)

    model, optimizer = nnx.eval_shape(build)
    fallbacks: dict[str, str] = {}
    if mesh is not None:
        specs, fallbacks = plan_shardings((model, optimizer), mesh, table,
                                          honor_annotations=honors_annotations(rule_name, table))
        for path, var in nnx.graph.iter_graph((model, optimizer)):
            key = "/".join(map(str, path))
            if isinstance(var, nnx.Variable) and key in specs:
                value = var.get_value()
                var.set_value(jax.ShapeDtypeStruct(value.shape, value.dtype,
                                                   sharding=NamedSharding(mesh, specs[key])))
    functions, state = make_step_functions(model, optimizer, mesh)
    rows = cfg.data.batch_size
    row_sharding = None if mesh is None else NamedSharding(mesh, P(batch_axes(mesh) or None))
    batch = {"theta": jax.ShapeDtypeStruct((rows, dim_theta), jnp.float32, sharding=row_sharding),
             "x": jax.ShapeDtypeStruct((rows, dim_x), jnp.float32, sharding=row_sharding)}
    key = jax.eval_shape(lambda: jax.random.key(0))
    if mesh is not None:
        key = jax.ShapeDtypeStruct(key.shape, key.dtype, sharding=NamedSharding(mesh, P()))
    start = time.perf_counter()
    compiled = functions.train_step.lower(state, batch, key).compile()
    report = compiled_report(compiled)
    report.update(compile_s=time.perf_counter() - start, fallbacks=fallbacks)
    _log(report)
    return report


def _log(report: dict[str, Any]) -> None:
    memory = report["memory"] or {}
    lines = ["dry run: one train step, per device",
             "| memory | bytes |", "|---|---|"]
    lines += [f"| {name.removesuffix('_bytes')} | {value} |" for name, value in memory.items()]
    lines += ["", "| collective | count | bytes |", "|---|---|---|"]
    lines += [f"| {op} | {c['count']} | {c['bytes']} |" for op, c in report["collectives"].items()]
    lines += [f"| total | {sum(c['count'] for c in report['collectives'].values())} | "
              f"{report['collective_bytes']} |", "", f"compile {report['compile_s']:.2f} s"]
    log.info("\n%s", "\n".join(lines))

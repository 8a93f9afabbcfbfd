"""The dry run's figure of the evaluation's device memory: the posterior sampler's program, compiled from shapes.

A run samples ``eval.num_samples`` posterior rows per observation after training, ``eval.batch_size`` rows at once
(``flow_sampler.FlowSampler``). Its program is not the train step's: a model that trains within a device's memory could
run out of it in the evaluation, after the training hours (10,000 rows of the GPU-sized Flux1 at once need 4.0 GB of
temporaries a device, its train step at data.batch_size=1024 2.2 GB). The dry run, read before the GPU hours, compiles
it too and says its per-device memory beside the step's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from omegaconf import DictConfig

if TYPE_CHECKING:  # annotations only: launch.py's start imports this module without JAX (test_start_imports)
    from jax.sharding import Mesh

__all__ = ["sampler_memory", "sampler_line"]


def sampler_memory(cfg: DictConfig, model: Any, mesh: Mesh | None, *, dim_theta: int, dim_x: int) -> dict[str, Any]:
    """Per-device memory of one block of the evaluation's ODE sampler (``compiled_report``'s ``memory``).

    Parameters
    ----------
    cfg : DictConfig
        The run's config: ``eval.num_samples``, ``eval.batch_size``, ``eval.ode_steps``.
    model : nnx.Module
        The abstract model (``abstract_sharded``): its parameters' shapes at their shardings, as sampled.
    mesh : jax.sharding.Mesh or None
        The run's mesh.
    dim_theta, dim_x : int
        The task's dimensions.

    Returns
    -------
    dict
        ``rows`` (integrated at once: ``min(eval.num_samples, eval.batch_size)``) and ``memory`` (bytes per device:
        ``argument_bytes``, ``output_bytes``, ``temp_bytes``, ..., ``total_bytes``).
    """
    from flax import nnx

    from gensbi_sharding import compiled_report
    from gensbi_sharding.harness.flow_sampler import FlowSampler

    graphdef, params, rest = nnx.split(model, nnx.Param, ...)
    sampler = FlowSampler(lambda p, th, xx, t: nnx.merge(graphdef, p, rest)(th, xx, t), rows=cfg.eval.num_samples,
                          num_steps=cfg.eval.ode_steps, mesh=mesh, params=params, batch_size=cfg.eval.batch_size)
    return {"rows": sampler.block, "memory": compiled_report(sampler.compiled_block(dim_x, dim_theta))["memory"] or {}}


def sampler_line(sampler: dict[str, Any], step_memory: dict[str, Any]) -> str:
    """The dry run's line of the evaluation's memory: "evaluation (posterior sampler, 2048 rows at once,
    eval.batch_size): per device 1.7 GB (temporaries 416 MB); the train step's: 7.2 GB", with a note where it needs
    more than the step."""
    from gensbi_sharding.harness.units import format_bytes

    memory = sampler["memory"]
    total, temp = memory.get("total_bytes"), memory.get("temp_bytes")
    step_total = step_memory.get("total_bytes")
    line = (f"evaluation (posterior sampler, {sampler['rows']} rows at once, eval.batch_size): per device "
            f"{format_bytes(total)} (temporaries {format_bytes(temp)}); the train step's: {format_bytes(step_total)}")
    if total is not None and step_total is not None and total > step_total:
        line += (f"; the evaluation needs more than training: lower eval.batch_size (e.g. "
                 f"eval.batch_size={max(sampler['rows'] // 4, 1)}) if the device cannot hold it")
    return line

"""The mesh of a run: ``mesh.*`` checked against the devices JAX has, then resolved (step 2 of ``run``).

Each refusal names the override that fits this machine; under ``mesh=auto`` the same facts only shape
the mesh chosen.
"""

from __future__ import annotations

from typing import Any

from omegaconf import DictConfig

from gensbi_sharding.harness.config import ConfigError
from gensbi_sharding.harness.distributed_checks import no_mesh_problem
from gensbi_sharding.harness.hints import mesh_devices_problem, model_axis_problem, overrides_named
from gensbi_sharding.harness.refusal import Refusal
from gensbi_sharding.harness.rule_config import check_table_against_mesh, mesh_spec

__all__ = ["run_mesh"]


def run_mesh(cfg: DictConfig, source: str, rule_name: str, table: dict) -> Any:
    """The run's ``jax.sharding.Mesh`` (None: ``mesh=none``), after JAX has started its devices.

    ``source`` says where the CPU device count came from (``resolve_cpu_count``): a dry run on simulated
    devices may plan for a wider model axis than this machine has. Raises ``ConfigError`` naming the fix.
    """
    import jax

    import gensbi_sharding as contract

    problem = mesh_devices_problem(cfg.mesh.devices, [d.id for d in jax.devices()], cfg.mesh.model_axis)
    if cfg.mesh.spec == "dict" and problem:
        raise ConfigError(problem)
    simulated = (bool(cfg.dry_run) and jax.default_backend() == "cpu" and jax.process_count() == 1
                 and not cfg.mesh.devices and source in ("default", "devices.cpu_count"))
    problem = model_axis_problem(cfg.mesh.model_axis, len(cfg.mesh.devices or jax.devices()), simulated,
                                 cfg.mesh.devices, cfg.data.batch_size)
    if cfg.mesh.spec == "dict" and problem:
        raise ConfigError(problem)
    problem = model_axis_problem(cfg.mesh.model_axis, jax.local_device_count())  # make_mesh's rule, named here
    if cfg.mesh.spec == "dict" and not cfg.mesh.devices and jax.process_count() > 1 and problem:
        # "2 devices are not divisible by model_axis=4" alone reads as the job's devices: it means each process's
        held = f"each of the {jax.process_count()} processes holds {jax.local_device_count()} device"
        raise ConfigError(Refusal(problem.reason.replace(": ", f": {held}{'s' * (jax.local_device_count() != 1)}; ", 1),
                                  problem.fix, after=f"{problem.after}; a model group stays inside one process"))
    with overrides_named("mesh", cfg.mesh, ConfigError):
        mesh = contract.resolve_mesh(mesh_spec(cfg.mesh))
    if mesh is None and jax.process_count() > 1:  # distributed=auto / explicit: known once JAX joined them
        raise ConfigError(no_mesh_problem(jax.process_count()))
    if mesh is not None:
        check_table_against_mesh(rule_name, table, tuple(mesh.axis_names))
    return mesh

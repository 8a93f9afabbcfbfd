"""The training state of a job on this host's CPU devices, checked before any folder is made: what ``strict=true``
refuses (a variable the rule cannot split) and whether the state fits in memory (``memory_check.fits_problem``).

Both were the run's alone (``model_plan`` as it built the model, ``check_fits`` once JAX had started its devices):
``python launch.py strict=true rule=tensor mesh=dict mesh.model_axis=8`` or ``model.width=100000`` was refused inside a
new ``outputs/<date>/<time>`` (``.hydra/``, ``launch.log``, ``error.txt``, ``metrics.json``), and a sweep ran its
earlier jobs first. Both need only the model's shapes (``nnx.eval_shape``) planned on the mesh's axes (an
``AbstractMesh``: no devices), and the host's memory: known before JAX's backend starts, which stays unstarted (the
run sets its device count after). GenSBI's models start that backend as they are imported or built
(``TRACED_STARTED``): for them the check makes the run's own device call first. Where the devices are a GPU's or
several processes', the run checks them alone, as it does a user's model.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # annotations only: launch.py's start imports this module without JAX (test_start_imports)
    from jax.sharding import AbstractMesh
    from omegaconf import DictConfig

__all__ = ["abstract_mesh", "state_problem", "TRACED_UNSTARTED", "TRACED_STARTED"]

#: The models traced here with JAX's backend left unstarted. Not a user's model, which may evaluate jnp at once even
#: under a trace and so start the backend with one CPU device: the run this check let through was then refused
#: "devices.cpu_count=8 was asked for, but JAX's backend already started with 1 CPU devices". Its run checks it.
TRACED_UNSTARTED = ("mlp", "transformer")
#: GenSBI's models, traced once the backend is started as the run starts it (``configure_devices`` with the run's
#: count and platform, the run's first JAX call: it accepts a backend so started). Built, they start it anyway:
#: importing ``gensbi.models`` evaluates tarflow's ``_LOG2PI`` with jnp, ``Flux1Params`` its hidden size (both at
#: once even under a trace, ``models/flux1.py``), so flux1 is checked before its run makes its new folder.
#: Where the backend started with another count (or the platform is refused), their run checks them.
TRACED_STARTED = ("flux1", "simformer")


def abstract_mesh(mesh: DictConfig, devices: int) -> AbstractMesh | None:
    """The ``("data", "model")`` mesh ``run_mesh`` builds of ``devices`` devices, as axes alone (a
    ``jax.sharding.AbstractMesh``); None for ``mesh=none``, or where ``mesh.*`` does not split them (refused by
    its own check, or a dry run's simulated devices: the run's to say).

    Parameters
    ----------
    mesh : DictConfig
        A config's ``mesh`` (``spec``, ``model_axis``, ``devices``).
    devices : int
        The job's device count (``resolve_cpu_count``).
    """
    from jax.sharding import AbstractMesh, AxisType

    from gensbi_sharding.harness.rule_config import MESH_AXES

    if mesh.spec is None:
        return None
    width = mesh.model_axis if mesh.spec == "dict" else 1
    count = len(mesh.devices) if mesh.spec == "dict" and mesh.devices else devices
    if width < 1 or count < width or count % width:
        return None
    return AbstractMesh((count // width, width), MESH_AXES, axis_types=(AxisType.Auto,) * len(MESH_AXES))


def state_problem(cfg: Any, devices: int) -> str | None:
    """Why a run on ``devices`` CPU devices of this host, in one process, would be refused as it builds its state:
    ``strict=true`` and a variable its rule cannot split (``model_plan.strict_problem``), or a state too large for
    the host's memory (``fits_problem``; not for a dry run, which allocates none); None where neither is known.

    Parameters
    ----------
    cfg : DictConfig
        The job's config (an sbibm task's: another data source's sizes are known once it runs).
    devices : int
        The job's CPU device count.
    """
    from gensbi_sharding.harness.memory_check import at_most_defaults
    from gensbi_sharding.harness.tasks import TASK_DIMS

    if cfg.data.name not in TASK_DIMS or cfg.model.name not in TRACED_UNSTARTED + TRACED_STARTED or not (
            cfg.strict or (not cfg.dry_run and not at_most_defaults(cfg))):
        return None  # a model at its preset's sizes without strict: nothing to trace (no JAX import)
    if cfg.model.name in TRACED_STARTED and not _started_as_the_run_starts(cfg, devices):
        return None
    import gensbi_sharding as gs
    from gensbi_sharding.harness.factory_keywords import model_builder
    from gensbi_sharding.harness.memory_check import fits_problem
    from gensbi_sharding.harness.model_plan import strict_problem, trace_model
    from gensbi_sharding.harness.rule_config import as_rule, rule_table

    mesh, rule, dims = abstract_mesh(cfg.mesh, devices), as_rule(*rule_table(cfg.rule)), TASK_DIMS[cfg.data.name]
    if mesh is None and cfg.mesh.spec is not None:  # mesh.* refused by its own check, or a dry run's simulated mesh
        return None
    try:
        if cfg.strict and mesh is not None:  # the model as the run builds it (state.builder), its optimizer left out
            build = model_builder(cfg, dim_theta=dims[0], dim_x=dims[1], partition_axis=None)
            model = trace_model(lambda: (build(),), cfg, needed_by="")
            if (problem := strict_problem(model, gs.plan_shardings(model, mesh, rule))) is not None:
                return problem
        return None if cfg.dry_run else fits_problem(cfg, mesh, rule, cpu=True, devices=devices)
    except Exception:  # noqa: BLE001 (a model that cannot be traced, a bad setting: the run names it as it builds)
        return None


def _started_as_the_run_starts(cfg: Any, devices: int) -> bool:
    """Start JAX's backend on ``devices`` CPU devices as the run does (``configure_devices``); False where it cannot
    (it started with another count, a platform refused: the run says so, in its words)."""
    import logging

    import jax

    from gensbi_sharding.harness.devices import configure_devices

    # Started here, not in GenSBI's import: JAX logs each backend it probes and lacks ("Unable to initialize backend
    # 'tpu'", INFO), which Hydra's logging showed before the run as two [HYDRA] lines the run itself never printed
    jax_log = logging.getLogger("jax")
    level, _ = jax_log.level, jax_log.setLevel(max(jax_log.getEffectiveLevel(), logging.WARNING))
    try:
        configure_devices(devices, cfg.devices.platform)
        jax.devices()
    except Exception:  # noqa: BLE001 (ConfigError, or a platform JAX fails on)
        return False
    finally:
        jax_log.setLevel(level)
    return True

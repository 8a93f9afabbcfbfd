"""The model's plan in a run: traced (or built) once, planned by the library, its fallbacks logged.

``trace_model`` traces the constructor for what must not allocate (sharded
initialisation, the dry run) and turns a constructor that cannot be traced into one
line naming what to do; ``model_plan`` plans the model and bounds what the console
shows of its fallbacks (``launch.log``, a process's ``process_<i>.log``, gets every path; ``strict=true``
refuses them).
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from omegaconf import DictConfig, OmegaConf

from gensbi_sharding.harness.config import ConfigError
from gensbi_sharding.harness.console import DETAILS, EVERY_PROCESS, job_log_name
from gensbi_sharding.harness.fallback_words import harness_plan
from gensbi_sharding.harness.python_words import said_as, setting

if TYPE_CHECKING:  # annotations only: launch.py's start imports this module without JAX (test_start_imports)
    from jax.sharding import AbstractMesh, Mesh
    from gensbi_sharding.rules import Rule, RuleTable
    from gensbi_sharding.sharding import Plan

__all__ = ["trace_model", "model_plan", "strict_problem", "heads_hint", "details_dropped", "sharded_init_traces",
           "dry_run_traces"]

log = logging.getLogger("gensbi_sharding")


def trace_model(build: Callable[[], tuple], cfg: DictConfig, *, needed_by: str | Callable[[], str]) -> Any:
    """``nnx.eval_shape`` of the model (nothing allocated), for what ``needed_by`` names (a function is said when
    refused: ``sharded_init_traces``, ``dry_run_traces``, in the caller's words, launch.py's or cfg's settings).

    Raises ``ConfigError`` naming what to do instead when the constructor cannot be traced:
    it computes a value and reads it back (GenSBI's ``pos1d`` id embedding sizes its table
    with ``jnp.maximum`` of two ints; ``int(w.max())`` anywhere does the same).
    """
    import jax
    from flax import nnx

    reads_back = (jax.errors.ConcretizationTypeError, jax.errors.TracerArrayConversionError,
                  jax.errors.TracerBoolConversionError, jax.errors.TracerIntegerConversionError)
    try:
        return nnx.eval_shape(lambda: build()[0])
    except reads_back as err:
        strategy = OmegaConf.select(cfg, "model.id_embedding_strategy", default=None)
        cause = (f" (GenSBI's pos1d id embedding: model.id_embedding_strategy=[{','.join(strategy)}]"
                 "; absolute or rope1d can be traced)" if strategy is not None and "pos1d" in list(strategy) else "")
        said = needed_by() if callable(needed_by) else needed_by
        raise ConfigError(f"model={cfg.model.name} cannot be traced{cause}: its constructor computes a value and "
                          f"reads it back ({type(err).__name__}: {str(err).splitlines()[0]}); {said}") from None


def sharded_init_traces() -> str:
    """``trace_model``'s ``needed_by`` for sharded initialisation."""
    return (f"model.init=sharded traces it to build it piece by piece: set "
            f"{setting('model.init', 'eager', 'model.init=eager')} (built whole on one device, then placed)")


def dry_run_traces() -> str:
    """``trace_model``'s ``needed_by`` for the dry run."""
    return ("dry_run=true traces it so as to allocate nothing, so this model has no dry run: "
            + said_as("drop dry_run=true", f"set {setting('dry_run', False)}")
            + f" and train it with {setting('model.init', 'eager', 'model.init=eager')}")


def model_plan(model: Any, mesh: Mesh | None, rule: str | RuleTable | Rule, *, strict: bool) -> Plan | None:
    """The plan of ``model`` (concrete or from ``trace_model``); None without a mesh.

    Its fallbacks are logged once, their fixes in the caller's settings (``fallback_words``), as the returned plan
    holds them. Raises ``ConfigError`` with ``strict`` when any.
    """
    if mesh is None:
        return None
    import gensbi_sharding as gs

    plan = harness_plan(gs.plan_shardings(model, mesh, rule))  # its fixes as the caller's settings, not a table's
    if not plan.fallbacks:
        return plan
    # A model may fail one annotation in every block (hundreds of paths): the console line and the error
    # are bounded (grouped by reason), launch.log gets every path.
    logging.getLogger(DETAILS).warning("every variable rule %r cannot split (%d):\n%s", rule.name,
                                       len(plan.fallbacks), "\n".join(f"  {p}: {r}" for p, r in plan.fallbacks.items()))
    if strict:
        raise ConfigError(strict_problem(model, plan))
    log.warning("%s", plan.fallback_message(every=f"metrics.json 'fallbacks' and {job_log_name()}"),
                extra=EVERY_PROCESS)
    if (hint := heads_hint(model, plan)) is not None:
        log.warning("%s", hint, extra=EVERY_PROCESS)
    return plan


def strict_problem(model: Any, plan: Plan) -> str | None:
    """Why ``strict=true`` refuses ``plan`` of ``model`` (its fallbacks, and the ``mesh.model_axis`` sizes under which
    its rule honours every annotation); None without fallbacks. ``plan``'s mesh may be an ``AbstractMesh``: the check
    before any folder plans on the mesh's axes alone (``state_check``)."""
    if not plan.fallbacks:
        return None
    plan = harness_plan(plan)  # state_check's plan is the library's: its fixes as the caller's settings
    widths = _model_axes_without_fallbacks(model, plan.mesh, plan.rule)
    axis = said_as(f"mesh.model_axis={' or '.join(map(str, widths))}",
                   " or ".join(setting("mesh.model_axis", width) for width in widths))
    fix = f"Set {axis} (every annotation honoured), or f" if widths else "F"
    heads = f" {hint}." if (hint := heads_hint(model, plan)) is not None else ""
    return (f"strict=true and rule {plan.rule.name!r} cannot split {len(plan.fallbacks)} variable(s); without strict, "
            f"{plan.fallback_message(every=job_log_name())}.{heads} {fix}ix the annotation or dimension, or set "
            + setting("strict", False, "strict=false"))


def heads_hint(model: Any, plan: Plan) -> str | None:
    """For GenSBI's Flux1 or Simformer in the harness's wrapper: the ``model.num_heads`` whose attention the rule
    splits, when the heads' dimensions do not divide by the mesh axes ``heads`` maps to; None otherwise (no fallback,
    another model, ``heads`` unsplit).

    The library's fallback warning names the logical axis and a mesh that fits; a GenSBI user's own lever is the
    hyperparameter that sizes it (Simformer's ``(embed, heads, head_dim)`` kernels: ``num_heads`` itself, a divisor
    of ``qkv_features``; Flux1's ``(embed, heads)``: its attention width ``qkv_features``, 3x for the fused
    query/key/value, ``sum(axes_dim)`` or ``val_emb_dim + id_emb_dim`` times ``num_heads``).

    Parameters
    ----------
    model : nnx.Module
        The run's model, concrete or abstract (``trace_model``); only a ``Flux1Velocity`` / ``SimformerVelocity``
        is read.
    plan : Plan
        Its plan (``plan.mesh`` may be an ``AbstractMesh``).

    Returns
    -------
    str or None
        One sentence naming the ``model.num_heads`` (Simformer: with ``model.qkv_features`` where no multiple of the
        axis size divides the attention width) under which the rule splits every attention kernel.
    """
    axes = plan.rule.table.get("heads")
    names = (axes,) if isinstance(axes, str) else tuple(axes or ())
    size = math.prod(plan.mesh.shape.get(a, 1) for a in names)
    inner = getattr(model, "simformer", None) or getattr(model, "flux", None)
    params = getattr(inner, "params", None)
    if not plan.fallbacks or size < 2 or params is None or not hasattr(params, "num_heads"):
        return None
    heads, over = params.num_heads, f"mesh axis {'/'.join(map(repr, names))} of size {size}"
    if hasattr(params, "dim_joint"):  # Simformer: one kernel dimension per head
        qkv = params.qkv_features or params.val_emb_dim + params.id_emb_dim + params.cond_emb_dim
        if heads % size == 0:
            return None
        fits = [n for n in range(size, qkv + 1, size) if qkv % n == 0]
        qkv_fix = -(-qkv // size) * size
        fix = (setting("model.num_heads", min(fits, key=lambda n: (abs(n - heads), n))) if fits else
               said_as(f"model.num_heads={size} model.qkv_features={qkv_fix}",
                       f"{setting('model.num_heads', size)} and {setting('model.qkv_features', qkv_fix)}"))
        return (f"model=simformer's attention stays whole: model.num_heads={heads} heads do not split over {over}; "
                f"{fix} splits them (a multiple of {size} that divides the attention width)")
    width = params.qkv_features
    if width % size == 0:
        return None
    per = width // heads  # a head's features: sum(axes_dim), or val_emb_dim + id_emb_dim
    step = size // math.gcd(per, size)
    fix = setting("model.num_heads", -(-heads // step) * step)
    return (f"model=flux1's attention width {width} (model.num_heads={heads} x {per} features) does not split over "
            f"{over}, so its projections stay whole; {fix} splits them")


@contextlib.contextmanager
def details_dropped() -> Iterator[None]:
    """While open, the ``DETAILS`` logger's records (``model_plan``'s every fallback path) go nowhere: for a caller
    with no job log (``sample_posterior`` from Python), where Python's last-resort handler showed them on the console
    beside the one-line fallback warning, the same fallback said twice."""
    def drop(record: logging.LogRecord) -> bool:
        return False

    details = logging.getLogger(DETAILS)
    details.addFilter(drop)
    try:
        yield
    finally:
        details.removeFilter(drop)


def _model_axes_without_fallbacks(model: Any, mesh: Mesh | AbstractMesh, rule: str | RuleTable | Rule) -> list[int]:
    """The other sizes of the "model" axis of a ("data", "model") mesh of as many devices, with both axes over 1 (on
    an axis of size 1 every annotation holds and nothing is split), under which ``rule`` honours every annotation of
    ``model``, largest first (planning on an ``AbstractMesh``: its axes alone, nothing moves)."""
    import gensbi_sharding as gs
    from jax.sharding import AbstractMesh, AxisType

    if tuple(mesh.axis_names) != ("data", gs.MODEL_AXIS):
        return []
    size, now = math.prod(mesh.shape.values()), mesh.shape[gs.MODEL_AXIS]
    sizes = [m for m in range(size - 1, 1, -1) if size % m == 0 and m != now]
    return [m for m in sizes if not gs.plan_shardings(
        model, AbstractMesh((size // m, m), tuple(mesh.axis_names), axis_types=(AxisType.Auto,) * 2), rule).fallbacks]


def model_axes_that_split(model: Any, mesh: Mesh | None, rule: str | RuleTable | Rule) -> list[int] | None:
    """The other sizes of the "model" axis of a ("data", "model") mesh of as many devices under which ``rule`` splits
    some variable of ``model`` over "model", largest first (None: no such mesh); what an idle model axis's hint names
    (not "a mesh.model_axis the widths divide by": none might, and a divisor of one width need not be one)."""
    import gensbi_sharding as gs
    from jax.sharding import AbstractMesh, AxisType

    if mesh is None or tuple(mesh.axis_names) != ("data", gs.MODEL_AXIS):
        return None
    size, now = math.prod(mesh.shape.values()), mesh.shape[gs.MODEL_AXIS]

    def splits(m: int) -> bool:
        abstract = AbstractMesh((size // m, m), tuple(mesh.axis_names), axis_types=(AxisType.Auto,) * 2)
        return any(f"'{gs.MODEL_AXIS}'" in str(s) for s in gs.plan_shardings(model, abstract, rule).specs.values())

    return [m for m in range(size, 1, -1) if size % m == 0 and m != now and splits(m)]

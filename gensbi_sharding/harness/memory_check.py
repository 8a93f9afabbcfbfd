"""Whether a run's training state and simulations can fit in memory: checked before anything is allocated.

``model.width=100000`` ended in XLA's ``RESOURCE_EXHAUSTED: Out of memory allocating 80000000000 bytes``,
``data.num_simulations=2000000000`` the same from the simulator (then the kernel's OOM killer), and
``model.depth=100000000`` built Python modules for minutes, deaf to SIGTERM: none named the setting. Here the
model is traced (``nnx.eval_shape``: shapes only) and planned on the run's mesh and rule; its state per device is
parameters x (1 + AdamW's two moments + the EMA + the best weights early stopping keeps), a lower bound (no
activations), compared with the devices' memory (on CPU: the host's, shared by its simulated devices).
"""

from __future__ import annotations

import math
import os
import re
from typing import TYPE_CHECKING, Any

from omegaconf import DictConfig, OmegaConf

from gensbi_sharding.harness.config import ConfigError
from gensbi_sharding.harness.composed_defaults import composed_section
from gensbi_sharding.harness.factory_keywords import model_builder, model_settings
from gensbi_sharding.harness.fitting_values import largest_fitting
from gensbi_sharding.harness.model_checks import check_model
from gensbi_sharding.harness.override_keys import schema_default
from gensbi_sharding.harness.refusal import Refusal
from gensbi_sharding.harness.processes import LOCAL_CHILD_ENV
from gensbi_sharding.harness.python_words import said_as, setting
from gensbi_sharding.harness.units import format_bytes, is_int, is_number

if TYPE_CHECKING:  # annotations only: launch.py's start imports this module without JAX (test_start_imports)
    from jax.sharding import AbstractMesh, Mesh
    from gensbi_sharding.rules import Rule, RuleTable

__all__ = ["check_fits", "fits_problem", "check_draw_fits", "simulations_problem", "state_bytes_per_device",
           "host_available_bytes", "MOMENTS", "DATA_COPIES"]

MOMENTS = 2  # AdamW's mu and nu, each shaped and placed like the parameters
DATA_COPIES = 4  # the simulations on the host: as simulated, as NumPy float32, transformed, normalised
_LAYERS = re.compile(r"depth|layers")  # layer counts: the parameters grow linearly with each
_TRACED_LAYERS = 2  # a layer count above this is traced at 2 and 3, and extrapolated (a huge one never built)


def host_available_bytes() -> int | None:
    """Memory the host can still give (``MemAvailable``, bounded by a cgroup's ``memory.max``); None if unknown."""
    found = []
    try:
        with open("/proc/meminfo") as meminfo:
            found += [int(line.split()[1]) * 1024 for line in meminfo if line.startswith("MemAvailable:")]
    except OSError:
        pass
    try:
        with open("/sys/fs/cgroup/memory.max") as limit, open("/sys/fs/cgroup/memory.current") as used:
            text = limit.read().strip()
            if text.isdigit():
                found.append(int(text) - int(used.read().strip()))
    except (OSError, ValueError):
        pass
    return min(found) if found else None


def check_draw_fits(num_samples: int, dims: int, available: int | None = None, setting: str | None = None) -> None:
    """``ValueError`` if drawing ``num_samples`` posterior samples (theta and x: ``dims`` floats each) cannot fit.

    A lower bound, 8 float32 copies per sample (noise, ODE state, midpoint, velocities, the kept rows), against
    ``available`` bytes (default the host's); without it ``sample.py --num-samples 3000000000`` built the model,
    then ended in NumPy's or XLA's out-of-memory traceback. ``setting``: how the message names the value as its
    caller's user gave it (``--num-samples 3000000000``); default ``num_samples=3,000,000,000``.
    """
    available, per_sample = host_available_bytes() if available is None else available, 8 * 4 * dims
    if available is not None and num_samples * per_sample > available:
        named = setting or f"num_samples={num_samples:,}"
        raise ValueError(f"{named} needs over {format_bytes(num_samples * per_sample)} to draw, "
                         f"the host has {format_bytes(available)} available: pass under {available // per_sample:,} "
                         "(a lower bound: fewer still for a wide model), or draw in parts with different seeds and "
                         "concatenate them")


def _traced_bytes(cfg: DictConfig, hparams: dict, mesh: Mesh | AbstractMesh | None, rule: str | RuleTable | Rule,
                  dims: tuple[int, int]) -> tuple[int, int]:
    """``(parameter bytes, other bytes)`` on the fullest device of the model of ``hparams``, traced, planned."""
    import jax
    from flax import nnx

    import gensbi_sharding as gs

    model = nnx.eval_shape(model_builder(cfg, dim_theta=dims[0], dim_x=dims[1], partition_axis=None, settings=hparams))
    specs = gs.plan_shardings(model, mesh, rule).specs if mesh is not None else {}
    params = others = 0
    for path, var in nnx.to_flat_state(nnx.state(model)):
        spec = tuple(specs.get("/".join(map(str, path)), ()))
        for leaf in jax.tree.leaves(var.get_value()):
            if not hasattr(leaf, "shape"):
                continue
            size = leaf.dtype.itemsize  # Python ints: a width of 10**10 overflows NumPy's int64 products
            for i, dim in enumerate(leaf.shape):
                axes = spec[i] if i < len(spec) and spec[i] is not None else ()
                split = math.prod(mesh.shape[a] for a in ((axes,) if isinstance(axes, str) else axes))
                size *= -(-dim // split)
            params, others = (params + size, others) if isinstance(var, nnx.Param) else (params, others + size)
    return params, others


def state_bytes_per_device(cfg: DictConfig, mesh: Mesh | AbstractMesh | None, rule: str | RuleTable | Rule,
                           dims: tuple[int, int], hparams: dict | None = None) -> int:
    """The training state's bytes on the fullest device: parameters x (1 + ``MOMENTS`` + the EMA + the best
    weights) + the model's other variables, from a trace of ``cfg.model`` (or ``hparams``) planned on ``mesh``.

    A layer count above 2 (a key naming depth or layers) is extrapolated from traces at 2 and 3: exact for a
    model linear in each, a lower bound where two multiply; a huge one is never built.
    """
    hparams = dict(hparams if hparams is not None else model_settings(cfg.model))
    deep = {k: v for k, v in hparams.items() if _LAYERS.search(k) and is_int(v) and v > _TRACED_LAYERS}
    base = {**hparams, **{k: _TRACED_LAYERS for k in deep}}
    params, others = base_params, base_others = _traced_bytes(cfg, base, mesh, rule, dims)
    for key, value in deep.items():
        more_params, more_others = _traced_bytes(cfg, {**base, key: _TRACED_LAYERS + 1}, mesh, rule, dims)
        params += (value - _TRACED_LAYERS) * max(more_params - base_params, 0)
        others += (value - _TRACED_LAYERS) * max(more_others - base_others, 0)
    return params * (1 + MOMENTS + (cfg.train.ema_decay > 0) + 1) + others


def check_fits(cfg: DictConfig, mesh: Mesh | None, rule: str | RuleTable | Rule, available: int | None = None) -> None:
    """``ConfigError`` naming the settings responsible when the state or the simulations cannot fit in memory.

    Parameters
    ----------
    cfg : DictConfig
        The run's config (an sbibm task's; another data source's sizes are unknown before it runs: not checked).
    mesh : jax.sharding.Mesh or None
        The run's mesh (None: one device holds everything).
    rule : gensbi_sharding.Rule
        The run's rule: the plan says what each device holds.
    available : int, optional
        The memory to compare with (bytes); default: on CPU the host's available memory, shared by this
        process's devices, else the smallest device's ``bytes_limit``.

    Raises
    ------
    ConfigError
        With the estimated and available bytes, the settings responsible and their defaults; its fixes as cfg's
        settings inside ``python_words.in_python_words`` (``run(cfg)`` from Python), else launch.py's overrides.
    """
    import jax

    cpu = jax.default_backend() == "cpu"
    # distributed=local's processes all live on this host: each checked its own share against the whole host
    # (and was told a budget that fit one share), so together they ran into the kernel's OOM killer.
    sharing = jax.process_count() if os.environ.get(LOCAL_CHILD_ENV) else 1
    limits = None if cpu or available is not None else [
        (d.memory_stats() or {}).get("bytes_limit") for d in jax.local_devices()]
    problem = fits_problem(cfg, mesh, rule, cpu=cpu, devices=jax.local_device_count(), processes=jax.process_count(),
                           sharing=sharing, limits=limits, available=available)
    if problem is not None:
        raise ConfigError(problem)


def fits_problem(cfg: DictConfig, mesh: Mesh | AbstractMesh | None, rule: str | RuleTable | Rule, *, cpu: bool,
                 devices: int, processes: int = 1, sharing: int = 1, limits: list | None = None,
                 available: int | None = None) -> str | None:
    """``check_fits``' refusal, or None, from facts a caller gives: needs no JAX backend, so the check before any
    folder (``state_check``) asks it of a job on this host's CPU devices, its mesh an ``AbstractMesh``.

    ``cpu``: the devices are the host's (simulated) CPUs; ``devices``: this process's; ``processes``: the JAX
    processes, ``sharing`` of them on this host; ``limits``: each device's ``bytes_limit`` (not CPU); ``available``:
    the bytes to compare with (default the host's).
    """
    from gensbi_sharding.harness.tasks import TASK_DIMS

    if cfg.data.name not in TASK_DIMS:
        return None
    dims = TASK_DIMS[cfg.data.name]  # not task_dims: sbibm_jax's import (~1 s) is the data step's, not a refusal's
    host = available if available is not None else host_available_bytes()
    data = cfg.data.num_simulations // processes * sum(dims) * 4 * DATA_COPIES * sharing
    if (problem := simulations_problem(cfg, processes, sharing, host)) is not None:
        return problem
    if cpu or available is not None:  # CPU devices share the host's memory with the simulations
        room = None if host is None else host - data * cpu
    else:
        room = min(limits) if limits and None not in limits else None
    if room is None:
        return None
    devices = devices * sharing if cpu and mesh is not None else 1
    if available is None and at_most_defaults(cfg):
        return None  # a model no larger than its preset's defaults fits anywhere the harness runs: spare the trace
    try:
        need = state_bytes_per_device(cfg, mesh, rule, dims) * devices
    except Exception:  # a model that cannot be traced, or a bad setting: the run names it where it builds the model
        return None
    if need <= room:
        return None
    where = f"{devices} simulated devices x {format_bytes(need // devices)}" if devices > 1 else "per device"
    return (f"the training state cannot fit: model={cfg.model.name} under rule {rule.name!r} needs at "
            f"least {format_bytes(need)} ({where}: parameters x (1 + {MOMENTS} AdamW moments + the EMA + "
            f"the best weights), activations not counted), but {format_bytes(room)} is available"
            f"{_responsible(cfg, mesh, rule, dims, devices, room)}")


def simulations_problem(cfg: DictConfig, processes: int = 1, sharing: int = 1, host: int | None = None) -> str | None:
    """Why ``data.num_simulations`` of an sbibm task cannot fit in the host's memory (``DATA_COPIES`` copies of each
    process's share of theta and x, float32), naming a budget that fits; None if it fits, or is not known to.

    ``processes``: the processes that share the budget; ``sharing``: how many of them live on this host;
    ``host``: the bytes available (default ``host_available_bytes``). Needs no JAX backend: a sweep's pre-check
    (``job_check.job_problem``) refuses such a job before the first one trains, not after it.
    """
    from gensbi_sharding.harness.tasks import TASK_DIMS

    if cfg.data.name not in TASK_DIMS:
        return None
    host = host_available_bytes() if host is None else host
    row = sum(TASK_DIMS[cfg.data.name]) * 4 * DATA_COPIES  # bytes of one simulation on the host
    data = cfg.data.num_simulations // processes * row * sharing
    if host is None or data <= host:
        return None
    shared = f" ({sharing} processes of distributed=local share it)" if sharing > 1 else ""
    return Refusal(f"data.num_simulations={cfg.data.num_simulations} cannot fit: its simulations need about "
                   f"{format_bytes(data)} on this host{shared} ({DATA_COPIES} copies of theta and x as float32), but "
                   f"{format_bytes(host)} is available",
                   f"data.num_simulations={_round_down(host // 2 // row // sharing * processes)}",
                   after=" or fewer (half of it)")


def _responsible(cfg: DictConfig, mesh: Mesh | AbstractMesh | None, rule: str | RuleTable | Rule, dims: tuple[int, int],
                 devices: int, available: int) -> str:
    """"; the setting(s) responsible: model.width=100000 (...); lower it, e.g. model.width=128" or the like: a value
    offered is estimated as the check does, and fits (not width 128, needing 11.4 MB of 10 MB): the
    default, or the largest that fits (``fitting_values``; halving would give width 64 where 119 fits)."""
    # The defaults named are those the command's composition gives (experiment=quick's width 32, not 128).
    hparams, defaults = model_settings(cfg.model), composed_section(cfg, "model")
    raised = [k for k, v in hparams.items() if k in defaults and _raised(v, defaults[k])]
    need = lambda values: state_bytes_per_device(cfg, mesh, rule, dims, {**hparams, **values}) * devices  # noqa: E731
    checked = lambda values: (check_model(OmegaConf.merge(cfg.model, values)), need(values))[1]  # noqa: E731
    try:
        at_default = {k: need({k: defaults[k]}) for k in raised}
        alone = [k for k in raised if at_default[k] <= available]
        start = {k: defaults[k] for k in alone or raised}
        fix, least = (start, None) if alone else largest_fitting(checked, start, available)
    except Exception:  # a default that does not go with the other settings: name none
        raised = []
    split = "split the weights (" + said_as("rule=fsdp, or rule=tensor with mesh.model_axis > 1",
                                           "cfg composed with rule=fsdp, or rule=tensor with cfg.mesh.model_axis > 1"
                                           ) + ") or use fewer devices"
    if not raised:
        return f"; {split}"
    named = ", ".join(f"model.{k}={_override(hparams[k])} (at its default {_override(defaults[k])}: "
                      f"{format_bytes(at_default[k])})" for k in sorted(start, key=at_default.get))
    if fix is None:  # no smaller value fits either: the state must be split, not shrunk
        return (f"; the setting(s) responsible: {named}; no smaller value fits ({_override(least[0])} still "
                f"needs {format_bytes(least[1])}): {split}")
    lowered = said_as(_override(fix), " and ".join(setting(f"model.{k}", v) for k, v in fix.items()))
    return f"; the setting(s) responsible: {named}; lower {'it' if len(fix) == 1 else 'them'}, e.g. {lowered}"


def _defaults(cfg: DictConfig) -> dict:
    """The model's settings' schema defaults: a bound below which any model fits (no composition on every run)."""
    schema = OmegaConf.get_type(cfg.model)
    found = {k: schema_default(schema, k) for k in cfg.model}
    return {k: value for k, (has, value) in found.items() if has}


def at_most_defaults(cfg: DictConfig) -> bool:
    """Whether every integer setting of a typed model config is at or below its default (none raised)."""
    defaults = _defaults(cfg)
    settings = model_settings(cfg.model)
    return bool(defaults) and not any(k in defaults and _raised(v, defaults[k]) for k, v in settings.items())


def _raised(value: Any, default: Any) -> bool:
    """Whether a size setting is above its default: a number (``mlp_ratio`` too, not only integers), or a list
    with an element above its default's (flux1's ``axes_dim``); a list of another length counts as raised.

    Integers alone were compared: ``model.axes_dim=[100000,0]`` or ``model.mlp_ratio=100000.0`` skipped the check
    as "at its defaults" and ran into XLA's unnamed out-of-memory error.
    """
    if is_number(value, finite=False) and is_number(default, finite=False):
        return value > default
    if isinstance(value, (list, tuple)) and isinstance(default, (list, tuple)):
        return len(value) != len(default) or any(_raised(v, d) for v, d in zip(value, default))
    return False


def _override(value: Any) -> str:
    """``[8, 0]`` -> ``[8,0]``: a list as one command-line override (no space to split it); a dict: its overrides."""
    if isinstance(value, dict):
        return " ".join(f"model.{k}={_override(v)}" for k, v in value.items())
    return f"[{','.join(map(_override, value))}]" if isinstance(value, (list, tuple)) else str(value)


def _round_down(n: int) -> int:
    """``123456`` -> ``120000``: two significant digits, rounded down (a budget to type)."""
    scale = 10 ** max(len(str(max(n, 1))) - 2, 0)
    return max(n // scale * scale, 1)

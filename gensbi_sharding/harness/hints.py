"""Errors about a value (batch size, mesh, mesh axis, a library argument) that name the override to type.

A hint that trades one violated constraint for another sends the user in a circle (``data.batch_size=45`` ->
"set 48" -> "at most 45"), so each kind of value is decided in one function here, every message about it from it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from gensbi_sharding.batch_sizes import nearest_batch_sizes
from gensbi_sharding.harness.cpu_count import count_setting
# closest_name, override_literal, overrides_named: re-exported (one matcher, override_words')
from gensbi_sharding.harness.override_words import closest_name, override_literal, overrides_named  # noqa: F401
from gensbi_sharding.harness.python_words import said_as, setting
from gensbi_sharding.harness.refusal import Refusal

if TYPE_CHECKING:  # annotations only: launch.py's start imports this module without JAX (test_start_imports)
    from jax.sharding import Mesh
    from omegaconf import DictConfig

__all__ = ["batch_size_problem", "mesh_alternatives", "device_alternatives", "kept_on_other_meshes",
           "model_axis_problem", "mesh_devices_problem", "overrides_named", "mesh_axis_fix", "mesh_spec_fix",
           "closest_name", "override_literal"]


def batch_size_problem(batch_size: int, *, shards: int, data_parallel: int, train_rows: int,
                       dropped: int = 0, per_process: bool = False, budget: Any = None) -> str | None:
    """What is wrong with a global batch size, and the one value that fixes all of it.

    The one place that decides a batch size: every batch-size message of the harness comes from here.

    Parameters
    ----------
    batch_size : int
        The global batch size (``data.batch_size``).
    shards : int
        Data shards; each contributes ``batch_size // shards`` rows to every batch.
    data_parallel : int
        The mesh's data-parallel size (``batch_size_divisor(mesh)``; 1 without a mesh).
    train_rows : int
        Training pairs of the smallest shard.
    dropped : int
        Non-finite simulations already dropped (named in the message).
    per_process : bool
        Whether the shards are the default one per process (named in the message).
    budget : callable, optional
        ``budget(rows)``: the smallest ``data.num_simulations`` whose every shard trains on ``rows``
        pairs, named when no batch size fits the training pairs.

    Returns
    -------
    str or None
        None if ``batch_size`` is a multiple of ``lcm(shards, data_parallel)`` and at most ``shards * train_rows``;
        else a message naming the value, each violated constraint, and ``data.batch_size=<nearest valid>`` (or budget).
    """
    multiple = math.lcm(shards, data_parallel)
    at_most = shards * train_rows
    reasons = []
    if batch_size % multiple:
        over = [f"{shards} data shards" + (" (one per process)" if per_process else "")] if shards > 1 else []
        over += [f"the data-parallel size {data_parallel}"] if data_parallel > 1 else []
        reasons.append(f"a multiple of {multiple} (it is split over {' and over '.join(over)})")
    if batch_size > at_most:
        rows = (f"the {train_rows} training pairs" if shards == 1
                else f"{shards} shards x {train_rows} training pairs (the smallest shard's)")
        reasons.append(f"at most {at_most} ({rows}"
                       + (f", after dropping {dropped} non-finite simulations" if dropped else "") + ")")
    if not reasons:
        return None
    fix = next(iter(nearest_batch_sizes(batch_size, multiple, at_most)), None)
    said = (f"data.batch_size={batch_size} cannot be used: the global batch size {batch_size} must be "
            f"{' and '.join(reasons)}")
    if fix is not None:
        return Refusal(said, f"data.batch_size={fix}")
    said += (f"; no batch size fits: one batch of {multiple} needs {multiple // shards} training pairs per shard, "
             f"but the smallest shard holds {train_rows}")
    least = budget(multiple // shards) if budget else None
    # that budget fills a batch of `multiple`, not this one: both overrides, typed together (no budget: no fix to type)
    fix = (f"data.num_simulations={least}",
           *([f"data.batch_size={multiple}"] * (batch_size != multiple))) * bool(budget)
    words = [(f"raise {cfg}data.num_simulations" + (f" to at least {least}" if budget else "")
              + (f" and set {cfg}data.batch_size={multiple}" if batch_size != multiple else ""))
             for cfg in ("", "cfg.")]  # launch.py's, a Python caller's
    keep = (f", or to at least {budget(batch_size // shards)} to keep {setting('data.batch_size', batch_size)}"
            if budget and batch_size != multiple and batch_size % multiple == 0 else "")
    return Refusal(said, fix, how="; ", after=keep, shown=words[0], python=words[1]) if fix else (
        f"{said}; {said_as(*words)}")


def mesh_alternatives(batch_size: int, *, shards: int, train_rows: int, mesh: Mesh | None,
                      mesh_cfg: DictConfig | None = None) -> str:
    """The other meshes on which ``batch_size`` is valid as it is, as overrides ('' if none), to add to its message.

    ``batch_size_problem`` decides each (the one rule): the nearest ``mesh.model_axis`` that divides each
    process's devices, and on simulated CPU devices without a ``mesh.devices`` list the nearest
    ``devices.cpu_count`` (all processes' devices, as ``distributed=local`` takes it; a model group
    stays in one process). ``mesh_cfg``: the run's ``mesh`` config (``mesh=auto`` needs ``mesh=dict``).
    """
    import jax

    if mesh is None or "model" not in mesh.shape:
        return ""
    return device_alternatives(batch_size, shards=shards, train_rows=train_rows, devices=mesh.devices.size,
                               axis=mesh.shape["model"], processes=jax.process_count(),
                               cpu=mesh.devices.flat[0].platform == "cpu", mesh_cfg=mesh_cfg)


def device_alternatives(batch_size: int, *, shards: int, train_rows: int, devices: int, axis: int,
                        processes: int = 1, cpu: bool = True, mesh_cfg: DictConfig | None = None,
                        source: str = "default") -> str:
    """``mesh_alternatives`` of a mesh of ``devices`` (``cpu``: simulated CPU ones, counted by ``source``) over
    ``processes``, model axis ``axis``, known before JAX starts (the check before a run's folder, which said only "set
    data.batch_size=66")."""
    local = devices // processes

    def fits(data_parallel: int) -> bool:
        return batch_size_problem(batch_size, shards=shards, data_parallel=data_parallel, train_rows=train_rows) is None

    options = []
    axes = [m for m in range(1, local + 1) if local % m == 0 and m != axis and fits(devices // m)]
    if axes:
        m = min(axes, key=lambda m: (abs(m - axis), m))
        auto = mesh_cfg is not None and mesh_cfg.spec == "auto"
        options.append(f"{'mesh=dict ' * auto}mesh.model_axis={m} (data-parallel size {devices // m})")
    listed = mesh_cfg is not None and mesh_cfg.spec == "dict" and mesh_cfg.devices
    if cpu and not listed:
        step = processes * axis
        counts = [c for c in range(step, 2 * devices + 1, step) if c != devices and fits(c // axis)]
        if counts:
            c = min(counts, key=lambda c: (abs(c - devices), c))
            options.append(f"{count_setting(source)}{c} (data-parallel size {c // axis})")
    return f"; or keep data.batch_size={batch_size} on another mesh: {' or '.join(options)}" if options else ""


def kept_on_other_meshes(problem: str | None, batch_size: int, mesh_cfg: DictConfig, *, shards: int, train_rows: int,
                         devices: int, processes: int = 1, source: str = "default") -> Any:
    """A batch size's refusal (``Refusal``) on ``devices`` CPU devices over ``processes``, known before JAX starts,
    with the meshes that keep it (``device_alternatives``), as the run says it on its started mesh (not "set
    data.batch_size=66" alone)."""
    if not isinstance(problem, Refusal) or mesh_cfg.spec not in ("auto", "dict"):
        return problem
    listed = mesh_cfg.spec == "dict" and mesh_cfg.devices
    other = device_alternatives(batch_size, shards=shards, train_rows=train_rows,
                                devices=len(mesh_cfg.devices) if listed else devices,
                                axis=mesh_cfg.model_axis if mesh_cfg.spec == "dict" else 1, processes=processes,
                                mesh_cfg=mesh_cfg, source=source)
    return Refusal(problem.reason, problem.fix, how=problem.how, after=problem.after + other, shown=problem.shown,
                   python=problem.python)


def model_axis_problem(model_axis: int, devices: int, simulated: bool = False,
                       listed: Sequence[int] | None = None, batch_size: int | None = None) -> str | None:
    """None if ``devices`` split into ``model_axis`` groups; else the message naming the nearest divisor.

    ``simulated``: a dry run on simulated CPU devices whose count ``devices.cpu_count`` sets; a model axis
    wider than them is then likely a plan for a larger machine, and the message names that count too.
    ``listed``: the ``mesh.devices`` given; the message also names the longest start of it that keeps the axis.
    ``batch_size``: the nearest divisor whose data-parallel size divides it is named, where one does (so 6 devices,
    ``mesh.model_axis=4`` do not get "set mesh.model_axis=3", whose data-parallel size 2 refuses data.batch_size=63).
    """
    if devices % model_axis == 0:
        return None
    fits = [d for d in range(1, devices + 1) if devices % d == 0]
    near = lambda among: min(among, key=lambda d: (abs(d - model_axis), d))  # noqa: E731
    nearest = near([d for d in fits if batch_size is None or batch_size % (devices // d) == 0] or fits)
    why = ("" if nearest == near(fits)
           else f"; the nearest whose data-parallel size divides data.batch_size={batch_size}")
    more = (f"; or, to plan for a machine with {model_axis} devices, set devices.cpu_count={model_axis} (the dry "
            "run compiles for that many simulated CPU devices)" if simulated and model_axis > devices else "")
    kept = list(listed or [])[:len(listed or []) // model_axis * model_axis]  # the axis asked, on fewer devices
    more += f"; or keep it with mesh.devices=[{','.join(map(str, kept))}]" if kept else ""
    return Refusal(f"mesh.model_axis={model_axis}: {devices} device{'s are' if devices != 1 else ' is'} not divisible "
                   f"by model_axis={model_axis}", f"mesh.model_axis={nearest}",
                   after=f" (divisors of {devices}: {fits}{why}){more}")


def mesh_devices_problem(devices: Sequence[int] | None, available: Sequence[int], model_axis: int = 1) -> str | None:
    """None if ``mesh.devices`` lists existing device ids once each; else the message and a list that fits.

    The list named keeps the user's order, drops repeats and unknown ids, and is cut to a
    multiple of ``model_axis`` (so the next check, ``model_axis_problem``, passes too).
    """
    if devices is None:
        return None
    ids, known = list(devices), set(available)
    if not ids:  # make_mesh refuses it only once JAX has started, inside the run's new folder
        return Refusal("mesh.devices=[] lists no device", "mesh.devices=null", how="; pass ", after=" for all devices")
    unique = list(dict.fromkeys(d for d in ids if d in known))
    if unique == ids:
        return None
    reasons = []
    if twice := sorted({d for d in ids if ids.count(d) > 1}):
        reasons.append(f"lists device {', '.join(map(str, twice))} more than once")
    if unknown := [d for d in ids if d not in known]:
        reasons.append(f"names device id {', '.join(map(str, unknown))}, but the device ids are "
                       f"{sorted(known)}")
    kept = unique[:len(unique) // model_axis * model_axis]
    fix = f"mesh.devices=[{','.join(map(str, kept))}]" if kept else "mesh.devices=null"
    return Refusal(f"mesh.devices={override_literal(ids)} {' and '.join(reasons)}", fix,  # as typed, not [0, 1, 1]
                   after=" (or mesh.devices=null for all of them)" if kept else " (all of them)")


def mesh_axis_fix(value: Any, mesh_axes: Sequence[str]) -> str:
    """The override value for a mesh-axis field (``rule.embed``, ``activation.head_axis``) naming axes the mesh lacks.

    Each unknown name becomes the closest mesh axis (``modle`` -> ``model``) or is dropped;
    nothing left is ``null`` (unsplit). A list comes back as ``[a,b]``.
    """
    names = [value] if isinstance(value, str) else list(value or ())
    fixed = [n if n in mesh_axes else closest_name(n, mesh_axes) for n in names]
    kept = list(dict.fromkeys(n for n in fixed if n))
    if not kept:
        return "null"
    return kept[0] if isinstance(value, str) else f"[{','.join(kept)}]"


def mesh_spec_fix(value: Any) -> str:
    """The ``mesh.spec`` a refused one meant: null for a word of no mesh ('none', what ``mesh=none`` sets), else the
    closest of auto and dict ('Auto', 'dikt'), else auto (one guess, and for 'none' the null it
    means)."""
    word = str(value).strip().lower()
    meant = "null" if word in ("none", "null", "no", "off", "single") else closest_name(word, ("auto", "dict"))
    return f"mesh.spec={meant or 'auto'}"

"""Errors that name the override to type, with a value that fixes every constraint at once.

A hint that trades one violated constraint for another sends the user in a circle
(``data.batch_size=45`` -> "set 48" -> "at most 45"), so each kind of value is decided
in one function here, and every message about it comes from that function.
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import json
import math
import re
import shlex
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from gensbi_sharding.batch import nearest_batch_sizes

__all__ = ["batch_size_problem", "model_axis_problem", "mesh_devices_problem",
           "overrides_named", "unknown_name_problem", "registered_name_problem", "unfinished_jobs_hint", "sweep_jobs", "mesh_axis_fix"]


def batch_size_problem(batch_size: int, *, shards: int, data_parallel: int, train_rows: int,
                       dropped: int = 0, per_process: bool = False,
                       min_simulations: int | None = None) -> str | None:
    """What is wrong with a global batch size, and the one value that fixes all of it.

    The one place that decides a batch size: every batch-size message of the harness
    comes from here, so a hint never trades one violated constraint for another.

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
    min_simulations : int, optional
        The smallest ``data.num_simulations`` that fills one valid batch, named when
        no batch size fits the training pairs.

    Returns
    -------
    str or None
        None if ``batch_size`` is a multiple of ``lcm(shards, data_parallel)`` and at most
        ``shards * train_rows``; else a message naming the value, each violated
        constraint, and ``data.batch_size=<nearest valid>`` (or the simulation budget).
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
    if fix is None:
        need = f" to at least {min_simulations}" if min_simulations else ""
        advice = (f"no batch size fits: one batch of {multiple} needs {multiple // shards} training pairs "
                  f"per shard, but the smallest shard holds {train_rows}; raise data.num_simulations{need}")
    else:
        advice = f"set data.batch_size={fix}"
    return (f"data.batch_size={batch_size} cannot be used: the global batch size {batch_size} must be "
            f"{' and '.join(reasons)}; {advice}")


def model_axis_problem(model_axis: int, devices: int) -> str | None:
    """None if ``devices`` split into ``model_axis`` groups; else the message naming the nearest divisor."""
    if devices % model_axis == 0:
        return None
    fits = [d for d in range(1, devices + 1) if devices % d == 0]
    nearest = min(fits, key=lambda d: (abs(d - model_axis), d))
    return (f"mesh.model_axis={model_axis}: {devices} devices are not divisible by model_axis={model_axis}; "
            f"set mesh.model_axis={nearest} (divisors of {devices}: {fits})")


def mesh_devices_problem(devices: Sequence[int] | None, available: Sequence[int], model_axis: int = 1) -> str | None:
    """None if ``mesh.devices`` lists existing device ids once each; else the message and a list that fits.

    The list named keeps the user's order, drops repeats and unknown ids, and is cut to a
    multiple of ``model_axis`` (so the next check, ``model_axis_problem``, passes too).
    """
    if devices is None:
        return None
    ids, known = list(devices), set(available)
    unique = list(dict.fromkeys(d for d in ids if d in known))
    if unique == ids:
        return None
    reasons = []
    twice = sorted({d for d in ids if ids.count(d) > 1})
    if twice:
        reasons.append(f"lists device {', '.join(map(str, twice))} more than once")
    unknown = [d for d in ids if d not in known]
    if unknown:
        reasons.append(f"names device id {', '.join(map(str, unknown))}, but the device ids are "
                       f"{sorted(known)}")
    kept = unique[:len(unique) // model_axis * model_axis]
    fix = f"mesh.devices=[{','.join(map(str, kept))}]" if kept else "mesh.devices=null"
    return (f"mesh.devices={ids} {' and '.join(reasons)}; set {fix}"
            + (" (or mesh.devices=null for all of them)" if kept else " (all of them)"))


def mesh_axis_fix(value: Any, mesh_axes: Sequence[str]) -> str:
    """The override value for a mesh-axis field (``rule.embed``, ``activation.head_axis``) naming axes the mesh lacks.

    Each unknown name becomes the closest mesh axis (``modle`` -> ``model``) or is dropped;
    nothing left is ``null`` (unsplit). A list comes back as ``[a,b]``.
    """
    names = [value] if isinstance(value, str) else list(value or ())
    fixed = [n if n in mesh_axes else _close(n, mesh_axes) for n in names]
    kept = list(dict.fromkeys(n for n in fixed if n))
    if not kept:
        return "null"
    return kept[0] if isinstance(value, str) else f"[{','.join(kept)}]"


@contextlib.contextmanager
def overrides_named(group: str, section: Mapping[str, Any], error: type[Exception] = ValueError) -> Iterator[None]:
    """Re-raise a ``ValueError`` about ``width=0`` from a library as ``error`` naming ``model.width=0``.

    Library functions name their own arguments (``width``); the user types config
    overrides (``model.width``). A key of ``section`` the message names as an argument
    (``width=``, ``width must``) gets the ``group.`` prefix, and the message is prefixed
    with its current value. Other errors pass through unchanged.
    """
    try:
        yield
    except ValueError as err:
        text, named = str(err), []
        for key in section:
            bare = rf"(?<![\w./]){re.escape(str(key))}"
            if re.search(bare + r"(=| must\b)", str(err)):
                named.append(f"{group}.{key}={section[key]}")
            text = re.sub(bare + "(?==)", f"{group}.{key}", text)
        if not named:
            raise
        raise error(f"{', '.join(named)}: {text}") from None


def unknown_name_problem(key: str, value: str, *, kind: str, registered: Sequence[str], fix: str,
                         group: str, register: str) -> str:
    """The message for ``key=value`` naming nothing registered: the names, the override, then how to add one.

    ``fix`` is the value to give ``key`` that works with the settings already composed (the
    model whose fields ``model=<name>`` loaded); ``group=<name>`` is the other way, once
    ``key=value`` is dropped (a group override cannot replace a key override: Hydra applies
    the key's after the group's).
    """
    return (f"unknown {kind} {value!r} ({key}={value}); registered: {', '.join(sorted(registered))}; "
            f"set {key}={fix}, or drop {key}={value} and choose one with {group}=<name>; "
            f"to add {value!r}, {register}")


def _close(value: str, names: Sequence[str]) -> str | None:
    found = difflib.get_close_matches(str(value), list(names), n=1)
    return found[0] if found else None


def _schema_name(section: Any) -> str | None:
    """The ``name`` default of the typed schema a config section was merged onto (``MLPConfig`` -> "mlp")."""
    from omegaconf import OmegaConf

    schema = OmegaConf.get_type(section)
    if not dataclasses.is_dataclass(schema):
        return None
    default = {f.name: f.default for f in dataclasses.fields(schema)}.get("name")
    return default if isinstance(default, str) and default not in ("???", "") else None


def registered_name_problem(cfg: Any, choices: Mapping[str, str] | None = None) -> str | None:
    """What is wrong with the registry-backed names of ``cfg`` (``model.name``, ``data.name``, ``rule.name``).

    ``choices`` are the options Hydra chose per group (``{"rule": "replicated", ...}``;
    ``groups.chosen_options()``); without them the rule's name is not checked (only Hydra
    knows which file loaded the table). Every message names the value, the registered names
    and an override that then passes; registering a new one comes second.
    """
    from gensbi_sharding import RULES
    from gensbi_sharding.harness import registry
    from gensbi_sharding.harness.groups import group_options

    choices = dict(choices or {})
    models = registry.model_names()
    loaded = _schema_name(cfg.model)  # the model whose fields the config holds
    if cfg.model.name not in models:
        fix = loaded if loaded in models else _close(cfg.model.name, models) or "mlp"
        return unknown_name_problem("model.name", cfg.model.name, kind="model", registered=models, fix=fix,
                                    group="model", register=f"register it with @register_model({cfg.model.name!r}) "
                                    f"and add conf/model/{cfg.model.name}.yaml")
    if loaded is not None and loaded != cfg.model.name:
        return (f"model.name={cfg.model.name} does not fit the settings model={loaded} loaded (the fields of {loaded}); "
                f"set model.name={loaded}, or drop model.name={cfg.model.name} and choose the model with "
                f"model={cfg.model.name}, which loads its own")
    tasks = registry.data_names()
    if cfg.data.name not in tasks:
        fix = _close(cfg.data.name, tasks) or choices.get("data") or "two_moons"
        return unknown_name_problem("data.name", cfg.data.name, kind="data", registered=tasks, fix=fix,
                                    group="data", register=f"register it with @register_data({cfg.data.name!r}) "
                                    f"and add conf/data/{cfg.data.name}.yaml")
    return _rule_name_problem(cfg.rule, choices.get("rule"), sorted(set(RULES) | set(group_options("rule"))))


def _rule_name_problem(rule: Any, choice: str | None, rules: list[str]) -> str | None:
    """``rule.name`` only labels a table: refuse a label that looks like choosing a rule but is not one."""
    from gensbi_sharding import RULES

    name = rule.get("name") if hasattr(rule, "get") else None
    if choice is None or name is None or name == choice:
        return None
    if name in rules:  # rule.name=fsdp on replicated's table: the user meant rule=fsdp
        return (f"rule.name={name} only labels the rule table, which rule={choice} loaded; to use the {name} rule, "
                f"choose it with rule={name} (rule.name={name} may stay)")
    untouched = choice in RULES and all(rule.get(k) == v for k, v in dict(RULES[choice]).items())
    if untouched:  # a new label on a preset's unchanged table: not a rule of its own
        return (unknown_name_problem("rule.name", name, kind="rule", registered=rules, fix=choice, group="rule",
                                     register=f"write conf/rule/{name}.yaml (README: Writing your own rule), or "
                                     f"change entries of this table (rule.embed=data rule.name={name})"))
    return None


def sweep_jobs(task_overrides: Sequence[str], sweeper_params: Mapping[str, Any] | None = None) -> list[list[str]]:
    """Every job of a multirun, as its overrides: the cartesian product of the swept values.

    ``task_overrides`` are the command's overrides (``rule=fsdp,tensor`` sweeps), ``sweeper_params``
    the preset's ``hydra.sweeper.params`` (an override on the command line wins), as Hydra's basic
    sweeper combines them.
    """
    import itertools

    from hydra.core.override_parser.overrides_parser import OverridesParser

    parser = OverridesParser.create()
    parsed = parser.parse_overrides(list(task_overrides))
    keys = {o.key_or_group for o in parsed}
    parsed += parser.parse_overrides([f"{k}={v}" for k, v in (sweeper_params or {}).items() if k not in keys])
    choices = [[f"{o.get_key_element()}={v}" for v in o.sweep_string_iterator()] if o.is_sweep_override()
               else [f"{o.get_key_element()}={o.get_value_element_as_str()}"] for o in parsed]
    return [list(job) for job in itertools.product(*choices)]


def unfinished_jobs_hint(jobs: Sequence[Any], resumable: Sequence[str], all_jobs: Sequence[Sequence[str]] = (),
                         sweep_dir: Any = None) -> str:
    """How to continue a sweep's unfinished jobs when its folder, holding completed ones, is refused.

    A sweep folder with a completed job is never rerun as a whole (its files are never
    overwritten), so ``-m ... train.resume=auto`` cannot finish it; each unfinished job
    (status in ``resumable``) continues in its own folder, with the overrides it ran with
    (``<job>/.hydra/overrides.yaml``), and each job of ``all_jobs`` (``sweep_jobs``) that never
    started (no folder with its overrides) runs in a new folder of ``sweep_dir``. "" when no
    job is unfinished or none completed.
    """
    from pathlib import Path

    status = {Path(j): json.loads((Path(j) / "metrics.json").read_text()).get("status") for j in jobs}
    recorded = all((j / ".hydra" / "overrides.yaml").exists() for j in status)  # else which ran is unknown
    ran = [_configuration(_yaml_list(j / ".hydra" / "overrides.yaml")) for j in status] if recorded else []
    never = [job for job in all_jobs if _configuration(job) not in ran] if recorded and sweep_dir is not None else []
    unfinished = [j for j, s in status.items() if s in resumable]
    if not (unfinished or never) or all(s in resumable for s in status.values()):
        return ""
    commands = []
    for job in unfinished:
        saved = job / ".hydra" / "overrides.yaml"
        overrides = [o for o in (_yaml_list(saved) if saved.exists() else ["<its overrides>"])
                     if not o.startswith(("train.resume=", "hydra."))]
        commands.append(" ".join(["python launch.py", *map(shlex.quote, overrides), "train.resume=auto",
                                  shlex.quote(f"hydra.run.dir={job}")]))
    numbers = [int(Path(j).name) for j in status if Path(j).name.isdigit()]
    for offset, job in enumerate(never, start=max(numbers, default=-1) + 1):
        overrides = [o for o in job if not o.startswith(("train.resume=", "hydra."))]
        commands.append(" ".join(["python launch.py", *map(shlex.quote, overrides), "train.resume=auto",
                                  shlex.quote(f"hydra.run.dir={Path(sweep_dir) / str(offset)}")]))
    started = f" ({len(never)} never started)" if never else ""
    return ("; a sweep folder holding completed jobs is never rerun as a whole: continue its unfinished "
            f"job{'s' if len(commands) > 1 else ''}{started} one by one: " + " ; ".join(commands))


def _configuration(overrides: Sequence[str]) -> dict[str, str]:
    """``{key: value}`` of a job's overrides, without those that say how it ran (resume, hydra)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parsed = OverridesParser.create().parse_overrides(list(overrides))
    return {o.key_or_group.lstrip("+~"): o.get_value_element_as_str() for o in parsed
            if not o.key_or_group.startswith(("train.resume", "hydra."))}


def _yaml_list(path: Any) -> list[str]:
    from omegaconf import OmegaConf

    return [str(o) for o in OmegaConf.load(path)]

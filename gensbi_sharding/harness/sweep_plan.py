"""The jobs of a multirun: each job's overrides in Hydra's order, its configuration, and which never started.

Hydra gives job ``i`` folder ``i``; the summary, the continue hints and ``train.resume=auto`` all read the
sweep's jobs from here, so they agree on which job is which.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["sweep_jobs", "command_overrides", "every_job", "never_started", "job_configuration"]


def sweep_jobs(task_overrides: Sequence[str], sweeper_params: Mapping[str, Any] | None = None,
               config_loader: Any = None) -> list[list[str]]:
    """Every job of a multirun, as its overrides, in Hydra's order: job ``i`` runs in folder ``i``.

    ``task_overrides`` are the command's overrides (``rule=fsdp,tensor`` sweeps), ``sweeper_params``
    the preset's ``hydra.sweeper.params``. As Hydra's basic sweeper: the preset's keys come first,
    the command's after them, and a command-line override of a preset's key takes its value in the
    preset's place (the order decides the job numbers). ``config_loader``: Hydra's, which expands a
    ``glob(...)`` of a group's options (default: the running app's; without one a glob raises ``HydraException``).
    """
    import itertools

    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.override_parser.overrides_parser import OverridesParser

    if config_loader is None and GlobalHydra.instance().is_initialized():
        config_loader = GlobalHydra.instance().config_loader()

    params = [f"{k}={v}" for k, v in (sweeper_params or {}).items()]
    choices: dict[str, list[str]] = {}
    for o in OverridesParser.create(config_loader=config_loader).parse_overrides(params + list(task_overrides)):
        key = o.get_key_element()
        choices[key] = ([f"{key}={v}" for v in o.sweep_string_iterator()] if o.is_sweep_override()
                        else [f"{key}={o.get_value_element_as_str()}"])
    return [list(job) for job in itertools.product(*choices.values())]


def command_overrides(config: Any) -> tuple[list[str] | None, dict[str, Any] | None]:
    """The command's overrides (``hydra.overrides.task``) and the preset's ``hydra.sweeper.params``, as typed.

    Unresolved: a multirun's own config keeps an override's ``${...}`` as text (a job's is escaped), and
    reading it resolved raised ``InterpolationKeyError`` in the folder and summary callbacks for
    ``-m 'train.steps=2,${data.nope}'`` (the folder lock and the summary were skipped). None where unset.
    """
    from omegaconf import OmegaConf

    task = OmegaConf.select(config, "hydra.overrides.task", default=None)
    params = OmegaConf.select(config, "hydra.sweeper.params", default=None)
    unresolved = [None if node is None else OmegaConf.to_container(node, resolve=False) for node in (task, params)]
    return unresolved[0], unresolved[1]


def every_job(config: Any) -> list[list[str]]:
    """Every job of the multirun ``config`` starts, as its overrides (``sweep_jobs``); [] if unknown."""
    task, params = command_overrides(config)
    return [] if task is None else sweep_jobs(task, params)


def never_started(all_jobs: Sequence[Sequence[str]], ran: Mapping[str, dict[str, str]]) -> list[tuple[int, list[str]]]:
    """The jobs of ``all_jobs`` (``sweep_jobs``) that have no folder, with their job numbers.

    Parameters
    ----------
    all_jobs : sequence of sequence of str
        Every job the sweep declared, in Hydra's order.
    ran : mapping of str to dict
        ``{folder name: job_configuration of its recorded overrides}`` of the job folders there are.

    Returns
    -------
    list of (int, list of str)
        Job ``i`` of ``all_jobs`` runs in folder ``str(i)``: that folder stands for it even when its
        overrides changed since (a job continued alone with another value), so a sweep never lists
        more jobs than it has; a folder of another name (``hydra.sweep.subdir``) stands for the job
        whose configuration it recorded.
    """
    configurations = list(ran.values())
    return [(number, list(job)) for number, job in enumerate(all_jobs)
            if str(number) not in ran and job_configuration(job) not in configurations]


def job_configuration(overrides: Sequence[str]) -> dict[str, str]:
    """``{key: value}`` of a job's overrides, without those that say how it ran (resume, hydra).

    Parameters
    ----------
    overrides : sequence of str
        Hydra overrides, e.g. a job's ``.hydra/overrides.yaml`` or one entry of ``sweep_jobs``.

    Returns
    -------
    dict of str to str
        Values as Hydra normalises them, so two spellings of one job compare equal.
    """
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.core.override_parser.types import ValueType

    def value(o) -> str:  # a quoted value as its text: data="two_moons" is data=two_moons, as Hydra assigns it
        plain = o.value_type == ValueType.ELEMENT and isinstance(o.value(), str)
        return o.value() if plain else o.get_value_element_as_str()

    parsed = OverridesParser.create().parse_overrides(list(overrides))
    return {o.key_or_group.lstrip("+~"): value(o) for o in parsed
            if not o.key_or_group.startswith(("train.resume", "hydra."))}

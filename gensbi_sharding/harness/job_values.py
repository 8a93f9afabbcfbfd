"""A sweep job's values and folder: ``job_configuration`` (its overrides as ``{key: value}``, as Hydra reads them) and
``folder_of`` (its folder's name).

Below ``sweep_plan`` (which re-exports both, beside the sweep's jobs) and ``sweep_retyped`` (which compares a job's
values with its folder's), so that ``sweep_retyped`` no longer imports ``sweep_plan``, which imports it. Pure Python:
no JAX.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["folder_of", "job_configuration"]


def folder_of(number: int, folders: Sequence[str] | None) -> str:
    """Job ``number``'s folder name: from ``folders`` (``job_folders``) where known, else Hydra's default, its
    number."""
    return folders[number] if folders is not None and number < len(folders) else str(number)


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

"""A dotted key that goes below the config's settings: ``mesh.shape.model=2`` (a part its group lacks) or
``train.steps.x=1`` (a part under a setting, which holds no keys).

Hydra's multi-line "Could not override 'mesh.shape.model'. To append to your config use +mesh.shape.model=2 ...
Key 'shape' not in 'MeshConfig'" (advice the config check refuses in turn), or "Value '{}' of type 'dict' could not
be converted to Integer", named no fix; ``override_keys.unknown_key_problem`` names the part and the setting likely
meant, as it does for a typo one level deep. Pure Python: no JAX.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence

from gensbi_sharding.harness.hints import closest_name

__all__ = ["unknown_part", "nearest_setting", "setting_path_problem"]


def unknown_part(parts: Sequence[str], keys_of: Callable,
                 lists: Collection[str] = ()) -> tuple[int, tuple | None] | None:
    """Where the dotted key ``parts`` leaves the config, as ``keys_of(path)`` (``override_keys.group_keys``) reads it.

    ``(i, keys)``: ``parts[i]`` is no key of the group ``parts[:i]``, whose keys are ``keys`` (``mesh.shape.model``:
    ``(1, mesh's)``); ``(i, None)``: ``parts[i]`` is a setting, and more parts follow it (``train.steps.x``: ``(1,
    None)``); None where each part but the last is a group (the last is the caller's to check), ``parts[0]`` is
    neither a section nor a setting (``override_types`` names it), or an item of a list setting of ``lists`` is set
    (``model.axes_dim.0=4``: Hydra sets it).
    """
    for i in range(1, len(parts)):
        keys = keys_of(parts[:i])
        if keys is None and ".".join(parts[:i]) in lists and parts[i].isdigit():
            return None
        if keys is None:
            return (i - 1, None) if i > 1 or parts[0] in (keys_of([]) or ()) else None
        if parts[i] not in keys:
            return (i, keys) if i < len(parts) - 1 else None
    return None


def nearest_setting(part: str, below: Sequence[str], keys: Sequence[str]) -> str | None:
    """The key of ``keys`` that ``part`` and the parts ``below`` it likely meant: ``c2st`` + ``folds`` -> c2st_folds
    (joined), ``shape`` + ``model`` -> model_axis (the last part's nearest), else the nearest to ``part``; or None."""
    for name in ("_".join([part, *below]), *below[-1:], part):
        if (near := closest_name(name, keys)) is not None:
            return near
    return None


def setting_path_problem(arg: str, held: Sequence[str], value: str | None, lists: Collection[str] = ()) -> str:
    """The refusal of the override ``arg`` whose part ``held[-1]`` is a setting with keys under it
    (``train.steps.x=1``; ``value`` None: a removal, ``~train.steps.x``); a setting of ``lists`` is set as a list
    (``model.axes_dim.x=4``: ``model.axes_dim=[4]``, which the list check takes)."""
    setting = ".".join(held)
    value = f"[{value}]" if setting in lists and value is not None and not value.startswith("[") else value
    return f"{arg}: {setting} is a setting, which holds no keys; " + (
        f"set {setting}={value}" if value is not None else f"drop {arg}")

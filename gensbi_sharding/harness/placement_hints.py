"""The placement report's hints: the largest variables a rule left whole, a rule that splits nothing on this mesh, an
idle model axis, each naming the override that does better."""

from __future__ import annotations

from typing import Any

import numpy as np

from gensbi_sharding.harness.python_words import fix_said, said_as, setting

__all__ = ["left_whole", "splits_nothing_hint", "idle_model_axis_hint"]


def _split_axes(table: dict[str, Any]) -> set[str]:
    """The mesh axes a rule table splits over."""
    return {axis for value in table.values() if value for axis in ((value,) if isinstance(value, str) else value)}


def left_whole(report: Any, annotations: dict[str, Any], table: dict[str, Any], fallbacks: dict[str, str],
               *, top: int = 3) -> list[tuple[str, int]]:
    """The largest model variables a splitting rule left whole, though its table would split them.

    That is the fallbacks (no annotation, a dimension that does not divide) and any other
    variable without logical axes. A variable whose annotated axes the table maps to nothing
    (``scale`` under tensor) is replicated on purpose and not listed.
    """
    if report.mesh is None or not _split_axes(table):
        return []
    whole = [v for v in report.variables if v.path.startswith("model/") and v.replicated and v.shape
             and (v.path.removeprefix("model/") in fallbacks or annotations.get(v.path) is None)]
    whole.sort(key=lambda v: (-v.nbytes, v.path))
    return [(v.path.removeprefix("model/"), v.nbytes) for v in whole[:top]]


def splits_nothing_hint(mesh_axis_sizes: dict[str, int] | None, table: dict[str, Any], rule_name: str,
                        mesh_choice: str) -> str | None:
    """One line when every mesh axis the rule splits over has size 1, naming the override that splits.

    E.g. ``mesh=auto rule=tensor`` on 8 devices: tensor splits over "model", which ``auto``
    makes of size 1, so nothing is split; ``mesh=dict mesh.model_axis=2`` splits.
    """
    used = _split_axes(table)
    if not mesh_axis_sizes or not used or any(mesh_axis_sizes.get(axis, 1) > 1 for axis in used):
        return None
    devices = int(np.prod(list(mesh_axis_sizes.values())))
    axes = " and ".join(f"{axis!r}" for axis in sorted(used))
    shape = " x ".join(f"{name}={size}" for name, size in mesh_axis_sizes.items())
    if devices < 2:
        fix = "there is one device: nothing can be split"
    elif used == {"data"}:
        fix = "to split, " + fix_said(["mesh=dict", "mesh.model_axis=1"], "run with ")
    else:  # an odd count's divisors split no power-of-2 width (mesh.model_axis=7 would replicate every variable)
        odd = [f"mesh.devices=[{','.join(map(str, range(devices - 1)))}]"] * (devices % 2)
        fix = ("to split, " + fix_said(["mesh=dict", "mesh.model_axis=2", *odd], "run with ")
               + " (an odd count divides no power-of-2 width)" * bool(odd))
    return (f"rule {rule_name} splits nothing here: it splits over {axes}, of size 1 on {shape} "
            f"(mesh={mesh_choice}); {fix}")


def idle_model_axis_hint(mesh_axis_sizes: dict[str, int] | None, table: dict[str, Any], rule_name: str,
                         mesh_choice: str, activation_axes: dict[str, Any] | None = None,
                         placed_on_model: bool | None = None, splits_at: list[int] | None = None) -> str | None:
    """One line when the mesh's model axis has size > 1 but neither the rule nor the activations split over it, or
    (``placed_on_model=False``) every variable its table splits over it fell back; ``splits_at``: the model axis sizes
    under which it splits some (``model_axes_that_split``). The devices along "model" then repeat the same work (the
    batch is split over the others): ``rule=fsdp mesh.model_axis=2`` trains on half the devices' worth of data.
    ``activation_axes``: the fields the model reads."""
    from gensbi_sharding import MODEL_AXIS

    size, split = (mesh_axis_sizes or {}).get(MODEL_AXIS, 1), MODEL_AXIS in _split_axes(table)
    if size < 2 or MODEL_AXIS in _split_axes(activation_axes or {}) or (split and placed_on_model is not False):
        return None
    shape, what = " x ".join(f"{k}={n}" for k, n in mesh_axis_sizes.items()), "every variable it splits" * split
    # run(cfg) from Python (python_words): its settings of cfg, a preset composed with
    axes = said_as(f"mesh.model_axis={' or '.join(map(str, splits_at or []))}",
                   " or ".join(setting("mesh.model_axis", m) for m in splits_at or []))
    fix = (said_as("rule=tensor", "cfg composed with rule=tensor") if not split else
           said_as("a mesh.model_axis", "a cfg.mesh.model_axis") + " the widths divide by" if splits_at is None else
           f"{axes}, under which it splits some" if splits_at else None)
    return (f"rule {rule_name} leaves the model axis idle: {what or 'it splits nothing'} over {MODEL_AXIS!r}, of "
            f"size {size} on {shape} (mesh={mesh_choice}){', fell back to replicated' * split}: the {size} devices"
            f" along it repeat the same work; {said_as('run with', 'set')} {setting('mesh.model_axis', 1)} so every "
            "device takes data"
            + (f", or {fix}" if fix else ", as no other mesh.model_axis splits a width"))

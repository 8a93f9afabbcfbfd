"""PartitionSpec and mesh checks every placing module shares: a spec entry's mesh axes, whether a spec splits a
shape on a mesh, whether a value is a mesh; importing from the package only ``messages``."""

import math
from collections.abc import Sequence
from typing import Any

from jax.sharding import AbstractMesh, Mesh, PartitionSpec

from gensbi_sharding.messages import shown


def mesh_axes_of(entry: Any) -> tuple:
    """A PartitionSpec entry's mesh axes (None: (), "data": ("data",)); ``ValueError`` naming its odd one."""
    axes = (() if entry is None else tuple(entry) if isinstance(entry, Sequence) and not isinstance(entry, str)
            else (entry,))
    if not (odd := [axis for axis in axes if not isinstance(axis, str)]):
        return axes
    if all(axis is None for axis in odd):  # None replicates as the whole entry; in a tuple JAX reads it as an axis
        kept = tuple(dict.fromkeys(filter(None, axes))) or None  # the fix passes: (None, "a", "a") is ("a",), not twice
        raise ValueError(f"PartitionSpec entry {shown(entry, 40)} holds None inside a tuple, read as a mesh "
                         f"axis name: leave it out ({shown(kept, 40)}), or give None to leave it unsplit")
    odd = [axis for axis in odd if axis is not None]  # (None, 3): 3 first, as "leave None out" would leave (3,)
    what = "names no mesh axis" if len(odd) == len(axes) else f"holds {shown(odd[0], 20)}, not a mesh axis name"
    raise ValueError(f"PartitionSpec entry {shown(entry, 40)} {what}: give a mesh axis name (e.g. 'data'), "
                     "a tuple of them, or None")


def spec_misfit(spec: Any, shape: Sequence[int], mesh: Any) -> str | None:
    """Why PartitionSpec ``spec`` cannot split a ``shape`` array on ``mesh``, else None (JAX's name no variable)."""
    try:
        names = [a for entry in spec for a in mesh_axes_of(entry)]
    except ValueError as err:  # UNCONSTRAINED too, named as such
        return ("PartitionSpec.UNCONSTRAINED leaves a layout to jit's compiler, and a placed array has one: give None"
                if any(entry is PartitionSpec.UNCONSTRAINED for entry in spec) else str(err))
    missing, twice = [a for a in names if a not in mesh.shape], [a for a in names if names.count(a) > 1]
    if missing or twice:  # twice: JAX's DuplicateSpecError named no variable
        return (f"mesh axis {missing[0]!r} is not in the mesh {tuple(mesh.axis_names)}" if missing else
                f"it names mesh axis {twice[0]!r} twice (a mesh axis splits one dimension at most)")
    if len(spec) > len(shape):
        return f"it has {len(spec)} entries for an array of shape {tuple(shape)}"
    sizes = [math.prod(mesh.shape[a] for a in mesh_axes_of(entry)) for entry in spec]
    bad = next(((n, e, k) for n, e, k in zip(shape, spec, sizes) if n % k), None)
    return None if bad is None else f"size {bad[0]} is not divisible by mesh axes {bad[1]!r} of size {bad[2]}"


def check_mesh(mesh: Any, *, abstract: bool = False, optional: bool = True, plans: bool = False) -> None:
    """``TypeError`` unless ``mesh`` is a Mesh (``abstract``/``plans``: or AbstractMesh), or None if ``optional``."""
    if not (isinstance(mesh, (Mesh, AbstractMesh) if abstract or plans else Mesh) or (optional and mesh is None)):
        kind = "a jax.sharding.Mesh" + (" or AbstractMesh" if abstract else "") + (" or None" if optional else "")
        got = "None: it reads the mesh's axes, so it needs one" if mesh is None and not optional else shown(mesh)
        raise TypeError(f"mesh must be {kind}, got {got}; build one with make_mesh(...) or resolve_mesh(spec)")

"""Multi-host input: each process's own rows of a batch become global ``jax.Array``s on the mesh (after AXLearn's
``axlearn/common/utils.py``). Input is checked, then compared across processes, before any array is built."""

import enum
import hashlib
import math
from collections.abc import Callable
from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from gensbi_sharding.mesh import entered_mesh
from gensbi_sharding.batch import batch_spec, numpy_scalars_as_arrays
from gensbi_sharding.batch_sizes import nearest_batch_sizes
from gensbi_sharding.leaf_checks import check_numeric_leaves, check_same_rows, unstacked_rows
from gensbi_sharding.factory import INPUT_IN_FACTORY, UNDER_TRANSFORM, refuse_in_factory, under_transform
from gensbi_sharding.nodes import check_flag, is_array, leaf_name
from gensbi_sharding.specs import check_mesh, mesh_axes_of
from gensbi_sharding.messages import shown
from gensbi_sharding.rules import typo_of

__all__ = ["DataPartitionType", "input_partition_spec", "host_to_global_array"]


class _Named(enum.EnumType):
    """Looks a member up by its value alone, refusing any other value naming the choices (Python's own "is not a
    valid DataPartitionType" named none; an array met "truth value ... is ambiguous" comparing it)."""

    def __call__(cls, value: Any, *args: Any, **kwargs: Any) -> Any:
        if args or kwargs:  # the functional API, Enum("Name", names): left to Python
            return super().__call__(value, *args, **kwargs)
        if isinstance(value, cls):
            return value
        known = [member.value for member in cls]
        if isinstance(value, str) and value in known:
            return super().__call__(value)
        raise ValueError(f"{cls.__name__}({shown(value)}) is none of its values {known}: pass one of them, e.g. "
                         f"{cls.__name__}({known[0]!r}), or {cls.__name__}.{next(iter(cls)).name}")


class DataPartitionType(str, enum.Enum, metaclass=_Named):
    """How ``host_to_global_array`` splits each leaf's leading axis, a ``str`` enum (a config's ``"full"`` works too):
    ``FULL`` over all mesh axes (``input_partition_spec``: each device its own rows), ``DATA`` over the batch axes
    only (as ``shard_batch``), ``REPLICATED`` not at all."""

    FULL = "full"
    DATA = "data"
    REPLICATED = "replicated"


def input_partition_spec(mesh: Mesh) -> P:
    """``P(tuple(mesh.axis_names))``: a leading axis split over all mesh axes (``DataPartitionType.FULL``). Given the
    mesh, unlike AXLearn's, which reads the active one.

    Parameters
    ----------
    mesh : jax.sharding.Mesh or jax.sharding.AbstractMesh

    Returns
    -------
    jax.sharding.PartitionSpec

    Raises
    ------
    TypeError
        ``mesh`` None or not a Mesh/AbstractMesh.
    """
    check_mesh(mesh, abstract=True, optional=False)
    return P(tuple(mesh.axis_names))


def host_to_global_array(host_arrays: Any, *, partition: Any = DataPartitionType.FULL,
                         mesh: Mesh | None = None, check_processes: bool = True) -> Any:
    """Turn this process's rows of a batch into global ``jax.Array``s at ``NamedSharding(mesh, spec)``, split dimensions
    joining the processes' rows (``(2 * b, ...)`` over 2 processes), by ``jax.make_array_from_process_local_data``;
    call it on every process, outside ``jax.jit``.

    Parameters
    ----------
    host_arrays : pytree
        ``numpy.ndarray`` or process-local ``jax.Array`` leaves of shape ``(b, ...)``, ``b`` this process's rows;
        Python scalars and None kept. A NumPy scalar is placed as ``shard_batch`` places it, a replicated 0-d array
        (one program runs for all processes), compared across processes (``check_processes``); a value of each
        process's own (its count of real rows) is rows: pass ``np.full(1, value)``, one row per process.
    partition : DataPartitionType or str or pytree of jax.sharding.PartitionSpec, default DataPartitionType.FULL
        A member or its value (0-d leaves then replicated), or PartitionSpecs forming a prefix of ``host_arrays``.
    mesh : jax.sharding.Mesh, optional
        Default: the active concrete mesh (``mesh_context(mesh)``, or JAX's deprecated ``with mesh:``).
    check_processes : bool, default True
        Compare the processes' inputs (a blocking collective): a loop whose batches keep one shape passes True on
        its first call and False after, on every process alike.

    Returns
    -------
    pytree
        ``host_arrays``' structure, each array leaf a global ``jax.Array`` (a split dimension: the processes' rows
        joined; a replicated one: as each process holds it).

    Raises
    ------
    ValueError
        Before any array is built: called under ``jax.jit`` or another transformation (NumPy leaves and ``mesh=``
        too); no concrete mesh; a bad ``partition`` or spec; a leaf already global or abstract;
        no device of ``mesh`` here; a local size no multiple of its local shards; a value beyond its placed dtype. With
        ``check_processes``, on every process: another process failed, or passes another tree, dtype, shape, or values
        for a leaf it replicates.
    TypeError
        A leaf no JAX array holds, or a Module; ``check_processes`` not a bool.
    RuntimeError
        A leaf deleted (donated to a jitted step), raised on every process as the errors above.
    """
    refuse_in_factory("host_to_global_array", INPUT_IN_FACTORY)  # each process alike: no collective is left waiting
    check_flag(check_processes, "check_processes")  # "no": a collective the caller meant to skip
    mesh = _concrete_mesh(mesh)
    host_arrays = numpy_scalars_as_arrays(host_arrays)  # what shard_batch places
    flat, treedef = jax.tree_util.tree_flatten_with_path(host_arrays)
    leaves, targets, error = [leaf for _, leaf in flat], {}, None
    paths = [leaf_name(keypath) for keypath, _ in flat]  # as messages name each leaf
    # a list of rows never stacked is named with the call that stacks them, the partition kept where it is a kind
    call = (f"host_to_global_array({{}}, partition={getattr(partition, 'value', partition)!r}, mesh=mesh)"
            if isinstance(partition, DataPartitionType) or type(partition) is str else "{}")
    try:  # caught, so every process reaches the one collective of _check_processes_agree and raises too
        specs = _specs(partition, host_arrays, mesh)
        check_numeric_leaves(host_arrays, "host_arrays")
        # The leaves split along their leading axis are one batch: their rows must line up (as shard_batch's).
        check_same_rows(jax.tree.unflatten(treedef, [leaf if is_array(leaf) and len(spec) and spec[0] is not None
                                                     else None for leaf, spec in zip(leaves, specs)]), "host_arrays")
        for i, (path, leaf, spec) in enumerate(zip(paths, leaves, specs)):
            if isinstance(leaf, jax.ShapeDtypeStruct):  # it would stay unplaced, one process's shape
                raise ValueError(f"leaf {path} is abstract ({leaf}); host_to_global_array builds arrays "
                                 "from each process's rows: for a dry run's batch, shard_batch(the global batch as "
                                 "jax.ShapeDtypeStruct, mesh)")
            if not is_array(leaf):
                continue
            if isinstance(leaf, jax.core.Tracer):  # mesh= given inside jax.jit: is_fully_addressable would raise
                raise ValueError(_OUTSIDE_JIT)
            if isinstance(leaf, jax.Array) and not leaf.is_fully_addressable:
                raise ValueError(f"leaf {path} is already a global array spanning processes; "
                                 "pass this process's rows as a numpy or local jax array")
            _check_local_shape(path, leaf.shape, spec, mesh, lambda fix, divisor: unstacked_rows(
                host_arrays, "host_arrays", fix, divisor, call, f"the number of shards process {jax.process_index()} "
                "holds"))
            targets[i] = NamedSharding(mesh, spec)
    except (ValueError, TypeError, RuntimeError) as err:  # any of ours: every process must reach the collective
        error = err
    # Inside jit no collective can run; a mesh over some processes only: the others may never call this.
    if check_processes and jax.process_count() > 1 and str(error) != _OUTSIDE_JIT and len(
            {d.process_index for d in mesh.devices.flat}) == jax.process_count():
        _check_processes_agree(error, treedef, [(paths[i], leaves[i].shape, leaves[i].dtype, sharding.spec,
                                                 _replicated_digest(leaves[i], sharding.spec, mesh))
                                                for i, sharding in targets.items()])
    if error:
        raise error
    for i, sharding in targets.items():
        leaves[i] = jax.make_array_from_process_local_data(sharding, leaves[i])
    return jax.tree.unflatten(treedef, leaves)


def _check_processes_agree(error: Exception | None, treedef: Any, leaves: list) -> None:
    """Raise on every process if one failed or passes other leaves (wrong arrays, a hang); a failed one, its error."""
    said = texts_if_processes_differ(f"failed: {error}" if error else f"passes tree {treedef}, leaves " + ", ".join(
        f"{path} {shape} {dtype} at {spec}" + (f" values {digest}" if digest else "")
        for path, shape, dtype, spec, digest in leaves))
    if said is None or error:  # with an error, this process raises its own
        return
    other = next(p for p, s in sorted(enumerate(said), key=lambda ps: not ps[1].startswith("failed"))
                 if s != said[jax.process_index()])
    raise ValueError(f"host_to_global_array: process {jax.process_index()} {said[jax.process_index()]}; but "
                     f"process {other} {said[other]}; every process must pass the same tree, dtypes and shapes "
                     "(the same number of rows), and the same values for a leaf it replicates")


def texts_if_processes_differ(mine: str) -> list[str] | None:
    """Every process's ``mine`` when they differ, else None; collective (an allgather of digests, then of the texts)."""
    from jax.experimental import multihost_utils  # pylint: disable=import-outside-toplevel

    text = mine.encode()
    head = np.concatenate([[len(text)], np.frombuffer(hashlib.sha256(text).digest()[:16], np.uint8)])
    heads = np.asarray(multihost_utils.process_allgather(head.astype(np.int32)))
    if (heads == heads[0]).all():
        return None
    padded = np.zeros(int(heads[:, 0].max()), np.uint8)
    padded[:len(text)] = np.frombuffer(text, np.uint8)
    return [bytes(row).rstrip(b"\0").decode() for row in np.asarray(multihost_utils.process_allgather(padded))]


def _replicated_digest(leaf: Any, spec: P, mesh: Mesh) -> str | None:
    """A short digest of a leaf every process holds alike (split over no axis spanning processes), else None."""
    split = [mesh.axis_names.index(a) for entry in spec for a in mesh_axes_of(entry)]
    held: dict[int, set] = {}  # process -> the positions along the split axes its devices hold
    for index in np.ndindex(mesh.devices.shape):
        held.setdefault(mesh.devices[index].process_index, set()).add(tuple(index[i] for i in split))
    if len({frozenset(positions) for positions in held.values()}) > 1:  # other slices: other rows by design
        return None
    return hashlib.sha256(np.ascontiguousarray(np.asarray(leaf)).tobytes()).hexdigest()[:12]


_OUTSIDE_JIT = (f"host_to_global_array was called {UNDER_TRANSFORM}: it runs outside them; call it on host data "
                "before the step function")


def _concrete_mesh(mesh: Mesh | None) -> Mesh:
    if mesh is not None and not isinstance(mesh, Mesh):
        raise ValueError(f"mesh must be a concrete jax.sharding.Mesh, got {type(mesh).__name__} "
                         f"{shown(mesh, 40)}; build one with make_mesh(...) or resolve_mesh(spec), or "
                         "pass mesh=None (the active one)")
    if under_transform():  # NumPy rows would become one process's constant in the program, not a global array
        raise ValueError(_OUTSIDE_JIT)
    if mesh is not None:
        return mesh
    active = jax.sharding.get_mesh()
    active = entered_mesh() if active.empty else active  # none set: a `with mesh:` block's, if any
    if active is None:
        what = ("only an abstract mesh is active (jax.sharding.use_abstract_mesh), which has "
                "no devices" if not jax.sharding.get_abstract_mesh().empty else "no mesh is active")
        raise ValueError(f"host_to_global_array needs a concrete mesh, but {what}; call it inside "
                         "`with mesh_context(mesh):` or pass mesh=")
    return active


def _specs(partition: Any, host_arrays: Any, mesh: Mesh) -> list[P]:
    """One PartitionSpec per leaf of ``host_arrays``."""
    if isinstance(partition, str):  # a DataPartitionType too
        if partition not in (known := [k.value for k in DataPartitionType]):
            raise ValueError(f"unknown partition {shown(partition)}; {typo_of(partition, known)}choose one of {known} "
                             "or pass PartitionSpecs")
        kind = DataPartitionType(partition)
        split = input_partition_spec(mesh) if kind is DataPartitionType.FULL else batch_spec(mesh)
        return [P() if not is_array(leaf) or leaf.ndim == 0 or kind is DataPartitionType.REPLICATED else split
                for leaf in jax.tree.leaves(host_arrays)]
    spec_leaves, spec_def = jax.tree.flatten(partition, is_leaf=lambda x: isinstance(x, P))
    if bad := [s for s in spec_leaves if not isinstance(s, P)]:
        raise ValueError(f"partition leaves must be PartitionSpecs, got {shown(bad[0])}; or pass a "
                         f"DataPartitionType, one of {[k.value for k in DataPartitionType]}")
    try:  # a spec for a subtree is every leaf's
        specs = jax.tree.broadcast(partition, host_arrays, is_leaf=lambda x: isinstance(x, P))
    except (ValueError, TypeError) as err:
        none = next((jax.tree_util.keystr(path) for path, spec in jax.tree_util.tree_flatten_with_path(
            partition, is_leaf=lambda x: x is None or isinstance(x, P))[0] if spec is None), None)
        raise ValueError(f"partition tree {spec_def} does not match the host_arrays tree "
                         f"{jax.tree.structure(host_arrays)}; give one PartitionSpec per array (or per subtree)" + (
                             f"; partition{none} is None, which a pytree reads as no leaf, not as a spec: to "
                             "replicate that array give PartitionSpec()" if none is not None else "")) from err
    return jax.tree.leaves(specs, is_leaf=lambda x: isinstance(x, P))


def _check_local_shape(name: str, shape: tuple[int, ...], spec: P, mesh: Mesh,
                       unstacked: Callable[[str, int], str | None] = lambda fix, divisor: None) -> None:
    """``ValueError`` for a spec ``shape`` cannot take here (rows never stacked: ``unstacked(fix, divisor)``)."""
    if any(entry is P.UNCONSTRAINED for entry in spec):
        raise ValueError(f"PartitionSpec {spec} for leaf {name} holds PartitionSpec.UNCONSTRAINED, which leaves a "
                         "layout to jit's compiler; an input array needs one: give None for that dimension")
    if len(spec) > len(shape):
        raise ValueError(f"PartitionSpec {spec} for leaf {name} has {len(spec)} entries, but the "
                         f"leaf has rank {len(shape)} (shape {shape}); use at most {len(shape)}")
    seen, kept, twice = set(), [], []  # kept: each mesh axis at its first use only, the spec suggested
    for entry in spec:
        try:
            names = mesh_axes_of(entry)
        except ValueError as err:
            raise ValueError(f"PartitionSpec {spec} for leaf {name}: {err}") from None
        fresh = tuple(dict.fromkeys(a for a in names if a not in seen))
        twice += [a for a in names if a in seen or names.count(a) > 1]
        seen.update(names)
        kept.append(fresh[0] if len(fresh) == 1 else fresh or None)
    if twice:
        raise ValueError(f"PartitionSpec {spec} for leaf {name} names mesh axis {twice[0]!r} twice; a mesh axis "
                         f"splits one dimension at most: use e.g. {P(*kept)}")
    for dim, names in enumerate(map(mesh_axes_of, spec)):
        if not names:
            continue
        if missing := [a for a in names if a not in mesh.shape]:
            raise ValueError(f"PartitionSpec {spec} for leaf {name} names mesh axis {missing[0]!r}, "
                             f"absent from the mesh {tuple(mesh.axis_names)}")
        held = NamedSharding(mesh, P(names)).addressable_devices_indices_map((math.prod(mesh.shape[a] for a in names),))
        if not held:
            raise ValueError(f"process {jax.process_index()} holds no device of the mesh {dict(mesh.shape)}; "
                             "build the mesh over devices of every process (make_mesh() does)")
        divisor = len({index[0].start for index in held.values()})  # distinct slices this process holds
        if shape[dim] % divisor:  # a dim past the batch's can stay whole
            what = f"leading size {shape[dim]} for" if dim == 0 else f"size {shape[dim]} in dim {dim} of"
            fix = (f"pass {' or '.join(map(str, sorted(nearest_batch_sizes(shape[0], divisor))))} rows per process"
                   if dim == 0 else f"make dim {dim} a multiple of "
                   f"{divisor}, or leave it unsplit: {P(*(None if i == dim else e for i, e in enumerate(spec)))}")
            if dim == 0 and (said := unstacked(f"each of {shape[0]} rows: {fix}", divisor)):
                raise ValueError(said)
            raise ValueError(f"process {jax.process_index()} passes {what} leaf {name} (shape {shape}), not a "
                             f"multiple of {divisor}, the number of shards it holds along mesh axes {names}; {fix}")

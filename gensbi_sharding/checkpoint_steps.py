"""A checkpoint on disk: its Orbax items and names, which step folders are complete, which one a path designates.
Complete: listed by ``CheckpointManager.all_steps()``, holding every item of ``ITEMS``, with a commit in its metadata
(none if cut short). Saving (``checkpoint_save``, refusing the arrays ``non_finite`` names) and restoring
(``checkpoint``) share this layout."""

import logging
import os
import re
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp
from flax import traverse_util

from gensbi_sharding.nodes import is_scalar, named_leaves, placed_dtype, prefixes_holding

__all__ = ["CHECKPOINT_SUBDIR", "ITEMS", "as_path", "check_array_path", "committed_steps", "find_checkpoint",
           "item_handlers", "flat_by_path", "nest_by_path", "non_finite", "nesting_fix",
           "renamed_fix", "wrt_difference"]

#: Folder of a run directory that holds its checkpoints.
CHECKPOINT_SUBDIR = "checkpoints"
#: The Orbax items every checkpoint holds: the arrays (train state, RNG key data), meta (JSON), config (JSON).
ITEMS = ("arrays", "meta", "config")


def as_path(value: Any, name: str, example: str = "checkpoints") -> Path:
    """``Path(value)`` with ``~`` expanded (every checkpoint path argument), not resolved; else ``TypeError``, or
    ``ValueError`` for ``""`` (an unset config field: ``Path("")`` is the current folder, saves among its files), a NUL
    or ``~nosuchuser``."""
    if not isinstance(value, (str, os.PathLike)):
        raise TypeError(f"{name}={value!r:.60}: pass a str or os.PathLike, e.g. {name}={example!r}")
    if value == "":
        raise ValueError(f"{name}='' is empty, which Path reads as the current folder ({os.getcwd()}); pass a folder, "
                         f"e.g. {name}={example!r}, or '.' to mean the current one")
    if "\x00" in os.fspath(value):  # os's "embedded null byte" named no argument
        raise ValueError(f"{name}={value!r}: holds a NUL character, which no path can; pass the folder's path without it")
    try:
        return Path(value).expanduser()
    except RuntimeError as err:  # "~nosuchuser": "Could not determine home directory.", naming no argument
        raise ValueError(f"{name}={value!r}: {Path(value).parts[0]!r} names no home folder here ({err}); pass the "
                         "folder's full path") from None


def check_array_path(path: Path, what: str, saving: bool) -> None:
    """``ValueError`` if TensorStore, which Orbax stores arrays with, misreads ``path`` (Orbax itself says nothing): a
    ``\\`` as a folder separator (arrays written beside it), ``[x]`` as a pattern (arrays saved, never found again)."""
    if odd := re.search(r"\\|\[[^]/]+]", str(path)):
        why = ("a folder separator", ": arrays would be written outside it") if odd[0] == "\\" else (
            "a pattern", ": arrays saved there would never be read back")
        raise ValueError(f"{what} {path} holds {odd[0]!r}, which TensorStore (Orbax's array storage) reads as {why[0]}"
                         + (f"{why[1]}; rename that folder, or pass another one" if saving else
                            ": its arrays cannot be read from there; rename that folder and restore from its new path"))


def committed_steps(directory: str | os.PathLike) -> list[int]:
    """The steps under ``directory`` whose checkpoints are complete, ascending (``[]`` if it is no folder);
    ``TypeError`` if ``directory`` is neither a str nor ``os.PathLike``, ``ValueError`` if ``""``.

    Parameters
    ----------
    directory : str or os.PathLike
        A checkpoints folder (``<run>/checkpoints``); ``~`` is expanded.
    """
    return sorted(step for step, complete in _step_folders(directory).items() if complete)


def find_checkpoint(path: str | os.PathLike, base_dir: str | os.PathLike | None = None) -> Path:
    """The step folder (``.../<step>``) ``path`` designates, absolute with symlinks and ``..`` resolved, so a record of
    it still names the checkpoint after a symlink (``runs/latest``) moves on.

    Parameters
    ----------
    path : str or os.PathLike
        A run dir or its ``checkpoints/`` dir (then the latest complete step), or one step dir; ``~`` is expanded.
    base_dir : str or os.PathLike or None, default None
        What a relative ``path`` is resolved against (``~`` expanded); None: the current working directory.

    Raises
    ------
    TypeError, ValueError, FileNotFoundError
        ``path`` or ``base_dir`` not a str or ``os.PathLike``, or ``""``; ``path`` missing, a file, one item of a step
        dir (the folder to pass named), a step dir cut short, or holding no complete checkpoint.
    """
    given, base = as_path(path, "path", "outputs/run"), as_path(os.getcwd() if base_dir is None else base_dir, "base_dir", ".")
    resolved = (base.absolute() / given).resolve()  # an absolute ``given`` replaces ``base``
    if not resolved.exists():
        steps = committed_steps(resolved.parent) if resolved.name.isdigit() else []  # never saved, or gone by keep
        fix = (f"{resolved.parent} holds steps {steps}: pass one, e.g. {resolved.parent / str(steps[-1])}" if steps
               else f"pass a run dir, its {CHECKPOINT_SUBDIR}/ dir or one step dir")
        raise FileNotFoundError(f"checkpoint path {str(path)!r} does not exist (resolved to {resolved}); {fix}")
    if not resolved.is_dir():
        raise FileNotFoundError(f"{resolved} is a file, not a folder: pass a run dir (e.g. {resolved.parent}), "
                                f"its {CHECKPOINT_SUBDIR}/ dir or one step dir")
    if resolved.name in ITEMS and resolved.parent.name.isdigit():  # one item of a step folder
        raise FileNotFoundError(f"{resolved} is the {resolved.name!r} item of the step folder {resolved.parent}: "
                                f"pass {resolved.parent}")
    is_run = (resolved / CHECKPOINT_SUBDIR).is_dir()  # a sweep's job is named by a number too: a step holds our items
    if resolved.name.isdigit() and not is_run and any((resolved / item).exists() for item in ITEMS):
        complete = _step_folders(resolved.parent).get(int(resolved.name))
        if complete:
            return resolved
        if complete is False:  # was "pass its parent" whatever it held, refused there when it held no complete step
            steps = committed_steps(resolved.parent)
            raise FileNotFoundError(f"{resolved} is not a complete checkpoint (Orbax recorded no commit: the save was "
                                    f"cut short); " + (f"pass its parent for the latest complete step, {steps[-1]}"
                                                       if steps else f"{resolved.parent} holds no complete step: start without it"))
    folder = resolved / CHECKPOINT_SUBDIR if is_run else resolved
    if not (steps := committed_steps(folder)):
        # another writer's steps; one step folder of another writer's is named by its parent
        foreign = _foreign_fix(folder) or (_foreign_fix(resolved.parent, resolved.name) if resolved.name.isdigit()
                                           else None)
        cut = [str(step) for step, done in _step_folders(folder).items() if not done]  # were not named
        raise FileNotFoundError(f"no checkpoint in {resolved}: " + (foreign or
                                f"looked for complete Orbax step folders <step>/ in {folder}" + (
                                    f" (step {', '.join(cut)}: cut short, no commit recorded)" if cut else "")
                                + f"; pass a run dir, its {CHECKPOINT_SUBDIR}/ dir or one step dir"))
    return folder / str(steps[-1])


def _foreign_fix(folder: Path, name: str | None = None) -> str | None:
    """Orbax step folders of ``folder`` (or its ``name``) another writer saved, named with how Orbax reads one; else
    None (was: "looked for complete Orbax step folders")."""
    paths = {s.step: Path(s.path) for s in ocp.step.standard_name_format().find_all(folder) if name in (
        None, Path(s.path).name) and (Path(s.path) / "_CHECKPOINT_METADATA").is_file()} if folder.is_dir() else {}
    foreign = {step: sorted(p.name for p in path.iterdir() if (p / "_METADATA").is_file() or (p / "metadata").is_file())
               for step, path in paths.items() if not any((path / item).exists() for item in ITEMS)}  # [] : unnamed
    if not foreign:
        return None
    (step, items), path = max(foreign.items()), repr(str(folder))
    read = (f"ocp.CheckpointManager({path}).restore({step}, args=ocp.args.Composite({items[0]}=ocp.args.StandardRestore"
            "(target)))" if items else f"ocp.StandardCheckpointer().restore({str(folder / str(step))!r}, target)")
    listed = "; ".join(f"step {s}: {', '.join(map(repr, i)) or 'one unnamed item'}" for s, i in sorted(foreign.items()))
    return (f"{folder} holds Orbax checkpoints another writer saved ({listed}), without the items {', '.join(ITEMS)} "
            "that CheckpointWriter saves and restore reads; from Python, read one with Orbax onto the same target: "
            f"target = abstract_state_for(model, mesh, rule); {read}")


def item_handlers(saving: bool = False) -> dict[str, Any]:
    """One Orbax handler per item of ``ITEMS``; saving registers scalars and, on CPU, no replica-parallel saving."""
    arrays = ocp.StandardCheckpointHandler()
    if saving:
        th, parallel = ocp.type_handlers, None if jax.default_backend() != "cpu" else False  # None: Orbax's default
        arrays = ocp.PyTreeCheckpointHandler(type_handler_registry=th.create_type_handler_registry(
            *((kind, th.ScalarHandler()) for kind in (int, float, complex, np.number, np.bool_)),
            (np.ndarray, th.NumpyHandler()), (jax.Array, th.ArrayHandler(use_replica_parallel=parallel))))
    return dict(zip(ITEMS, (arrays, ocp.JsonCheckpointHandler(), ocp.JsonCheckpointHandler())))


def flat_by_path(tree: Any) -> dict[str, Any]:
    """``{"a/b/c": leaf}`` in leaf order, a variable by its value's leaves; ``ValueError`` if two get one name."""
    named = named_leaves(tree)
    flat, alike = dict(named), Counter(name.replace(".", "/") for name, _ in named)
    # A key holding "/" ({"x/y": ...}) beside a nested one ({"x": {"y": ...}}) names two leaves alike; "." in Orbax.
    clash = next((name for name, _ in named if any(name.rsplit("/", i)[0] in flat for i in range(
        1, name.count("/") + 1))), None) or next((name for name, _ in named if alike[name.replace(".", "/")] > 1), None)
    if clash:
        raise ValueError(f"two leaves of the state are named {clash!r} or one inside the other: a dict key holding "
                         "'/' or '.' beside a nested key (checkpoints name each leaf by its path joined with '/', Orbax "
                         "its arrays with '.'); rename that key, e.g. 'x/y' -> 'x_y'")
    return flat


def nest_by_path(flat: Mapping[str, Any]) -> dict:
    """Nest ``{"a/b/c": leaf}`` into ``{"a": {"b": {"c": leaf}}}`` (what Orbax stores), inverting ``flat_by_path``."""
    return traverse_util.unflatten_dict(dict(flat), sep="/")


def non_finite(flat: dict[str, Any], inf_allowed: set[str] = frozenset()) -> list[str]:
    """Names of the floating-point leaves of ``flat`` holding NaN or inf (those in ``inf_allowed``: NaN); one process's
    CPU arrays read in place (a compiled check took 0.5 s), others by one compiled check every process agrees on."""
    device = {name: leaf for name, leaf in flat.items()
              if isinstance(leaf, jax.Array) and jnp.issubdtype(leaf.dtype, jnp.inexact)}
    fine = lambda name, a: ~np.isnan(a) if name in inf_allowed else np.isfinite(a)  # noqa: E731
    if jax.process_count() == 1 and all(d.platform == "cpu" for v in device.values() for d in v.sharding.device_set):
        flags = [all(fine(name, np.asarray(shard.data)).all() for shard in v.addressable_shards
                     if shard.replica_id == 0) for name, v in device.items()]
    else:
        flags = np.asarray(_finite_flags(list(device.values()), tuple(n in inf_allowed for n in device))) if device else []
    bad = {name for name, ok in zip(device, flags) if not ok} | {  # NumPy and scalars: checked on the host
        name for name, leaf in flat.items() if (isinstance(leaf, np.ndarray) or is_scalar(leaf))
        and jnp.issubdtype(np.asarray(leaf).dtype, jnp.inexact) and not fine(name, leaf).all()}
    return [name for name in flat if name in bad]


@jax.jit(static_argnums=1)
def _finite_flags(leaves: list[jax.Array], nan_only: tuple[bool, ...]) -> jax.Array:
    """One bool per leaf: all its values finite, or not NaN (``nan_only``) (one compiled reduction, one transfer)."""
    return jnp.stack([jnp.all(~jnp.isnan(leaf) if n else jnp.isfinite(leaf)) for leaf, n in zip(leaves, nan_only)])


def _said_here(record: logging.LogRecord) -> bool:
    """False for Orbax's "Metadata file does not exist" (was on sample.py's and launch.py's console before the
    refusal that names the step "cut short, no commit recorded"); True for every other record."""
    return not str(record.msg).startswith("Metadata file does not exist")


def _step_folders(directory: str | os.PathLike) -> dict[int, bool]:
    """``{step: complete}`` of step folders with an item of ``ITEMS``, read with no CheckpointManager (starts JAX)."""
    if not (directory := as_path(directory, "directory")).is_dir():
        return {}
    found, absl = {}, logging.getLogger("absl")
    absl.addFilter(_said_here)  # Orbax's warning of an uncommitted folder, said twice each: the caller names it
    try:
        for step in ocp.step.standard_name_format().find_all(directory):
            try:
                metadata = ocp.metadata.get_step_metadata(step.path)
            except ValueError:  # no step metadata written: never committed; an item's folder still marks it a save's
                found[step.step] = (False, {item for item in ITEMS if (Path(step.path) / item).is_dir()})
            else:
                found[step.step] = (metadata.commit_timestamp_nsecs is not None, set(metadata.item_handlers or ()))
    finally:
        absl.removeFilter(_said_here)
    return {step: committed and set(ITEMS) <= items for step, (committed, items) in found.items() if set(ITEMS) & items}


def wrt_difference(saved: Mapping[str, Any], target: Mapping[str, Any]) -> str | None:
    """The fix when both optimizer states cover other parameters (another ``wrt=``), else None; a leaf covers its path's
    longest tail after ``opt_state`` ending a variable path (``.../opt_state/0/mu/b/bias``: ``b/bias``)."""
    outside = [n.split("/") for n in (*saved, *target) if "opt_state" not in n.split("/")]
    tails = {"/".join(parts[j:]) for parts in outside for j in range(1, len(parts))}

    def covered(names) -> dict[str, str]:  # parameter tail -> one state path covering it
        found: dict[str, str] = {}
        for name, parts in ((name, name.split("/")) for name in names if "opt_state" in name.split("/")):
            if (tail := next((t for j in range(parts.index("opt_state") + 1, len(parts))
                              if (t := "/".join(parts[j:])) in tails), None)) is not None:
                found.setdefault(tail, name.removeprefix("state/"))  # as the target names it
        return found

    in_saved, in_target = covered(saved), covered(target)
    only_saved, only_target = ([t for t in a if t not in b] for a, b in ((in_saved, in_target), (in_target, in_saved)))
    if not (in_saved and in_target and (only_saved or only_target)):  # one holds none: a stateless tx (plain sgd)
        return None
    example = (f"the checkpoint's covers {only_saved[0]} ({in_saved[only_saved[0]]}), the target's does not"
               if only_saved else
               f"the target's covers {only_target[0]} ({in_target[only_target[0]]}), the checkpoint's does not")
    return (f"The optimizer states cover different parameters ({len(only_saved)} only in the checkpoint's, "
            f"{len(only_target)} only in the target's; e.g. {example}): the target's nnx.Optimizer was built with "
            "another wrt= filter. Build it with the wrt= it was saved with (nnx.Optimizer(model, tx, wrt=...)), "
            "restore, then make the new one over the restored model")


def nesting_fix(saved: Mapping[str, Any], target: Mapping[str, Any], whole: str = "(model, optimizer)",
                step_dir: Any = "<step folder>") -> str | None:
    """The fix when one side holds all the other's variables under nodes' prefixes (``whole``, as saved), else None."""
    names = [[name.removeprefix("state/") for name in d if name.startswith("state/")] for d in (saved, target)]
    for saved_one in (False, True):  # the target inside the checkpoint, then the reverse
        heads = prefixes_holding(names[1 - saved_one], names[saved_one])
        nodes = [head for head in heads if "opt_state" not in head.split("/")]  # was: the first head, mu/ if first
        under = " and ".join(f"'{head}/'" for head in nodes or heads)
        if heads and not nodes:  # an optimizer's moments (mu/): the other side an nnx.Optimizer alone, holding no model
            saver, node = ("an nnx.Optimizer", "optimizer") if not saved_one else ("a model", "model")
            return (f"The {('checkpoint', 'target')[saved_one]} holds the other's variables only as an optimizer's "
                    f"moments, under {under}: the checkpoint was saved from {saver} alone; build the target from the "
                    f"same: abstract_state_for({node}, mesh, rule)")
        keys = ["state", *(nodes or ["0"])[0].split("/")]  # Orbax reads the first part holding the target alone
        item = "".join(f"{{{key!r}: " for key in keys) + "nnx.to_pure_dict(target)" + "}" * len(keys)
        if nodes:
            return (f"The target holds every variable of the checkpoint under {under}: the checkpoint was saved from "
                    f"{'that one node' if len(nodes) == 1 else 'one of them'}; build the target from it alone, e.g. "
                    f"abstract_state_for({ {'0': 'model', '1': 'optimizer'}.get(nodes[0], nodes[0])}, mesh, rule)"
                    if saved_one else f"The checkpoint holds every variable of the target under {under}: it was "
                    f"saved from a tuple or dict holding this node, e.g. nnx.state({whole}); build the target from "
                    f"the same: abstract_state_for({whole}, mesh, rule); or read the part under '{nodes[0]}/' alone "
                    f"with Orbax: target = abstract_state_for(model, mesh, rule); item = {item}; part = ocp.Checkpointer("
                    f"ocp.CompositeCheckpointHandler()).restore({str(step_dir)!r}, args=ocp.args.Composite(arrays=ocp."
                    "args.PyTreeRestore(item, restore_args=ocp.checkpoint_utils.construct_restore_args(item), partial_"
                    "restore=True)))['arrays']" + "".join(f"[{key!r}]" for key in keys) + "; nnx.replace_by_pure_dict("
                    "target, part); nnx.update(model, target)")
    return None


def renamed_fix(saved: Mapping[str, Any], target: Mapping[str, Any]) -> str | None:
    """The fix when only optimizer state differs, or one name in every differing path (renamed), else None."""
    kind = lambda leaf: (tuple(leaf.shape), placed_dtype(leaf.dtype))  # noqa: E731
    missing, extra = ({n: kind(d[n]) for n in d if n not in o} for d, o in ((target, saved), (saved, target)))
    unlike = [n for n in target if n in saved and kind(saved[n]) != kind(target[n])]
    if all("opt_state" in n.split("/") for n in [*missing, *extra, *unlike]):  # another wrt= filter, or tx
        return wrt_difference(saved, target) or (
            "Only the optimizer state differs: the checkpoint was saved with another optimizer (another optax "
            "transformation or settings); build the target's optimizer as saved, restore, then make the new one "
            "over the restored model: nnx.Optimizer(model, new_tx, wrt=nnx.Param)")
    first = next(iter(missing), "").split("/")  # a name renamed in every path renames this one's too
    for old, new in {(a, b) for m in extra if len(m.split("/")) == len(first)
                     for a, b in zip(m.split("/"), first) if a != b}:
        if not unlike and missing == {"/".join(new if p == old else p for p in m.split("/")): k
                                      for m, k in extra.items()}:
            return (f"Every difference is one name: the checkpoint's {old!r} is the target's {new!r} (an attribute "
                    f"renamed since the save, e.g. self.{old} -> self.{new}); name it {old!r} again to restore")
    return None

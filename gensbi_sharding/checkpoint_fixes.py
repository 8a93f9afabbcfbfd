"""Whether a checkpoint's variables differ from a restore target's (``check_against``), and what to do: another ``wrt=``
filter or optimizer, one side nested in the other (the node it was saved from), an attribute renamed since the save,
more variables saved; Orbax checkpoints another writer saved (``foreign_fix``, with the Orbax call that reads each), a
step's Orbax metadata (``step_metadata``), and Orbax's log lines a refusal already says, dropped (``absl_filtered``)."""

import contextlib
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import orbax.checkpoint as ocp
from flax import nnx

from gensbi_sharding.nodes import placed_dtype, prefixes_holding

__all__ = ["absl_filtered", "check_against", "foreign_fix", "step_metadata", "subfolder_fix"]

_MAX_LISTED = 6  # mismatching variables quoted in full in an error


def wrt_difference(saved: Mapping[str, Any], target: Mapping[str, Any]) -> str | None:
    """The fix when the optimizer states cover other parameters (another ``wrt=``), else None."""
    outside = [n.split("/") for n in (*saved, *target) if "opt_state" not in n.split("/")]
    tails = {"/".join(parts[j:]) for parts in outside for j in range(1, len(parts))}

    def covered(names) -> dict[str, str]:  # parameter path -> a state path ending in it (.../opt_state/0/mu/b/bias)
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


def nesting_fix(saved: Mapping[str, Any], target: Mapping[str, Any], whole: str, step_dir: Path) -> str | None:
    """The fix when one side holds all the other's variables under nodes' prefixes (``whole``, as saved), else None."""
    names = [[name.removeprefix("state/") for name in d if name.startswith("state/")] for d in (saved, target)]
    for saved_one in (False, True):  # the target inside the checkpoint, then the reverse
        heads = prefixes_holding(names[1 - saved_one], names[saved_one])
        nodes = [head for head in heads if "opt_state" not in head.split("/")]
        if not saved_one:  # those whose shapes fit too (a Linear named beside the Linear it holds)
            nodes = [h for h in nodes if all(tuple(saved[f"state/{h}/{n}"].shape) == tuple(target[f"state/{n}"].shape)
                                             for n in names[1])] or nodes
        under = " and ".join(f"'{head}/'" for head in nodes or heads)
        if heads and not nodes:  # an optimizer's moments (mu/): the other side an nnx.Optimizer alone, holding no model
            saver, node = ("an nnx.Optimizer", "optimizer") if not saved_one else ("a model", "model")
            return (f"The {('checkpoint', 'target')[saved_one]} holds the other's variables only as an optimizer's "
                    f"moments, under {under}: the checkpoint was saved from {saver} alone; build the target from the "
                    f"same: abstract_state_for({node}, mesh, rule)")
        keys = ["state", *(nodes or ["0"])[0].split("/")]  # Orbax reads the first part holding the target alone
        reach = lambda of: "".join(f"[{k}]" if k.isdigit() else f"[{k!r}]" if of == dict else f".{k}"  # noqa: E731
                                   for k in keys[1:])  # Python's words for it: self.layers[0], parent['lin']
        item = "".join(f"{{{key!r}: " for key in keys) + "nnx.to_pure_dict(target)" + "}" * len(keys)
        if nodes:
            return (f"The target holds every variable of the checkpoint under {under}: the checkpoint was saved from "
                    f"{'that one node' if len(nodes) == 1 else 'one of them'}; build the target from it alone, e.g. "
                    f"abstract_state_for({ {'0': 'model', '1': 'optimizer'}.get(nodes[0], nodes[0])}, mesh, rule)"
                    if saved_one else f"The checkpoint holds every variable of the target under {under}: " + (
                        f"it was saved from a tuple or dict holding this node, e.g. nnx.state({whole}); build the "
                        f"target from the same: abstract_state_for({whole}, mesh, rule)" if nodes[0][0].isdigit() else
                        # a Module's attributes or a dict's keys, alike in a checkpoint
                        f"it was saved from a parent holding this node as {nodes[0]!r} (a Module with it as attribute "
                        f"self{reach(object)}, or a dict under that key; the checkpoint's top level: "
                        f"{whole}); restore that parent and take the node from it: restored = "
                        f"restore({str(step_dir)!r}, abstract_state_for(parent, mesh, rule)); nnx.update(parent, "
                        f"restored.state); parent{reach(object)} is it (a dict's: parent{reach(dict)})") + f"; or read "
                    f"the part under '{nodes[0]}/' alone with Orbax: target = abstract_state_for(model, mesh, rule); "
                    f"item = {item}; part = ocp.Checkpointer("
                    f"ocp.CompositeCheckpointHandler()).restore({str(step_dir)!r}, args=ocp.args.Composite(arrays=ocp."
                    "args.PyTreeRestore(item, restore_args=ocp.checkpoint_utils.construct_restore_args(item), partial_"
                    "restore=True)))['arrays']" + "".join(f"[{key!r}]" for key in keys) + "; nnx.replace_by_pure_dict("
                    "target, part); nnx.update(model, target)")
    return None


def renamed_fix(saved: Mapping[str, Any], target: Mapping[str, Any]) -> str | None:
    """The fix when only optimizer state differs, one name in every differing path (renamed), every top-level entry
    (a dict's keys saved, a tuple's positions restored, or the reverse), or the target is a part so named, else None."""
    kind = lambda leaf: (tuple(leaf.shape), placed_dtype(leaf.dtype))  # noqa: E731
    missing, extra = ({n: kind(d[n]) for n in d if n not in o} for d, o in ((target, saved), (saved, target)))
    unlike = [n for n in target if n in saved and kind(saved[n]) != kind(target[n])]
    if all("opt_state" in n.split("/") for n in [*missing, *extra, *unlike]):  # another wrt= filter, or tx
        return wrt_difference(saved, target) or (
            "Only the optimizer state differs: the checkpoint was saved with another optimizer (another optax "
            "transformation or settings); build the target's optimizer as saved, restore, then make the new one "
            "over the restored model: nnx.Optimizer(model, new_tx, wrt=nnx.Param)")
    tops = [top_entries(d) for d in (saved, target)]  # each top entry's own names alike: the nodes themselves fit
    rest = lambda d, top=None: sorted((n.split("/", 2)[2], kind(d[n])) for n in d  # noqa: E731
                                      if n.startswith("state/") and n.count("/") > 1 and top in (None, n.split("/")[1]))
    entries = (f"the checkpoint's are {', '.join(map(repr, tops[0]))}, the target's {', '.join(map(repr, tops[1]))} "
               "(a tuple's positions, a dict's keys or a Module's attributes)")
    if len(tops[0]) > 1 and not set(tops[0]) & set(tops[1]) and rest(saved) == rest(target):  # one: renamed, below
        return (f"Only the top-level entries differ: {entries}: build the target as the state was saved, e.g. "
                f"abstract_state_for({whole_target(saved)}, mesh, rule)")
    fits = {t: [s for s in tops[0] if rest(saved, s) == rest(target, t)] for t in tops[1]}  # two alike models: both
    if tops[1] and not set(tops[0]) & set(tops[1]) and all(fits.values()) and rest(saved) != rest(target):
        key = lambda s: int(s) if s.isdigit() and all(t.isdigit() for t in tops[0]) else s  # noqa: E731
        return (f"The target holds only part of the checkpoint: {entries}; the target's "
                f"{', '.join(f'{t!r} fits the saved ' + ' or '.join(map(repr, s)) for t, s in fits.items())}. Restore "
                f"all it holds, e.g. restored = restore(path, abstract_state_for({whole_target(saved)}, mesh, rule)), "
                f"then keep the part: nnx.update(model, restored.state[{key(next(iter(fits.values()))[0])!r}])")
    first = next(iter(missing), "").split("/")  # a name renamed in every path renames this one's too
    for old, new in {(a, b) for m in extra if len(m.split("/")) == len(first)
                     for a, b in zip(m.split("/"), first) if a != b}:
        if not unlike and missing == {"/".join(new if p == old else p for p in m.split("/")): k
                                      for m, k in extra.items()}:
            return (f"Every difference is one name: the checkpoint's {old!r} is the target's {new!r} (an attribute "
                    f"renamed since the save, e.g. self.{old} -> self.{new}); name it {old!r} again to restore")
    return None


def extra_fix(extra: list[str], target: Mapping[str, Any], whole: str, config: Path | None, only_extra: bool) -> str:
    """The fix for ``extra`` saved names: more nodes for those under top entries the target lacks (a Module's: first a
    submodule more), the saved hyperparameters (``config``: their item, None if none saved) for those inside its nodes,
    both; a call first for sow's or perturb's."""
    lacked = [t for t in top_entries(extra) if t not in top_entries(target)]
    inner = [n for n in extra if not (n.startswith("state/") and n.count("/") > 1 and n.split("/")[1] in lacked)]
    called = [n for n in inner if n.split("/")[-1].isdigit() or _beside_submodules(n, target)]
    how = ("a call sowed (nnx.Intermediate" if all(n.split("/")[-1].isdigit() for n in inner) else
           "nnx.Module.perturb left (nnx.Perturbation")
    build = "build the model with the hyperparameters " + (
        f"saved in {config}" if config else "it was saved with (none saved: CheckpointWriter(..., config=...) saves "
                                            "them)") + (
        f"; if they are values {how}, which older checkpoints hold), call the target once before abstract_state_for"
        if only_extra and inner and len(called) == len(inner) else "")
    if not (only_extra and lacked):
        return build[0].upper() + build[1:]
    module = not inner and not all(t.isdigit() for t in top_entries(target)) and not any(  # a Module's attributes,
        n.split("/")[2:3] == ["opt_state"] for n in target)  # or a dict's keys: one holding an optimizer is of nodes
    return (f"The checkpoint holds the whole target as saved and {len(extra)} more variable(s) "
            f"({len(extra) - len(inner)} under {', '.join(map(repr, lacked))}, which the target lacks" + (
                f"; {len(inner)} inside its own nodes, e.g. {inner[0].removeprefix('state/')}): {build}; then"
                if inner else "):") +
            (f" if the model was saved with more submodules, {build}; if among more nodes," if module else "") +
            f" restore into a target of all it holds, e.g. abstract_state_for({whole}, mesh, rule), and keep the part "
            "you need")


def _beside_submodules(name: str, target: Mapping[str, Any]) -> bool:
    """Whether ``name`` is an array of a node holding submodules alone in the target (perturb's, not a layer's bias)."""
    parent = name.rsplit("/", 1)[0] + "/"
    own = [t[len(parent):] for t in target if t.startswith(parent)]
    return bool(own) and all("/" in t for t in own)


def filtered_fix(saved: Mapping[str, Any], target: Mapping[str, Any], kinds: Mapping[str, type]) -> str | None:
    """The fix where the checkpoint holds exactly the target's variables of some types (``kinds``: each variable's
    path, its type), a state filtered as saved (``nnx.state(model, nnx.Param)``): the target filtered alike."""
    by_path = {f"state/{p}": k for p, k in kinds.items()}

    def kind(name: str) -> type | None:  # the variable's path is the name or one of its prefixes (a dict lookup each)
        parts = name.split("/")
        return next((by_path[p] for p in ("/".join(parts[:i]) for i in range(len(parts), 1, -1)) if p in by_path),
                    None)

    held, lacked = ({kind(n) for n in target if n.startswith("state/") and (n in saved) == inside}
                    for inside in (True, False))
    if not (held and lacked) or None in held | lacked or held & lacked or any(n not in target for n in saved) or any(
            tuple(saved[n].shape) != tuple(target[n].shape) for n in target if n in saved):
        return None  # a type on both sides (a layer more), or another width: hyperparameters, not a filter
    names = [f"nnx.{k.__name__}" if getattr(nnx, k.__name__, None) is k else k.__name__ for k in held]
    kept = names[0] if len(names) == 1 else f"nnx.Any({', '.join(sorted(names))})"
    return (f"The checkpoint holds only the target's {' and '.join(sorted(names))} variables (a filtered state saved, "
            f"e.g. nnx.state(model, {kept})): restore into the target filtered alike, nnx.filter_state("
            f"abstract_state_for(model, mesh, rule), {kept}), then nnx.update(model, restored.state); or save the "
            "whole nnx.state(model)")


def check_against(saved: Mapping[str, Any], target: Mapping[str, Any], step_dir: Path,
                  has_config: Callable[[], bool], kinds: Mapping[str, type]) -> None:
    """``ValueError`` listing the variables missing, extra, or of another shape or dtype than saved."""
    problems = [f"{n}: missing from the checkpoint" for n in target if n not in saved]
    extra = [n for n in saved if n not in target]
    problems += [f"{n}: in the checkpoint, not in the model" for n in extra]
    dtypes_only = not problems
    for name in (n for n in target if n in saved):
        s, t = saved[name], target[name]
        # Compared as placed: an unplaced NumPy float64 saved as such restores into its float32 place, and back.
        if tuple(s.shape) != tuple(t.shape) or placed_dtype(s.dtype) != placed_dtype(t.dtype):
            dtypes_only = dtypes_only and tuple(s.shape) == tuple(t.shape)
            problems.append(f"{name}: saved {tuple(s.shape)} {s.dtype}, target {tuple(t.shape)} {t.dtype}")
    if problems:
        listed = "; ".join(p.removeprefix("state/") for p in problems[:_MAX_LISTED])  # as the target and fix name them
        listed += f"; and {len(problems) - _MAX_LISTED} more" if len(problems) > _MAX_LISTED else ""
        # Same shapes: no hyperparameter differs; the saved state's dtypes are those training left it with.
        config = step_dir / "config" if has_config() else None  # {}: a writer given no config=
        fix = (f"Only dtypes differ: build the model with the dtypes it was saved with (its param_dtype"
               f"{f': {config}' if config else ''}), or, where a train step changed them (optax.inject_hyperparams "
               "makes a bfloat16 parameter's moments float32), the target from such a state (abstract_state_for after "
               "a step)" if dtypes_only else nesting_fix(saved, target, whole_target(saved), step_dir)
               or renamed_fix(saved, target) or filtered_fix(saved, target, kinds)
               or extra_fix(extra, target, whole_target(saved), config, len(extra) == len(problems)))
        raise ValueError(f"checkpoint {step_dir} does not fit the current model, {len(problems)} variable(s) "
                         f"differ: {listed}. {fix}")


def top_entries(names: Any) -> list[str]:
    """The top-level entries of a state's saved names, in order (``state/1/opt_state/...``: ``1``)."""
    return list(dict.fromkeys(n.split("/")[1] for n in names if n.startswith("state/") and n.count("/") > 1))


def whole_target(saved: Mapping[str, Any]) -> str:
    """A restore target of the saved top level: ``(model, optimizer, <node 2>)`` for a tuple's, a dict's keys."""
    tops = top_entries(saved)
    if tops == [str(i) for i in range(len(tops))] and len(tops) > 1:
        return f"({', '.join(['model', 'optimizer', *(f'<node {t}>' for t in tops[2:])])})"
    return "{" + ", ".join(f"{t!r}: <node>" for t in tops) + "}" if len(tops) > 1 else "(model, optimizer)"


def foreign_fix(folder: Path, ours: Sequence[str], name: str | None = None) -> str | None:
    """Orbax step folders of ``folder`` (``name``: that one alone), or a checkpoint in ``folder`` itself, holding none
    of ``ours`` (another writer's), named with the Orbax call that reads one; None if none."""
    paths = {s.step: Path(s.path) for s in ocp.step.standard_name_format().find_all(folder)
             if name in (None, Path(s.path).name)} if folder.is_dir() else {}
    if not paths and name is None and folder.is_dir() and not folder.name.isdigit():  # a step's: named by its parent
        paths = {None: folder}  # one checkpoint in the folder itself, as StandardCheckpointer().save(ckpt / 's', state)
    saved = {step: metadata.item_handlers for step, path in paths.items() if not any((path / item).exists() for item
             in ours) and (metadata := step_metadata(path)) is not None}
    foreign = {step: dict(sorted(h.items())) if isinstance(h, dict) else {} for step, h in saved.items()}  # {}: unnamed
    if not foreign:
        return None
    (step, items), path = max(foreign.items()), repr(str(folder))
    # an item of arrays, not a JSON one; a manager's one unnamed item, 'default', is read without Composite
    arrays = [n for n, h in items.items() if str(h).endswith(("StandardCheckpointHandler", "PyTreeCheckpointHandler"))]
    composite = f"ocp.args.Composite({(arrays or list(items) or [''])[0]}=ocp.args.StandardRestore(target)))"
    if step is None:
        read = (f"ocp.Checkpointer(ocp.CompositeCheckpointHandler()).restore({path}, args={composite}" if items
                else f"ocp.StandardCheckpointer().restore({path}, target)")
        listed = f"its item{'s' if len(items) > 1 else ''} {', '.join(map(repr, items))}" if items else \
            "one unnamed item"
        said = f"{folder} is an Orbax checkpoint another writer saved in the folder itself ({listed}), not in step " \
            "folders"
    else:
        read = (f"ocp.CheckpointManager({path}).restore({step}, args=" + (
            "ocp.args.StandardRestore(target))" if list(items) == ["default"] else composite) if items
            else f"ocp.StandardCheckpointer().restore({str(folder / str(step))!r}, target)")
        listed = "; ".join(f"step {s}: {', '.join(map(repr, i)) or 'one unnamed item'}" for s, i in
                           sorted(foreign.items()))
        said = f"{folder} holds Orbax checkpoints another writer saved ({listed})"
    return (f"{said}, without the items {', '.join(ours)} that CheckpointWriter saves and restore reads; from Python, "
            f"read one with Orbax onto the same target: target = abstract_state_for(model, mesh, rule); {read}")


def subfolder_fix(folder: Path, ours: Sequence[str]) -> str | None:
    """``foreign_fix`` of the first subfolder of ``folder`` holding another writer's checkpoint (Flax's guide's
    ``StandardCheckpointer().save(ckpt_dir / 'state', state)``, ``ckpt_dir`` passed); None if none does."""
    try:
        children = sorted(child for child in folder.iterdir() if child.is_dir() and not child.name.isdigit())
    except OSError:  # no folder, or none it may list: this refusal's words are "no checkpoint" all the same
        return None
    found = []
    for child in children:
        try:
            found += [(child, fix)] if (fix := foreign_fix(child, ours)) else []
        except OSError:  # a child that may not be read (another user's folder beside the run): not one
            continue
    if not found:
        return None
    names = ", ".join(repr(child.name) for child, _ in found)
    return (f"its subfolders {names} hold one each; the first: " if len(found) > 1 else
            f"its subfolder {names} holds one: ") + found[0][1]


def step_metadata(path: Path) -> Any:
    """Orbax's ``StepMetadata`` of the step folder ``path`` (``ocp.metadata.get_step_metadata``); None if none."""
    try:
        # Orbax's "Metadata file does not exist" dropped: the refusal names what a step lacks
        with absl_filtered(lambda record: not str(record.msg).startswith("Metadata file does not exist")):
            return ocp.metadata.get_step_metadata(path)
    except ValueError:  # none written: never committed, or the file lost since
        return None


@contextlib.contextmanager
def absl_filtered(keep: Callable[[logging.LogRecord], bool]) -> Iterator[None]:
    """Drop the ``absl`` logger's records (Orbax's) for which ``keep(record)`` is False, inside the block only: by a
    filter of this call's own, never the logger's level (the user's; a level set and put back raced across threads)."""
    absl = logging.getLogger("absl")
    own = lambda record: keep(record)  # noqa: E731  (one object per call: removing it leaves other calls' filters)
    absl.addFilter(own)
    try:
        yield
    finally:
        absl.removeFilter(own)

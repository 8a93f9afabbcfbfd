"""The train step must return its state with the very dtypes and shapes it was given.

The step is jitted once and called with its own output: a variable whose dtype or shape
the step changes (a bfloat16 parameter averaged into float32, say) compiles fine and
fails only at the second call, with a list of XLA argument types. Checking the lowered
step's output types against its input state finds such drift before any step runs, in
a training run and in ``dry_run=true`` alike, and names the variables.
"""

from __future__ import annotations

from typing import Any

import jax

from gensbi_sharding.harness.units import is_int

__all__ = ["StateDriftError", "check_step_keeps_state"]

#: The nodes of the split state ``(model, optimizer[, ema])``, by position.
NODES = ("model", "optimizer", "ema")
SHOWN = 6  # variables named in the message; the rest are counted


class StateDriftError(TypeError):
    """The train step returns some state variable with another dtype or shape than it was given."""


def check_step_keeps_state(state: Any, out_state: Any) -> None:
    """Raise if ``out_state`` (the step's output state, e.g. ``lowered.out_info[0]``) differs in type from ``state``.

    Parameters
    ----------
    state : pytree
        The split state the step is called with (arrays or ``jax.ShapeDtypeStruct``).
    out_state : pytree
        The state part of the step's output: arrays or ``jax.ShapeDtypeStruct``.

    Raises
    ------
    StateDriftError
        One line naming each variable (``ema/params/.../kernel``) whose dtype or shape changes,
        with both types.
    """
    ins, in_def = jax.tree_util.tree_flatten_with_path(state)
    outs, out_def = jax.tree_util.tree_flatten(out_state)
    if in_def != out_def:
        raise StateDriftError(f"the train step returns a state of another structure than it is given "
                              f"({in_def.num_leaves} variables in, {out_def.num_leaves} out); it could not "
                              "be called with its own output")
    drift = [(path, a, b) for (path, a), b in zip(ins, outs)
             if a.dtype != b.dtype or tuple(a.shape) != tuple(b.shape)]
    if not drift:
        return
    named = [f"{_name(path)} {_type(a)} -> {_type(b)}" for path, a, b in drift[:SHOWN]]
    more = f" and {len(drift) - SHOWN} more" if len(drift) > SHOWN else ""
    hint = (" (train.ema_decay=0 trains without the average)"
            if all(_name(path).startswith("ema/") for path, _, _ in drift) else "")
    raise StateDriftError(f"the train step changes the type of {len(drift)} state variable(s), so it could not "
                          f"be called with its own output: {'; '.join(named)}{more}. A fault of the step, not of "
                          f"the settings{hint}")


def _name(path: tuple) -> str:
    # state[2]['params']['flux']['kernel'].value -> ema/params/flux/kernel
    parts = []
    for entry in path:
        key = getattr(entry, "key", getattr(entry, "idx", getattr(entry, "name", None)))
        if key is None or key == "value":
            continue
        parts.append(NODES[key] if not parts and is_int(key) and key < len(NODES) else str(key))
    return "/".join(parts)


def _type(leaf: Any) -> str:
    return f"{leaf.dtype}[{','.join(map(str, leaf.shape))}]"

"""What a checkpoint says of the run that saved it, for the run that continues it: a damaged step's words
(``damaged_here``), a changed compute dtype (``compute_dtype_note``), and the saving run's ``JAX_ENABLE_X64``
(``run_x64``) that a pasted command continuing it carries before ``python`` (``x64_prefix``, ``continue_prefix``).
Whether the checkpoint's saved config lets this run's config continue it is ``resume_refusal``'s (moved from here: it
names the model overrides, ``model_switch``, which reaches the printed commands that import this module).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gensbi_sharding.harness.config import ConfigError
from gensbi_sharding.harness.held_out import config_value
from gensbi_sharding.harness.python_words import fix_said
from gensbi_sharding.harness.stopped_step import stopped_at_step
from gensbi_sharding.harness.units import is_int
from gensbi_sharding.harness.x64_words import x64_lead, x64_on

__all__ = ["damaged_here", "compute_dtype_note", "run_x64", "x64_prefix", "continue_prefix"]


def damaged_here(reason: str, step_dir: Path) -> FileNotFoundError:
    """The refusal of a damaged step folder of the run's own (``train.resume=auto``), with the fix that works there:
    the library's "resume from another step folder" or "start without it" names no command the folder's run takes (run
    without train.resume, the folder is refused, "rerun with train.resume=auto", which refuses it again). The older
    steps it would pick next are checked as ``step_items`` checks them, their arrays' metadata too (not their config
    and meta items only: "it resumes from step 4" of a step 4 whose arrays are gone would be refused by the restore in
    turn)."""
    import re

    from gensbi_sharding.checkpoint import committed_steps
    from gensbi_sharding.harness.step_items import step_damage

    others = [step_dir.parent / str(s) for s in committed_steps(step_dir.parent) if str(s) != step_dir.name]
    also = {older: why for older in others if (why := step_damage(older)) is not None}
    while others and others[-1] in also:  # the steps train.resume=auto would pick next, in turn
        others.pop()
    also = {older: re.search(r"its '(\w+)'", also[older]).group(1) for older in sorted(
        also, key=lambda p: -int(p.name)) if not others or int(older.name) > int(others[-1].name)}
    then = f"resumes from step {others[-1].name}" if others else \
        f"starts afresh in this folder (no other step is {'readable' if also else 'complete'})"
    items = " or ".join(dict.fromkeys(also.values()))
    too = f", and {' and '.join(map(str, also))} too (whose {items} item cannot be read either)" if also else ""
    said = FileNotFoundError(f"{reason}; move {step_dir} aside, e.g. to {step_dir}.damaged{too}, and run the same "
                             f"command again: it {then}")
    said.reason = reason
    return said


def compute_dtype_note(saved: dict, now: dict, step: int) -> tuple[str, bool] | None:
    """How a run resumed at ``step`` computes otherwise than the run that saved it: ``model.dtype`` is free on resume
    (the weights restore in ``model.param_dtype`` either way), but every step and score after it is computed in this
    run's; None where both agree or the checkpoint's config has none (mlp, transformer).

    Parameters
    ----------
    saved, now : dict
        The checkpoint's saved config and this run's (plain dicts with a ``model`` section).
    step : int
        The checkpoint's step, where this run starts.

    Returns
    -------
    (str, bool) or None
        One line naming both values and the override that continues as the saved run would have gone; and whether
        the saved run was unfinished (``step`` below its ``train.steps``: then the change is likely a slip, worth a
        warning, as ``schedule.schedule_change_note`` says of the schedule).
    """
    old, new = config_value(saved, "model.dtype"), config_value(now, "model.dtype")
    if old is None or old == new:
        return None
    steps = config_value(saved, "train.steps")
    unfinished = is_int(steps) and step < steps
    further = config_value(now, "train.steps")
    trains = not is_int(further) or further > step  # at the checkpoint's step: nothing to train
    scores = config_value(now, "eval.enabled") is not False
    if not (trains or scores):
        return None  # nothing is computed in either dtype
    does = " and ".join(verb for verb, done in (("trains", trains), ("scores", scores)) if done)
    return (f"train.resume: the checkpoint at step {step} was computed in model.dtype={old} (this run: "
            f"model.dtype={new}): from step {step} this run {does} in {new}; {fix_said([f'model.dtype={old}'])} to "
            "compute as the saved run did", unfinished)  # the fix in the caller's words: run(cfg)'s is a setting


def _saver_x64(record: dict, step: int) -> tuple[object, str]:
    """The ``jax_enable_x64`` of the attempt in ``record`` (a run's ``metrics.json``) that saved ``step``, and where it
    lies in the record (``""``: its top level; ``"previous_attempts[0]."``): the newest attempt that trained up to
    ``step``, else the newest that trained at all, else the top level's. Not the top level's alone, which an
    attempt refused before training rewrites with its own setting, so the same refused ``train.resume=auto`` would
    pass."""
    earlier = record.get("previous_attempts")
    attempts = [(record, ""), *reversed([(a, f"previous_attempts[{i}].") for i, a in enumerate(
        earlier if isinstance(earlier, list) else []) if isinstance(a, dict)])]
    reached = [(a, where, s) for a, where in attempts if isinstance(a.get("jax_enable_x64"), bool)
               and is_int(s := stopped_at_step(a) if stopped_at_step(a) is not None else a.get("final_step"))]
    a, where, _ = next((r for r in reached if (r[0].get("resumed_from_step") or 0) < step <= r[2]),
                       reached[0] if reached else (record, "", None))
    return a["jax_enable_x64"], where


def run_x64(step_dir: Path) -> tuple[bool | None, str]:
    """The ``jax_enable_x64`` of the attempt that saved ``step_dir`` and where it was read (``"<run>/metrics.json:
    previous_attempts[0]."``): its run's ``metrics.json`` (``_saver_x64``), else the record its launch wrote as it
    started (``launch_record.launch_x64``, for a run killed before its ``metrics.json``, so its continue
    commands carry ``JAX_ENABLE_X64`` and a resume under the other setting is refused); (None, "")
    where neither says."""
    import json

    from gensbi_sharding.harness.launch_record import X64_FILE, launch_x64, saving_record

    metrics = Path(step_dir).parent.parent / "metrics.json"
    try:
        saved, where = _saver_x64(json.loads(metrics.read_text(encoding="utf-8")), int(Path(step_dir).name))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        saved, where = None, ""
    if isinstance(saved, bool):
        return saved, f"{metrics}: {where}"
    if (launched := launch_x64(step_dir)) is None:
        return None, ""
    return launched, f"{saving_record(Path(step_dir)) / X64_FILE}: "


def x64_prefix(step_dir: Path) -> str:
    """What a pasted command that continues ``step_dir`` (to any ``train.steps``, or only evaluates it) puts before
    ``python``: the run's setting (``run_x64``) in ``x64_words.x64_lead``'s words, wherever the command is printed
    (also where this process's setting is the run's, so the run's own commands at a stop work pasted in a fresh
    shell)."""
    try:
        return x64_lead(run_x64(step_dir)[0])
    except ConfigError:  # a hand-edited record that is no bool: the pasted command's refusal names it and its fix
        return x64_lead(None)


def continue_prefix(run_dir: Any, overrides: Sequence[str] | None = ()) -> str:
    """``x64_prefix`` of a command that continues ``run_dir``'s newest checkpoint, as the train-further command has
    it (the continue-here and sweep commands too: without it, pasted in the same shell they would be refused "trained
    with JAX_ENABLE_X64 off ..."); where it holds no checkpoint (run again from the start), this launch's setting in the
    same words (``x64_words.x64_lead``); ``""`` where ``overrides`` is None (a run from Python, told in its own
    words).

    Parameters
    ----------
    run_dir : path-like
        The run's folder (``<run_dir>/checkpoints/<step>``, its ``metrics.json``).
    overrides : sequence of str or None
        The command's overrides; None: no command is printed.

    Returns
    -------
    str
        ``"env -u JAX_ENABLE_X64 "``, ``"JAX_ENABLE_X64=1 "`` or ``""``.
    """
    from gensbi_sharding.harness.launch_record import step_folder_names

    if overrides is None:
        return ""
    if not (saved := step_folder_names(Path(run_dir))):  # run again from its start: this launch's setting
        return x64_lead(x64_on())
    return x64_prefix(Path(run_dir) / "checkpoints" / str(saved[-1]))

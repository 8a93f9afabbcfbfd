"""The commands offered where a run's folder is refused: train a completed run further into a new folder
(``train_further_hint``), continue a stopped one in its own (``rerun_hint``, ``stopped_hint``), each with the settings
the run was launched with (``saved_overrides``). ``sweep_hints`` words a sweep's jobs.
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gensbi_sharding.harness.paste_command import command_for
from gensbi_sharding.harness.python_words import override_said, said_as, setting
from gensbi_sharding.harness.resume_settings import continue_prefix
from gensbi_sharding.harness.sweep_hints import SEARCH_PATH, with_search_path

__all__ = ["train_further_hint", "saved_overrides", "rerun_hint", "stopped_hint"]


def train_further_hint(run_dir: Any, saved_step: int | None, steps: int | None, overrides: Sequence[str] | None,
                       *, multirun: bool = False, stopped_early: bool = False) -> str:
    """How to train a completed run further: from its final checkpoint, into a new folder.

    A completed run's folder is never written into again (not by ``train.resume=auto`` either), and a new folder with
    ``train.resume=auto`` starts from step 0; ``train.resume=<its folder>`` with a new ``hydra.run.dir`` continues from
    its newest checkpoint. A sweep's job: ``<sweep>-<job>-steps<N>``, beside the sweep (in it, a summary row).

    Parameters
    ----------
    run_dir : path-like
        The completed run's folder.
    saved_step : int or None
        The step of its final checkpoint (its metrics' ``final_step``); None: it holds none.
    steps : int or None
        The ``train.steps`` asked for; one not above the checkpoint's step gives twice that step (any above will do).
    overrides : sequence of str or None
        The command's overrides (Hydra's ``overrides.task``); None: "the same command with ...".
    multirun, stopped_early : bool
        Whether the run was a sweep's job: ``hydra.mode=RUN`` is added, as in ``job_command``; whether early stopping
        ended it: ``train.patience=0`` is added, or it ends again at a validation without a new best.

    Returns
    -------
    str
        "; to train it further from its final checkpoint (step N) into a new folder: <command>",
        or "" when ``saved_step`` is None or no step is complete. Where step N, the newest by name, is not complete
        (``launch_record.complete_step``; its Orbax step metadata lost): "from its newest complete checkpoint (step
        M; step N, newer, is not complete)", resuming step M's folder (step N's is refused when pasted). Where every
        step is damaged: "; none of its checkpoints can be resumed (...): to run it again from the start ...".
    """
    from gensbi_sharding.harness.launch_record import complete_step

    newer = ""
    if saved_step is not None:  # the newest step by name may be no complete checkpoint: then the one before it
        ended, (saved_step, resume, newer) = saved_step, complete_step(run_dir := Path(run_dir).absolute(), saved_step)
    if saved_step is None:  # every step damaged (its saved step named): a fresh run is what there is to offer
        return _fresh_hint(run_dir, ended, newer, saved_overrides(run_dir, ended, overrides), multirun) if newer else ""
    overrides = saved_overrides(run_dir, saved_step, overrides)
    # further than the run went (step `ended`), from whichever step resumes it (not to its end again)
    target = steps if (steps or 0) > ended else max(2 * ended, ended + 1)  # a number: bash reads <more than N> as <
    sweep = run_dir.parent if multirun or (run_dir.parent / "multirun.yaml").is_file() else None  # a sweep's job
    name, copy = f"{sweep.name + '-' if sweep else ''}{run_dir.name}-steps{target}", 1
    while (new_dir := (sweep or run_dir).with_name(name + (f"-{copy}" if copy > 1 else ""))).exists():
        copy += 1  # a folder not used yet, or the command would be refused in turn
    tail = [setting("train.steps", target), *[setting("train.patience", 0)] * stopped_early,
            setting("train.resume", resume), *(["hydra.mode=RUN"] if multirun else []),
            setting("hydra.run.dir", new_dir)]  # launch.py's overrides, or run(cfg)'s settings
    kept = [shlex.quote(o) for o in with_search_path(overrides or ()) if o.startswith(SEARCH_PATH)
            or not o.startswith(("train.resume=", "train.steps=", *["train.patience="] * stopped_early, "hydra."))]
    from gensbi_sharding.harness.resume_settings import x64_prefix  # the run's JAX_ENABLE_X64, or it is refused

    env = x64_prefix(run_dir / "checkpoints" / str(saved_step)) if overrides is not None else ""
    command = _same_command(overrides, env, kept, tail)
    final = "newest complete" if newer else "final"
    return f"; to train it further from its {final} checkpoint (step {saved_step}{newer}) into a new folder: {command}"


def saved_overrides(run_dir: Path, step: int, overrides: Sequence[str] | None) -> Sequence[str] | None:
    """The overrides of the launch that saved ``run_dir``'s step ``step`` (its Hydra record, ``launch_record.
    saving_record``), led by the search path and config flags of ``overrides``; ``overrides`` where no record says.
    Not the refused command's own: ``launch.py experiment=quick seed=1 hydra.run.dir=<a seed=0 run>`` would be told
    to train it further with ``seed=1 ... train.resume=<run>``: other held-out pairs and draws, early stopping
    afresh."""
    from omegaconf import OmegaConf

    from gensbi_sharding.harness.launch_record import saving_record
    from gensbi_sharding.harness.outputs import read_record

    if overrides is None:  # run(cfg) from Python: "the same command with", its settings its own
        return None
    saved = read_record(saving_record(Path(run_dir) / "checkpoints" / str(step)) / "overrides.yaml")
    if not OmegaConf.is_list(saved):
        return overrides
    return [*(o for o in overrides if o.startswith((SEARCH_PATH, "--config-"))), *map(str, saved)]


def rerun_hint(run_dir: Any, again: str, why: str, overrides: Sequence[str] | None, multirun: bool) -> str:
    """"rerun with <its train.resume> to <again> in this folder<why>" (``resume_command.folder_resume``; ``why``: ""
    or e.g. " (it saved no complete checkpoint: it trains from step 0)", said after "in this folder"): the command's own
    plus that override; where the command's settings are not those of the launch the folder's record holds (but
    ``train.steps``, ``train.resume``, ``hydra.*``), "<again> in this folder with the settings it was launched with:
    <its command>" (``sweep_hints.job_command``): pasted, 'launch.py seed=1 hydra.run.dir=<a stopped seed=0 run>'
    plus the override would continue the seed-0 weights on seed 1's held-out pairs and draws.
    Where this process's ``JAX_ENABLE_X64`` is not the run's (``resume_settings.continue_prefix``), the whole
    command, led by the setting that continues it (a sweep's job: the sweep's, ``sweep_again``; "rerun
    with train.resume=auto" pasted in the same shell is refused).
    """
    from gensbi_sharding.harness.resume_command import folder_resume
    from gensbi_sharding.harness.sweep_hints import job_command

    said = f"rerun with {override_said(folder_resume(run_dir))} to {again} in this folder{why}"  # or cfg's setting
    own, env = _own_command(run_dir, overrides, multirun), continue_prefix(run_dir, overrides)
    if own is None and env:  # a sweep's job: the whole sweep's command, as the user typed it, led by the setting
        from gensbi_sharding.harness.sweep_continue import sweep_again

        if whole := sweep_again(Path(run_dir).parent, sys.argv, env) if multirun else "":
            return f"{again} with the rest of the sweep in its folder{why}: {whole}"
        return f"{again} in this folder{why}: {job_command(overrides or (), run_dir, multirun=multirun)}"
    return said if own is None else f"{again} in this folder{why} with the settings it was launched with: {own}"


def stopped_hint(run_dir: Any, overrides: Sequence[str] | None, multirun: bool) -> str:
    """"continue it here with the same command plus train.resume=auto", or where the command's settings are not
    those of the folder's record, "continue it here with the settings it was launched with: <its command>"
    (``rerun_hint``'s rule; not a seed=1 typed over a killed seed=0 run's checkpoints); the
    whole command where ``JAX_ENABLE_X64`` must change (``rerun_hint``'s rule)."""
    from gensbi_sharding.harness.sweep_hints import job_command

    own = _own_command(run_dir, overrides, multirun)
    if own is None and continue_prefix(run_dir, overrides):
        return f"continue it here: {job_command(overrides or (), run_dir, multirun=multirun)}"
    return (said_as("continue it here with the same command plus ", "continue it here by the same call with ")
            + setting("train.resume", "auto") if own is None else
            f"continue it here with the settings it was launched with: {own}")


def _own_command(run_dir: Any, overrides: Sequence[str] | None, multirun: bool) -> str | None:
    """``sweep_hints.job_command`` of ``run_dir``'s record (``.hydra/overrides.yaml``) after its search path and config
    flags (``hydra.yaml``; none recorded: ``overrides``'), where the settings of the two differ (``train.steps``,
    ``train.resume``, ``hydra.*`` aside); else None. The record's flags: with ``overrides``', a run of ``model=small``
    from ``hydra.searchpath=[file://my_conf]`` would be offered a command without it, which Hydra refuses pasted."""
    from gensbi_sharding.harness.sweep_hints import job_command
    from gensbi_sharding.harness.unfinished_run import recorded_overrides

    if overrides is None:
        return None
    if (record := recorded_overrides(run_dir)) is None:  # no record: the config its checkpoint saved, so the seed too
        from gensbi_sharding.harness.checkpoint_settings import continue_settings

        lacked, fixed = continue_settings(run_dir, overrides)  # one read of its checkpoint for both
        if lacked is not None:  # not "rerun with train.resume=auto"
            return lacked
        return None if fixed is None or fixed == list(overrides) else job_command(fixed, run_dir, multirun=multirun)
    flags, saved = record
    flags = flags or [o for o in overrides if o.startswith((SEARCH_PATH, "--config-"))]

    def settings(words: Sequence[str]) -> list[str]:
        return sorted(o for o in words if not o.startswith(("train.resume=", "train.steps=", "hydra.", "--config-")))

    return None if settings(saved) == settings(overrides) else job_command([*flags, *saved], run_dir, multirun=multirun)


def _fresh_hint(run_dir: Path, ended: int, why: str, overrides: Sequence[str] | None, multirun: bool) -> str:
    """"; none of its checkpoints can be resumed (<why>): to run it again from the start into a new folder: <command>",
    the command as the run was given (its ``train.resume`` left out), into a folder not used yet, so a completed run
    whose every step is damaged gets a command, not only "choose another hydra.run.dir"."""
    sweep = run_dir.parent if multirun or (run_dir.parent / "multirun.yaml").is_file() else None  # a sweep's job
    name, copy = f"{sweep.name + '-' if sweep else ''}{run_dir.name}-again", 1
    while (new_dir := (sweep or run_dir).with_name(name + (f"-{copy}" if copy > 1 else ""))).exists():
        copy += 1  # a folder not used yet, or the command would be refused in turn
    kept = [shlex.quote(o) for o in with_search_path(overrides or ()) if o.startswith(SEARCH_PATH)
            or not o.startswith(("train.resume=", "hydra."))]
    command = _same_command(overrides, "", kept, [*(["hydra.mode=RUN"] if multirun else []),
                                                 setting("hydra.run.dir", new_dir)])
    return (f"; none of its checkpoints can be resumed (step {ended} is its last; {why}): to run it again from the "
            f"start into a new folder: {command}")


def _same_command(overrides: Sequence[str] | None, env: str, kept: Sequence[str], tail: Sequence[str]) -> str:
    """The command that runs with ``kept`` and ``tail`` (``env`` before it): where the command's ``overrides`` are not
    known, "the same command with <tail>", to a Python caller (``run(cfg)``) "the same call with <its settings>",
    joined by "and" (``python_words.setting``: launch.py's overrides or cfg's settings, said as they are made)."""
    if overrides is None:
        return said_as("the same command with ", "the same call with ") + said_as(" ", " and ").join([*kept, *tail])
    return env + command_for() + " " + " ".join([*kept, *tail])

"""What a stopped job's lines advise where the usual "continue with: <command>" would not be true or would not work.

A dry run continues nothing: its stop said "continue with: ... dry_run=true ... train.resume=auto", a command
refused when pasted (``config_checks.dry_run_resume_problem``), and its folder, which holds the stop's record, takes
no dry run again (``fresh_folder``): it now names the command that runs it again in a new folder.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

__all__ = ["again_command", "stop_advice"]


def again_command(run_dir: Any, *, same_folder: bool = False) -> str:
    """The command that runs the job in ``run_dir`` again from its start, as it was given (``hydra.*`` and, into a
    new folder, ``train.resume`` left out).

    Parameters
    ----------
    run_dir : path-like
        The job's folder.
    same_folder : bool
        True: into ``run_dir`` itself (it holds no run's record); False: into a folder not used yet beside it.

    Returns
    -------
    str
        ``python launch.py <overrides> [hydra.mode=RUN] hydra.run.dir=<folder>``; outside a Hydra job (``run(cfg)``
        from Python) the sentence that says what to set.
    """
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    from gensbi_sharding.harness.override_grammar import hydra_override
    from gensbi_sharding.harness.paste_command import command_for
    from gensbi_sharding.harness.resume_settings import continue_prefix
    from gensbi_sharding.harness.sweep_hints import SEARCH_PATH, with_search_path

    run_dir = Path(run_dir)
    target = run_dir if same_folder else unused_folder(run_dir)
    if not HydraConfig.initialized():
        return f"run(cfg) again with cfg.output_dir={str(target)!r} set in omegaconf.open_dict(cfg)"
    hydra = HydraConfig.get()
    multirun = hydra.mode == RunMode.MULTIRUN
    dropped = ("hydra.",) if same_folder else ("hydra.", "train.resume=")
    kept = [shlex.quote(o) for o in with_search_path(list(hydra.overrides.task))
            if o.startswith(SEARCH_PATH) or not o.startswith(dropped)]
    return " ".join([continue_prefix(run_dir) + command_for(), *kept, *(["hydra.mode=RUN"] if multirun else []),
                     hydra_override("hydra.run.dir", target)])


def unused_folder(run_dir: Path) -> Path:
    """``<run_dir>-again`` (``-again-2``, ...): a folder not used yet, which a dry run is never refused."""
    copy = 1
    while (new_dir := run_dir.with_name(f"{run_dir.name}-again" + (f"-{copy}" if copy > 1 else ""))).exists():
        copy += 1
    return new_dir


def stop_advice(run_dir: Any, dry_run: bool) -> str:
    """The end of a stop's line: ``"continue with: <command>"``, or for a dry run ``"a dry run has nothing to
    continue: run it again with: <command>"`` (``again_command``, into a new folder).

    Parameters
    ----------
    run_dir : path-like
        The job's folder.
    dry_run : bool
        Whether the job is a dry run (``dry_run=true``).

    Returns
    -------
    str
    """
    from gensbi_sharding.harness.sweep_hints import continue_command

    if dry_run:
        return f"a dry run has nothing to continue: run it again with: {again_command(run_dir)}"
    return f"continue with: {continue_command(run_dir)}"


"""The line a stopped sweep job prints after its own command: how to continue the rest of the sweep.

Rerun as a whole (``-m ... train.resume=auto hydra.sweep.dir=<sweep>``), a sweep continues every job only while
none has completed: a sweep folder holding a completed job is refused (its files are never overwritten), the
refusal naming each unfinished job's own command. So once a job has completed, those commands are the ones
printed here: a printed command works as printed (was: the ``-m`` command, refused when run).
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gensbi_sharding.harness.sweep_hints import hydra_job_overrides, search_path_of, unfinished_jobs_hint

__all__ = ["whole_sweep_hint"]


def whole_sweep_hint(run_dir: Any, argv: Sequence[str]) -> str:
    """How to continue the sweep a job stopped by Ctrl-C or a preemption belongs to; "" outside a multirun.

    While no other job of the sweep has completed: "to continue the whole sweep, this job and those not started:
    python launch.py -m ... train.resume=auto hydra.sweep.dir=<sweep>". Once one has, that command would be
    refused: "to continue the rest of the sweep, a sweep folder holding completed jobs is never rerun as a whole:
    continue its unfinished jobs (1 never started) one by one: <command> ; <command>", this job's first (more
    than three: ``bash <sweep>/continue_unfinished.sh``), as the refusal names them.

    Parameters
    ----------
    run_dir : path-like
        The stopped job's folder, ``<sweep>/<job>``.
    argv : sequence of str
        ``sys.argv`` of the command that started the sweep; only ``launch.py``'s is rebuilt.

    Returns
    -------
    str
    """
    from gensbi_sharding.harness.override_grammar import hydra_override

    if not hydra_job_overrides()[1] or not argv or Path(argv[0]).name != "launch.py":
        return ""
    run_dir = Path(run_dir).absolute()
    if rest := _rest_of_sweep(run_dir):
        return rest
    kept = [a for a in argv[1:] if not a.startswith(("train.resume=", "hydra.sweep.dir="))]
    return "to continue the whole sweep, this job and those not started: " + " ".join(
        ["python launch.py", *map(shlex.quote, kept), "train.resume=auto",
         hydra_override("hydra.sweep.dir", run_dir.parent)])


def _rest_of_sweep(run_dir: Path) -> str:
    """Each unfinished job's command when another job of ``run_dir``'s sweep completed; "" when none did."""
    from omegaconf import OmegaConf

    from gensbi_sharding.harness.run_folder import RESUMABLE
    from gensbi_sharding.harness.sweep_plan import every_job

    sweep = run_dir.parent
    jobs = sorted({m.parent for m in sweep.glob("*/metrics.json")} | {run_dir})
    record = sweep / "multirun.yaml"
    if not record.is_file():
        return ""
    saved = OmegaConf.load(record)
    hint = unfinished_jobs_hint(jobs, RESUMABLE, every_job(saved), sweep_dir=sweep, stopped=run_dir,
                                search_path=search_path_of(OmegaConf.select(saved, "hydra.overrides.hydra")))
    return f"to continue the rest of the sweep, {hint[2:]}" if hint else ""

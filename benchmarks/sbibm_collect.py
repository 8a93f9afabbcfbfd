"""Which jobs the sbibm table counts (``collect``) and the settings each ran with (``row_settings``)."""

from __future__ import annotations

import sys
from pathlib import Path

from gensbi_sharding.messages import clipped
from cli_args import Refused, not_a_script
from sbibm_files import read_scores
from sbibm_jobs import asked_observations, job_status, running_in, scores_problem
from sbibm_method import cell_of, job_method
from sbibm_tables import row_name
not_a_script(__name__, __file__)  # run as a script: name the one to run


def collect(folders: list[Path], jobs: dict | None = None,
            left_out: dict | None = None) -> dict[tuple, list[dict]]:
    """``{cell: [per-observation rows]}`` from every job folder under ``folders`` (and each
    cell's job folder into ``jobs``, and ``{cell: why in a few words}`` of each job left out
    into ``left_out``, when given). A cell is ``(task, budget)`` for an amortised job and
    ``(task, budget, method label)`` for a sequential one (``sbibm_method.cell_of``): its own row.

    Only jobs whose ``metrics.json`` says ``status: ok`` and whose ``c2st.csv`` holds a C2ST for
    each observation its config asked count; every other job is named on stderr with why: one still
    running, one that failed or was preempted or interrupted (during evaluation it has scored some
    observations only, which would read as a finished row), one that scored nothing, or one whose
    ``c2st.csv`` is damaged. Two jobs of one (task, budget) are refused, naming both: one table row
    averages one training run (the same observation twice would count it twice; different
    observations would mix two runs, or two settings, in one row).
    """
    from omegaconf import OmegaConf

    cells: dict[tuple, list[dict]] = {}
    seen: dict[tuple, Path] = {}
    owner: dict[tuple, Path] = {}
    counted: set[Path] = set()
    for folder in folders:
        for config in sorted(folder.rglob(".hydra/config.yaml")):
            job = config.parent.parent
            scores = job / "c2st.csv"
            # A job run moved aside (<task>_<budget>.failed-<time>) inside the folder given is superseded; one
            # given itself is looked at (else every job in it is skipped, and the table says only "no finished job").
            if ".failed-" in str(job.relative_to(folder)) or job.resolve() in counted:  # or given twice
                continue
            counted.add(job.resolve())
            busy = running_in(job)
            status = job_status(job / "metrics.json")
            method, unread = job_method(job)
            if busy:
                why, short = f"still running: {busy.split(': two runs')[0]}; run table again once it has ended", \
                    "still running"
            elif status != "ok":
                then = (_what_next(job, status) if not (method and method.sequential) else  # rounds keep no checkpoint
                        "sbibm.py run with its --rounds, --region and --margin starts it again")
                why = (f"status {status}, so its C2ST covers only the observations scored before it stopped, if any; "
                       f"{then}")
                short = f"status {status.split(' (')[0]}"
            else:
                why = scores_problem(job)
                short = "damaged c2st.csv" if scores.is_file() else "no C2ST"
            try:
                cfg = OmegaConf.load(config)
                cell = (str(cfg.data.name), int(cfg.data.num_simulations))
            except Exception as err:  # noqa: BLE001 (YAML's, OmegaConf's or int's error): which row is unknown
                print(f"left out {job}: {why + '; ' if why else ''}its {config} does not say its task and budget "
                      f"({type(err).__name__}: {clipped(' '.join(str(err).split()), 200)})", file=sys.stderr)
                continue
            if unread:  # which row it belongs to is unknown: counted in none
                print(f"left out {job}: {unread}", file=sys.stderr)
                continue
            cell = cell_of(*cell, method.label)
            if why:
                print(f"left out {job}: {why}", file=sys.stderr)
                if left_out is not None:  # its row says so, not only stderr: a missing row reads as never run
                    left_out.setdefault(cell, short)
                continue
            rows = read_scores(scores, asked_observations(job))[0]
            for r in rows:
                other = seen.setdefault((*cell, int(r["observation"])), job)
                if other != job:
                    raise Refused(f"{row_name(cell)}, observation {r['observation']}, is scored "
                                     f"by two jobs, {other} and {job}: one table row averages one run; pass the "
                                     "folders of one run per (task, budget)")
            other = owner.setdefault(cell, job)
            if other != job:
                raise Refused(f"{row_name(cell)} is scored by two jobs, {other} and {job} "
                                 "(other observations): one table row averages one training run; pass the folders "
                                 "of one run per (task, budget)")
            cells.setdefault(cell, []).extend(rows)
    if jobs is not None:
        jobs.update(owner)
    return cells


def _what_next(job: Path, status: str) -> str:
    """What continues a job left out that stopped (its checkpoint) or failed (its error named, to fix first), as
    ``sbibm.py run`` would (was, of every one: "continue it with ... train.resume=auto", which fails alike a job
    whose error was its own settings', and continues nothing of one that saved no checkpoint); a job whose weights
    failed its evaluation, the commands its error names (``weights_failure``), not a rerun that fails alike."""
    import json

    from gensbi_sharding.harness.weights_failure import FAILED_WEIGHTS

    checkpoints = job / "checkpoints"
    saved = checkpoints.is_dir() and any(checkpoints.iterdir())
    resume = "its overrides plus train.resume=auto hydra.run.dir=<that folder>"
    if status in ("preempted", "interrupted") or saved and status.startswith("unknown"):  # unknown: killed
        return (f"continue it from its last checkpoint with {resume} (sbibm.py run continues it so)" if saved else
                "it saved no checkpoint: rerun it (sbibm.py run starts it again)")
    try:
        error = json.loads((job / "metrics.json").read_text()).get("error")
    except (OSError, ValueError, AttributeError):
        error = None
    if error and FAILED_WEIGHTS in str(error):  # a rerun trains the same weights and fails alike (so not "fix its
        # cause, then rerun it"): the commands its error names get past it, given whole (a cut command runs another)
        error = str(error)
        start = max(error.rfind("; checkpoint ", 0, error.index(FAILED_WEIGHTS)), 0)
        return (f"its weights failed its evaluation: {clipped(' '.join(error[:start].split()), 200)}; a rerun "
                f"(sbibm.py run) trains the same weights and fails alike{error[start:]}")
    error = clipped(" ".join(str(error).split()), 200) if error else "none recorded (see its launch.log)"
    return (f"its error: {error}; fix its cause (one of its overrides, if the error names one), then rerun it "
            "(sbibm.py run moves it aside and starts it again)"
            + (f", or continue it from its last checkpoint with {resume}" if saved else ""))


def row_settings(jobs: dict[tuple, Path]) -> dict[tuple, str]:
    """``{cell: the settings its job ran with beyond the preset, task and budget}`` (``none``: the preset
    alone; a job of another preset names it, ``experiment=quick``, or of none, ``experiment=null``; ``unknown ...``
    when its ``.hydra/overrides.yaml`` cannot be read), as ``sbibm_results.csv`` keeps them."""
    from gensbi_sharding.harness.sweep_plan import job_configuration
    from omegaconf import OmegaConf

    own = {"data", "data.num_simulations"}
    found = {}
    for cell, job in jobs.items():
        recorded = job / ".hydra" / "overrides.yaml"
        try:
            ran = job_configuration([str(o) for o in OmegaConf.load(recorded)]) if recorded.is_file() else None
        except Exception:  # noqa: BLE001 (YAML's or Hydra's error): which settings it ran with is unknown
            ran = None
        if ran is not None:
            # Only the sbibm preset goes unsaid: a job of another (experiment=quick: 20 steps, 128 samples) or of
            # none (launch.py's defaults) names it, else its row read as made with experiment=sbibm.
            ran = {"experiment": "null", **ran}
            if ran["experiment"] == "sbibm":
                del ran["experiment"]
        found[cell] = ("unknown (no readable .hydra/overrides.yaml)" if ran is None else
                       " ".join(f"{k}={v}" for k, v in sorted(ran.items()) if k not in own) or "none")
    return found

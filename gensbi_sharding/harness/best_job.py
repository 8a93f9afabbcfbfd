"""Which of a sweep's jobs scored best: what a refusal of a sweep's folder names first.

``sample.py <sweep folder>`` and ``train.resume=<sweep folder>`` are refused (one run per job) with a job to use
instead. They named the first job by number, ``e.g. <sweep>/0``, whatever the jobs scored: a user sweeping models to
sample the best one was pointed at job 0 (an MLP scoring C2ST 0.95 beside a Flux1 at 0.91) and had to open the
summary to find which job that was. The refusal now names the best job and its score, by the numbers the sweep's
summary shows: the lowest C2ST, else (no job scored, ``eval.enabled=false``) the lowest best validation loss; only
where every completed job trained on one task (a sweep over tasks has no best model: each task its own) and, for C2ST,
was scored alike (the same observations, samples and folds: a sweep over ``eval.num_samples`` has no best model either).
"""

from __future__ import annotations

from pathlib import Path

from gensbi_sharding.harness.held_out import HELD_OUT_KEYS, config_value, effective_shards
from gensbi_sharding.harness.units import format_count, is_number

__all__ = ["DIGITS", "best_jobs", "best_line", "best_per_task", "best_note", "c2st_measure", "lowest"]

#: Decimals a score is compared and shown at: the sweep table's (C2ST to 3, a loss to 4)
DIGITS = {"C2ST": 3, "best val loss": 4}


def _record(job: Path) -> dict:
    """``job``'s ``metrics.json`` if it completed (status ok), else ``{}`` (a damaged or missing one counts as none)."""
    from gensbi_sharding.harness.outputs import read_metrics

    try:
        metrics = read_metrics(job / "metrics.json")
    except (OSError, ValueError):  # no record, or a damaged one (FileExistsError is an OSError): not ranked
        return {}
    return metrics if metrics.get("status") == "ok" else {}


def best_jobs(jobs: list[Path]) -> tuple[str, float, list[Path]] | None:
    """The jobs of ``jobs`` that scored best, with the score's name and value; None where none can be ranked.

    Parameters
    ----------
    jobs : list of Path
        Job folders of one sweep (``runs_below.sweep_jobs``: those with a checkpoint), in the order to name them.

    Returns
    -------
    tuple of (str, float, list of Path) or None
        ``("C2ST", 0.912, [<sweep>/5])``: the lowest ``c2st`` of the completed jobs, and every job reading it to
        three decimals (the rules of one model train the same function, so they tie), the lowest unrounded first;
        else ``("best val loss", ...)`` by ``best_val_loss`` (four decimals). None where the completed jobs trained
        on several tasks (``data``), none has either, their C2STs were scored on other observations, sample counts
        or folds (``c2st_measure``), or their val losses are not comparable (another setting of
        ``data.theta_transform``, or the held-out pairs and draws, the seed's and effective data shards included).
    """
    return lowest({job: _record(job) for job in jobs})


def lowest(records: dict) -> tuple[str, float, list] | None:
    """``best_jobs`` over ``records``, job -> its completed record (``{}`` for one not completed): the same rules."""
    if len({m.get("data") for m in records.values() if m}) != 1:  # a sweep over tasks: no job is the best model
        return None
    scored = {job: m["c2st"] for job, m in records.items() if is_number(m.get("c2st"))}
    name = "C2ST"
    # C2ST reads lower on fewer samples (a classifier needs data to see a difference), and another observation is
    # another posterior: `-m eval.num_samples=40,400` named the 40-sample job best, the same weights as the other's
    if len({c2st_measure(records[job]) for job in scored}) > 1:
        return None
    if not scored:
        scored = {job: m["best_val_loss"] for job, m in records.items() if is_number(m.get("best_val_loss"))}
        name = "best val loss"
        if len({_loss_measure(records[job]) for job in scored}) > 1:  # losses of other spaces or held-out sets
            return None
    if not scored:
        return None
    digits = DIGITS[name]
    low = round(min(scored.values()), digits)
    # the lowest unrounded first (0.9516 before 0.9524, both 0.952); a stable sort: equal ones in job order
    return name, low, sorted((job for job, value in scored.items() if round(value, digits) == low), key=scored.get)


def c2st_measure(record: dict) -> tuple:
    """What makes two jobs' C2STs comparable: per observation scored, its number and the samples on each side (``n``),
    and the classifier's folds (fewer samples, or fewer folds, train the classifier on less: it reads lower).

    Parameters
    ----------
    record : dict
        A job's ``metrics.json``; one without ``c2st_observations`` (recorded before them) gives ``()``.

    Returns
    -------
    tuple
        ``((1, 10000, 5), (2, 10000, 5))`` for observations 1 and 2 of 10,000 samples, 5 folds each.
    """
    rows = record.get("c2st_observations") or []
    return tuple((row.get("observation"), row.get("n"), len(row.get("c2st_scores") or []))
                 for row in rows if isinstance(row, dict))


def _loss_measure(record: dict) -> tuple:
    """The settings that make two jobs' validation losses comparable: the space the loss is in
    (``data.theta_transform``) and the held-out pairs and draws it is over (those ``held_out_changes`` compares: the
    seed draws the pairs); a job whose record has no config: all None."""
    config = record.get("config") or {}
    return (config_value(config, "data.theta_transform"), *(config_value(config, key) for key in HELD_OUT_KEYS),
            effective_shards(config) if config else None)  # data.shards=1 in one process and null hold alike


def best_note(jobs: list[Path], named=str) -> str:
    """The refusal's pointer to the best of ``jobs`` (``best_jobs``), then all of them by number.

    Parameters
    ----------
    jobs : list of Path
        The sweep's job folders with a checkpoint.
    named : callable
        How a job is written in the refusal (``str``, or ``lambda j: python_words.setting("train.resume", j)``).

    Returns
    -------
    str
        The note, then every job with a checkpoint: ``"the lowest C2ST, 0.912: <sweep>/5 (jobs with a checkpoint: 0,
        5)"``; ``"e.g. <first job> (jobs ...)"`` where no job can be ranked, as before.
    """
    listed = f"jobs with a checkpoint: {', '.join(job.name for job in jobs)}"
    best = best_jobs(jobs)
    if best is None:
        return f"e.g. {named(jobs[0])} ({listed}){_stopped_note(jobs, best)}"
    name, value, tied = best
    same = ", ".join(job.name for job in tied[1:])
    return (f"the lowest {name}, {value:.{DIGITS[name]}f}: {named(tied[0])} ("
            + (f"{same} read{'s' * (len(tied) == 2)} the same; " if same else "") + f"{listed})"
            + _stopped_note(jobs, best))


def _stopped_note(jobs: list[Path], best: tuple | None) -> str:
    """What ``best_note`` adds where some of ``jobs`` stopped before finishing (a Ctrl-C, a preemption, a failure
    after a checkpoint, a kill that left no record): that the job named is only ranked among the finished ones (a new
    run from its weights, not the stopped job's continuation), and the command that continues each stopped job in its
    own folder; "" where none stopped. A user resuming a stopped sweep was pointed at the best finished job with no
    word of the stopped one."""
    from gensbi_sharding.harness.moved_folder import continue_in
    from gensbi_sharding.harness.outputs import read_metrics
    from gensbi_sharding.harness.summary_legend import status_word  # no plotting module to rank jobs
    from gensbi_sharding.harness.unfinished_run import recorded_command, training_run

    stopped = []
    for job in jobs:
        if training_run(job) is not None:  # training: not stopped (a stopped job continued too, whose metrics.json
            continue  # is the earlier attempt's until this one ends)
        try:
            record = read_metrics(job / "metrics.json")
        except (OSError, ValueError):  # no record, or a damaged one: killed where no one writes there (SIGKILL, out
            # of memory), whose checkpoints hold its work, continued by the command Hydra recorded
            if command := recorded_command(job):
                stopped.append(f"job {job.name} left no record of its end (killed?): to continue it in its own "
                               f"folder: {command}")
            continue
        # for the job's folder as it is now: a sweep folder copied or moved named the folder each job ran in
        if record.get("status") != "ok" and (command := continue_in(record, job)):
            step = record.get("stopped_at_step")
            at = "" if step is None else f" at step {step}"
            # in the sweep table's word (summary_legend.status_word): a failed job is "failed", not "stopped (status
            # error)"
            if status_word(record.get("status")) == "failed":
                stopped.append(f"job {job.name} failed{at} (its error in {job / 'metrics.json'}): once that is "
                               f"fixed, to continue it in its own folder: {command}")
                continue
            stopped.append(f"job {job.name} stopped before finishing (status {record.get('status')}{at}): to "
                           f"continue it in its own folder: {command}")
    if not stopped:
        return ""
    chosen = ("that job is the best of the finished ones, named by the sweep's own scores" if best is not None else
              "that job is the first with a checkpoint, none being ranked")
    return f"; {chosen}; {'; '.join(stopped)}"


def best_line(rows: list[dict]) -> str:
    """The line a training sweep's summary ends with (``summary.write_summary``'s rows): which job is best, by what; in
    a sweep over tasks, whose C2STs do not compare across tasks, the best job of each task (``best_per_task``).

    Parameters
    ----------
    rows : list of dict
        The summary's rows (``job``, ``metrics``).

    Returns
    -------
    str
        E.g. ``"best: job 0, C2ST 0.952 (jobs 1, 2, 3 read the same to 3 decimals; the fastest of them: job 2 at
        4,820 samples/s)"``; ``""`` where no job can be ranked (``lowest``), in no task.
    """
    records = {row["job"]: row["metrics"] if row["metrics"].get("status") == "ok" else {} for row in rows}
    if (best := lowest(records)) is None:
        return best_per_task(records)
    return f"best: {_ranked(records, best)}"


def best_per_task(records: dict) -> str:
    """In a sweep over tasks (jobs of several ``data``), the best job of each task, one line each, by ``lowest``'s
    rules within the task (a user comparing models across tasks: each task's best model); ``""`` where the jobs trained
    on one task or none, or no task's jobs can be ranked.

    Parameters
    ----------
    records : dict
        Job -> its completed record (``{}`` for one not completed).

    Returns
    -------
    str
        E.g. ``"best per task (a C2ST compares jobs of one task):\n  two_moons: job 2, C2ST 0.552\n  slcp: job 1,
        C2ST 0.701"``, the tasks in job order.
    """
    tasks = list(dict.fromkeys(m["data"] for m in records.values() if m and m.get("data") is not None))
    if len(tasks) < 2:
        return ""
    lines = []
    for task in tasks:
        mine = {job: m for job, m in records.items() if m and m.get("data") == task}
        if (best := lowest(mine)) is not None:
            lines.append(f"  {task}: {_ranked(mine, best)}")
    return "best per task (a C2ST compares jobs of one task):\n" + "\n".join(lines) if lines else ""


def _ranked(records: dict, best: tuple) -> str:
    """``best`` (``lowest(records)``) as said: ``"job 0, C2ST 0.952"``, with the jobs tied and the fastest of them."""
    name, value, tied = best
    text = f"job {tied[0]}, {name} {value:.{DIGITS[name]}f}"
    if len(tied) == 1:
        return text
    others, one = ", ".join(map(str, tied[1:])), len(tied) == 2
    # a tie is not always one function (two models can score alike): say the tie and the speed, not why
    text = f"{text} (job{'s' * (not one)} {others} read{'s' * one} the same to {DIGITS[name]} decimals"
    if not all(is_number(records[job].get("samples_per_s")) for job in tied):  # a dry-run or 0-step job: no speed
        return f"{text})"
    fastest = max(tied, key=lambda job: records[job]["samples_per_s"])
    return f"{text}; the fastest of them: job {fastest} at {format_count(records[fastest]['samples_per_s'])} samples/s)"

"""How a cell of ``benchmarks/sbibm.py`` is made: amortised (one ``launch.py`` job, the default) or sequential
(``--rounds 2`` or more: ``benchmarks/sequential.py``'s truncated rounds, per observation).

A ``Method`` names both kinds the same way everywhere: in the job's folder name (``<task>_<budget>`` or
``<task>_<budget>_sequential-2-box-0.5``), in the record a sequential job keeps in its folder (``RECORD``), in
the ``method`` column of ``sbibm_results.csv`` and ``sbibm_table.csv`` and in the table's row. So a sequential
cell and an amortised one of the same task and budget never share a folder, a row or a skip decision.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path

from cli_args import integer, not_a_script
from gensbi_sharding.harness.sampled_checkpoint import SEQUENTIAL
not_a_script(__name__, __file__)  # run as a script: name the one to run

AMORTISED = "amortised"
REGIONS = ("box", "ellipsoid")
#: What a sequential job keeps in its folder: its rounds, region and margin (an amortised job has none). Named once,
#: in the harness, which reads it to tell a sequential job's folder from a run's (resume, sample.py).
RECORD = SEQUENTIAL
#: Per-(task, budget) settings of ``sbibm.py run``'s amortised jobs, before the arguments after ``--``: one group, which
#: any of its keys given there replaces whole (key by key, model=mlp would keep train.steps=6000, an MLP neither row
#: measured). gaussian_linear_uniform (x_i = theta_i + noise, dimension by dimension): the transformer's weights,
#: shared across one token per scalar, scored 0.517 against the preset MLP's 0.552 at 10^4 simulations
#: (docs/posterior_quality.md, "A token model with weights shared across dimensions"); sir's was worse (0.628 against
#: 0.585), so per task; measured at 10^4 only, so at 10^4 only (the 10^3 and 10^5 rows stay the MLP's).
#: two_moons at 10^3 (900 training pairs): a narrower MLP trained longer, whose validation loss was still falling
#: when the preset's stopped (0.4707 against 0.4787; C2ST 0.593 against 0.785 over observations 1-3; docs/
#: posterior_quality.md, "The 10^3 budget: a narrow MLP trained longer").
TASK_SETTINGS = {("gaussian_linear_uniform", 10_000): ("model=transformer", "train.steps=6000"),
                 ("two_moons", 1_000): ("model.width=32", "train.steps=40000", "train.patience=40")}


def task_settings(task: str, budget: int, extra: list[str] = ()) -> tuple[list[str], str]:
    """``(settings, note)``: ``task``'s ``TASK_SETTINGS`` at ``budget``, or none when ``extra`` (the overrides after
    ``--``) sets a key of them or a group holding one (``model=transformer`` holds two_moons' ``model.width=32``),
    ``note`` then saying which were left out and why ("" otherwise)."""
    own = list(TASK_SETTINGS.get((task, budget), ()))
    keys = {s.split("=", 1)[0] for s in own}
    # another model replaces the one whose settings these are: kept, model.width=32 was refused under a transformer
    covers = lambda key: any(k == key or k.startswith(f"{key}.") for k in keys)  # noqa: E731
    given = [a for a in extra if covers(a.split("=", 1)[0].lstrip("+~"))]
    if not given:
        return own, ""
    return [], f"the task's own {' '.join(own)} left out whole: {' '.join(given)} given after --"


@dataclass(frozen=True)
class Method:
    """One way of making a (task, budget) cell: ``rounds`` 1 is the amortised preset; 2 or more are truncated
    sequential rounds (``region`` and ``margin`` as ``benchmarks/sequential_rounds.region_test`` reads them)."""

    rounds: int = 1
    region: str = "box"
    margin: float = 0.5

    @property
    def sequential(self) -> bool:
        return self.rounds > 1

    @property
    def label(self) -> str:
        """The ``method`` column's value: ``amortised`` or ``sequential rounds=2 region=box margin=0.5``."""
        if not self.sequential:
            return AMORTISED
        return f"sequential rounds={self.rounds} region={self.region} margin={float(self.margin)!r}"

    @property
    def title(self) -> str:
        """The table row's words after the task, e.g. ``sequential: 2 rounds per observation, box, margin 0.5``."""
        return f"sequential: {self.rounds} rounds per observation, {self.region}, margin {float(self.margin)!r}"

    @classmethod
    def from_label(cls, label: str) -> Method:
        """The ``Method`` whose ``label`` is ``label`` (``amortised``, or ``sequential rounds=2 ...``)."""
        if label == AMORTISED:
            return cls()
        found = dict(part.split("=", 1) for part in label.split()[1:])
        return cls(int(found["rounds"]), found["region"], float(found["margin"]))

    @property
    def short(self) -> str:
        """A few words for a plot's legend: ``2 rounds, box 0.5``."""
        return f"{self.rounds} rounds, {self.region} {float(self.margin)!r}"

    def folder(self, task: str, budget: int) -> str:
        """The job's folder under ``--root``; an amortised one's is unchanged (``<task>_<budget>``)."""
        if not self.sequential:
            return f"{task}_{budget}"
        return f"{task}_{budget}_sequential-{self.rounds}-{self.region}-{float(self.margin)!r}"


def method_of(cell: tuple) -> str:
    """The method label of a table cell: ``(task, budget)`` is amortised, ``(task, budget, label)`` says its own."""
    return cell[2] if len(cell) > 2 else AMORTISED


def cell_of(task: str, budget: int, label: str) -> tuple:
    """The table's key of a cell: ``(task, budget)`` when amortised (as before), else ``(task, budget, label)``."""
    return (task, int(budget)) if label == AMORTISED else (task, int(budget), label)


def rounds_arg(text: str) -> int:
    """``--rounds``: an integer >= 1."""
    try:
        value = integer(text)
    except argparse.ArgumentTypeError as err:
        raise argparse.ArgumentTypeError(f"{str(err).split('; e.g.')[0]}; pass --rounds 1 (amortised, the default) "
                                         "or --rounds 2 (sequential)") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} must be >= 1; pass --rounds 1 (amortised, the default) or "
                                         "--rounds 2 (sequential)")
    return value


def margin_arg(text: str) -> float:
    """``--margin``: a finite number >= 0 (nan passed ``< 0`` and drew 10**8 prior draws in vain)."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"{text} must be a finite number >= 0, e.g. --margin 0.5")
    return value


def region_arg(text: str) -> str:
    """``--region``: one of ``REGIONS``."""
    if text not in REGIONS:
        raise argparse.ArgumentTypeError(f"{text!r} is not one of {', '.join(REGIONS)}; e.g. --region box")
    return text


def method_from_args(rounds: int, region: str | None, margin: float | None) -> tuple[Method | None, str | None]:
    """The ``Method`` of ``run``'s options, or why they contradict: a region or margin shapes the later rounds,
    so with ``--rounds 1`` (amortised) it would be ignored, and the table would not say it was."""
    if rounds == 1 and (region is not None or margin is not None):
        given = " ".join(f"--{k} {v}" for k, v in (("region", region), ("margin", margin)) if v is not None)
        return None, (f"{given} shapes the truncated rounds of a sequential run, but --rounds is 1 (amortised); "
                      f"pass --rounds 2 (or more) with it, or leave {given} out")
    return Method(rounds, region or "box", 0.5 if margin is None else margin), None


def write_record(job: Path, method: Method) -> None:
    """Keep ``method`` in the sequential ``job``'s folder (``RECORD``)."""
    from gensbi_sharding.harness.outputs import write_atomic

    write_atomic(job / RECORD, json.dumps(asdict(method), indent=1) + "\n")


def job_method(job: Path) -> tuple[Method | None, str | None]:
    """The ``Method`` a job folder was made with (no ``RECORD``: amortised), or why its record cannot be read."""
    record = job / RECORD
    if not record.is_file():
        return Method(), None
    try:
        found = json.loads(record.read_text())
        method = Method(int(found["rounds"]), str(found["region"]), float(found["margin"]))
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as err:
        return None, f"its {record} cannot be read ({type(err).__name__}: {err}), so how it was made is unknown"
    if method.rounds < 2 or method.region not in REGIONS or not (math.isfinite(method.margin) and method.margin >= 0):
        return None, f"its {record} holds {found}, not a sequential method (rounds >= 2, region box or ellipsoid)"
    return method, None


def read_results(path: Path) -> list[dict]:
    """The rows of a ``sbibm_results.csv``; a file written before the ``method`` column existed reads as amortised
    (every row then came from an amortised job)."""
    with Path(path).open(newline="") as f:
        return [{**row, "method": row.get("method") or AMORTISED} for row in csv.DictReader(f)]


def sequential_problem(method: Method, tasks: list[str], budgets: list[int], extra: list[str],
                       choices: tuple[int, ...] | None = None) -> str | None:
    """Why a sequential ``method`` cannot run some (task, budget) with ``extra`` (round 1 trains on one share of
    the budget, which must fill a batch), named with the fix (a budget among ``choices``, those ``--budgets``
    takes), or an extra ``train.resume`` its rounds would ignore; None when every cell can run (or it is amortised)."""
    if not method.sequential:
        return None
    # Refused, not accepted: every round would ignore it (a sequential job always starts afresh), yet its row names it.
    resume = next((o for o in extra if o.lstrip("+~").startswith("train.resume=")), None)
    if resume is not None:
        return (f"extra argument {resume}: a sequential job's rounds keep no checkpoint to continue from (a stopped "
                "one is started again), so it would be ignored; leave it out")
    from sequential_rounds import compose_config, shares_problem

    job = [o for o in extra if not o.lstrip("+~").startswith("hydra")]
    for task in tasks:
        for budget in budgets:
            cfg = compose_config(task, budget, job)
            problem = shares_problem(budget, method.rounds, cfg.data.val_fraction, cfg.data.batch_size,
                                     budget_flag="--budgets", budgets=choices)
            if problem:
                return f"{task}: {problem}"
    return None

"""A sweep typed again into its own folder with a value changed: which job folders still stand for its jobs.

Job ``i`` of a sweep continues folder ``i``. A folder that ran other values of a key the sweep varies is another job,
except one whose run failed naming each key that changed: ``-m train.learning_rate=0.003,1e30,0.001`` (job 1 diverged,
its error naming ``train.learning_rate=1e+30``) typed again as ``-m train.learning_rate=0.003,0.002`` continues folder
1 with 0.002, the value that failed corrected (offered with 1e+30, it would fail alike). Any other such folder is
named, with why, and never offered: its checkpoints or record belong to the value it ran.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from gensbi_sharding.harness.failed_weights import error_cause
from gensbi_sharding.harness.job_values import folder_of, job_configuration

__all__ = ["swept_keys", "changed_keys", "failed_on", "named_overrides", "retyped_job", "values_words",
           "moved_folders", "typed_values"]


def swept_keys(wanted: Sequence[Mapping[str, str]]) -> list[str]:
    """The keys whose value differs between a sweep's jobs (``job_values.job_configuration`` of each)."""
    return [k for k in (wanted[0] if wanted else {}) if len({w.get(k) for w in wanted}) > 1]


def typed_values(overrides: Sequence[str]) -> dict[str, str]:
    """``{key: value}`` of a job's overrides (as ``job_values.job_configuration`` keeps them) written as Hydra's grammar
    reads them: a quoted string keeps its quotes, so the string '1e30' is not shown as the float 1e30 (else both
    look alike: "ran x=1e30 where this sweep's job is x=1e+30")."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from gensbi_sharding.harness.override_grammar import parse

    shown = {}  # data="two_moons" bare (it reads back as the same string), '1e30' quoted
    for o in OverridesParser.create().parse_overrides([str(o) for o in overrides]):
        if not o.key_or_group.startswith(("train.resume", "hydra.")):
            text = job_configuration([str(o.input_line)])[o.key_or_group.lstrip("+~")]  # bare, as compared
            again = parse([f"x={text}"]).overrides[0].hydra  # None where the bare text does not parse
            bare = text == "" or again is not None and again.value() == o.value()
            shown[o.key_or_group.lstrip("+~")] = text if bare else o.get_value_element_as_str()
    return shown


def values_words(configuration: Mapping[str, str], keys: Sequence[str]) -> str:
    """``"k=v k2 unset"``: the values of ``keys`` in a job's configuration."""
    return " ".join(f"{k}={configuration[k]}" if k in configuration else f"{k} unset" for k in keys)


def changed_keys(job_dir: Any, want: Mapping[str, str], swept: Sequence[str], alone: bool = False,
                 every: bool = False) -> tuple[list[str], dict[str, str]] | None:
    """The keys of ``swept`` that job folder ``job_dir`` ran with other values than ``want``, and what it ran (as
    typed: ``typed_values``); None where nothing is swept, its record is missing or damaged, or it was continued
    alone (``hydra.mode=RUN``: then it may be on another rule or mesh on purpose), unless ``alone`` (its values
    compared all the same). ``every``: also each key both its record and ``want`` set (one set alone may be the
    default's value)."""
    from omegaconf import OmegaConf

    from gensbi_sharding.harness.outputs import read_record

    record = Path(job_dir) / ".hydra"
    overrides, hydra = read_record(record / "overrides.yaml"), read_record(record / "hydra.yaml")
    if not (swept or every) or not OmegaConf.is_list(overrides) or (not alone and OmegaConf.is_dict(
            hydra) and OmegaConf.select(hydra, "hydra.mode", default=None) == "RUN"):
        return None
    ran, shown = job_configuration([str(o) for o in overrides]), typed_values([str(o) for o in overrides])
    for key in (k for k in want if k not in ran):  # set by the job alone: what the folder ran, composed (else
        held = _held(record, key, want[key])  # -m seed=0,1 rule=tensor over -m seed=0,1 would count complete)
        if held is not None:
            ran[key] = shown[key] = held
    keys = list(dict.fromkeys([*swept, *(k for k in want if k in ran)])) if every else swept  # both: no default
    return [k for k in keys if ran.get(k) != want.get(k)], shown


def _held(record: Path, key: str, wanted: str) -> str | None:
    """What job folder ``record``'s ``config.yaml`` (``hydra.yaml``'s choices for a group) says it ran of ``key``:
    ``wanted`` where that is its value, else the value as an override writes it; None where it does not say."""
    from omegaconf import OmegaConf

    from gensbi_sharding.harness.hints import override_literal
    from gensbi_sharding.harness.outputs import read_record
    from gensbi_sharding.harness.override_grammar import parse

    choices = OmegaConf.select(read_record(record / "hydra.yaml") or OmegaConf.create(), "hydra.runtime.choices",
                               default=None)
    if "." not in key and OmegaConf.is_dict(choices) and isinstance(choices.get(key), str):
        return wanted if choices[key] == wanted else choices[key]  # a group: the option it composed
    config = read_record(record / "config.yaml")
    if not OmegaConf.is_dict(config):
        return None
    absent = object()
    try:
        value = OmegaConf.select(config, key, default=absent, throw_on_resolution_failure=False)
        value = OmegaConf.to_container(value, resolve=True) if OmegaConf.is_config(value) else value
    except Exception:  # noqa: BLE001 (an interpolation of Hydra's own, unresolvable outside its run)
        return None
    if value is absent:
        return None
    typed = parse([f"{key}={wanted}"]).overrides[0].hydra
    return wanted if typed is not None and typed.value() == value else override_literal(value)


def _error(job_dir: Any) -> tuple[str | None, str, str]:
    """Job ``job_dir``'s status, its error's cause and ``failed_weights.error_cause``'s note; (None, "", "") when
    its metrics.json is missing or cannot be read."""
    from gensbi_sharding.harness.outputs import read_metrics

    try:  # its cause, not the commands it names to continue (each repeats every override: nothing to change there)
        metrics = read_metrics(Path(job_dir) / "metrics.json")
    except FileExistsError:
        return None, "", ""
    return (metrics.get("status"), *error_cause(metrics))


def _names(cause: str, key: str) -> bool:
    """Whether ``cause`` names ``key=``: not inside a path (``/runs/lr=1e+30/``) or a longer name (``my-lr=``)."""
    return re.search(rf"(?<![\w./\\-]){re.escape(key)}=", cause) is not None


def failed_on(job_dir: Any, keys: Sequence[str]) -> bool:
    """Whether job ``job_dir`` failed (status error) with an error whose cause names each of ``keys`` (``key=``)."""
    status, cause, _ = _error(job_dir)
    return status == "error" and bool(keys) and all(_names(cause, k) for k in keys)


def _key(override: str) -> str:
    return override.split("=", 1)[0].lstrip("+~")


def named_overrides(job_dir: Any, overrides: Sequence[str]) -> str:
    """" (its error names eval.num_samples=20000: change it in that command first)" when ``job_dir`` failed naming one
    of its ``overrides`` (its command as it ran would fail it alike); ``failed_weights.error_cause``'s note;
    else ""."""
    _, cause, note = _error(job_dir)
    named = [o for o in overrides if "=" in o and _names(cause, _key(o))]
    return note or (f" (its error names {', '.join(named)}: change {'it' if len(named) == 1 else 'them'} in that "
                    "command first)" if named else "")


def retyped_job(job_dir: Any, number: int | None, all_jobs: Sequence[Sequence[str]],
                ran_with: Sequence[str], every: bool = False) -> tuple[list[str] | None, str]:
    """How a refused sweep offers its unfinished job folder ``job_dir``, the folder of its job ``number``.

    Parameters
    ----------
    job_dir : path-like
        The job's folder.
    number : int or None
        This sweep's job whose folder it is; None: not known (its overrides are offered as it ran).
    all_jobs : sequence of sequence of str
        Every job of this sweep (``sweep_plan.sweep_jobs``).
    ran_with : sequence of str
        The overrides the folder recorded.
    every : bool
        Whether every key the folder or the job sets is compared (``changed_keys``), not only the swept ones.

    Returns
    -------
    (list of str or None, str)
        The overrides that continue it and a note for its command: as it ran where it ran this sweep's job; with this
        sweep's values where it failed naming each swept key that changed. Otherwise (None, the sentence that names the
        folder, the values it ran and why it is not offered), continued alone (``hydra.mode=RUN``) or not.
    """
    wanted, swept = _wanted(tuple(map(tuple, all_jobs)))
    # continued alone too (hydra.mode=RUN, e.g. preempted after its value was corrected): what it holds is compared
    # (not offered with the value it ran, 0.002, as this sweep's job of 1e+30)
    changed = None if number is None else changed_keys(job_dir, wanted[number], swept, alone=True, every=every)
    if not changed or not changed[0]:
        return list(ran_with), named_overrides(job_dir, ran_with)
    (keys, ran), (status, cause, _) = changed, _error(job_dir)
    was, now = values_words(ran, keys), values_words(typed_values(all_jobs[number]), keys)
    if failed_on(job_dir, keys):  # the value that failed it, corrected: this sweep's job continues that folder
        typed = {_key(o): o for o in all_jobs[number] if "=" in o}
        offered = [typed.get(_key(o), "") if _key(o) in keys else o for o in ran_with]
        offered = [o for o in offered if o] + [typed[k] for k in keys if k not in ran and k in typed]
        return offered, f" (its error names {was}: this sweep's {now} in its place)"
    if status == "ok" and changed_keys(job_dir, wanted[number], swept, every=every) is None:  # completed alone: kept
        return None, _completed_alone(job_dir, number, all_jobs, every)
    unnamed = " ".join(k for k in keys if not _names(cause, k))  # the others it names
    why = ("it completed" if status == "ok" else f"its error does not name {unnamed}" if status == "error" else
           f"it ended {status or 'without a record'}, no error naming {' '.join(keys)}")
    return None, (f"folder {job_dir} ran {was} where this sweep's job {number} is {now}, and {why} (a job folder "
                  "takes this sweep's value only where its error named the key that changed): run this sweep in "
                  "another hydra.sweep.dir")


def moved_folders(sweep_dir: Any, all_jobs: Sequence[Sequence[str]],
                  folders: Sequence[str] | None = None) -> dict[str, str]:
    """``{folder name: retyped_job's sentence}`` of each job folder of ``sweep_dir`` that ran other values than this
    sweep's job of its number and is not offered with this sweep's: no job of this sweep, never counted complete
    (not "2 of its 3 jobs complete (0, 2); job 0: ...; to train it further ...: train.learning_rate=0.003", folder 0
    where this sweep's job 0 is 0.005). ``folders``: each job's folder name (``sweep_plan.job_folders``).

    Each key both the folder's record and the job set is compared, swept or not (not the swept ones only, so the
    same values with train.steps=100 where the folder ran 50 do not count it complete). A folder continued alone
    (``hydra.mode=RUN``) with another value is named too, complete or not; one that completed without a record of its
    values (no ``.hydra/overrides.yaml``: not counted as this sweep's job) too."""
    from omegaconf import OmegaConf

    from gensbi_sharding.harness.outputs import read_record

    found = {}
    for number in range(len(all_jobs)):
        job = Path(sweep_dir) / folder_of(number, folders)
        if job.is_dir() and (moved := retyped_job(job, number, all_jobs, (), every=True))[0] is None:
            found[job.name] = moved[1]
        elif job.is_dir() and _error(job)[0] == "ok" and not OmegaConf.is_list(read_record(job / ".hydra" /
                                                                                           "overrides.yaml")):
            found[job.name] = (f"folder {job} holds a completed run with no record of its values (no readable "
                               f".hydra/overrides.yaml): not counted as this sweep's job {number}; run this sweep in "
                               "another hydra.sweep.dir")
    return found


def _completed_alone(job_dir: Path, number: int, all_jobs: Sequence[Sequence[str]], every: bool = False) -> str | None:
    """The sentence naming job folder ``job_dir`` where it completed a run of other swept values than this sweep's
    job ``number`` (continued alone, ``hydra.mode=RUN``: a failed job's value corrected); else None.

    ``-m train.learning_rate=0.003,1e30`` (job 1 diverged), its folder 1 continued as advised with 0.002, then the
    first sweep typed again: "2 of its 2 jobs complete (0, 1)", folder 1's 0.002 counted as 1e+30's result.
    """
    wanted, swept = _wanted(tuple(map(tuple, all_jobs)))
    changed = changed_keys(job_dir, wanted[number], swept, alone=True, every=every)
    if not changed or not changed[0] or _error(job_dir)[0] != "ok":
        return None
    keys, ran = changed
    return (f"folder {job_dir} holds a completed run of {values_words(ran, keys)}, continued alone, where this "
            f"sweep's job {number} is {values_words(typed_values(all_jobs[number]), keys)}: its result is that "
            "value's, kept there, not counted as this job's; run this sweep in another hydra.sweep.dir")


@lru_cache(maxsize=4)
def _wanted(all_jobs: tuple[tuple[str, ...], ...]) -> tuple[list[dict[str, str]], list[str]]:
    """Each job's configuration and the keys the sweep varies, read once per sweep (not once per folder)."""

    wanted = [job_configuration(job) for job in all_jobs]
    return wanted, swept_keys(wanted)

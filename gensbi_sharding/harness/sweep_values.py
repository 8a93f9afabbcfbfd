"""Sweeps Hydra's basic sweeper cannot run, or that run no job: refused in one line before anything is written.

``interval(1,5)`` is a continuous range for an optimizing sweeper (Optuna's, Ax's; none is installed here):
the basic sweeper ended in its own traceback (``BasicSweeper does not support sweep type : INTERVAL_SWEEP``)
after a callback's warning. A sweep with no value (``range(5,1)``, ``glob(nope*)``, a glob of a key that is no group:
``train.steps=glob(*)``) launched 0 jobs and exited 0, as if the sweep had run. ``shuffle(...)`` ran the jobs in
an order the harness (``sweep_plan.sweep_jobs``, which numbers the jobs for train.resume=auto) draws anew.
``sweep_values_problem`` is checked on the command line by launch.py (before Hydra composes) and on a preset's
``hydra.sweeper.params`` by ``sweep_check.sweep_config_problem`` (before the first job starts). Pure Python.
"""

from __future__ import annotations

from collections.abc import Sequence

from hydra.core.override_parser.types import ValueType

from gensbi_sharding.harness.override_grammar import CommandLine, parse

__all__ = ["sweep_values_problem", "command_sweep_problem", "dry_run_mix_problem"]

#: Words OmegaConf reads as true for a bool setting (``dry_run=yes``).
_TRUE = ("true", "yes", "on", "y", "1")


def _interval_fix(start: float, end: float) -> str:
    """The sweep to write instead of ``interval(start, end)``: its whole numbers, else its ends and middle."""
    if float(start).is_integer() and float(end).is_integer() and end >= start:
        first, last = int(start), int(end)
        middle = f",{(first + last) // 2}" if last - first > 1 else ""
        return (f"range({first},{last + 1}) (every whole number from {first} to {last}) or "
                f"choice({first}{middle},{last})")
    return f"choice({start:g},{(start + end) / 2:g},{end:g}) (the values to try)"


def sweep_values_problem(overrides: Sequence[str] | CommandLine, options=None, where: str = "") -> str | None:
    """The one-line refusal of the first sweep in ``overrides`` the basic sweeper cannot run or that has no value.

    Parameters
    ----------
    overrides : sequence of str or CommandLine
        ``key=value`` overrides as typed (the command line, or a preset's ``hydra.sweeper.params`` as ``k=v``),
        read by ``override_grammar.parse``; one Hydra's grammar cannot read is left to ``grammar_problem``.
    options : callable, optional
        ``options(group)``: the group's options ([] for a key that is no group; None where they are unknown,
        e.g. a ``pkg://`` search path), default ``conf/``'s.
    where : str, optional
        Where the override was written (``" (in the preset's hydra.sweeper.params)"``), added after it.

    Returns
    -------
    str or None
        E.g. ``"train.steps=interval(1,5): Hydra's basic sweeper cannot sweep an interval (a continuous range, for
        an optimizing sweeper such as Optuna's); list the values: train.steps=range(1,6) ..."``; None if none.
    """
    if options is None:
        from gensbi_sharding.harness.groups import group_options

        options = group_options
    for typed in parse(overrides).parsed:
        arg, o = typed.arg, typed.hydra
        key = o.get_key_element().lstrip("+~")
        if o.value_type == ValueType.INTERVAL_SWEEP:
            v = o.value()
            return (f"{arg}{where}: Hydra's basic sweeper cannot sweep an interval (a continuous range, for an "
                    "optimizing sweeper such as Optuna's, which is not installed here); list the values to run "
                    f"instead, e.g. -m {key}={_interval_fix(v.start, v.end)}")
        if o.value_type == ValueType.GLOB_CHOICE_SWEEP:
            found = options(key)
            if found is None:  # options Hydra finds where this module cannot look: Hydra's to expand
                continue
            if not found:
                return (f"{arg}{where}: glob(...) picks among a config group's options (model, data, rule, ...), "
                        f"and {key} is no group, so the sweep would run no job; list the values instead, e.g. "
                        f"-m {key}=1,2 or {key}=range(1,3)")
            if not o.value().filter(found):
                return (f"{arg}{where}: the glob matches none of {key}'s options ({', '.join(found)}), so the sweep "
                        f"would run no job; widen it, or list the options: -m {key}={','.join(found[:2])}")
        elif getattr(o.value(), "shuffle", False):  # shuffle(...): Hydra's order is random, the harness's is not
            v = o.value()
            listed = (",".join(map(str, v.list)) if hasattr(v, "list")
                      else f"range({v.start},{v.stop}" + (f",{v.step})" if v.step != 1 else ")"))
            return (f"{arg}{where}: shuffle(...) runs the jobs in a random order, different on every launch, so job "
                    "i's folder would stand for other values when the sweep is continued (train.resume=auto) or "
                    f"summarised; list the values in the order to run them: {key}={listed}")
        elif o.value_type == ValueType.RANGE_SWEEP and o.value().step == 0:  # Python's range() raises
            r = o.value()
            return (f"{arg}{where}: a range with step 0 never reaches its stop; give a step that does, e.g. "
                    f"{key}=range({r.start},{r.stop})" + ("" if r.start < r.stop else f" or range({r.stop},{r.start})"))
        elif o.value_type == ValueType.RANGE_SWEEP and not list(o.sweep_string_iterator()):
            r = o.value()
            return (f"{arg}{where}: the range has no value, so the sweep would run no job (range(start,stop,step) "
                    f"counts from start by step up to, not including, stop); e.g. {key}="
                    + (f"range({r.stop},{r.start})" if r.step > 0 and r.stop < r.start
                       # start == stop: no step reaches it, so not "e.g. seed=range(0,0)", the range refused
                       else f"range({r.start},{r.start + 1})" if r.start == r.stop else f"range({r.start},{r.stop})"))
    return None


def command_sweep_problem(args: Sequence[str] | CommandLine) -> str | None:
    """``sweep_values_problem`` of launch.py's command line, before Hydra composes.

    Parameters
    ----------
    args : sequence of str or CommandLine
        The command line after the program name (``sys.argv[1:]``); its groups' options include those of its
        ``hydra.searchpath`` folders.

    Returns
    -------
    str or None
        The refusal; None when there is none, or when the command picks another sweeper (``hydra/sweeper=...``),
        which may run an interval.
    """
    from gensbi_sharding.harness.override_keys import options

    command = parse(args)
    if any(o.key == "hydra/sweeper" for o in command.parsed):
        return None
    return sweep_values_problem(command, lambda group: options(group, command.search_paths)) or dry_run_mix_problem(
        command)


def dry_run_mix_problem(args: Sequence[str] | CommandLine, where: str = "") -> str | None:
    """The refusal of a sweep of dry runs and training together (``-m dry_run=true,false``); None otherwise.

    Such a sweep ran, and its summary gave the dry run's job a training row, status ok, its step time, losses and
    score blank as if it had trained and measured nothing (the dry-run table, ranked by memory and communication, was
    not written); and a stopped one's continue command (``train.resume=auto``) is refused for its dry runs. Each kind
    runs as a sweep of its own; on the command line the two commands are named, the dry runs' into a folder of their
    own where the sweep names one.

    Parameters
    ----------
    args : sequence of str or CommandLine
        The command line after the program name, or a preset's ``hydra.sweeper.params`` as ``key=value``.
    where : str, optional
        Where the override was written (``" (in the preset's hydra.sweeper.params)"``): no commands are named then.

    Returns
    -------
    str or None
    """
    import shlex

    from gensbi_sharding.harness.override_grammar import hydra_override
    from gensbi_sharding.harness.paste_command import command_for

    command = parse(args)
    mixed = next((o for o in command.parsed if o.key == "dry_run" and o.hydra.is_sweep_override()
                  and len({str(v).lower() in _TRUE for v in o.values()}) > 1), None)
    if mixed is None:
        return None
    said = (f"{mixed.arg}{where}: a sweep runs dry runs or training, not both (its summary would show a dry run's "
            "job as a trained one that measured nothing, and a dry run continues nothing); run each as a sweep of "
            "its own")
    if where:
        return f"{said}: give dry_run one value"
    words = [a for a in command.args if a != mixed.arg]
    folder = next((o for o in command.parsed if o.key == "hydra.sweep.dir" and not o.hydra.is_sweep_override()), None)
    dry = shlex.join([w for w in words if folder is None or w != folder.arg] + ["dry_run=true"])
    if folder is not None:  # one shell word already (hydra_override quotes it): not quoted again
        dry += " " + hydra_override("hydra.sweep.dir", f"{folder.hydra.value()}-dry_run")
    return (f"{said}: {command_for()} {dry} (the dry runs), then {command_for()} "
            f"{shlex.join([*words, 'dry_run=false'])} (training)")

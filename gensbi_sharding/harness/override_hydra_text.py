"""A bare ``true``/``false`` given to a text setting of Hydra's (``+hydra.job.env_set.MY_FLAG=true``), refused as the
same word in a config file is (``yaml_words``).

Hydra's grammar reads a bare ``true`` as a yes/no, and a text setting takes it as Python's spelling: the job ran with
``MY_FLAG=True``, silently, where ``hydra.job.env_set: {MY_FLAG: true}`` in a YAML file is refused. Pure Python.
"""

from __future__ import annotations

import json
import shlex
import typing

from gensbi_sharding.harness.hydra_entries import hydra_entry_problem, hydra_type
from gensbi_sharding.harness.override_grammar import CommandLine
from gensbi_sharding.harness.refusal import Refusal

__all__ = ["hydra_text_problem", "preset_sweep_problem"]


def hydra_text_problem(command: CommandLine, preset: bool = False) -> str | None:
    """The refusal of the first ``hydra.*`` override giving a text setting a bare yes/no; None where none does.

    Parameters
    ----------
    command : CommandLine
        The parsed command line, or a preset's ``hydra.sweeper.params`` as ``key=value`` words.
    preset : bool
        Whether ``command`` is a preset's sweeper params: then the fix is the line to write there (a preset's
        ``+hydra.job.env_set.MY_FLAG: true,false`` would run its jobs with 'True' and 'False').

    Returns
    -------
    str or None
        E.g. ``"+hydra.job.env_set.MY_FLAG=true: hydra.job.env_set.MY_FLAG takes text, and true is a yes/no, which it
        would read as 'True' (Python's spelling), as in a config file; for the text, quote it:
        \\"+hydra.job.env_set.MY_FLAG='true'\\""``.
    """
    for o in command.parsed:
        # A sweep on the command line is hydra_values.hydra_sweep_problem's (Hydra sweeps none of its own settings
        # there, with -m or not); a preset's sweeper params are swept by the sweeper, so each value is checked here.
        if not o.key.startswith("hydra.") or o.hydra.is_delete() or (o.sweep and not preset):
            continue
        values, kind = o.values(), hydra_type(o.key)
        # an entry of a list or dict of text too (exclude_keys=[true], env_set={A:true}: was 'True', silently)
        value = next((b for v in values for b in _yes_nos(v, kind)), None)
        if value is None:
            continue
        word, prefix = str(value).lower(), o.arg[:len(o.arg) - len(o.arg.lstrip("+~"))]
        fixed = f"{prefix}{o.key}={','.join(map(_as_text, values))}"
        if not prefix and not preset and _unheld(command, o.arg, fixed):  # an entry Hydra lacks: ++ adds it (Hydra
            fixed = f"++{fixed}"  # refuses hydra.job.env_set.N='false' there: "Could not override")
        said = o.raw if isinstance(values[0], bool) and not o.sweep else f"{word} (a value of the sweep {o.raw})" \
            if o.sweep else f"{word} (an entry of {o.raw})"
        if preset:  # the sweeper reads the line's text as an override: the quotes go inside YAML's
            return (f"{o.arg} (in the preset's hydra.sweeper.params): {o.key} takes text, and {said} is a yes/no, "
                    f"which it would read as '{value}' (Python's spelling), as in a config file; for the text, write "
                    f"{o.typed}: {json.dumps(fixed.split('=', 1)[1])} there")
        return Refusal(f"{o.arg}: {o.key} takes {'text' if _text(kind) else 'text entries'}, and {said} is a yes/no, "
                       f"which it would read as '{value}' (Python's spelling), as in a config file", fixed,
                       how="; for the text, quote it: ",
                       shown=shlex.quote(fixed) if set(fixed) & set('"$`\\!') else f"\"{fixed}\"")
    return None


def _unheld(command: CommandLine, typed: str, fixed: str) -> bool:
    """Whether Hydra's config, as ``command`` (``typed`` replaced by ``fixed``) composes it, lacks ``fixed``'s key."""
    problem = hydra_entry_problem([fixed if arg == typed else arg for arg in command.args])
    return problem is not None and problem.startswith(f"{fixed}:")


def hydra_written(key: str, value: object) -> str:
    """``value`` for Hydra's setting ``key`` as a command line writes it back: a yes/no as its word (``true``),
    quoted where the setting takes text (``'true'``), None as ``null``, text as Hydra's grammar reads it.

    Parameters
    ----------
    key : str
        The setting, e.g. ``hydra.job.env_set.MY_FLAG`` (a leading ``+``/``~`` already dropped).
    value : object
        One value Hydra's grammar read from an override.

    Returns
    -------
    str
        E.g. ``"'true'"`` for ``hydra.job.env_set.MY_FLAG`` and True, ``"true"`` for ``hydra.job.chdir``.
    """
    from gensbi_sharding.harness.override_grammar import hydra_value

    text = _text(hydra_type(key))
    if value is None or isinstance(value, bool):
        return _as_text(value) if text else str(value).lower() if value is not None else "null"
    return hydra_value(str(value)) if text else str(value)


def _as_text(value: object) -> str:
    """``value`` (one of an override's) written for the fix: a yes/no as its quoted word, the rest as Hydra reads
    them back (a sweep's other values kept)."""
    from gensbi_sharding.harness.override_grammar import hydra_value

    if isinstance(value, bool):
        return f"'{str(value).lower()}'"
    if isinstance(value, list):
        return f"[{','.join(map(_as_text, value))}]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{k}:{_as_text(v)}" for k, v in value.items()) + "}"
    return "null" if value is None else hydra_value(value) if isinstance(value, str) else str(value)


def preset_sweep_problem(params: list[str], options=None) -> str | None:
    """The refusal of a preset's ``hydra.sweeper.params``: a sweep the basic sweeper cannot run or with no value
    (``sweep_values.sweep_values_problem``), of dry runs and training together (``dry_run_mix_problem``), else a
    yes/no its sweep gives a text setting of Hydra's.

    Parameters
    ----------
    params : list of str
        The params as ``key=value`` words (``+hydra.job.env_set.MY_FLAG=true,false``).
    options : callable, optional
        ``sweep_values_problem``'s: a group's options.

    Returns
    -------
    str or None
        One line naming the param, "(in the preset's hydra.sweeper.params)", and the fix.
    """
    from gensbi_sharding.harness.override_grammar import parse
    from gensbi_sharding.harness.sweep_values import dry_run_mix_problem, sweep_values_problem

    where = " (in the preset's hydra.sweeper.params)"
    return (sweep_values_problem(params, options, where) or dry_run_mix_problem(params, where)
            or hydra_text_problem(parse(params), preset=True))


def _yes_nos(value: object, kind: object) -> list[bool]:
    """The yes/no words ``value`` gives text where Hydra's setting is of ``kind``: itself for a text setting, its
    entries for a list or dict of text."""
    args = typing.get_args(kind)
    if isinstance(value, bool):
        return [value] if _text(kind) else []
    if isinstance(value, list) and typing.get_origin(kind) is list and _text(args[0]):
        return [v for v in value if isinstance(v, bool)]
    if isinstance(value, dict) and typing.get_origin(kind) is dict and _text(args[1]):
        return [v for v in value.values() if isinstance(v, bool)]
    return []


def _text(kind: object) -> bool:
    """Whether ``kind`` is text (``str`` or ``Optional[str]``)."""
    return kind is str or (typing.get_origin(kind) is typing.Union and str in typing.get_args(kind)
                           and bool not in typing.get_args(kind))

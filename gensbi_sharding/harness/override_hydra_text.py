"""A bare ``true``/``false`` given to a text setting of Hydra's (``+hydra.job.env_set.MY_FLAG=true``), refused as the
same word in a config file is (``yaml_words``).

Hydra's grammar reads a bare ``true`` as a yes/no, and a text setting takes it as Python's spelling: the job ran with
``MY_FLAG=True``, silently, where ``hydra.job.env_set: {MY_FLAG: true}`` in a YAML file is refused. Pure Python.
"""

from __future__ import annotations

import json
import shlex
import typing

from gensbi_sharding.harness.hydra_entries import as_hydra_text, hydra_entry_problem, hydra_type, text_kind
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
        fixed = f"{prefix}{o.key}={','.join(map(as_hydra_text, values))}"
        if not prefix and not preset and _unheld(command, o.arg, fixed):  # an entry Hydra lacks: ++ adds it (Hydra
            fixed = f"++{fixed}"  # refuses hydra.job.env_set.N='false' there: "Could not override")
        said = o.raw if isinstance(values[0], bool) and not o.sweep else f"{word} (a value of the sweep {o.raw})" \
            if o.sweep else f"{word} (an entry of {o.raw})"
        if preset:  # the sweeper reads the line's text as an override: the quotes go inside YAML's
            return (f"{o.arg} (in the preset's hydra.sweeper.params): {o.key} takes text, and {said} is a yes/no, "
                    f"which it would read as '{value}' (Python's spelling), as in a config file; for the text, write "
                    f"{o.typed}: {json.dumps(fixed.split('=', 1)[1])} there")
        return Refusal(f"{o.arg}: {o.key} takes {'text' if text_kind(kind) else 'text entries'}, and {said} is a "
                       f"yes/no, which it would read as '{value}' (Python's spelling), as in a config file", fixed,
                       how="; for the text, quote it: ",
                       shown=shlex.quote(fixed) if set(fixed) & set('"$`\\!') else f"\"{fixed}\"")
    return None


def _unheld(command: CommandLine, typed: str, fixed: str) -> bool:
    """Whether Hydra's config, as ``command`` (``typed`` replaced by ``fixed``) composes it, lacks ``fixed``'s key."""
    problem = hydra_entry_problem([fixed if arg == typed else arg for arg in command.args])
    return problem is not None and problem.startswith(f"{fixed}:")


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
        return [value] if text_kind(kind) else []
    if isinstance(value, list) and typing.get_origin(kind) is list and text_kind(args[0]):
        return [v for v in value if isinstance(v, bool)]
    if isinstance(value, dict) and typing.get_origin(kind) is dict and text_kind(args[1]):
        return [v for v in value.values() if isinstance(v, bool)]
    return []

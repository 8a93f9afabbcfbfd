"""A group choice only Hydra's composition can judge, refused in one line before Hydra composes: an option of one of
Hydra's own groups (``hydra/job_logging=x``, ``hydra/help=x``; its launcher and sweeper are ``hydra_plugins``'), a
group Hydra has not (``hydra/foo=x``), and an interpolation as a choice (``rule=${nope}``, ``rule=${mesh}``).

Hydra's own words are "Could not find 'hydra/job_logging/x'" with its options and search path over ten lines, "Error
resolving interpolation '${nope}', possible interpolation keys: ..." or "Could not find 'rule/dict'" after every
check has passed (``model=${oc.env:HOME} experiment=quick``: a refusal of the quick sizes of a model named so).
Only a command holding such a choice is composed (once, as its first job). Pure Python: no JAX.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from gensbi_sharding.harness.override_grammar import CommandLine, parse
from gensbi_sharding.harness.refusal import Refusal

__all__ = ["hydra_groups", "group_choice_problem"]

#: Hydra's groups that ``hydra_plugins`` judges (the plugins installed, their settings).
_PLUGIN_GROUPS = ("hydra/launcher", "hydra/sweeper")


def hydra_groups() -> list[str]:
    """Hydra's own config groups, as its schema's defaults list names them: ``hydra/output``, ``hydra/launcher``, ..."""
    from hydra.conf import HydraConf

    return [f"hydra/{name}" for entry in HydraConf().defaults for name in entry]


def _judged(o, groups: set[str]) -> list[str]:
    """The values of the override ``o`` this check composes: one of Hydra's groups' (an unknown one too), or an
    interpolation for a group of ``conf/`` (a sweep's each); none for + or ~, a list, null (other checks')."""
    values = o.values() if o.sweep else [o.hydra.value()]
    if o.typed != o.key or "=" not in o.arg or not all(isinstance(v, str) for v in values):
        return []
    if o.key.startswith("hydra/"):  # swept: hydra_sweep_problem's
        return values if o.key not in _PLUGIN_GROUPS and not o.sweep else []
    return [v for v in values if "${" in v] if o.key in groups else []


def group_choice_problem(args: Sequence[str] | CommandLine) -> str | None:
    """The one-line refusal of the first group choice Hydra's composition refuses (see the module); None when the
    command holds none, or its composition fails elsewhere (the other checks' to name).

    Parameters
    ----------
    args : sequence of str or CommandLine
        The command line after the program name (``sys.argv[1:]``).

    Returns
    -------
    str or None
        E.g. ``"hydra/job_logging=x: hydra/job_logging has no option x (its options: default, disabled, gensbi, none,
        stdout); pick one, or leave hydra/job_logging=x out"``.
    """
    from gensbi_sharding.harness.command_defaults import command_jobs, composed
    from gensbi_sharding.harness.override_keys import option_groups

    command = parse(args)
    groups = set(option_groups())
    picked = [(o, v) for o in command.parsed for v in _judged(o, groups)]
    hydras = tuple(o.arg for o, _ in picked if o.key.startswith("hydra/"))
    for chosen, home, name in (command_jobs(command) or []) if picked else ():  # a sweep: each job's choices
        if (err := composed((*chosen, *hydras), home, name)[1]) is not None:
            mine = [(o, v) for o, v in picked if o.key.startswith("hydra/") or f"{o.key}={v}" in chosen]
            return _composition_problem(err, mine) if mine else None
    return None


def _composition_problem(err: Exception, picked: list) -> str | None:
    """The refusal of the choice of ``picked`` (``(override, value)``) that Hydra's error ``err`` names; None where
    it names none of them."""
    from hydra.errors import MissingConfigException

    said = str(err).strip().splitlines()[0] if str(err).strip() else ""
    if isinstance(err, MissingConfigException) and err.options is not None:
        missing = err.missing_cfg_file or ""
        o, v = next(((o, v) for o, v in picked if missing.startswith(f"{o.key}/")), (None, None))
        return None if o is None else _option_problem(o, v, missing[len(o.key) + 1:], list(err.options))
    if said.startswith("Could not override 'hydra/"):
        o = next((o for o, _ in picked if f"'{o.key}'" in said), None)
        return None if o is None else (f"{o.arg}: Hydra has no group {o.key}; its groups: "
                                       f"{', '.join(hydra_groups())}; drop {o.arg}")
    if (found := re.match(r"Error resolving interpolation '(.*)', possible interpolation keys: (.*)", said)) is None:
        return None
    interpolation, keys = found.groups()
    o, v = next(((o, v) for o, v in picked if v == interpolation), None) or next(
        ((o, v) for o, v in picked if f"${{{o.key}}}" in interpolation), picked[0])
    named = [k for k in keys.split(", ") if "@" not in k and not k.startswith("hydra/") and k != o.key]
    return _interpolation_problem(o, v, named)


def _option_problem(o, value: str, resolved: str, options: list[str]) -> str:
    """``hydra/job_logging=x`` (or ``rule=${mesh}``, which resolves to mesh's choice, dict): the group's options, the
    nearest, or Hydra's default (the choice left out), in one parenthesis."""
    from gensbi_sharding.harness.hints import closest_name

    # One parenthesis, each value one word: was "no option ${mesh} (which resolves to dict) (its options: ...)", and
    # "(which resolves to (a))" or "no option (x) (its options" for a value of its own in parentheses
    resolves = f"it resolves to {_word(resolved)}; " if value != resolved else ""
    said = f"{o.arg}: {o.key} has no option {_word(value)} ({resolves}its options: {', '.join(options)})"
    if value == resolved and (near := closest_name(value, options)):
        return Refusal(said, _put(o, value, near), how="; did you mean ", after=f"? Or leave {o.arg} out")
    if not o.key.startswith("hydra/") and options:
        return Refusal(said, _put(o, value, _default(o.key, options)), how="; pick one, e.g. ")
    return f"{said}; pick one, or leave {o.arg} out"


def _interpolation_problem(o, value: str, named: list[str]) -> str:
    """``rule=${nope}``: a choice interpolates only another group's choice (``${mesh}``), one not interpolated in
    turn (``model``'s is: ``experiment_model``'s file is ``${experiment}/${model}``); the fix names an option."""
    from gensbi_sharding.harness.groups import group_options

    said = (f"{o.arg}: Hydra cannot resolve {value} as a choice of {o.key}: a choice interpolates only the choice of "
            f"another group ({', '.join(named)}; e.g. ${{mesh}}), and one not interpolated in turn")
    if o.key.startswith("hydra/"):
        return f"{said}; pick an option of {o.key}, or leave {o.arg} out"
    return Refusal(said, _put(o, value, _default(o.key, group_options(o.key))), how="; pick an option, e.g. ")


def _word(value: str) -> str:
    """``value`` as one word of a message: quoted where it is empty or holds a parenthesis, a comma, a semicolon or a
    space, which would read as the message's own punctuation."""
    return repr(value) if not value or any(c in value for c in "(),; ") else value


def _put(o, value: str, option: str) -> str:
    """The override ``o`` with ``option`` in place of its ``value`` (a sweep's other values kept)."""
    put = [option if v == value else str(v) for v in (o.values() if o.sweep else [value])]
    return f"{o.key}={','.join(dict.fromkeys(put))}"


def _default(group: str, options: list[str]) -> str:
    """The option ``conf/config.yaml`` picks for ``group`` where it is one of ``options``, else the first."""
    from gensbi_sharding.harness.groups import chosen_default

    return default if (default := chosen_default(group)) in options else options[0]

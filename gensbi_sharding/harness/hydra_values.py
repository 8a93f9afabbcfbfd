"""Hydra's own settings (``hydra.*``) given a value of a shape Hydra cannot take, refused in one line before Hydra
composes: a dict setting given one value (``hydra.job.env_set=1``: was Hydra's "Cannot assign int to Dict[str, str]"
and its full key and object type, in several lines), a sweep of one (``hydra.job.env_set.X=1,2``: was "Ambiguous
value" without ``-m``, offering -m, and with it Hydra's "Sweeping over Hydra's configuration is not supported").
Pure Python: no JAX.
"""

from __future__ import annotations

import enum
import shlex
import typing
from collections.abc import Sequence

from gensbi_sharding.harness.hydra_entries import hydra_type
from gensbi_sharding.harness.override_grammar import CommandLine, parse
from gensbi_sharding.harness.refusal import Refusal

__all__ = ["hydra_dict_problem", "hydra_sweep_problem", "sweeper_param_problem", "hydra_type_problem"]

#: The basic sweeper's ``params`` (``hydra.sweeper`` is of no fixed schema in ``HydraConf``): a dict of sweeps.
_SWEEPER_PARAMS = "hydra.sweeper.params"


def _hint(key: str) -> typing.Any:
    """The type ``HydraConf`` declares for the dotted ``key`` (``hydra_entries.hydra_type``: a dict's entry is its
    value type, as Hydra converts it); the sweeper's params a dict (``hydra.sweeper`` has no fixed schema)."""
    return dict if key == _SWEEPER_PARAMS else hydra_type(key)


def _enum_of(hint: typing.Any) -> type[enum.Enum] | None:
    """The enum a setting of Hydra's takes by name (``hydra.mode``: ``Optional[RunMode]``); None for another type."""
    return next((kind for kind in (hint, *typing.get_args(hint)) if isinstance(kind, type)
                 and issubclass(kind, enum.Enum)), None)


def _enum_refusal(o: typing.Any, key: str, kind: type[enum.Enum], value: typing.Any) -> Refusal:
    """The refusal of an enum setting given a value it cannot take, or several (a sweep): the names it takes and the
    one that reads as ``value`` (``run``: RUN; ``1``: RUN, its number) or else the first, to write instead. Was, for
    ``hydra.mode``: OmegaConf's "Invalid value 'run', expected one of [RUN, MULTIRUN]" with "give it a value it
    takes", or for ``hydra.mode=1,2`` "e.g. hydra.mode=1", Hydra's number for RUN."""
    names = [member.name for member in kind]
    member = next((m for m in kind if str(value).upper().removeprefix(f"{kind.__name__.upper()}.") == m.name
                   or not isinstance(value, bool | dict | list) and value == m.value), next(iter(kind)))
    given = "several (Hydra sweeps none of its own settings)" if o.hydra.is_sweep_override() else o.raw or "''"
    takes = " or ".join(names) if len(names) == 2 else f"one of {', '.join(names)}"
    sweep = " (MULTIRUN: a sweep, as -m)" if key == "hydra.mode" else ""
    return Refusal(f"{o.arg}: {key} takes {takes} by name{sweep}, not {given}", f"{o.typed}={member.name}",
                   how="; write ", after=", or leave it out")


def _written(value: typing.Any) -> str:
    """``value`` (a dict, list or scalar Hydra's grammar read) as an override types it: ``{b:1}``, ``[1,2]``."""
    from gensbi_sharding.harness.override_words import override_literal

    if isinstance(value, dict):
        return "{" + ",".join(f"{k}:{_written(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(map(_written, value)) + "]"
    return override_literal(value)


def _text_entry_problem(o: typing.Any, key: str, value: typing.Any) -> Refusal | None:
    """An entry of one of Hydra's dict settings of text (``hydra.job.env_set``: an environment variable's value) given
    a dict or a list, or a key below one (``hydra.job.env_set.A.b=1``); None otherwise. The fix writes the entry as
    text, with ``++`` (it adds the entry, or overrides a preset's): Hydra's job sets each entry as an environment
    variable, so a dict there passes every check of the config and fails only as the job starts ("TypeError: str
    expected, not DictConfig")."""
    from gensbi_sharding.harness.override_grammar import hydra_value
    from gensbi_sharding.harness.paste_command import pasted

    parts = key.split(".")
    for i in range(2, len(parts) + 1):
        setting, hint = ".".join(parts[:i]), hydra_type(".".join(parts[:i]))
        if typing.get_origin(hint) is dict:
            break
    else:
        return None
    if typing.get_args(hint)[1] is not str or value is None or "${" in str(value):
        return None  # a dict of anything (a callback's, a logging config's), or null or an interpolation: others'
    what = f"an entry of {setting} is text (an environment variable's value)" if setting == "hydra.job.env_set" \
        else f"an entry of {setting} is text"
    if len(parts) > i + 1:  # hydra.job.env_set.A.b: text holds no keys
        entry = ".".join(parts[:i + 1])
        fix = f"++{entry}={hydra_value(_written(value))}"
        said = f"{o.arg}: {what}, so {entry} holds no {'.'.join(parts[i + 1:])}"
        return Refusal(said, fix, how="; set the entry itself: ", after=", or leave it out", shown=pasted([fix])[1])
    if len(parts) == i + 1 and isinstance(value, dict | list):  # hydra.job.env_set.A={b:1}
        fix = f"++{key}={hydra_value(_written(value))}"
        said = f"{o.arg}: {what}, not a {type(value).__name__}"
    elif len(parts) == i and isinstance(value, dict) and (bad := [k for k, v in value.items()
                                                                    if isinstance(v, dict | list)]):
        entries = ",".join(f"{k}:{hydra_value(_written(v)) if k in bad else _written(v)}" for k, v in value.items())
        fix = f"++{key}={{{entries}}}"  # every entry kept, those of a dict or a list as text
        said = f"{o.arg}: {what}, and {', '.join(f'{key}.{k}' for k in bad)} is a {type(value[bad[0]]).__name__}"
    else:
        return None
    return Refusal(said, fix, how="; as text: ", after=", or leave it out", shown=pasted([fix])[1])


def hydra_dict_problem(args: Sequence[str] | CommandLine) -> str | None:
    """The one-line refusal of a ``hydra.*`` setting that holds entries by name (``hydra.job.env_set``,
    ``hydra.sweeper.params``, ``hydra.callbacks``, ...) given one value, or a list; None when there is none.

    Parameters
    ----------
    args : sequence of str or CommandLine
        The command line after the program name (``sys.argv[1:]``).

    Returns
    -------
    str or None
        E.g. ``"hydra.job.env_set=1: hydra.job.env_set holds entries by name (a dict), not one value; set one by its
        name: '+hydra.job.env_set.MY_VAR=\"1\"'"``.
    """
    from gensbi_sharding.harness.hydra_entries import hydra_written
    from gensbi_sharding.harness.paste_command import pasted

    for o in parse(args).parsed:
        key = o.typed.lstrip("+")
        if not key.startswith("hydra.") or "=" not in o.arg or o.sweep or key.startswith("hydra.sweeper.params."):
            continue
        hint = _hint(key)
        if dict not in (typing.get_origin(hint), hint) or isinstance(value := o.hydra.value(), dict | None):
            continue  # null: hydra_nulls' (a dict of Hydra's that cannot be null), or the sweeper's default
        said = f"{o.arg}: {key} holds entries by name (a dict), not one value"
        if key == "hydra.job.env_set":  # written for the text setting, one shell word: it survives the paste
            fix = f"+{key}.MY_VAR={hydra_written(f'{key}.MY_VAR', value)}"
            return Refusal(said, fix, how="; set one by its name: ", shown=pasted([fix])[1])
        if key == _SWEEPER_PARAMS:  # a preset's sweep: the command line's own is -m with the values
            return f"{said}; to sweep a key from the command line, give its values with -m, e.g. -m seed=0,1"
        return f"{said}; set one entry by its name ({key}.<name>=<value>), or leave {key} out"
    return None


def hydra_sweep_problem(args: Sequence[str] | CommandLine) -> str | None:
    """The one-line refusal of a sweep of one of Hydra's own settings on the command line (``hydra.job.env_set.X=1,2``,
    ``hydra.sweeper.params.seed=range(3)``, ``hydra/launcher=basic,slurm``: was Hydra's "Ambiguous value" in several
    lines, offering -m, and with -m "Sweeping over Hydra's configuration is not supported"); None when there is none.

    Parameters
    ----------
    args : sequence of str or CommandLine
        The command line after the program name (``sys.argv[1:]``).

    Returns
    -------
    str or None
        E.g. ``"hydra.run.dir=a,b: several values are a sweep, and Hydra sweeps none of its own settings (hydra.*);
        give hydra.run.dir one value, e.g. hydra.run.dir=a"``.
    """
    from gensbi_sharding.harness.hydra_entries import hydra_written
    from gensbi_sharding.harness.paste_command import pasted

    command = parse(args)
    for o in command.parsed:  # with -m too: Hydra's "Sweeping over Hydra's configuration is not supported"
        key = o.typed.lstrip("+~")
        if not key.startswith(("hydra.", "hydra/")) or not o.hydra.is_sweep_override():
            continue
        if kind := _enum_of(_hint(key)):  # hydra.mode=1,2: one of its names, not the first value as typed
            return _enum_refusal(o, key, kind, (o.values() or [None])[0])
        said = f"{o.arg}: several values are a sweep, and Hydra sweeps none of its own settings (hydra.*)"
        if key == _SWEEPER_PARAMS:  # a preset's sweep: the command line's own is -m with the values
            return f"{said}; to sweep a key from the command line, give its values with -m, e.g. -m seed=0,1"
        if key.startswith(f"{_SWEEPER_PARAMS}.") and (swept := key.removeprefix(f"{_SWEEPER_PARAMS}.")):
            return f"{said}; to sweep {swept}, give its values with -m: -m {shlex.quote(f'{swept}={o.raw}')}"
        values = o.values()
        # an entry of a dict setting typed bare (hydra.job.env_set.N=1,2): Hydra overrides only an entry there, ++
        # adds or overrides it, so the fix runs either way
        entry = o.typed == key and "." in key and typing.get_origin(_hint(key.rpartition(".")[0])) is dict
        fix = f"{'++' * entry}{o.typed}={hydra_written(key, values[0])}" if values else None
        # shown as one shell word, so that the pasted fix keeps its quotes ('true' for a text setting)
        return Refusal(f"{said}; give {key} one value", fix, how=", e.g. ", shown=fix and pasted([fix])[1])
    return None


def sweeper_param_problem(args: Sequence[str] | CommandLine) -> str | None:
    """The one-line refusal of ``hydra.sweeper.params.<key>=<value>`` where nothing gives the sweeper params to set
    one in: no ``sweep=`` or ``experiment=`` preset, no other sweeper or config (Hydra's is an AssertionError traceback,
    "Unexpected type for root: NoneType", with -m or without); None when there is none.

    Parameters
    ----------
    args : sequence of str or CommandLine
        The command line after the program name (``sys.argv[1:]``).

    Returns
    -------
    str or None
        E.g. ``"hydra.sweeper.params.seed=1: the sweeper has no params to set seed in (only a preset, e.g.
        sweep=rules_x_model_axis, gives it some); sweep seed from the command line with -m: -m seed=1"``.
    """
    command = parse(args)
    # a preset's or another config's params, another sweeper's: Hydra's to judge
    flags = ("-cn", "--config-name", "-cp", "--config-path", "-cd", "--config-dir")
    if any(o.key in ("sweep", "experiment", "hydra/sweeper") for o in command.parsed) or any(
            a.startswith(flags) for a in command.args):
        return None
    for o in command.parsed:
        key = o.typed.lstrip("+")
        if not key.startswith(f"{_SWEEPER_PARAMS}.") or "=" not in o.arg:
            continue
        swept = key.removeprefix(f"{_SWEEPER_PARAMS}.")
        return (f"{o.arg}: the sweeper has no params to set {swept} in (only a preset, e.g. sweep=rules_x_model_axis, "
                f"gives it some); sweep {swept} from the command line with -m: -m {shlex.quote(f'{swept}={o.raw}')}")
    return None


#: Hydra's settings naming the folder a job runs in (a sweep's job: ``<sweep.dir>/<sweep.subdir>``).
_FOLDER_KEYS = ("hydra.run.dir", "hydra.sweep.dir", "hydra.sweep.subdir")


def _folder_brace_problem(args: Sequence[str] | CommandLine) -> str | None:
    """The one-line refusal of a job's folder whose path holds ``${`` as text; None where none does. Hydra records the
    folder (``hydra.runtime.output_dir``) unescaped and reads that record as an interpolation: was its traceback,
    "Interpolation key 'b' not found" (``full_key: hydra.job_logging...``), the folder made and claimed. Given
    escaped (``runs/a\\${b}``), unescaped as a continue command recorded it before r77 (``runs/a${b}``, a folder that
    exists: was "cannot be resolved ... give a folder whose ${...} resolves"), or below the command's own folder."""
    import os

    from gensbi_sharding.harness.paste_command import LITERAL_BRACE

    command, absolute = parse(args), False  # made: the folder its Hydra makes (-m hydra.mode=RUN: a sweep's)
    made = f"hydra.{'sweep' if command.multirun else 'run'}.dir"
    for o in command.parsed:
        key = o.typed.lstrip("+")
        if key not in _FOLDER_KEYS or "=" not in o.arg or not isinstance(value := o.hydra.value(), str):
            continue
        escaped, named = LITERAL_BRACE.search(value), "${" in value and os.path.isdir(value)
        if key == made:  # the last one given; an interpolation (${oc.env:SCRATCH}/runs) may name an absolute path
            absolute = os.path.isabs(value) or value.startswith("${")
        if escaped or named:  # named: runs/a${b} read as text, which an interpolation of b would not give
            folder = value.replace("\\${", "${") if escaped else value
            return (f"{o.arg}: Hydra cannot run a job in a folder whose path holds '${{' ({folder}): it reads its own "
                    "record of the folder as an interpolation; rename the folder without '${' (e.g. mv "
                    f"{shlex.quote(folder)} {shlex.quote(folder.replace('${', '_{'))}) and give that, or choose "
                    f"another {key}")
    if "${" in (here := os.getcwd()) and not absolute:  # the folder Hydra makes is below this one
        return (f"this command's folder, {here}, holds '${{': Hydra cannot run a job in a folder whose path holds it "
                "(it reads its own record of the folder as an interpolation); run it from another folder, or give "
                "an absolute hydra.run.dir (-m: hydra.sweep.dir) without '${'")
    return None


def hydra_type_problem(args: Sequence[str] | CommandLine) -> str | None:
    """The one-line refusal of a ``hydra.*`` setting of a fixed type given a value it cannot take
    (``hydra.job.chdir=x``, ``hydra.mode=a``, ``hydra.run.dir=[]``: was Hydra's "Error merging override" with the
    value's type, full key and object type, in several lines); None when there is none. Its dict settings are
    ``hydra_dict_problem``'s, null ``hydra_nulls``', an interpolation Hydra's to resolve.

    Parameters
    ----------
    args : sequence of str or CommandLine
        The command line after the program name (``sys.argv[1:]``).

    Returns
    -------
    str or None
        E.g. ``"hydra.job.chdir=x: hydra.job.chdir cannot take x (Value 'x' is not a valid bool); give it one it
        takes, e.g. hydra.job.chdir=false, or leave it out"``.
    """
    from hydra.conf import HydraConf
    from omegaconf import OmegaConf

    from gensbi_sharding.harness.hydra_entries import hydra_written
    from gensbi_sharding.harness.paste_command import pasted

    if problem := _folder_brace_problem(args):  # a folder Hydra cannot run in, written as it takes any other
        return problem
    schema = None
    for o in parse(args).parsed:
        key = o.typed.lstrip("+")
        hint, value = (_hint(key), o.hydra.value()) if key.startswith("hydra.") and "=" in o.arg else (None, None)
        if "=" in o.arg and key.startswith("hydra.") and not o.hydra.is_sweep_override() and (
                text := _text_entry_problem(o, key, value)):
            return text
        if hint in (None, typing.Any) or o.hydra.is_sweep_override() or value is None or "${" in str(value) or (
                dict in (typing.get_origin(hint), hint)) or key.startswith(f"{_SWEEPER_PARAMS}."):
            # no type to check (an entry of a dict of anything: a logging config's, a callback's), a dict's or null
            continue
        if (kind := _enum_of(hint)) and not (isinstance(value, str) and value in kind.__members__):
            # by name only: OmegaConf also takes the enum's number (hydra.mode=2: MULTIRUN, then refused for
            # hydra.run.dir, "a multirun (-m, or a preset) writes into hydra.sweep.dir", naming neither) and
            # "RunMode.MULTIRUN", which the checks reading the command line as typed do not know as a mode
            return _enum_refusal(o, key, kind, value)
        schema = schema or OmegaConf.structured(HydraConf)
        node = schema.copy()
        try:
            OmegaConf.update(node, key.removeprefix("hydra."), value, merge=True)
        except Exception as err:  # noqa: BLE001 (OmegaConf's validation errors: the first line is the reason)
            if kind := _enum_of(hint):  # its names, and the one to write (hydra.mode=run: RUN)
                return _enum_refusal(o, key, kind, value)
            reason = (str(err).strip().splitlines() or [type(err).__name__])[0]
            default = OmegaConf.select(schema, key.removeprefix("hydra."), default=None, throw_on_missing=False)
            # Hydra's default, where it has one to show, as its grammar and the shell read it back (',' quoted)
            shown = f", e.g. {pasted([f'{key}={hydra_written(key, default)}'])[1]}" if isinstance(
                default, bool | int | str) and str(default) not in ("", "???") else ""
            return f"{o.arg}: {key} cannot take {o.raw} ({reason}); give it a value it takes{shown}, or leave it out"
    return None

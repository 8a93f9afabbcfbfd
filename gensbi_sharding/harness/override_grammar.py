"""Values Hydra's override grammar cannot read, named before Hydra; values written so that it reads them back.

``grammar_problem(args)`` is launch.py's check of the command line (Hydra's own message, e.g. "mismatched
input '(' expecting <EOF>", names neither the override nor the fix); ``hydra_value`` / ``hydra_override``
write a folder into the commands the harness prints or starts (continue a job, train it further, the
processes of ``distributed=local``), so that a folder such as ``runs/a(1)`` survives them. Pure Python: no JAX.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Sequence

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import ValueType

__all__ = ["grammar_problem", "hydra_value", "hydra_override"]


#: Keys whose value is a folder Hydra makes as written: a leading ``~`` there is a folder named "~".
_FOLDER_KEYS = ("hydra.run.dir", "hydra.sweep.dir")


def grammar_problem(args: Sequence[str]) -> str | None:
    """The one-line refusal of the first ``key=value`` Hydra's override grammar cannot read; None when all parse.

    Hydra's own message ("mismatched input '(' expecting <EOF>", "token recognition error at: '~'") names
    neither the override nor the fix. A value such as a path with ``(``, ``=`` or ``[`` in it, or a leading
    ``~`` (the shell expands it only at the start of a word), reads as one string once quoted for Hydra; a
    leading ``~`` is written out as the home folder, since neither Hydra nor its folders expand it. A value
    in brackets or a sweep function (``[1,2``, ``choice(1,2``) is named with Hydra's reason only: quoting
    would turn it into a string. Also refused: ``hydra.run.dir`` / ``hydra.sweep.dir`` quoted with a leading
    ``~``, which Hydra would make as a folder named "~" under the current one.

    Parameters
    ----------
    args : sequence of str
        The command line after the program name (``sys.argv[1:]``).

    Returns
    -------
    str or None
        ``"hydra.run.dir=runs/a(1): Hydra's override grammar cannot read the value runs/a(1) (mismatched input
        '(' expecting <EOF>); quote it for Hydra inside the shell's quotes: 'hydra.run.dir=\"runs/a(1)\"'"``.
    """
    parser = OverridesParser.create()
    for arg in args:
        if "=" not in arg or arg.startswith("-"):  # flags (-m, --cfg job, --help) and their values
            continue
        key, value = arg.split("=", 1)
        if not re.fullmatch(r"[+~]{0,2}[\w./@-]+", key):  # not a key=value Hydra could mean: its message
            continue
        try:
            parsed = parser.parse_override(arg)
        except Exception as err:  # Hydra's grammar: the first line is its reason
            reason = (str(err).strip().splitlines() or [type(err).__name__])[0]
            if re.match(r"\s*(\[|\{|\w+\()", value):  # a list, dict or sweep: quoting would make it a string
                return (f"{arg}: Hydra's override grammar cannot read the value {value} ({reason}); check its "
                        "brackets and commas (a list: eval.observations=[1,2,3]; a sweep: -m rule=fsdp,tensor)")
            return (f"{arg}: Hydra's override grammar cannot read the value {value} ({reason}); "
                    + _quoted_fix(key, value))
        if parsed.key_or_group in _FOLDER_KEYS and (parsed.value() is None or str(parsed.value()).strip() == ""):
            # An unset shell variable (hydra.run.dir=$OUT): Hydra wrote the run's files into the current folder.
            default = "outputs/<date>/<time>" if parsed.key_or_group == "hydra.run.dir" else "multirun/<date>/<time>"
            return (f"{arg}: an empty folder (an unset shell variable?) would put the run's files in the current "
                    f"folder; give one, e.g. {key}=outputs/my_run, or leave {key} out for {default}")
        if (parsed.key_or_group in _FOLDER_KEYS and isinstance(parsed.value(), str)
                and re.match(r"~(/|$)", parsed.value())):
            home = os.path.expanduser(parsed.value())
            return (f"{arg}: Hydra does not expand ~ and would make a folder named '~' under the current one; "
                    f"write the path out: {shlex.quote(f'{key}={home}')}")
    return None


def _quoted_fix(key: str, value: str) -> str:
    """How to write ``value`` so Hydra reads it as one string: quoted for Hydra, the whole override for the shell."""
    note = ""
    if re.match(r"~(/|$)", value):  # the shell left it (not at the start of a word); nothing here expands it
        value, note = os.path.expanduser(value), " (~ written out: neither the shell nor Hydra expands it there)"
    if not re.search(r"[^\w./@:+-]", value):  # plain once written out
        return f"write it out: {shlex.quote(f'{key}={value}')}{note}"
    quote = '"' if '"' not in value else "'"
    return f"quote it for Hydra inside the shell's quotes: {shlex.quote(f'{key}={quote}{value}{quote}')}{note}"


def hydra_value(value) -> str:
    """``value`` (a path, say) written so that Hydra's override grammar reads back that very string.

    As it is when Hydra reads it so (``runs/a``, ``/tmp/my runs``); else quoted for Hydra (``"runs/a(1)"``,
    ``"/tmp/x=y"``, ``"/tmp/a,b"``, which would be a sweep): commands the harness prints or starts never fail
    in Hydra's grammar.

    Parameters
    ----------
    value : Any
        The value; ``str(value)`` is written.

    Returns
    -------
    str
        The text after ``key=``, not yet quoted for a shell (``hydra_override`` does both).
    """
    text, parser = str(value), OverridesParser.create()
    for written in (text, f'"{text}"', f"'{text}'", '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'):
        try:
            parsed = parser.parse_override(f"key={written}")
        except Exception:
            continue
        if parsed.value_type == ValueType.ELEMENT and parsed.value() == text:
            return written
    return text  # nothing reads back (an interpolation in a path): as it is, Hydra names it


def hydra_override(key: str, value) -> str:
    """``key=<value>`` as one shell word that Hydra reads back as ``value`` (``hydra_value``, then ``shlex.quote``).

    Parameters
    ----------
    key : str
        The override's key, e.g. ``hydra.run.dir``.
    value : Any
        Its value, e.g. a folder.

    Returns
    -------
    str
        E.g. ``hydra.run.dir=runs/a`` or ``'hydra.run.dir="runs/a(1)"'``.
    """
    return shlex.quote(f"{key}={hydra_value(value)}")

"""``grammar_problem``: the first override Hydra's grammar cannot read (or reads as a folder it should not make)."""

from __future__ import annotations

import itertools
import os
import re
import shlex
from collections.abc import Sequence

from gensbi_sharding.harness.groups import group_options
from gensbi_sharding.harness.override_grammar import CommandLine, parse

__all__ = ["grammar_problem", "line_break_problem", "bare_word_problem"]

#: Keys whose value is a folder Hydra makes as written: a leading ``~`` there is a folder named "~".
_FOLDER_KEYS = ("hydra.run.dir", "hydra.sweep.dir")
#: Hydra's flags whose value is the next word (``--cfg job``, ``-cd conf2``): no override, whatever it holds.
_VALUE_FLAGS = ("-cp", "--config-path", "-cn", "--config-name", "-cd", "--config-dir", "-c", "--cfg", "-p", "--package",
                "-i", "--info", "--experimental-rerun")


def line_break_problem(args: Sequence[str] | CommandLine) -> str | None:
    """The one-line refusal of the first word of the command line that holds a line break (``$'mesh=\\n'``, a
    ``$(cat file)`` of several lines); None when there is none. No setting, option or flag takes one, and each
    refusal that showed the word as typed ran over several lines (its advice, to quote the line break, too).

    Parameters
    ----------
    args : sequence of str or CommandLine
        The command line after the program name (``sys.argv[1:]``).

    Returns
    -------
    str or None
        E.g. ``"'mesh=\\n': the word holds a line break, which no setting, option or flag takes; type it on one
        line (python launch.py --cfg job shows the settings and their values)"``.
    """
    word = next((w for w in parse(args).args if w.splitlines() != [w]), None)  # "" splits to []: no line break
    if word is None or word == "":
        return None
    return (f"{word!r}: the word holds a line break, which no setting, option or flag takes; type it on one line "
            "(python launch.py --cfg job shows the settings and their values)")


def grammar_problem(args: Sequence[str] | CommandLine) -> str | None:
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
    args : sequence of str or CommandLine
        The command line after the program name (``sys.argv[1:]``).

    Returns
    -------
    str or None
        ``"hydra.run.dir=runs/a(1): Hydra's override grammar cannot read the value runs/a(1) (mismatched input
        '(' expecting <EOF>); quote it for Hydra inside the shell's quotes: 'hydra.run.dir=\"runs/a(1)\"'"``.
    """
    for o in (command := parse(args)).overrides:
        # No key Hydra could mean: named here (hydra_plugin_problem would meet it as an AttributeError);
        # Hydra reads =1 as the key '', which no other check names
        if not re.fullmatch(r"[+~]{0,2}[\w./@-]+", o.typed):
            if (o.hydra is None or not o.typed) and not _flag_value(command.args, o.arg):
                return _key_problem(o.arg, o.typed, o.error)
            continue
        if "=" not in o.arg:
            continue
        key, value, parsed = o.typed, o.raw, o.hydra
        if parsed is None and value.endswith(","):  # -m rule=replicated, fsdp: the shell split the sweep at a space
            rest = "".join(itertools.takewhile(lambda a: not re.match(r"-|.*=", a), command.args[command.args.index(
                o.arg) + 1:]))  # the words after it up to the next override or flag: fsdp, tensor -> fsdp,tensor
            return (f"{o.arg}: a value cannot end in a comma" + (f" (the shell split {rest} from it at a space)" if rest
                    else "") + f"; write {shlex.quote(f'{key}={value}{rest}') if rest else f'{key}={value[:-1]}'}")
        if parsed is None:
            if re.match(r"\s*(\[|\{|\w+\()", value):  # a list, dict or sweep: quoting would make it a string
                return (f"{o.arg}: Hydra's override grammar cannot read the value {value} ({o.error}); check its "
                        "brackets and commas (a list: eval.observations=[1,2,3]; a sweep: -m rule=fsdp,tensor)")
            return (f"{o.arg}: Hydra's override grammar cannot read the value {value} ({o.error}); "
                    + _quoted_fix(key, value))
        if parsed.key_or_group in _FOLDER_KEYS and (parsed.value() is None or str(parsed.value()).strip() == ""):
            # An unset shell variable (hydra.run.dir=$OUT): Hydra wrote the run's files into the current folder.
            default = "outputs/<date>/<time>" if parsed.key_or_group == "hydra.run.dir" else "multirun/<date>/<time>"
            return (f"{o.arg}: an empty folder (an unset shell variable?) would put the run's files in the current "
                    f"folder; give one, e.g. {key}=outputs/my_run, or leave {key} out for {default}")
        if (parsed.key_or_group in _FOLDER_KEYS and isinstance(parsed.value(), str)
                and re.match(r"~(/|$)", parsed.value())):
            home = os.path.expanduser(parsed.value())
            return (f"{o.arg}: Hydra does not expand ~ and would make a folder named '~' under the current one; "
                    f"write the path out: {shlex.quote(f'{key}={home}')}")
    return None


def bare_word_problem(args: Sequence[str] | CommandLine) -> str | None:
    """The one-line refusal of the first word that is neither a flag, a flag's value nor an override (no ``=``):
    ``python launch.py fsdp``, ``seed``, ``seed= 3`` (the shell split at the space); None when there is none. Was
    Hydra's "Error parsing override 'fsdp' / missing EQUAL at '<EOF>'" in several lines, after every check passed.

    Parameters
    ----------
    args : sequence of str or CommandLine
        The command line after the program name (``sys.argv[1:]``).

    Returns
    -------
    str or None
        E.g. ``"fsdp: Hydra reads each word after the flags as an override, key=value, and fsdp has no '='; fsdp is
        an option of rule: write rule=fsdp"``.
    """
    from gensbi_sharding.harness.override_keys import option_groups

    words = list(parse(args).args)
    for before, word in zip([None, *words], words):
        if word.startswith(("-", "~")) or "=" in word or _flag_value(words, word) and before in _VALUE_FLAGS:
            continue
        said = f"{word}: Hydra reads each word after the flags as an override, key=value, and {word} has no '='"
        if before is not None and before.endswith("=") and not before.startswith("-"):  # seed= 3
            return f"{said} (the shell split {before}{word} at a space); write {shlex.quote(before + word)}"
        groups = [g for g in option_groups() if word in group_options(g)]
        if groups:  # fsdp alone: an option, its group left out
            return f"{said}; {word} is an option of {' and '.join(groups)}: write {groups[0]}={word}"
        return (f"{said}; give it a value, {word.lstrip('+')}=<value> (python launch.py --cfg job shows each setting "
                "with its value)")
    return None


def _flag_value(args: Sequence[str], word: str) -> bool:
    """Whether ``word`` is the value of one of Hydra's flags (``-cd ~x``), which no check reads as an override."""
    return any(a in _VALUE_FLAGS and b == word for a, b in zip(args, args[1:]))


def _key_problem(arg: str, typed: str, error: str | None) -> str:
    """The refusal of ``arg``, whose key ``typed`` Hydra's grammar cannot read (``hydra.sweeper.params.+x=1``,
    ``=1``, ``'a b=1'``): Hydra's own error is several lines naming neither the key nor the fix."""
    if not typed.lstrip("+~"):
        return f"{arg}: no key before the '='; write key=value, e.g. seed=1 (python launch.py --cfg job lists the keys)"
    said = (f"{arg}: Hydra's override grammar cannot read the key {typed!r} ({error}); a key is names joined by dots "
            "(model.width), with +, ++ or ~ only in front of the whole key (+hydra.job.env_set.X=1)")
    if typed.startswith("hydra.sweeper.params."):  # a preset's sweep, typed: the command line's own sweep is -m
        said += "; to sweep a key from the command line, give its values with -m, e.g. -m seed=0,1"
    return said


def _quoted_fix(key: str, value: str) -> str:
    """How to write ``value`` so Hydra reads it as one string: quoted for Hydra, the whole override for the shell."""
    note = ""
    if re.match(r"~(/|$)", value):  # the shell left it (not at the start of a word); nothing here expands it
        value, note = os.path.expanduser(value), " (~ written out: neither the shell nor Hydra expands it there)"
    if not re.search(r"[^\w./@:+-]", value):  # plain once written out
        return f"write it out: {shlex.quote(f'{key}={value}')}{note}"
    quote = '"' if '"' not in value else "'"
    return f"quote it for Hydra inside the shell's quotes: {shlex.quote(f'{key}={quote}{value}{quote}')}{note}"

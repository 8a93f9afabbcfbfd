"""The command line, parsed once; what Hydra's grammar cannot read; values written so that it reads them back.

``parse(args)`` is the one reading of launch.py's command line that every override check shares (``override_keys``,
``override_types``): each ``key=value`` or ``~key`` as typed and as Hydra's grammar reads it, the model(s) it picks, the
mode flags, whether it runs a sweep, its ``hydra.searchpath`` (with ``--config-dir``'s). ``grammar_problem`` and
``mode_flags_problem`` refuse what Hydra refuses naming neither the override nor the fix; ``hydra_value`` /
``hydra_override`` write a folder into the commands the harness prints or starts (continue a job, train it further, the
processes of ``distributed=local``), so that a folder such as ``runs/a(1)`` survives them. Pure Python: no JAX.
"""

from __future__ import annotations

import copy
import functools
import itertools
import os
import re
import shlex
import typing
from collections.abc import Sequence

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import OverrideType, QuotedString, ValueType

from gensbi_sharding.harness.groups import group_options, preset_is_multirun, search_path_entries
from gensbi_sharding.harness.paste_command import command_for

__all__ = ["SWEEPS", "Override", "CommandLine", "parse", "grammar_problem", "mode_flags_problem",
           "flag_order_problem", "hydra_value", "hydra_override"]

#: Hydra's sweeps whose values a check can list (a glob's are the group's options: ``CommandLine.models``).
SWEEPS = (ValueType.SIMPLE_CHOICE_SWEEP, ValueType.CHOICE_SWEEP, ValueType.RANGE_SWEEP)
#: Keys whose value is a folder Hydra makes as written: a leading ``~`` there is a folder named "~".
_FOLDER_KEYS = ("hydra.run.dir", "hydra.sweep.dir")
#: Hydra's mode flags (its ``--help``): at most one may be given.
_MODES = {"-r": "--run", "--run": "--run", "-m": "-m", "--multirun": "-m", "-c": "--cfg", "--cfg": "--cfg",
          "-i": "--info", "--info": "--info", "-sc": "--shell-completion", "--shell-completion": "--shell-completion"}


class Override(typing.NamedTuple):
    """One override as typed (``arg``: ``typed``, its key with any ``+``/``++``/``~``, = ``raw``) and as Hydra's
    grammar reads it: ``hydra`` (None where the grammar refuses it, ``error`` holding its reason), ``key`` (the key
    or group, no prefix), ``sweep`` (values listed: ``1,2``, ``choice``, ``range``), ``values()`` (the one value or
    each swept one, a quoted one as its text; [] for a glob)."""

    arg: str
    typed: str
    raw: str
    hydra: typing.Any
    error: str | None

    key = property(lambda self: self.hydra.key_or_group)
    sweep = property(lambda self: self.hydra.value_type in SWEEPS)

    def values(self) -> list:
        if self.sweep:
            return [v.text if isinstance(v, QuotedString) else v for v in self.hydra.sweep_iterator()]
        return [self.hydra.value()] if self.hydra.value_type == ValueType.ELEMENT else []


class CommandLine(typing.NamedTuple):
    """The command line after the program name: its words (``args``), and each override among them (``parse``).

    ``parsed``: the overrides Hydra's grammar reads. ``model_override``: the ``model=`` Hydra applies, the last
    one typed; ``models``: the model(s) it picks (each swept one, a glob's matching options; [] for none),
    ``model``: the one it picks (None when none or a sweep). ``multirun``: ``-m``, ``hydra.mode=``, or a preset
    that turns multirun on itself (``groups.preset_is_multirun``: ``experiment=sbibm``, ``sweep=``). ``search_paths``: the first ``hydra.searchpath=``'s entries.
    """

    args: tuple[str, ...]
    overrides: tuple[Override, ...]

    parsed = property(lambda self: [o for o in self.overrides if o.hydra is not None])

    @property
    def model_override(self) -> Override | None:
        picks = [o for o in self.parsed if o.key == "model" and o.hydra.package is None
                 and o.hydra.type == OverrideType.CHANGE]  # +model= (a second model) is refused
        return picks[-1] if picks else None

    @property
    def models(self) -> list[str]:
        if (picked := self.model_override) is None:
            return []
        if hasattr(picked.hydra.value(), "filter"):  # glob(*former): the matching options of the group
            return picked.hydra.value().filter(group_options("model"))
        return [str(v) for v in picked.values()]

    @property
    def model(self) -> str | None:
        picked = self.model_override
        return None if picked is None or picked.hydra.is_sweep_override() else str(picked.hydra.value())

    @property
    def multirun(self) -> bool:
        presets = [(o.key, o.values()) for o in self.parsed if o.key in ("sweep", "experiment")]
        return any(a in ("-m", "--multirun") or a.startswith("hydra.mode=") for a in self.args) or any(
            not values or any(preset_is_multirun(group, str(v), self.search_paths) for v in values)  # []: a glob
            for group, values in presets)

    @property
    def search_paths(self) -> list[str]:
        # Hydra reads the first plain one (was: all merged), then -cd/-cp folders (was "Could not find 'experiment/x'")
        return search_path_entries(next((o.hydra.value() for o in self.parsed
                                         if o.hydra.get_key_element() == "hydra.searchpath"), None), self.args)


def parse(args: Sequence[str] | CommandLine) -> CommandLine:
    """The command line read once, for every check: each ``key=value`` or ``~key`` with Hydra's parse of it.

    Parameters
    ----------
    args : sequence of str or CommandLine
        The command line after the program name (``sys.argv[1:]``); a ``CommandLine`` is returned as is.

    Returns
    -------
    CommandLine
        Its words, and an ``Override`` per override (flags such as ``-m`` and ``--cfg job`` are none).
    """
    if isinstance(args, CommandLine):
        return args
    overrides = []
    for arg in args:
        if arg.startswith("-") or "=" not in arg and not arg.startswith("~"):  # flags (-m, --cfg job) and values
            continue
        typed, _, raw = arg.partition("=")
        try:
            overrides.append(Override(arg, typed, raw, copy.deepcopy(_parsed(arg)), None))
        except Exception as err:  # Hydra's grammar: the first line is its reason
            overrides.append(Override(arg, typed, raw, None, (str(err).strip().splitlines() or [type(err).__name__])[0]))
    return CommandLine(tuple(args), tuple(overrides))


@functools.lru_cache(maxsize=4096)  # pure in the word, which each check parses again; parse hands out copies
def _parsed(arg: str) -> typing.Any:
    return OverridesParser.create().parse_override(arg)


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
        if "=" not in o.arg or not re.fullmatch(r"[+~]{0,2}[\w./@-]+", o.typed):  # not a key=value Hydra could mean
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


def mode_flags_problem(args: Sequence[str] | CommandLine) -> str | None:
    """The one-line refusal of two of Hydra's modes on one command line (``-m`` with ``--cfg job``); else None.

    Hydra refused them with a ``ValueError`` traceback.

    Parameters
    ----------
    args : sequence of str or CommandLine
        The command line after the program name (``sys.argv[1:]``).

    Returns
    -------
    str or None
        E.g. ``"-m and --cfg cannot be combined (Hydra runs one mode); to see a job's composed config, leave
        out -m and give each swept key one value: python launch.py <overrides> --cfg job"``.
    """
    given = list(dict.fromkeys(_MODES[a.split("=", 1)[0]] for a in parse(args).args if a.split("=", 1)[0] in _MODES))
    if len(given) < 2:
        return None
    fix = ("to see a job's composed config, leave out -m and give each swept key one value: "
           f"{command_for()} <overrides> --cfg job") if "-m" in given and "--cfg" in given else f"keep one of {', '.join(given)}"
    return f"{' and '.join(given)} cannot be combined (Hydra runs one mode); {fix}"


def flag_order_problem(args: Sequence[str] | CommandLine) -> str | None:
    """The one-line refusal of overrides on both sides of a flag (``experiment=quick -m train.steps=1,2``); else None.

    Hydra's argument parser reads the overrides as one run of words: those after a flag that follows an override
    were refused as "unrecognized arguments", as if the keys were unknown, with its whole usage text.

    Parameters
    ----------
    args : sequence of str or CommandLine
        The command line after the program name (``sys.argv[1:]``).

    Returns
    -------
    str or None
        E.g. ``"train.steps=1,2 comes after -m, which follows the override experiment=quick: Hydra reads the
        overrides as one run of words (it refused the rest as 'unrecognized arguments'); put the flags first:
        python launch.py -m experiment=quick train.steps=1,2"``.
    """
    words = parse(args).args
    is_override = [not w.startswith("-") and ("=" in w or w.startswith("~")) for w in words]
    for i, word in enumerate(words):
        flag = next((j for j in range(i) if words[j].startswith("-") and any(is_override[:j])), None)
        if not is_override[i] or flag is None:
            continue
        first = words[is_override.index(True)]
        flags = [w for w, o in zip(words, is_override) if not o]
        overrides = [w for w, o in zip(words, is_override) if o]
        return (f"{word} comes after {words[flag]}, which follows the override {first}: Hydra reads the overrides "
                "as one run of words (it refused the rest as 'unrecognized arguments'); put the flags first: "
                f"{command_for()} {shlex.join(flags + overrides)}")
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
    text = str(value)
    for written in (text, f'"{text}"', f"'{text}'", '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'):
        parsed = parse([f"key={written}"]).overrides[0].hydra
        if parsed is not None and parsed.value_type == ValueType.ELEMENT and parsed.value() == text:
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
        E.g. ``hydra.run.dir=runs/a``, ``'hydra.run.dir="runs/a(1)"'`` or ``'hydra.run.dir=runs/a.'`` (quoted, though
        the shell needs no quotes: a sentence's punctuation after a plain word is read as the sentence's).
    """
    word = shlex.quote(f"{key}={hydra_value(value)}")
    return f"'{word}'" if word[-1] in ".:,;" else word

"""The command line, parsed once; values written so that Hydra's grammar reads them back.

``parse(args)`` is the one reading of launch.py's command line that every override check shares (``override_keys``,
``override_types``): each ``key=value`` or ``~key`` as typed and as Hydra's grammar reads it, the model(s) it picks, the
mode flags, whether it runs a sweep, its ``hydra.searchpath`` (with ``--config-dir``'s). ``grammar_checks`` and
``hydra_flags`` refuse what Hydra refuses naming neither the override nor the fix; ``hydra_value`` /
``hydra_override`` write a folder into the commands the harness prints or starts (continue a job, train it further, the
processes of ``distributed=local``), so that a folder such as ``runs/a(1)`` survives them. Pure Python: no JAX.
"""

from __future__ import annotations

import copy
import functools
import shlex
import typing
from collections.abc import Sequence

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import OverrideType, QuotedString, ValueType

from gensbi_sharding.harness.groups import group_options, preset_is_multirun
from gensbi_sharding.harness.search_path import search_path_entries

__all__ = ["SWEEPS", "Override", "CommandLine", "parse", "hydra_value", "hydra_override"]

#: Hydra's sweeps whose values a check can list (a glob's are the group's options: ``CommandLine.models``).
SWEEPS = (ValueType.SIMPLE_CHOICE_SWEEP, ValueType.CHOICE_SWEEP, ValueType.RANGE_SWEEP)


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
    ``model``: the one it picks (None when none or a sweep). ``multirun``: whether Hydra sweeps, by its precedence
    (``hydra._internal.utils._run_app``): ``-m`` always (over ``hydra.mode=RUN``, with Hydra's warning); else the
    ``hydra.mode`` it composes: the last one typed (``multirun_typed``: ``MULTIRUN`` or its number 2, over a
    preset's), else a preset that turns multirun on itself (``groups.preset_is_multirun``: ``experiment=sbibm``,
    ``sweep=``). ``search_paths``: the first ``hydra.searchpath=``'s entries.
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
    def multirun_typed(self) -> bool | None:
        """Whether the words alone make Hydra sweep: ``-m`` (over ``hydra.mode=RUN``), else the last ``hydra.mode=``
        (a typed one is composed over a preset's: ``hydra.mode=RUN``, launch.py's continue commands); None where they
        say nothing (a preset may)."""
        modes = [o.hydra for o in self.parsed if o.key == "hydra.mode"]
        if any(a in ("-m", "--multirun") for a in self.args):
            return True
        return None if not modes else modes[-1].type != OverrideType.DEL and str(modes[-1].value()).upper() in (
            "MULTIRUN", "2")  # RunMode's name or number

    @property
    def run_mode_args(self) -> list[str]:
        """The ``hydra.mode`` overrides typed that say RUN (``hydra.mode=RUN``, its number 1): with ``-m`` Hydra
        overrides them, with its warning, so a fix that adds ``-m`` leaves them out too."""
        return [o.arg for o in self.parsed if o.key == "hydra.mode" and o.hydra.type != OverrideType.DEL
                and str(o.hydra.value()).upper() in ("RUN", "1")]

    @property
    def run_mode_dropped(self) -> str:
        """Said after the command a refusal gives with ``-m`` added, where a ``hydra.mode=RUN`` is typed: that it goes
        (followed as said before, Hydra's "Running Hydra app with --multirun, overriding with hydra.mode=MULTIRUN");
        "" otherwise."""
        dropped = " and ".join(self.run_mode_args)
        return f" (without {dropped}: -m overrides it)" if dropped else ""

    @property
    def multirun(self) -> bool:
        presets = [(o.key, o.values()) for o in self.parsed if o.key in ("sweep", "experiment")]
        if (typed := self.multirun_typed) is not None:
            return typed
        return any(not values or any(preset_is_multirun(group, str(v), self.search_paths) for v in values)
                   for group, values in presets)  # no values: a glob

    @property
    def search_paths(self) -> list[str]:
        # Hydra reads the first plain one (not all merged), then -cd/-cp folders, where presets like experiment/x live
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
            reason = (str(err).strip().splitlines() or [type(err).__name__])[0]
            overrides.append(Override(arg, typed, raw, None, reason))
    return CommandLine(tuple(args), tuple(overrides))


@functools.lru_cache(maxsize=4096)  # pure in the word, which each check parses again; parse hands out copies
def _parsed(arg: str) -> typing.Any:
    return OverridesParser.create().parse_override(arg)


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

"""Argument types the benchmark scripts share: a bad value stops a script while its arguments are
parsed, in argparse's error line naming the argument and a value that works, before any work starts."""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path


def missing_dependency_line(error: ModuleNotFoundError) -> str | None:
    """The one line for a module the script needs that the Python running it lacks (the system one instead of the
    project's .venv, or .venv without the gensbi extra); None for another error, or a missing module of this
    checkout."""
    top = (error.name or "").split(".")[0]
    here = Path(__file__).resolve().parent
    if not top or top in ("gensbi_sharding", "benchmarks") or (here / f"{top}.py").exists():
        return None
    script = f"benchmarks/{Path(sys.argv[0]).name}"
    return (f"{script}: {top!r} is not installed for {sys.executable}. From the repository, run .venv/bin/python "
            f"{script} (make run creates .venv; elsewhere pip install -e \".[test,gensbi]\")")


def require_gensbi(parser: argparse.ArgumentParser) -> None:
    """Stop with one line, before any work, when the Python running the script lacks the gensbi extra.

    Checked here, once, so the missing package is named once and before any work: not 12 times by
    ``gensbi_scale.py table``'s 12 dry-run jobs, not after ``init``'s table header under its child's name, not
    twice after ``gensbi_pipeline.py`` has simulated and run the harness's setup.
    """
    import importlib

    try:
        importlib.import_module("gensbi")
    except ModuleNotFoundError as missing:
        if (missing.name or "").split(".")[0] != "gensbi":
            raise
        parser.exit(2, f"{parser.prog}: error: needs GenSBI, which is not installed for {sys.executable}: "
                       f"{sys.executable} -m pip install -e \".[gensbi]\" (make run installs it into .venv)\n")


def _excepthook(kind, error, traceback):
    line = missing_dependency_line(error) if issubclass(kind, ModuleNotFoundError) else None
    if issubclass(kind, KeyboardInterrupt):  # one line, not a traceback into JAX; exit 130 (by SIGINT)
        line = f"benchmarks/{Path(sys.argv[0]).name}: stopped by Ctrl-C; run it again to measure"
    if line is None:
        sys.__excepthook__(kind, error, traceback)
    else:
        print(line, file=sys.stderr)


# Each script imports this module before anything beyond the standard library, so that run by a Python without the
# project's dependencies it ends in that line, as launch.py and sample.py do, not an import's traceback.
sys.excepthook = _excepthook


class Refused(SystemExit):
    """A refusal of what a script's command line names, found past argparse (``--root`` a file, a ``--from-results``
    csv that is no table's): exit code 2, argparse's for a usage error, as every refusal of a script's arguments (not
    1, a run's failure's, beside argparse's 2). ``str()`` is the message; ``said`` prints it at the script's entry."""

    def __init__(self, message: str):
        super().__init__(2)
        self.message = message

    def __str__(self) -> str:
        return self.message


def said(main: Callable[[], object]) -> None:
    """Run a script's ``main``: a ``Refused`` ends it in argparse's error line, ``<script>: error: <message>``,
    exit code 2 (raised in a caller's process, it carries its message there)."""
    try:
        main()
    except Refused as refused:
        print(f"{Path(sys.argv[0]).name}: error: {refused}", file=sys.stderr)
        raise SystemExit(2) from None


def fit_console() -> None:
    """Called first at each script's entry: a console without UTF-8 (``PYTHONIOENCODING=ascii``,
    ``LC_ALL=C PYTHONUTF8=0``, latin-1) prints a non-ASCII character of a table or a path escaped
    (``log_file.console_fits``, as launch.py and sample.py do), never an UnicodeEncodeError in place of the table (say,
    gensbi_scale.py table under a TMPDIR named 'r\u00e9sultats', a traceback before its first line)."""
    from gensbi_sharding.harness.log_file import console_fits  # here: see integer

    console_fits()


def bars_off_unless_terminal() -> None:
    """GenSBI's tqdm progress bars (a training bar, 'Sampling') off where they would not reach a terminal: redrawn with
    ANSI codes, piped (``| tee``, ``> log 2>&1``) they were one line of 20 KB each. ``TQDM_DISABLE`` is tqdm's own
    environment setting of ``disable``, read as tqdm is imported: call this before GenSBI is; one already set wins."""
    if not os.isatty(2):  # tqdm writes to stderr
        os.environ.setdefault("TQDM_DISABLE", "1")


def command_line(script: str, *words: str) -> str:
    """``python <script> <words>``, a command a script prints for the user to paste where they typed theirs: the
    script as ``paste_command.command_for`` names it, ``benchmarks/sbibm.py`` in the checkout, its path from another
    folder (so it runs pasted: ``sbibm.py table ...`` names no python, a bare path runs nowhere). ``words`` as
    given: quote a path (``shlex.quote``), leave a placeholder (``<folders>``) bare."""
    from gensbi_sharding.harness.paste_command import command_for  # here: see integer

    return " ".join([command_for(script), *words])


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """``--help`` keeps the script's docstring as written (what it measures, how to run it) and
    shows each option's default: a bare ``--layers LAYERS`` left a newcomer reading the source."""


def new_parser(doc: str) -> argparse.ArgumentParser:
    """The parser of a benchmark script: ``doc`` (its module docstring) as the description; an option's negative
    number (``--seed -1e3``) reaches its type, as sample.py's does (``NumberParser``)."""
    from gensbi_sharding.harness.sample_output import NumberParser  # here: see integer

    return NumberParser(description=doc, formatter_class=HelpFormatter)


def integer(text: str) -> int:
    """An integer (a seed), refused as launch.py refuses ``train.steps=1e3``: ``1e3`` names ``1000`` to write
    (the value meant, which argparse's "invalid int value: '1e3'" does not name)."""
    # Imported here, not above: missing_dependency_line must work in a Python without this package.
    from gensbi_sharding.harness.sample_output import whole_number

    return whole_number(text, noun="an integer", example=2)


def _float(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def positive_int(text: str) -> int:
    """An integer >= 1 (a count of layers, steps, trials, repeats ...)."""
    return count(example=2, rounded=True)(text)  # any integer >= 1 is taken: a fraction's nearest one too


def count(*, example: int, least: int = 1, rounded: bool = False) -> Callable[[str], int]:
    """The type of an integer option >= 1 whose own later check takes only some values: a refusal's example is
    ``example``, one that check takes, and a whole float below ``least`` is refused naming ``least``; an int below
    it is left to that check, which says why (so no example offered, "e.g. 2", "write 10", is one
    gensbi_pipeline's --steps check refuses next); a fraction's is ``example`` too, unless ``rounded`` (its nearest
    integer can be refused in turn: --num-samples 2.5 -> 2, < 2 * --folds; gensbi_scale's --timeout 1.5 -> 2)."""
    def parse(text: str) -> int:
        # Imported here, not above: missing_dependency_line must work in a Python without this package.
        from gensbi_sharding.harness.sample_output import whole_number

        with contextlib.suppress(ValueError):  # a fraction's nearest integer need not pass the later check
            if not rounded and math.isfinite(number := float(text)) and not number.is_integer():
                raise argparse.ArgumentTypeError(f"{text!r} is not an integer; e.g. {example}")
        value = whole_number(text, noun="an integer", example=example, minimum=max(least, 1))
        if value < 1 and least == 1:
            raise argparse.ArgumentTypeError(f"{value} must be >= 1; e.g. {example}")  # a value to type
        return value
    return parse


def model_axis(devices: int) -> Callable[[str], int]:
    """The type of ``--model-axis``: a divisor of ``devices``, or the mesh cannot be built."""
    def parse(text: str) -> int:
        value = positive_int(text)
        if devices % value:
            divisors = [d for d in range(1, devices + 1) if devices % d == 0]
            raise argparse.ArgumentTypeError(f"{value} does not divide the {devices} device{'s' * (devices != 1)}; "
                                             f"choose one of {divisors}")
        return value

    parse.__name__ = "model_axis"
    return parse


def one_of(choices: tuple, kind: Callable[[str], object] = str, *, argument: str,
           several: bool = True) -> Callable[[str], object]:
    """The type of a list argument (``--tasks``, ``--budgets``; ``several=False``: one value, ``--task``) whose
    values are ``choices``.

    A Hydra override typed among them (``--tasks two_moons train.steps=20``) is named as one:
    argparse alone answered "invalid choice", which does not say where overrides go. Values joined by commas, as
    launch.py's sweeps write them (``--tasks two_moons,slcp``), are named as several: "did you mean two_moons?"
    alone led to a run without slcp.
    """
    def parse(text: str):
        if "=" in text:
            raise argparse.ArgumentTypeError(f"{text!r} is an override, not a value of {argument}: put overrides "
                                             f"after --, e.g. {argument} ... -- {text}")
        parts = text.replace(",", " ").split()
        if len(parts) > 1:
            raise argparse.ArgumentTypeError(f"{text!r} is {len(parts)} values in one; " + (
                f"separate them with spaces: {argument} {' '.join(map(str, map(parse_or_near, parts)))}"
                if several else f"{argument} takes one: run once per value, e.g. {argument} {parse_or_near(parts[0])}"))
        return parse_one(text)

    def parse_or_near(text: str):  # a part of "two_moons,slcpp" as it is to be typed: slcp
        try:
            return parse_one(text)
        except argparse.ArgumentTypeError:
            from gensbi_sharding.harness.hints import closest_name

            return (closest_name(text, [str(c) for c in choices]) if kind is str else None) or text

    def parse_one(text: str):
        try:
            value = kind(text)
        except ValueError:
            value = None
        if value is None and kind is int and _float(text) in choices:  # --budgets 1e3: named as the
            integer(text)  # whole number to write, the value meant
        if value not in choices:  # the nearest named, as launch.py names a mistyped data=
            from gensbi_sharding.harness.hints import closest_name

            near = closest_name(text, [str(c) for c in choices]) if kind is str else None
            raise argparse.ArgumentTypeError(f"{text!r} is not one of {', '.join(map(str, choices))}"
                                             + (f"; did you mean {near}?" if near else ""))
        return value

    parse.__name__ = argument.lstrip("-")
    return parse


def model_fits(parser: argparse.ArgumentParser, nbytes: int, flags: str, fix: str) -> None:
    """Stop in ``parser``'s error line when a model of ``nbytes`` (one float32 copy, a lower bound of what the script
    holds) exceeds the memory the host has available: was a child's XLA abort ("Check failed: buffer_.IsConcrete()")
    or a build of a billion layers that ran until ``--timeout``. ``flags`` as typed, ``fix`` what to pass instead."""
    from gensbi_sharding.harness.memory_check import host_available_bytes
    from gensbi_sharding.harness.units import format_bytes

    available = host_available_bytes()
    if available is not None and nbytes > available:
        parser.error(f"{flags}: the model alone is {format_bytes(nbytes)} of float32, the host has "
                     f"{format_bytes(available)} available; {fix}")


def run_bounded(command: list[str], *, timeout_s: float, what: str, least: float = 0,
                **kwargs) -> subprocess.CompletedProcess:
    """``subprocess.run(command, **kwargs)``, waited for at most ``timeout_s`` seconds.

    A child past its time (a hang, or a machine far slower than the README's) is killed and named in one
    line with ``--timeout`` and a larger value, at least ``least`` (the script's default: ``--timeout 1`` was
    offered ``--timeout 4``, which stops a dry-run sweep of minutes again); Ctrl-C ends it too, in one line
    instead of a traceback.
    """
    try:
        return subprocess.run(command, timeout=timeout_s, **kwargs)  # past it: killed, then waited for
    except subprocess.TimeoutExpired:
        raise SystemExit(f"{what} ran past --timeout {timeout_s:g} s and was stopped; on a slower or busier machine "
                         f"pass a larger one, e.g. --timeout {max(timeout_s * 4, least):g}") from None
    except KeyboardInterrupt:
        print(f"{what}: stopped by Ctrl-C; nothing of it was kept", file=sys.stderr)
        raise SystemExit(130) from None  # 130, as any command Ctrl-C stops (1 reads as a failure to make or a script)


def jax_platform(parser: argparse.ArgumentParser) -> None:
    """Stop in argparse's error line when ``JAX_PLATFORMS`` names a platform JAX cannot start here, naming it and
    the fix (JAX itself ends in a bare AssertionError, for ``JAX_PLATFORMS=cuda`` on a CPU machine)."""
    from gensbi_sharding.harness.config import ConfigError
    from gensbi_sharding.harness.devices import check_platform

    try:
        check_platform(None, started=False)
    except ConfigError as err:
        parser.exit(2, f"{parser.prog}: error: {err}\n")  # no usage line: no flag is at fault


def not_a_script(name: str, path: str, script: str = "benchmarks/sbibm.py") -> None:
    """Exit naming ``script`` when a module the scripts import is run (``python benchmarks/sbibm_plot.py --help``
    ran nothing, printed nothing and exited 0); call it last, with the module's ``__name__`` and ``__file__``."""
    if name == "__" "main__":  # spelled apart: a file holding the word is a script (test_docs_pages.py's test)
        sys.exit(f"{Path(path).name} is a module the benchmark scripts import, not a script: run "
                 f"{command_line(script, '--help')}")


not_a_script(__name__, __file__)

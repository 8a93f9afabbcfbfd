"""A folder refusal of a run started from Python (``run(cfg)``, no Hydra), in the settings such a caller sets.

The refusals of a job's folder name launch.py's overrides: ``choose another hydra.run.dir``, ``rerun with
train.resume=auto``. A Python caller takes none of them: it sets ``cfg.output_dir`` (in ``omegaconf.open_dict``:
it is no field of the composed config) and ``cfg.train.resume``, as ``sweep_hints.continue_command`` says for such a
run (the overrides would be wrong under ``run(cfg)``). Pure Python: no JAX.
"""

from __future__ import annotations

import contextvars
import re
import shlex
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["in_python_words", "python_words", "as_overrides"]

_COMMAND_LINE = contextvars.ContextVar("command_line", default=False)  # inside as_overrides

#: An override as a refusal names it, one shell word: plain (``hydra.run.dir=runs/a``, a sentence's ``.:,;)`` after it
#: not its value's), as ``shlex.quote`` writes it (``'hydra.run.dir=/tmp/my runs'``, ``'hydra.run.dir="runs/a(1)"'``,
#: a quote inside as ``'"'"'``), a value quoted as typed (``train.resume=''``), or a placeholder
#: (``hydra.run.dir=<new folder>``); never inside a setting already said (``cfg.train.resume=...``).
_KEYS = r"(?<![\w.])(?:hydra\.run\.dir|train\.resume|train\.steps)="
_OVERRIDE = re.compile(rf"""'{_KEYS}[^']*'(?:"'"'[^']*')*|"""
                       rf"""{_KEYS}(?:'[^']*'|<[^>]*>(?:/<[^>]*>)*|[^\s'"]*[^\s'".:,;)])""")
_SETTING = {"hydra.run.dir": "cfg.output_dir", "train.resume": "cfg.train.resume", "train.steps": "cfg.train.steps"}


def python_words(message: str) -> str:
    """``message`` with each override of the run's folder, ``train.resume`` or ``train.steps`` written as the config
    setting a Python caller sets (``hydra.run.dir=runs/a`` -> ``cfg.output_dir='runs/a'``; a folder quoted for the
    shell and Hydra, ``'hydra.run.dir=/tmp/my runs'``, by the value Python takes: ``cfg.output_dir='/tmp/my runs'``).

    Parameters
    ----------
    message : str
        A refusal of the run's folder, as launch.py's run says it.

    Returns
    -------
    str
    """
    said, end, joined = [], 0, False  # joined: the word before this one was a setting (both set: "and")
    for found in _OVERRIDE.finditer(message):
        between = _prose(message[end:found.start()])
        said += [" and " if joined and between == " " else between, _setting(found[0])]
        end, joined = found.end(), True
    said = "".join(said) + _prose(message[end:])
    return said + ("; set cfg.output_dir in omegaconf.open_dict(cfg)" if "cfg.output_dir" in said else "")


def _prose(text: str) -> str:
    """The words around the overrides, in a Python caller's terms."""
    text = text.replace("hydra.run.dir (or hydra.sweep.dir)", "hydra.run.dir").replace("hydra.run.dir",
                                                                                     "cfg.output_dir")
    text = text.replace("dry_run=true with", "cfg.dry_run=True with").replace("drop dry_run=true", "set "
                        "cfg.dry_run=False").replace("drop train.resume", "set cfg.train.resume=None")
    text = text.replace("leave train.resume out", "set cfg.train.resume=None").replace(
        "without train.resume", "with cfg.train.resume=None")
    return text.replace("with the same command plus", "by the same call with").replace("the same command with",
                                                                                      "the same call with")


def _setting(word: str) -> str:
    """``word`` (one override, as ``_OVERRIDE`` finds it) as the setting: the value Hydra reads from it."""
    from gensbi_sharding.harness.override_grammar import parse

    override = shlex.split(word)[0] if word.startswith("'") else word
    key, written = override.split("=", 1)
    # As Hydra reads it: "runs/a(1)" its string, escapes undone; 16 a number, "123" a folder (quoted, not 123);
    # a placeholder (<new folder>) is none.
    parsed = [] if written.startswith("<") else parse([override]).parsed
    return f"{_SETTING[key]}={(parsed[0].hydra.value() if parsed else written)!r}"


@contextmanager
def in_python_words() -> Iterator[None]:
    """A folder refusal raised inside, raised again in ``python_words`` where no Hydra app runs (``run(cfg)`` from
    Python); as it is under launch.py."""
    from hydra.core.hydra_config import HydraConfig

    from gensbi_sharding.harness.config import ConfigError
    from gensbi_sharding.harness.folder_lock import FolderInUseError

    try:
        yield
    except (ConfigError, FileExistsError, FileNotFoundError, FolderInUseError) as refused:
        # Another run's command line, quoted in a FolderInUseError, is named as it ran, not reworded as settings.
        quoted = getattr(refused, "holder", "") or "\0"
        said = python_words(str(refused).replace(quoted, "\0")).replace("\0", quoted)
        if HydraConfig.initialized() or _COMMAND_LINE.get() or said == str(refused):
            raise
        raise type(refused)(said) from None


@contextmanager
def as_overrides() -> Iterator[None]:
    """Refusals inside said as launch.py's overrides, though no Hydra app runs yet: its command-line checks run the
    run's checks on the config they compose (so launch.py's list never says "pass cfg.train.resume='auto'")."""
    token = _COMMAND_LINE.set(True)
    try:
        yield
    finally:
        _COMMAND_LINE.reset(token)

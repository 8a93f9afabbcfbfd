"""A run's recorded continue command, said for its folder as it is now: where the folder was moved or copied.

A stopped run records the command that continues it (``continue_field``), naming the folder it ran in
(``hydra.run.dir=<folder>``; from Python, ``cfg.output_dir='<folder>'``). Read after the folder was moved or copied
(``mv multirun/... archive/``, ``cp -r``), the notes pasted that command as recorded: sample.py's "to finish it: ...",
a sweep folder's "to continue it in its own folder: ..." named the old path, where the command would start a run
from scratch (the folder gone) or continue the original instead of the copy read. ``continue_in`` puts the folder
as it is now in its place; a command whose folder did not move is returned untouched.
"""

from __future__ import annotations

import ast
import os
import re
import shlex
from typing import Any

from gensbi_sharding.harness.continue_field import continue_of

__all__ = ["continue_in", "in_folder"]

#: The folder a ``run(cfg)`` continue command names (``sweep_hints.continue_command``): ``cfg.output_dir=<repr>``.
_OUTPUT_DIR = re.compile(r"""cfg\.output_dir=('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")""")
#: The override that names a job's folder in a shell command (``sweep_hints.job_command``, ``again_command``).
_RUN_DIR = "hydra.run.dir="


def continue_in(record: dict[str, Any], folder: Any) -> str:
    """The command that continues the run whose ``metrics.json`` is ``record``, for its folder ``folder`` as it is now.

    Parameters
    ----------
    record : dict
        The run's ``metrics.json``.
    folder : path-like
        The folder that holds that record now.

    Returns
    -------
    str
        ``continue_field.continue_of(record)`` (``""`` where none continues it), with the folder it names replaced by
        ``folder`` where that is another folder (``in_folder``).
    """
    return in_folder(continue_of(record), folder)


def in_folder(command: str, folder: Any) -> str:
    """``command`` with the folder it names (its last ``hydra.run.dir=`` override, or a ``run(cfg)`` sentence's
    ``cfg.output_dir=``) made ``folder``, where that names another folder than ``folder``.

    Parameters
    ----------
    command : str
        A continue command as a run recorded it.
    folder : path-like
        The run's folder now.

    Returns
    -------
    str
        The command, unchanged where its folder is ``folder`` (the same folder, however written) or where it names
        none; else with that one word replaced by ``folder``'s absolute path, written as the harness writes it (shell-
        and Hydra-quoted: ``override_grammar.hydra_override``; Python's ``repr`` in a ``run(cfg)`` sentence).
    """
    target = os.path.abspath(folder)
    if command.startswith("run(cfg)"):  # run(cfg) from Python: a sentence, its folder a Python string
        found = _OUTPUT_DIR.search(command)
        if found is None or _same_folder(ast.literal_eval(found[1]), target):
            return command
        return f"{command[:found.start()]}cfg.output_dir={target!r}{command[found.end():]}"
    spans = [span for span in _words(command) if span[0].startswith(_RUN_DIR)]
    if not spans or (named := _override_value(spans[-1][0])) is None or _same_folder(named, target):
        return command
    from gensbi_sharding.harness.override_grammar import hydra_override

    _, start, end = spans[-1]  # Hydra takes the last of a key's overrides
    return f"{command[:start]}{hydra_override('hydra.run.dir', target)}{command[end:]}"


def _words(command: str) -> list[tuple[str, int, int]]:
    """Each shell word of ``command`` as the shell reads it, with where it is written (start, end); [] where the
    shell could not read it (an unclosed quote): then nothing is replaced."""
    lexer = shlex.shlex(command, posix=True)
    lexer.whitespace_split, lexer.commenters = True, ""
    spans = []
    try:
        while True:
            begin = lexer.instream.tell()
            if (word := lexer.get_token()) is None:  # posix: None at the end
                return spans
            written = command[begin:lexer.instream.tell()]
            start = begin + len(written) - len(written.lstrip())
            spans.append((word, start, start + len(written.strip())))  # its one space after it read, not kept
    except ValueError:
        return []


def _override_value(word: str) -> str | None:
    """The folder a ``hydra.run.dir=...`` word names, as Hydra reads it (``"runs/a(1)"`` -> ``runs/a(1)``); None
    where Hydra reads no single string from it."""
    from gensbi_sharding.harness.override_grammar import parse

    parsed = parse([word]).overrides[0].hydra
    value = None if parsed is None else parsed.value()
    return value if isinstance(value, str) else None


def _same_folder(named: str, target: str) -> bool:
    """Whether ``named`` (relative: to this process's folder) is the folder ``target``: the same folder written
    otherwise (``runs/a``, a symlink to it) is not a move."""
    try:
        return os.path.samefile(named, target)
    except OSError:  # gone (moved away) or never there: another folder, unless written as the very path
        return os.path.abspath(named) == target

"""A refusal of a run started from Python (``run(cfg)``, no Hydra) in the settings such a caller sets.

launch.py's refusals name overrides: ``choose another hydra.run.dir``, ``add model.width=32``, ``rerun with
train.resume=auto``. A Python caller takes none of them: it sets ``cfg.output_dir`` (in ``omegaconf.open_dict``: it is
no field of the composed config), ``cfg.model.width = 32``, ``cfg.train.resume``, or composes with a preset
(``experiment=quick``). The caller chooses the words (``in_python_words``: a Python caller where no Hydra app runs;
``as_overrides``: launch.py's command-line checks), and a refusal made inside says its fix from data
(``setting``, ``override_said``, ``fix_said``, ``said_as``; ``refusal.said``), never by reading its own prose back.
Refusals made by modules that do not say them so yet (``checkout_folders``' folder in conf/ or a checkout,
``outputs.read_metrics``' damaged record) are reworded on the way out (``python_words``: the folder,
``train.resume`` and ``train.steps`` overrides only).
Pure Python: no JAX.
"""

from __future__ import annotations

import contextvars
import re
import shlex
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

__all__ = ["in_python_words", "as_overrides", "python_caller", "setting", "override_said", "fix_said", "said_as",
           "python_words", "settings_of", "WITHOUT_RESUME", "OPEN_DICT"]

_COMMAND_LINE = contextvars.ContextVar("command_line", default=False)  # inside as_overrides
_PYTHON = contextvars.ContextVar("python_caller", default=False)  # inside in_python_words, no Hydra app running

#: The settings a Python caller sets for the overrides of the run's folder and resume (``cfg.output_dir`` is no field
#: of the composed config: set in ``omegaconf.open_dict``).
_SETTING = {"hydra.run.dir": "cfg.output_dir", "train.resume": "cfg.train.resume", "train.steps": "cfg.train.steps"}
_COMPOSE_TAIL = " to the overrides cfg is composed with"
#: How a refusal says to start afresh (``said_as(*WITHOUT_RESUME)``): launch.py leaves the override out.
WITHOUT_RESUME = ("without train.resume", "with cfg.train.resume=None")
#: Matched by the words of refusals made elsewhere (``folder_lock``, ``fresh_folder``, ``best_job``, the library's):
#: an override of the folder, ``train.resume`` or ``train.steps`` as one shell word: plain (a sentence's ``.:,;)``
#: after it not its value's), as ``shlex.quote`` writes it, a value quoted as typed, or a placeholder
#: (``hydra.run.dir=<new folder>``); never inside a setting already said (``cfg.train.resume=...``).
_KEYS = r"(?<![\w.])(?:hydra\.run\.dir|train\.resume|train\.steps)="
_OVERRIDE = re.compile(rf"""'{_KEYS}[^']*'(?:"'"'[^']*')*|"""
                       rf"""{_KEYS}(?:'[^']*'|<[^>]*>(?:/<[^>]*>)*|[^\s'"]*[^\s'".:,;)])""")
#: Where a refusal quotes another run's command line (``saving_record.launched_with``): said as it ran.
_LAUNCHED = "was launched with: "
#: A command line a refusal quotes, from its ``python <script>.py`` on (``paste_command.command_for``: ``best_job``'s
#: note over a sweep folder, the recorded command that continues a stopped job, ``sweep_hints.job_command``), or from
#: a bare ``<script>.py`` after ": " (the process holding a run's lock, ``folder_note.owner_line``): launch.py's
#: command, pasted into a shell as written (its overrides reworded as settings ran nowhere), or another run's, as it
#: ran.
_SHELL_LEAD = re.compile(r"(?<![\w./-])(?:env -u JAX_ENABLE_X64 |JAX_ENABLE_X64=1 )?python3? "
                         r"(?:'[^']*\.py'|[^\s']*\.py)(?=\s|$)|(?<=: )[^\s'()]*\.py(?= )")
#: The note once a refusal names ``cfg.output_dir``: said once (a refusal worded twice keeps one).
OPEN_DICT = "; set cfg.output_dir in omegaconf.open_dict(cfg)"


def python_caller() -> bool:
    """Whether a refusal made now is said to a Python caller (inside ``in_python_words`` with no Hydra app running,
    not inside ``as_overrides``).

    Returns
    -------
    bool
    """
    return _PYTHON.get() and not _COMMAND_LINE.get()


def said_as(launch: str, python: str) -> str:
    """``launch``'s words under launch.py, ``python``'s to a Python caller (``python_caller``).

    Parameters
    ----------
    launch, python : str
        E.g. ``"without train.resume"`` and ``"with cfg.train.resume=None"``.

    Returns
    -------
    str
    """
    return python if python_caller() else launch


def setting(key: str, value: Any, typed: str | None = None) -> str:
    """One setting as the caller gives it: launch.py's override (``typed``, else a text as ``hydra_override`` writes
    it, one shell word Hydra reads back as ``value``, a number as is) or the Python setting
    (``cfg.train.resume='runs/a'``; the folder ``cfg.output_dir``).

    Parameters
    ----------
    key : str
        E.g. ``"train.resume"``.
    value : Any
        Its value as the config holds it (a path is said as text).
    typed : str, optional
        launch.py's words where they are not ``hydra_override``'s; a placeholder (``"<copy>"``) is said as is
        (``train.resume=<copy>``, unquoted).

    Returns
    -------
    str
    """
    if not python_caller():
        from gensbi_sharding.harness.override_grammar import hydra_override

        if typed is not None or isinstance(value, str) and value.startswith("<") and value.endswith(">"):
            return typed or f"{key}={value}"
        text = isinstance(value, (str, os.PathLike))  # a folder: one shell word Hydra reads back as text
        return hydra_override(key, value) if text else f"{key}={value}"
    value = os.fspath(value) if isinstance(value, os.PathLike) else value
    return f"{_SETTING.get(key, f'cfg.{key}')}={value!r}"


def override_said(word: str, typed: str | None = None) -> str:
    """``word``, one override as a record keeps it (``train.resume=runs/my run``: Hydra's words, no shell quotes), as
    the caller gives it: under launch.py ``typed`` (default ``word``, e.g. ``shlex.quote(word)``), to a Python caller
    the setting of the value Hydra reads from it (``cfg.train.resume='runs/my run'``). Returns str."""
    if not python_caller():
        return word if typed is None else typed
    from gensbi_sharding.harness.override_grammar import parse

    key, written = word.split("=", 1)
    parsed = parse([word]).parsed  # as Hydra reads it: escapes undone, "123" a folder (text), not 123
    return setting(key, parsed[0].hydra.value() if parsed else written)


def fix_said(words: Sequence[str], lead: str = "add ") -> str:
    """A fix's overrides (shell words, as launch.py's command takes them) as the caller makes them: under launch.py
    ``lead`` and the words (``"add model.width=32 model.depth=1"``); to a Python caller, settings of ``cfg``
    (``"set cfg.model.width=32 and cfg.model.depth=1"``), or, where one picks a preset (``experiment=quick``), adds
    or drops a key or sets Hydra's own, the overrides to compose ``cfg`` with.

    Parameters
    ----------
    words : sequence of str
        E.g. ``["'hydra.searchpath=[file:///my conf]'", "model=my_flux1"]``.
    lead : str
        launch.py's words before them, e.g. ``"add "``; ``""`` for a list said after "(or ".

    Returns
    -------
    str
    """
    if not python_caller():
        return lead + " ".join(words)
    overrides = [shlex.split(word)[0] for word in words]
    if (settings := settings_of(overrides)) is not None:
        return f"set {settings}"
    return f"add {', '.join(map(repr, overrides))}{_COMPOSE_TAIL}"


def settings_of(overrides: Sequence[str]) -> str | None:
    """``overrides`` as the settings of ``cfg`` Hydra's reading of them gives (``"cfg.model.width=32 and
    cfg.model.theta=None"``); None where one is none (a preset, a key added or dropped, Hydra's own).

    Parameters
    ----------
    overrides : sequence of str
        As Hydra reads them (no shell quotes), e.g. ``["model.width=32", "model.theta=null"]``.

    Returns
    -------
    str or None
    """
    from gensbi_sharding.harness.groups import CONF
    from gensbi_sharding.harness.override_grammar import parse

    settings = []
    for override in overrides:
        key = override.split("=", 1)[0]
        parsed = parse([override]).overrides[0].hydra
        if override.startswith(("+", "~", "hydra.")) or "." not in key and (CONF / key).is_dir() or parsed is None:
            return None
        settings.append(f"{_SETTING.get(key, f'cfg.{key}')}={parsed.value()!r}")
    return " and ".join(settings) if settings else None


def python_words(message: str) -> str:
    """``message``, made where the caller's words were not known, with each override of the run's folder,
    ``train.resume`` or ``train.steps`` written as the setting a Python caller sets (``hydra.run.dir=runs/a`` ->
    ``cfg.output_dir='runs/a'``; ``'hydra.run.dir=/tmp/my runs'`` -> ``cfg.output_dir='/tmp/my runs'``); a command
    line it quotes (launch.py's to paste, another run's: "was launched with: ...") as it ran.

    Parameters
    ----------
    message : str
        A refusal of the run's folder, as launch.py's run says it.

    Returns
    -------
    str
    """
    head, launched, tail = message.partition(_LAUNCHED)
    said, end = [], 0
    for start, stop in _shell_commands(head):  # a shell command quoted: as written, the words around it reworded
        said += [_overrides_said(head[end:start]), head[start:stop]]
        end = stop
    said = "".join(said) + _overrides_said(head[end:]) + launched + tail
    reworded = said.replace(OPEN_DICT, "")
    return said + (OPEN_DICT if "cfg.output_dir" in reworded and OPEN_DICT not in said else "")


def _shell_commands(message: str) -> list[tuple[int, int]]:
    """Where each shell command ``message`` quotes (``_SHELL_LEAD``) starts and ends: at the first unquoted
    sentence punctuation (``; ``, ``, ``, ``. ``, ``: ``, ``)``) or ``(``, which the shell words the harness writes
    (``shlex.quote``, ``hydra_override``) never hold unquoted, or at the end."""
    spans: list[tuple[int, int]] = []
    for lead in _SHELL_LEAD.finditer(message):
        if spans and lead.start() < spans[-1][1]:
            continue
        at, quote = lead.end(), ""
        while at < len(message):
            char = message[at]
            if quote:
                quote = "" if char == quote else quote
                at += 2 if char == "\\" and quote == '"' else 1  # an escaped character inside "..."
                continue
            if char in "'\"":
                quote = char
            elif char in "()" or char in ";,.:" and message[at + 1:at + 2] in ("", " "):
                break
            at += 2 if char == "\\" else 1
        spans.append((lead.start(), min(at, len(message))))
    return spans


def _overrides_said(message: str) -> str:
    """``message`` with each override of ``_OVERRIDE`` (the folder, ``train.resume``, ``train.steps``) a setting."""
    said, end, joined = [], 0, False  # joined: the word before this one was a setting (both set: "and")
    for found in _OVERRIDE.finditer(message):
        between = _prose(message[end:found.start()])
        said += [" and " if joined and between == " " else between, _setting(found[0])]
        end, joined = found.end(), True
    return "".join(said) + _prose(message[end:])


def _prose(text: str) -> str:
    """The words around the overrides, in a Python caller's terms."""
    text = text.replace("hydra.run.dir (or hydra.sweep.dir)", "hydra.run.dir").replace("hydra.run.dir",
                                                                                     "cfg.output_dir")
    text = text.replace("without train.resume", "with cfg.train.resume=None")
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
def in_python_words(reword: bool = True) -> Iterator[None]:
    """Refusals made inside said to a Python caller where no Hydra app runs (``run(cfg)`` from Python): those that
    say their fixes from data (``python_caller``) in its settings as they are made, any other refusal of the folder
    or resume raised again in ``python_words`` (``reword``; False where every refusal inside says its fixes from
    data: ``validate``'s "train.steps=-3 must be >= 1" names the value refused, like "seed=-1 must be >= 0", and
    is no override to reword); under launch.py (or ``as_overrides``), as launch.py says them.

    Parameters
    ----------
    reword : bool
        Whether a refusal raised inside is reworded by its text (``python_words``) on the way out.
    """
    from hydra.core.hydra_config import HydraConfig

    from gensbi_sharding.harness.config import ConfigError

    token = _PYTHON.set(not HydraConfig.initialized())
    try:
        yield
    except (ConfigError, FileExistsError, FileNotFoundError) as refused:  # folder_lock's FolderInUseError: as made
        said = python_words(str(refused))
        if not reword or not python_caller() or said == str(refused):
            raise
        raise type(refused)(said) from None
    finally:
        _PYTHON.reset(token)


@contextmanager
def as_overrides() -> Iterator[None]:
    """Refusals inside said as launch.py's overrides, though no Hydra app runs yet: its command-line checks run the
    run's checks on the config they compose (so launch.py's list never says "pass cfg.train.resume='auto'")."""
    token = _COMMAND_LINE.set(True)
    try:
        yield
    finally:
        _COMMAND_LINE.reset(token)

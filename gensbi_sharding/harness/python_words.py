"""A folder refusal of a run started from Python (``run(cfg)``, no Hydra), in the settings such a caller sets.

The refusals of a job's folder name launch.py's overrides: ``choose another hydra.run.dir``, ``rerun with
train.resume=auto``. A Python caller takes none of them: it sets ``cfg.output_dir`` (in ``omegaconf.open_dict``:
it is no field of the composed config) and ``cfg.train.resume``, as ``sweep_hints.continue_command`` says for such a
run (the overrides would be wrong under ``run(cfg)``). A resume's refusal names its fix as overrides to add
("add model.width=32"): a Python caller sets ``cfg.model.width=32``, or composes with a preset (``experiment=quick``).
Pure Python: no JAX.
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
#: A fix's overrides: "add model.width=32" and its other way "(or model.width=32 model.depth=1)" (a resume's refusal:
#: ``model_switch``, ``resume_refusal``, ``schedule``), each override one shell word, the list ending at a word that is
#: none or at a sentence's ``.:,;)`` after an unquoted word (a value ending so is quoted: ``hydra_override``).
_FIX_LEAD = re.compile(r"(?<![\w.])(add|\(or) ")
_WORD = re.compile(r"(?:'[^']*'|[^\s'])+")
_KEY = re.compile(r"[+~]?[A-Za-z_][\w.]*=")
#: ``_fix_said``'s overrides to compose with, once said: left as they are when said again (a refusal raised inside two
#: ``in_python_words``).
_COMPOSE_TAIL = " to the overrides cfg is composed with"
_COMPOSED = re.compile(r"""(?:'[^']*'|"[^"]*")(?:, (?:'[^']*'|"[^"]*"))*""" + _COMPOSE_TAIL)
#: Where a refusal quotes another run's command line (``saving_record.launched_with``): said as it ran.
_LAUNCHED = "was launched with: "
#: A command line a refusal quotes, from its ``python <script>.py`` on (``paste_command.command_for``: ``best_job``'s
#: note over a sweep folder, the recorded command that continues a stopped job, ``sweep_hints.job_command``), or from
#: a bare ``<script>.py`` after ": " (the process holding a run's lock, ``folder_note.owner_line``): launch.py's
#: command, pasted into a shell as written (its overrides reworded as settings ran nowhere), or another run's, as it
#: ran.
_SHELL_LEAD = re.compile(r"(?<![\w./-])(?:env -u JAX_ENABLE_X64 |JAX_ENABLE_X64=1 )?python3? "
                         r"(?:'[^']*\.py'|[^\s']*\.py)(?=\s|$)|(?<=: )[^\s'()]*\.py(?= )")
#: ``python_words``' note once a setting names ``cfg.output_dir``: said once (a refusal worded twice keeps one).
_OPEN_DICT = "; set cfg.output_dir in omegaconf.open_dict(cfg)"


def python_words(message: str) -> str:
    """``message`` with each override of the run's folder, ``train.resume`` or ``train.steps`` written as the config
    setting a Python caller sets (``hydra.run.dir=runs/a`` -> ``cfg.output_dir='runs/a'``; a folder quoted for the
    shell and Hydra, ``'hydra.run.dir=/tmp/my runs'``, by the value Python takes: ``cfg.output_dir='/tmp/my runs'``),
    and each fix's overrides to add likewise (``add model.width=32`` -> ``set cfg.model.width=32``; with a preset,
    ``add 'experiment=quick' to the overrides cfg is composed with``); another run's command line it quotes ("was
    launched with: ...") as it ran.

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
        said += [_prose_said(head[end:start]), head[start:stop]]
        end = stop
    said = "".join(said) + _prose_said(head[end:]) + launched + tail
    reworded = said.replace(_OPEN_DICT, "")
    return said + (_OPEN_DICT if "cfg.output_dir" in reworded and _OPEN_DICT not in said else "")


def _prose_said(text: str) -> str:
    """``text`` (no shell command in it) with its fixes' overrides (``_fix_lists``) and every other override of the
    folder, ``train.resume`` or ``train.steps`` said as settings."""
    said, end = [], 0
    for lead, overrides, start, stop in _fix_lists(text):
        said += [_overrides_said(text[end:start]), _fix_said(lead, overrides) if overrides else text[start:stop]]
        end = stop
    return "".join(said) + _overrides_said(text[end:])


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


def _fix_lists(message: str) -> list[tuple[str, list[str], int, int]]:
    """Each fix's list of overrides in ``message`` (``_FIX_LEAD``): its lead, the overrides as the shell reads them,
    where it starts and ends; no overrides where they are said already (``_COMPOSED``)."""
    found, end = [], 0
    for lead in _FIX_LEAD.finditer(message):
        if lead.start() < end:
            continue
        if (said := _COMPOSED.match(message, lead.end())) is not None:
            found.append((lead[1], [], lead.start(), end := said.end()))
            continue
        overrides, at, stop = [], lead.end(), lead.end()
        while (word := _WORD.match(message, at)) is not None:
            text = word[0] if word[0].endswith("'") else word[0].rstrip(".:,;)")
            try:
                override = shlex.split(text)[0]
            except (ValueError, IndexError):
                break
            if not _KEY.match(override):
                break
            overrides.append(override)
            stop = word.start() + len(text)
            if text != word[0] or message[word.end():word.end() + 1] != " ":
                break
            at = word.end() + 1
        if overrides:
            found.append((lead[1], overrides, lead.start(), stop))
            end = stop
    return found


def _fix_said(lead: str, overrides: list[str]) -> str:
    """A fix's overrides (``_fix_lists``) as a Python caller makes them: settings of ``cfg``
    (``set cfg.model.width=32``), or where one picks a preset (``model=flux1``, ``experiment=quick``), adds or drops
    a key or sets Hydra's own, the overrides to compose ``cfg`` with."""
    from gensbi_sharding.harness.groups import CONF
    from gensbi_sharding.harness.override_grammar import parse

    settings = []
    for override in overrides:
        key = override.split("=", 1)[0]
        if key in _SETTING:  # as the folder's refusals say it (cfg.output_dir, not hydra.run.dir)
            settings.append(_setting(override))
            continue
        parsed = parse([override]).overrides[0].hydra
        if override.startswith(("+", "~", "hydra.")) or "." not in key and (CONF / key).is_dir() or parsed is None:
            settings = None
            break
        settings.append(f"cfg.{key}={parsed.value()!r}")
    said = (f"set {' and '.join(settings)}" if settings else
            f"add {', '.join(map(repr, overrides))}{_COMPOSE_TAIL}")
    return said if lead == "add" else f"(or {said}"


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

"""A refusal of a run started from Python (``run(cfg)``, no Hydra) in the settings such a caller sets.

launch.py's refusals name overrides: ``choose another hydra.run.dir``, ``add model.width=32``, ``rerun with
train.resume=auto``. A Python caller takes none of them: it sets ``cfg.output_dir`` (in ``omegaconf.open_dict``: it is
no field of the composed config), ``cfg.model.width = 32``, ``cfg.train.resume``, or composes with a preset
(``experiment=quick``). The caller chooses the words (``in_python_words``: a Python caller where no Hydra app runs;
``as_overrides``: launch.py's command-line checks), and a refusal made inside says its fix from data
(``setting``, ``override_said``, ``fix_said``, ``said_as``; ``refusal.said``), never by reading its own prose back;
one naming ``cfg.output_dir`` (no field of the composed config) gains the ``omegaconf.open_dict`` note on the way out.
Pure Python: no JAX.
"""

from __future__ import annotations

import contextvars
import os
import shlex
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

__all__ = ["in_python_words", "as_overrides", "python_caller", "setting", "run_setting", "override_said", "fix_said",
           "said_as", "settings_of", "WITHOUT_RESUME", "OPEN_DICT"]

_COMMAND_LINE = contextvars.ContextVar("command_line", default=False)  # inside as_overrides
_PYTHON = contextvars.ContextVar("python_caller", default=False)  # inside in_python_words, no Hydra app running

#: The settings a Python caller sets for the overrides of the run's folder and resume (``cfg.output_dir`` is no field
#: of the composed config: set in ``omegaconf.open_dict``).
_SETTING = {"hydra.run.dir": "cfg.output_dir", "train.resume": "cfg.train.resume", "train.steps": "cfg.train.steps"}
_COMPOSE_TAIL = " to the overrides cfg is composed with"
#: How a refusal says to start afresh (``said_as(*WITHOUT_RESUME)``): launch.py leaves the override out.
WITHOUT_RESUME = ("without train.resume", "with cfg.train.resume=None")
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
    return _python_setting(key, os.fspath(value) if isinstance(value, os.PathLike) else value)


def run_setting(key: str, value: Any, typed: str | None = None) -> str:
    """``setting`` for a line a run logs (a warning's fix, not a refusal): ``run(cfg)``'s setting of cfg where no Hydra
    app runs (``cfg.data.theta_transform='support'``), launch.py's override under launch.py or ``as_overrides``.

    Parameters
    ----------
    key, value, typed
        As for ``setting``.

    Returns
    -------
    str
    """
    with in_python_words(reword=False):
        return setting(key, value, typed)


def _python_setting(key: str, value: Any) -> str:
    """The Python setting of ``key`` (``cfg.train.resume='runs/a'``; the folder's ``cfg.output_dir``)."""
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
        settings.append(_python_setting(key, parsed.value()))
    return " and ".join(settings) if settings else None


@contextmanager
def in_python_words(reword: bool = True) -> Iterator[None]:
    """Refusals made inside said to a Python caller where no Hydra app runs (``run(cfg)`` from Python), each in its
    settings as it is made (``python_caller``: ``setting``, ``said_as``, ...), one naming ``cfg.output_dir`` raised
    again with the ``omegaconf.open_dict`` note (``reword``); under launch.py (or ``as_overrides``), as launch.py
    says them.

    Parameters
    ----------
    reword : bool
        Whether a refusal raised inside that names ``cfg.output_dir`` gains the ``omegaconf.open_dict`` note.
    """
    from hydra.core.hydra_config import HydraConfig

    from gensbi_sharding.harness.config import ConfigError

    token = _PYTHON.set(not HydraConfig.initialized())
    try:
        yield
    except (ConfigError, FileExistsError, FileNotFoundError) as refused:  # folder_lock's FolderInUseError: as made
        said = str(refused)
        if not reword or not python_caller() or "cfg.output_dir" not in said or OPEN_DICT in said:
            raise
        raise type(refused)(said + OPEN_DICT) from None
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

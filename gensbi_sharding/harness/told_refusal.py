"""The refusal process 0 told the other processes (``run_folder.claim_together``), raised again on each."""

from __future__ import annotations

import builtins

from gensbi_sharding.harness.config import ConfigError
from gensbi_sharding.harness.folder_lock import FolderInUseError

__all__ = ["told_refusal"]


def told_refusal(kind: str, text: str) -> Exception:
    """The refusal process 0 told (``claim_together``) as the exception it raised there, so that every process ends
    the job with the same words (``"<kind>: <text>"``) and status: a builtin one (``PermissionError``, ``OSError``),
    ``FolderInUseError``, ``ConfigError``; any other kind, an exception of that name (as a ``ConfigError``,
    a ``PermissionError`` that reads 'PermissionError: ...' on process 0 would read, as a refusal of the user's
    input, without its class name on the others).

    Parameters
    ----------
    kind : str
        The class name of process 0's exception.
    text : str
        Its message.
    """
    known = {"FolderInUseError": FolderInUseError, "ConfigError": ConfigError}
    cls = known.get(kind, getattr(builtins, kind, None))
    if not (isinstance(cls, type) and issubclass(cls, Exception)):
        cls = type(kind, (Exception,), {})
    try:
        return cls(text)
    except Exception:  # noqa: BLE001 - a builtin that takes other arguments (UnicodeDecodeError's five)
        return type(kind, (Exception,), {})(text)


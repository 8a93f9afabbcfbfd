"""The words that start a command the harness prints for the user to paste: ``python launch.py`` from the checkout.

Every fix the harness prints ("continue with: python launch.py ... train.resume=auto ...") started
``python launch.py``; run from another folder (``cd /tmp/work && python ~/gensbi_sharding/launch.py ...``), that
pasted line failed, ``can't open file '/tmp/work/launch.py'``. ``command_for`` names the script so that the line
runs where the user typed the first: ``python launch.py`` where the folder's ``launch.py`` is this checkout's, else
its path. Pure Python: no JAX.
"""

from __future__ import annotations

import os
import re
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path

__all__ = ["CHECKOUT", "PYTHON", "command_for", "user_folder", "pasted", "LITERAL_BRACE"]

#: A ``${`` OmegaConf reads as text, not an interpolation: led by an odd number of backslashes (``\${``; ``\\${`` is a
#: backslash, then an interpolation).
LITERAL_BRACE = re.compile(r"(?<!\\)(?:\\\\)*\\\$\{")

CHECKOUT = Path(__file__).resolve().parents[2]  # gensbi_sharding/harness/ -> the folder holding launch.py
#: The Python running the harness, shell-quoted: what a script it writes runs (a bare ``python`` there, without the
#: venv activated, is the system's, with no JAX). The lines it prints keep ``python``, as the user typed it.
PYTHON = shlex.quote(sys.executable or "python")


def user_folder() -> Path:
    """The folder the user typed the command in: Hydra's record of it inside a job (``hydra.job.chdir=true`` moves
    the process into the job's folder), else the process's."""
    try:
        from hydra.core.hydra_config import HydraConfig
        from omegaconf import OmegaConf
    except ImportError:
        return Path.cwd()
    # A config set by hand (a test, compose()) has no runtime.cwd: "???", Hydra's missing value
    known = HydraConfig.initialized() and OmegaConf.select(HydraConfig.get(), "runtime.cwd", default=None)
    return Path(known) if known else Path.cwd()


def command_for(script: str = "launch.py", folder: str | os.PathLike | None = None) -> str:
    """``python <script>`` as the user types it in ``folder`` to run this checkout's ``script``.

    Parameters
    ----------
    script : str
        The script's path inside the checkout: ``"launch.py"``, ``"sample.py"``, ``"benchmarks/sbibm.py"``.
    folder : path-like, optional
        Where the command is typed; default the folder the user ran the harness from.

    Returns
    -------
    str
        ``"python launch.py"`` where ``folder/launch.py`` is this checkout's; else ``"python <path>"``, the path
        relative to ``folder`` where that is shorter than the absolute one, shell-quoted (a path with spaces).
    """
    target = CHECKOUT / script
    here = Path(folder) if folder is not None else user_folder()
    try:
        if (here / script).samefile(target):
            return f"python {script}"
    except OSError:  # no such file in that folder (or no checkout file: an installed copy), so a path is needed
        pass
    path = str(target)
    try:
        relative = os.path.relpath(target, here)
        path = relative if len(relative) < len(path) else path
    except ValueError:  # another drive (Windows): only the absolute path reaches it
        pass
    return f"python {shlex.quote(path)}"


def pasted(overrides: Sequence[str]) -> tuple[str, str]:
    """Overrides as the words to paste into bash: ``(drops, words)``, each override one shell word, so that
    ``shlex.split(words)`` gives back exactly the overrides (``refusal.listed``'s "all fixed together" line: was the
    overrides as typed, so a quoted fix lost its quotes); ``drops`` the keys dropped (``~key=value``) as typed with
    ``+`` (words to take out of the command, not to paste), "" where none.

    Parameters
    ----------
    overrides : sequence of str
        E.g. ``("~model.dpeth=2", "+hydra.job.env_set.MY_FLAG='true'", "eval.observations=[1]")``.

    Returns
    -------
    tuple of (str, str)
        E.g. ``("+model.dpeth=2", "\"+hydra.job.env_set.MY_FLAG='true'\" 'eval.observations=[1]'")``.
    """
    drops = " ".join(_shell_word(f"+{o[1:]}") for o in overrides if o.startswith("~"))
    return drops, " ".join(_shell_word(o) for o in overrides if not o.startswith("~"))


def _shell_word(word: str) -> str:
    """``word`` as one bash word: ``shlex.quote``'s, or in double quotes where it holds a single quote and nothing
    bash reads inside double quotes (shlex's ``'a='"'"'b'"'"''`` is hard to read back)."""
    quoted = shlex.quote(word)
    return f'"{word}"' if quoted != word and "'" in word and not set(word) & set('"$`\\!') else quoted

"""Hydra's settings it acts on as a job starts, given what it cannot use there: ``hydra.job.env_copy`` naming a
variable this shell has not set, and a callback (``hydra.callbacks.<name>``) that is no ``{_target_: module.Class}``
Hydra can import. Each was a traceback or Hydra's several-line error after every check had passed (found by round
67's fuzz of the command line): ``KeyError: 'NOPE_VAR'``, "Cannot instantiate config of type int", "Error locating
target 'nope.X'". Pure Python: no JAX (a callback's module is imported, as Hydra would).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Sequence

from gensbi_sharding.harness.override_grammar import CommandLine, parse

__all__ = ["env_copy_problem", "callback_problem"]


def env_copy_problem(args: Sequence[str] | CommandLine) -> str | None:
    """The one-line refusal of ``hydra.job.env_copy`` naming a variable not set here (Hydra copies each with
    ``os.environ[name]``: a KeyError traceback as the job started); None when there is none.

    Parameters
    ----------
    args : sequence of str or CommandLine
        The command line after the program name (``sys.argv[1:]``).

    Returns
    -------
    str or None
        E.g. ``"hydra.job.env_copy=[NOPE_VAR]: NOPE_VAR is not set in this shell, and Hydra copies only a variable
        that is (it stopped with a KeyError); export NOPE_VAR=<value> first, or leave it out"``.
    """
    for o in parse(args).parsed:
        if o.key != "hydra.job.env_copy" or "=" not in o.arg or o.sweep or not isinstance(v := o.hydra.value(), list):
            continue
        if unset := [str(name) for name in v if isinstance(name, str | int) and str(name) not in os.environ]:
            return (f"{o.arg}: {unset[0]} is not set in this shell, and Hydra copies only a variable that is (it "
                    f"stopped with a KeyError); export {unset[0]}=<value> first, or leave it out")
    return None


def _import_reason(target: str) -> str | None:
    """Why ``target`` (``module.Class``) cannot be imported, as Hydra imports a ``_target_``; None where it can."""
    parts = target.split(".")
    for i in range(len(parts) - 1, 0, -1):
        try:
            found = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        except Exception as err:  # noqa: BLE001 (a module that fails as it imports: Hydra's error would say it)
            return f"importing {'.'.join(parts[:i])} raised {type(err).__name__}: {err}"
        for part in parts[i:]:
            if not hasattr(found, part):
                return f"{'.'.join(parts[:i])} has no {'.'.join(parts[i:])}"
            found = getattr(found, part)
        return None
    return f"no module {parts[0]} is installed" if len(parts) > 1 else "it names no module"


def callback_problem(args: Sequence[str] | CommandLine) -> str | None:
    """The one-line refusal of a ``hydra.callbacks.<name>`` the command sets (``++hydra.callbacks.a={_target_:x.Y}``,
    ``+hydra.callbacks={a:1}``) that Hydra cannot instantiate as the job starts: no dict, no ``_target_``, or one no
    import finds; None when there is none.

    Parameters
    ----------
    args : sequence of str or CommandLine
        The command line after the program name (``sys.argv[1:]``).

    Returns
    -------
    str or None
        E.g. ``"++hydra.callbacks.a={_target_:nope.X}: Hydra cannot import the callback a's class nope.X (no module
        nope is installed); give an importable module.Class, or leave it out"``.
    """
    for o in parse(args).parsed:
        key = o.key
        if not key.startswith("hydra.callbacks") or "=" not in o.arg or o.sweep or o.hydra.is_delete():
            continue
        value = o.hydra.value()
        parts = key.split(".")[2:]
        entries = value if not parts and isinstance(value, dict) else {parts[0]: value} if len(parts) == 1 else \
            {parts[0]: {parts[1]: value}} if parts[1:] == ["_target_"] else {}
        for name, entry in entries.items():
            if not isinstance(entry, dict) or not isinstance(entry.get("_target_", ...), str):
                if isinstance(entry, dict) and parts[1:]:  # one key of an entry: the rest is the config's
                    continue
                return (f"{o.arg}: a callback of Hydra's is a dict naming its class ({{_target_: module.Class}}), "
                        f"and {name} is not one; give one, or leave it out")
            if "${" not in entry["_target_"] and (reason := _import_reason(entry["_target_"])) is not None:
                return (f"{o.arg}: Hydra cannot import the callback {name}'s class {entry['_target_']} ({reason}); "
                        "give an importable module.Class, or leave it out")
    return None

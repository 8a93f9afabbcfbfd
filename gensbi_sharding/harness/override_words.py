"""How a value and a name are written as an override: ``override_literal`` (``null``, ``[8,0]``), ``closest_name``
(``modle`` -> ``model``) and ``overrides_named`` (a library's ``width=0`` -> ``model.width=0``).

Split from ``hints`` (the batch-size and mesh messages), which re-exports these names.
"""

from __future__ import annotations

import contextlib
import difflib
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

__all__ = ["overrides_named", "override_literal", "closest_name", "GENSBI_NAMES"]


@contextlib.contextmanager
def overrides_named(group: str, section: Mapping[str, Any], error: type[Exception] = ValueError) -> Iterator[None]:
    """Re-raise a ``ValueError`` about ``width=0`` from a library as ``error`` naming ``model.width=0``.

    Library functions name their own arguments (``width``); the user types config
    overrides (``model.width``). A key of ``section`` the message names as an argument
    (``width=``, ``width must``) gets the ``group.`` prefix, and the message is prefixed
    with its current value. Other errors pass through unchanged.
    """
    try:
        yield
    except ValueError as err:
        text, named = str(err), []
        for key in section:
            bare = rf"(?<![\w./]){re.escape(str(key))}"
            if re.search(bare + r"(=| must\b)", str(err)):
                named.append(f"{group}.{key}={override_literal(section[key])}")
            text = re.sub(bare + "(?==)", f"{group}.{key}", text)
        if not named:
            raise
        # The library writes Python's None/True/False; typed on the command line they are strings.
        text = re.sub(rf"({re.escape(group)}\.\w+)=(None|True|False)\b",
                      lambda m: f"{m.group(1)}={_LITERALS[m.group(2)]}", text)
        raise error(f"{', '.join(named)}: {text}") from None


_LITERALS = {"None": "null", "True": "true", "False": "false"}  # Python's spelling -> an override's


def override_literal(value: Any) -> str:
    """A config value as it is typed in an override: ``null``, ``true``, ``false``, ``''``, a list as ``[8,0]``, else
    ``str``.

    A list without spaces: ``model.axes_dim=[8, 0]`` pasted into a shell is two words, and Hydra refuses both.

    Parameters
    ----------
    value : Any
        A resolved config value (scalar or list of them).

    Returns
    -------
    str
        The text after ``key=``.
    """
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(override_literal(v) for v in value) + "]"
    if value == "":  # said as typed (was: "rule.embed= ... names mesh axis , which the mesh lacks")
        return "''"
    return _LITERALS[str(value)] if value is None or isinstance(value, bool) else str(value)


#: GenSBI's names (its training config's) for settings the harness names otherwise, each taking the same value.
GENSBI_NAMES = {"nsteps": "steps", "max_lr": "learning_rate", "save_every": "checkpoint_every", "training": "train",
                "sharding_rule": "rule", "lr": "learning_rate"}


def closest_name(value: str, names: Sequence[str]) -> str | None:
    """The name of ``names`` closest to ``value`` (``modle`` -> ``model``), or None when none is close.

    Parameters
    ----------
    value : str
        The name typed.
    names : sequence of str
        The valid names.

    Returns
    -------
    str or None
        ``GENSBI_NAMES``' counterpart where ``names`` holds it, else ``difflib.get_close_matches``'s best.
    """
    if GENSBI_NAMES.get(str(value)) in names:  # not the nearest spelling: save_every was read as val_every
        return GENSBI_NAMES[str(value)]
    return next(iter(difflib.get_close_matches(str(value), list(names), n=1)), None)

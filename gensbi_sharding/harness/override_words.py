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
    if value == "":  # said as typed: a bare empty word reads as a blank in a message
        return "''"
    return _LITERALS[str(value)] if value is None or isinstance(value, bool) else str(value)


#: GenSBI's names (its training config's) for settings the harness names otherwise, each taking the same value.
GENSBI_NAMES = {"nsteps": "steps", "max_lr": "learning_rate", "save_every": "checkpoint_every", "training": "train",
                "sharding_rule": "rule", "lr": "learning_rate"}


def closest_name(value: str, names: Sequence[str]) -> str | None:
    """The name of ``names`` closest to ``value``, its case ignored (``SLCP`` -> ``slcp``, ``modle`` -> ``model``), or
    None when none is close.

    difflib counts an upper-case letter as another letter, so ``data=SLCP`` was near no task and was offered
    ``data=bernoulli_glm``; a name equal but for case comes first, then GenSBI's name for it (``GENSBI_NAMES``), then
    difflib's nearest, then the nearest with both sides in lower case (``TwoMoons`` -> ``two_moons``). One matcher
    for every caller, so none that imports this one misses the case (``bernoulli_glm`` offered for ``SLCP``).

    Parameters
    ----------
    value : str
        The name typed.
    names : sequence of str
        The valid names.

    Returns
    -------
    str or None
        The name to offer, as ``names`` spells it.
    """
    folded = {str(name).casefold(): name for name in reversed(list(names))}  # the first of names wins a tie
    if (same := folded.get(str(value).casefold())) is not None:
        return same
    if (near := _nearest(str(value), list(names))) is not None:
        return near
    near = _nearest(str(value).casefold(), list(folded))
    return None if near is None else folded[near]


def _nearest(value: str, names: list[str]) -> str | None:
    if GENSBI_NAMES.get(value) in names:  # not the nearest spelling: save_every was read as val_every
        return GENSBI_NAMES[value]
    return next(iter(difflib.get_close_matches(value, names, n=1)), None)

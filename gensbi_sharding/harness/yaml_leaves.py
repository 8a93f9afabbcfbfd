"""A config file's text and its YAML nodes, as the checks of its words read them (``yaml_words``, ``hydra_nulls``).

One walker of a parsed file's settings and one guarded parse for both checks (a near-copy in each would differ in
lists and ``defaults``); a file's reading is cached by its text (``file_text``), not its modification time and size.
Pure Python until a file is parsed.
"""

from __future__ import annotations

import typing
from pathlib import Path

__all__ = ["scalar_leaves", "composed_text", "file_text"]


def scalar_leaves(root: object) -> list[tuple[tuple[str, ...], typing.Any, bool]]:
    """Each ``(key path, node, item)`` of a composed YAML document (``yaml.compose``): a mapping's scalar value, or a
    scalar item of a mapping's list (``item``: its path ends in ``[i]``), nested mappings walked but the top one's
    ``defaults`` (Hydra's choices, not settings: its scalar or list items are given, not walked into). One walker for
    ``yaml_words`` and ``hydra_nulls``, so the two cannot differ in lists and ``defaults``.

    Parameters
    ----------
    root : yaml.Node or None
        ``composed_text``'s tree (None, or not a mapping: none).

    Returns
    -------
    list of (tuple of str, yaml.ScalarNode, bool)
    """
    import yaml

    found: list[tuple[tuple[str, ...], typing.Any, bool]] = []

    def walk(node: object, keys: tuple[str, ...]) -> None:
        for key, value in node.value if isinstance(node, yaml.MappingNode) else ():
            name = (*keys, str(key.value))
            if isinstance(value, yaml.MappingNode) and name != ("defaults",):
                walk(value, name)
            elif isinstance(value, yaml.ScalarNode):
                found.append((name, value, False))
            elif isinstance(value, yaml.SequenceNode):  # env_copy: [~]
                found.extend(((*name, f"[{i}]"), v, True) for i, v in enumerate(value.value)
                             if isinstance(v, yaml.ScalarNode))

    walk(root, ())
    return found


def composed_text(text: str) -> object | None:
    """YAML's node tree of ``text`` (``yaml.compose``); None where YAML cannot read it (``config_files``' to say).

    Parameters
    ----------
    text : str
        A config file's text.

    Returns
    -------
    yaml.Node or None
    """
    import yaml

    try:
        return yaml.compose(text)
    except Exception:
        return None


def file_text(path: Path) -> str:
    """``path``'s text, read at each call: what a cache of a config file's reading is keyed by (``yaml_words``',
    ``hydra_nulls``'), as ``config_loads`` keys its parses by a file's bytes. Not by ``(mtime_ns, size)``: a file
    rewritten to the same size within one clock tick, or with its old time put back (``touch -r``, ``cp -p``), would
    be judged by its old text in the same process (a ``plot: yes`` fixed still refused).

    Parameters
    ----------
    path : Path
        A config file.

    Returns
    -------
    str
        Its text, bytes that are not UTF-8 replaced.
    """
    return Path(path).read_text(encoding="utf-8", errors="replace")

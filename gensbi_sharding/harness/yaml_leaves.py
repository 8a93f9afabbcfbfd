"""A config file's text and its YAML nodes, as the checks of its words read them (``yaml_words``, ``hydra_nulls``).

One walker of a parsed file's settings and one guarded parse for both checks (a near-copy in each would differ in
lists and ``defaults``); a file's reading is cached by its text (``file_text``), not its modification time and size.
Where a file's keys land (``file_package``) and the schema type of a setting (``field_type``) are here for both too:
in ``yaml_words``, which imports ``hydra_nulls``, they made ``hydra_nulls`` import it back. Pure Python until a file
is parsed.
"""

from __future__ import annotations

import dataclasses
import re
import typing
from pathlib import Path

__all__ = ["scalar_leaves", "composed_text", "file_text", "field_type", "group_package", "file_package"]


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


def field_type(dotted: tuple[str, ...], model: str | None = None) -> object:
    """The schema type of the setting at ``dotted`` (``("eval", "plot")``: bool), or None where no schema says; a
    ``model`` setting by the job's model's schema (``model``, its name: flux1's ``qkv_bias`` is a bool, which the
    base ``ModelConfig`` lacks), a ``hydra`` one by Hydra's own (``hydra.conf.HydraConf``)."""
    from hydra.conf import HydraConf

    from gensbi_sharding.harness.config import Config, type_hints
    from gensbi_sharding.harness.override_keys import model_schemas

    roots = {"hydra": HydraConf, "model": model_schemas().get(model)}
    schema, parts = (roots[dotted[0]], dotted[1:]) if dotted and dotted[0] in roots else (Config, dotted)
    for part in parts:
        if typing.get_origin(schema) is dict:  # a mapping's entry (hydra.job.env_set's: str), was untyped
            schema = typing.get_args(schema)[1]
            if schema is typing.Any:  # hydra.callbacks' entries, a rule's: no schema says
                return None
            continue
        if not dataclasses.is_dataclass(schema) or part not in type_hints(schema):
            return None
        schema = type_hints(schema)[part]
    return schema


def group_package(path: Path, group: str) -> tuple[str, ...]:
    """Where a group file's keys land: its ``# @package`` header's (``_global_``: the top), else its group's."""
    header = re.search(r"^#\s*@package\s+(\S+)", path.read_text(encoding="utf-8", errors="replace"), re.M)
    package = header.group(1) if header else group
    package = group if package == "_group_" else "" if package == "_global_" else package
    return tuple(p for p in package.split(".") if p)


def file_package(path: Path, folder: Path) -> tuple[str, ...]:
    """Where the keys of ``path``, a file under the config folder ``folder``, land: its group's or header's package."""
    group = path.parent.relative_to(folder).as_posix()
    return group_package(path, group) if group != "." else ()

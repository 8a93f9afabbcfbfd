"""A bare ``true``/``false`` given to a text setting of Hydra's (``+hydra.job.env_set.MY_FLAG=true``), refused as the
same word in a config file is (``yaml_words``).

Hydra's grammar reads a bare ``true`` as a yes/no, and a text setting takes it as Python's spelling: the job ran with
``MY_FLAG=True``, silently, where ``hydra.job.env_set: {MY_FLAG: true}`` in a YAML file is refused. Pure Python.
"""

from __future__ import annotations

import dataclasses
import typing

from gensbi_sharding.harness.override_grammar import CommandLine
from gensbi_sharding.harness.refusal import Refusal

__all__ = ["hydra_text_problem"]


def hydra_text_problem(command: CommandLine) -> str | None:
    """The refusal of the first ``hydra.*`` override giving a text setting a bare yes/no; None where none does.

    Parameters
    ----------
    command : CommandLine
        The parsed command line.

    Returns
    -------
    str or None
        E.g. ``"+hydra.job.env_set.MY_FLAG=true: hydra.job.env_set.MY_FLAG takes text, and true is a yes/no, which it
        would read as 'True' (Python's spelling), as in a config file; for the text, quote it:
        \\"+hydra.job.env_set.MY_FLAG='true'\\""``.
    """
    for o in command.parsed:
        if not o.key.startswith("hydra.") or o.hydra.is_delete() or o.sweep:  # a sweep's values: its own check's
            continue
        value = o.hydra.value()
        if not isinstance(value, bool) or not _text(_hydra_type(o.key.split(".")[1:])):
            continue
        word, prefix = str(value).lower(), o.arg[:len(o.arg) - len(o.arg.lstrip("+~"))]
        fixed = f"{prefix}{o.key}='{word}'"
        return Refusal(f"{o.arg}: {o.key} takes text, and {o.raw} is a yes/no, which it would read as '{value}' "
                       f"(Python's spelling), as in a config file", fixed, how="; for the text, quote it: ",
                       shown=f"\"{fixed}\"")
    return None


def _hydra_type(parts: list[str]) -> object:
    """The type Hydra's schema (``hydra.conf.HydraConf``) gives the setting at ``parts`` below ``hydra``; None where
    none says (a plugin's, a callback's)."""
    from hydra.conf import HydraConf

    schema: object = HydraConf
    for part in parts:
        if typing.get_origin(schema) is dict:  # a mapping's entry (env_set's: str)
            schema = typing.get_args(schema)[1]
            continue
        hints = typing.get_type_hints(schema) if dataclasses.is_dataclass(schema) else {}
        if part not in hints:
            return None
        schema = hints[part]
    return schema


def _text(kind: object) -> bool:
    """Whether ``kind`` is text (``str`` or ``Optional[str]``)."""
    return kind is str or (typing.get_origin(kind) is typing.Union and str in typing.get_args(kind)
                           and bool not in typing.get_args(kind))

"""A null in a config file that a setting of Hydra's cannot take (``hydra.job.env_set``'s ``MY_FLAG: null``).

Hydra refuses it while composing, in several lines ("field 'hydra.job.env_set.MY_FLAG' is not Optional") that name
the file as "In 'experiment/mine'" and no fix; ``null_read_problem`` (called by ``yaml_words.yes_no_word_problem``,
among the command's checks before any folder) names the file, line, setting and fix in one line. The project's own
settings' nulls are ``config_files``' to refuse. Pure Python until a file that names ``hydra`` holds a null.
"""

from __future__ import annotations

import functools
import re
import typing
from pathlib import Path

from gensbi_sharding.harness.override_grammar import CommandLine
from gensbi_sharding.harness.yaml_leaves import composed_text, field_type, file_package, file_text, scalar_leaves

__all__ = ["hydra_null_problem", "null_read_problem", "MAYBE_NULL"]

#: A value that may be YAML's null (``null``, ``~``, nothing after the colon): only a file that also names ``hydra``
#: is parsed for them (``_hydra_nulls``; the project's own settings' nulls are ``config_files``' to refuse).
MAYBE_NULL = re.compile(r"(?m):\s*(?:null|Null|NULL|~)?\s*(?:[,}\]#]|$)")


@functools.lru_cache(maxsize=1024)
def _hydra_nulls(text: str) -> tuple[tuple[tuple[str, ...], str, int], ...]:
    """Each ``(key path, as written, line)`` of the file's mappings whose value is YAML's null; none in a file that
    does not name ``hydra`` (Hydra's own settings are the ones checked) or that YAML cannot read. Parsed once per
    text (``yaml_leaves.file_text``: per modification time and size, an edit of the same size would go unseen)."""
    if "hydra" not in text or not MAYBE_NULL.search(text):
        return ()
    return tuple((name, node.value, node.start_mark.line + 1) for name, node, _ in scalar_leaves(composed_text(text))
                 if node.tag == "tag:yaml.org,2002:null")  # a list's too: env_copy: [~] (Hydra's multi-line error)


def hydra_null_problem(path: Path, package: tuple[str, ...]) -> str | None:
    """A null that ``path`` (a config file whose keys land in ``package``) gives a setting of Hydra's that cannot
    be null (``hydra.job.env_set``'s ``MY_FLAG: null``), in one line naming the file, line, setting and fix; None
    where it gives none. Hydra's is multi-line, "field 'hydra.job.env_set.MY_FLAG' is not Optional", no fix."""
    for keys, written, line in _hydra_nulls(file_text(path)):
        full = (*package, *keys)
        if item := keys[-1].startswith("["):  # a list's item: the list's element type
            listed = field_type(full[:-1]) if full[0] == "hydra" else None
            kind = typing.get_args(listed)[0] if typing.get_origin(listed) is list and typing.get_args(listed) \
                else None
            said = f"{path}, line {line}: an item {written or 'left empty'} of {'.'.join(full[:-1])}"
            fix = "delete that item"
        else:
            kind = field_type(full) if full[0] == "hydra" else None
        if kind is None or kind is typing.Any or type(None) in typing.get_args(kind):
            continue  # not Hydra's, no schema, or Optional: null is taken
        if item:
            return f"{said} is YAML's null, which Hydra's {'.'.join(full[:-1])} cannot hold; {fix}"
        said = f"{path}, line {line}: {f'{keys[-1]}: {written}'.rstrip()} ({'.'.join(full)})"
        entry = len(full) > 1 and typing.get_origin(field_type(full[:-1])) is dict  # env_set's MY_FLAG
        fix = (f"write {keys[-1]}: '' there for an empty value, or delete that line to leave it unset" if entry
               else f"delete that line so {'.'.join(full)} keeps its default")
        return f"{said} is YAML's null, which Hydra's {'.'.join(full)} cannot take; {fix}"
    return None


def null_read_problem(command: CommandLine, files: list[tuple[Path, Path]]) -> str | None:
    """``hydra_null_problem`` of a file (of ``files``, each with its config folder) that a job of ``command`` reads:
    Hydra refuses such a file while composing (its error names it, "In 'experiment/mine'"), so it is found so."""
    from gensbi_sharding.harness.command_defaults import command_jobs, composed

    nulls = {path.relative_to(folder).with_suffix("").as_posix(): problem for path, folder in files
             if (problem := hydra_null_problem(path, file_package(path, folder)))}
    for job in command_jobs(command) or [] if nulls else []:
        said = str(composed(*job)[1])
        if problem := next((problem for name, problem in nulls.items() if f"In '{name}'" in said), None):
            return problem
    return None

"""A config file YAML cannot read (a tab indent, a key written twice, an unclosed bracket), named before Hydra composes.

A user's own ``conf/rule/my_rule.yaml`` or ``my_conf/model/my_flux1.yaml`` with a tab where YAML wants spaces was
Hydra's 87-line traceback of its defaults list and PyYAML's scanner, the file and line only in its last lines; one
written as a list (``- embed: data``) was Hydra's "list is not a subclass of Dict[str, Any]", naming no fix.
``config_file_problem`` names the file, line and column, YAML's reason and the fix in one line, for a file the
command's composition reads; a broken file the command never reads (another preset) stops nothing. A file of one's
own in no folder the command reads is named with the search path to add (``unsearched_file``, ``resumed_search_path``).
Pure Python.
"""

from __future__ import annotations

import functools
import io
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from gensbi_sharding.harness.groups import CONF
from gensbi_sharding.harness.override_grammar import CommandLine

__all__ = ["config_file_problem", "file_version", "resumed_search_path", "unsearched_file", "yaml_error_in"]

#: Where a config folder's files lie: the primary configs, ``<group>/<option>.yaml``, ``<group>/<sub>/<option>.yaml``
#: (not deeper: ``--config-dir .`` would walk every run's ``.hydra/``).
_DEPTHS = ("*.yaml", "*/*.yaml", "*/*/*.yaml")


def _unreadable(folders: list[Path]) -> tuple[set[str], dict[str, Path], dict[str, tuple]]:
    """The config files under ``folders`` that ``OmegaConf.load`` (as Hydra reads them) refuses, as paths; those
    holding a list, by the name Hydra gives them (``rule/my_rule``); and a group file setting a key its section's
    schema lacks or whose value it cannot take (``train/default``: its path, group, key, value and the reason)."""
    broken, lists, unknown = set(), {}, {}
    for folder in (f for f in folders if f.is_dir()):
        for path in (p for depth in _DEPTHS for p in folder.glob(depth) if p.is_file()):
            read, items = _read_as(_bytes_of(path))
            name = path.relative_to(folder).with_suffix("").as_posix()
            if read == "list":
                lists[name] = path
            elif read == "broken":
                broken.add(str(path.resolve()))
            elif read == "global":  # each section a preset sets, checked as that group's file
                for section, bad in ((k, _unfit(k, tuple(v.items()))) for k, v in items if isinstance(v, dict)):
                    if bad is not None:
                        unknown.setdefault(name, (path, section, *bad, True))
            elif "/" in name and (bad := _unfit(name.split("/")[0], items)) is not None:
                unknown.setdefault(name, (path, name.split("/")[0], *bad))
    return broken, lists, unknown


def _section(group: str) -> type | None:
    """The schema a group's files fill (``train``: ``TrainConfig``); None for a group whose files are checked
    elsewhere (``model``: by the schema each lists; ``rule``: a table) or that fills no section."""
    import dataclasses

    from gensbi_sharding.harness.config import Config, type_hints

    schema = type_hints(Config).get(group) if group not in ("model", "rule") else None
    return schema if dataclasses.is_dataclass(schema) else None


def _unfit(group: str, items: tuple) -> tuple | None:
    """The first ``(key, value, reason)`` of a group file's ``items`` that its section's schema lacks (reason None)
    or cannot take; None where all fit, or the group fills no section."""
    import dataclasses

    from gensbi_sharding.harness.config import assignment_reason

    if (schema := _section(group)) is None:
        return None
    fields = [f.name for f in dataclasses.fields(schema)]
    for key, value in items:
        if key not in fields:
            return key, value, None
        if not (isinstance(value, str) and ("${" in value or value == "???")):  # resolved or asked for later
            if (reason := assignment_reason(schema, key, value)) is not None:
                return key, value, reason
    return None


def file_version(path: Path) -> tuple[int, int]:
    """What tells an edit of ``path`` apart, for a cache keyed by it: ``(st_mtime_ns, st_size)``, both ints
    (nanoseconds, bytes); a file is read again after either changes."""
    stat = path.stat()
    return stat.st_mtime_ns, stat.st_size


def _bytes_of(path: Path) -> bytes:
    """``path``'s bytes, read at each check: what ``_read_as`` is keyed by (a small file's read is ~1/100 of its
    parse)."""
    return path.read_bytes()


@functools.lru_cache(maxsize=1024)
def _read_as(data: bytes) -> tuple[str, tuple[str, ...]]:
    """``"broken"`` (YAML cannot read it), ``"list"``, ``"mapping"`` or ``"global"`` (``# @package _global_``: a
    preset setting sections, ``train: {steps: 5}``), and its items but ``defaults`` (none for another ``@package``
    header: its keys land elsewhere), of a config file's bytes: read once per content (parsed again by each check
    of a command line, ~0.3 s each time; keyed by modification time and size, a file edited to the same size within
    one clock tick, or with its old time put back, would be judged by its old text)."""
    try:  # OmegaConf.load of the file's text, as Hydra reads it (UTF-8, universal newlines: as its open)
        read = OmegaConf.load(io.StringIO(data.decode("utf-8"), newline=None))
    except Exception:
        return "broken", ()
    if OmegaConf.is_list(read):
        return "list", ()
    header = data.decode("utf-8", errors="replace")
    items = tuple((str(k), v) for k, v in OmegaConf.to_container(read, resolve=False).items() if k != "defaults")
    if "@package _global_" in header:
        return "global", items
    return "mapping", () if "@package" in header else items


def _fix(reason: str, mark: object) -> str:
    if "'\\t'" in reason:  # a tab after text on its line (before a comment, say) indents nothing: not "indent with"
        return "indent with spaces: YAML takes no tabs" if _indenting(mark) else (
            "write spaces for the tab at that column: YAML takes no tabs")
    if "duplicate key" in reason:
        return f"keep one of the two '{reason.rsplit(' ', 1)[-1]}:' lines"
    return "write each setting as key: value, nested ones indented by spaces, lists as [a, b]"


def _indenting(mark: object) -> bool:
    """Whether the character at YAML's ``mark`` lies in its line's leading whitespace."""
    try:
        line = Path(mark.name).read_text(errors="replace").splitlines()[mark.line]
    except (OSError, IndexError):
        return True
    return not line[:mark.column].strip()


def config_file_problem(command: CommandLine) -> str | None:
    """One line naming a config file that this command's composition reads and YAML cannot, where it fails, why, and
    the fix (``conf/rule/my_rule.yaml, line 2, column 1: YAML cannot read it (found character '\\t' that cannot
    start any token); indent with spaces: YAML takes no tabs``); None when every file it reads is valid YAML."""
    import yaml

    from gensbi_sharding.harness.command_defaults import command_jobs, composed

    folders = [CONF] + [Path(p[len("file://"):]) for p in command.search_paths if p.startswith("file://")]
    broken, lists, unknown = _unreadable(folders)
    if not broken and not lists and not unknown:  # the common case: no composition needed
        return None
    for job in command_jobs(command) or []:
        err = composed(*job)[1]
        named = [path for name, path in lists.items() if f"In '{name}'" in str(err)]  # Hydra's "In 'rule/my_rule'"
        if named:  # in words; Hydra says "Invalid type assigned: list is not a subclass of Dict[str, Any]"
            return (f"{named[0]} holds a list (its lines start with '- '), and a config file is a mapping: write each "
                    "setting as key: value, without the '- '")
        if bad := next((v for name, v in unknown.items() if f"In '{name}'" in str(err)), None):
            return _unknown_key(*bad)  # Hydra's is multi-line "ConfigKeyError ... Key 'speed' not in 'TrainConfig'"
        err = yaml_error_in(err)
        mark = getattr(err, "problem_mark", None)
        if mark is not None and str(Path(mark.name).resolve()) in broken:
            reason = str(err.problem or err.context)
            return (f"{mark.name}, line {mark.line + 1}, column {mark.column + 1}: YAML cannot read it ({reason}); "
                    + _fix(reason, mark))
    return None


def yaml_error_in(err: BaseException | None) -> BaseException | None:
    """The YAML error ``err`` holds in its chain of causes (``__cause__``, else ``__context__``), else None.

    The walk ends at an exception seen already: a chain may loop (an error raised ``from`` one whose context it is),
    and an unbounded walk then hung the refusal (seen under coverage's tracing in the test suite)."""
    import yaml

    seen: set[int] = set()
    while err is not None and not isinstance(err, yaml.MarkedYAMLError):
        if id(err) in seen:
            return None
        seen.add(id(err))
        err = err.__cause__ or err.__context__
    return err


def _unknown_key(path: Path, section: str, key: str, value: Any, reason: str | None, nested: bool = False) -> str:
    import dataclasses

    from gensbi_sharding.harness.hints import closest_name, override_literal
    from gensbi_sharding.harness.override_keys import schema_default

    shown, under = (f"{section}.{key}", f" under {section}:") if nested else (key, "")  # a preset's train: {...}
    if reason is not None:  # Hydra's is multi-line "ValidationError ... could not be converted to Integer"
        return (f"{path} sets {shown}: {override_literal(value)}, which it cannot take ({reason}); write e.g. {key}: "
                f"{override_literal(schema_default(_section(section), key)[1])}{under} there")
    fields = [f.name for f in dataclasses.fields(_section(section))]
    near = closest_name(key, fields)
    return (f"{path} sets {shown}, which is not a setting of {section}" + (f" (did you mean {near}?)" if near else "")
            + f"; its settings: {', '.join(fields)}; remove {key}{under} from that file"
            + (f" or rename it {near}" if near else ""))


def unsearched_file(group: str, value: str, search_paths: list[str], near: str | None = None) -> str | None:
    """Where ``<group>/<value>.yaml`` lies under the current folder's ``conf/`` (or the folder itself) but launch.py
    reads neither (its own ``conf/`` and the search path's are its config folders): the clause naming that file and
    the search path to add, for the README's ``conf/rule/my_rule.yaml`` written beside a ``python /path/to/launch.py``
    run from another folder, where Hydra says only "Could not find 'rule/my_rule' ...". None where no
    such file lies here. A search path folder that does not exist (a typo: Hydra skips it, with a warning) is named
    likewise, with ``near`` (the closest option) offered after (so the folder is named, not only "pick
    one, e.g. model=flux1")."""
    import shlex

    from gensbi_sharding.harness.override_grammar import hydra_value

    read = {CONF.resolve()} | {Path(p[len("file://"):]).resolve() for p in search_paths if p.startswith("file://")}
    for folder in (Path.cwd() / "conf", Path.cwd()):
        if (folder / group / f"{value}.yaml").is_file() and folder.resolve() not in read:
            add = shlex.quote(f"hydra.searchpath=[{hydra_value(f'file://{folder.resolve()}')}]")
            return (f"{(folder / group / value).relative_to(Path.cwd())}.yaml here is not read: launch.py reads its "
                    f"own {CONF} and the search path's folders; add {add}")
    for gone in (p[len("file://"):] for p in search_paths if p.startswith("file://")):
        if not Path(gone).is_dir():
            return (f"the search path's folder {gone} does not exist{'' if Path(gone).is_absolute() else ' here'}, "
                    f"so Hydra skips it; give hydra.searchpath the folder that holds {group}/{value}.yaml"
                    + (f", or did you mean {group}={near}?" if near else ""))
    return None


def resumed_search_path(command: CommandLine, group: str, value: str) -> str | None:
    """The search path flags (``'hydra.searchpath=[file://.../my_conf]'``, ``--config-dir ...``) of the run
    ``train.resume`` names (``auto``: ``hydra.run.dir``'s), where one of their folders holds ``<group>/<value>.yaml``:
    a preset of one's own resumed without them (not "did you mean model=flux1?", whose sizes the resume refuses)."""
    import shlex

    from gensbi_sharding.harness.saving_record import saving_overrides
    from gensbi_sharding.harness.override_grammar import parse

    given = {p.key: p.raw for p in command.parsed if p.key in ("train.resume", "hydra.run.dir")}
    run = given.get("hydra.run.dir") if given.get("train.resume") == "auto" else given.get("train.resume")
    if not run:
        return None
    path = Path(run).expanduser()  # a run folder, its checkpoints/ or a step folder
    found = [f for f in (path, path.parent, path.parent.parent) if (f / ".hydra").is_dir()]
    searched = (saving_overrides(found[0] / "checkpoints" / "0") or ([], []))[0] if found else []
    folders = [Path(e[len("file://"):]) for e in parse(searched).search_paths if e.startswith("file://")]
    if any((f / group / f"{value}.yaml").is_file() for f in folders):
        return " ".join(map(shlex.quote, searched))
    return None

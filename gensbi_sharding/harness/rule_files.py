"""A rule table the run would refuse (a key typo in one's own ``conf/rule/my_rule.yaml``), named before Hydra composes.

The command line's ``rule.embd=data`` is refused before any folder is made (``override_keys``), yet the same key in a
rule file would be refused only by the run's own check (``config_checks.validate``), after Hydra made the run's folder,
leaving an outputs folder holding ``error.txt`` (``python launch.py rule=my_rule`` with ``embd: data``).
Here the rule table this command composes is put through that check (``rule_config.rule_problem``), so launch.py
refuses it with the other checks of the command line, dry runs too. Composed only where a rule file of the command's
config folders or a ``rule.*`` override could be refused: a command without either composes nothing. Pure Python.
"""

from __future__ import annotations

import functools
from pathlib import Path

from omegaconf import OmegaConf

from gensbi_sharding.harness.groups import CONF
from gensbi_sharding.harness.override_grammar import CommandLine
from gensbi_sharding.harness.refusal import Refusal
from gensbi_sharding.harness.rule_config import MESH_AXES, rule_problem

__all__ = ["rule_file_problem"]


def _refused_files(folders: list[Path]) -> dict[Path, str]:
    """Each rule file under ``folders`` whose table alone ``rule_problem`` refuses, with that refusal."""
    from gensbi_sharding.harness.config_files import file_version

    files = (p for f in folders for p in sorted((f / "rule").glob("*.yaml")) if p.is_file())
    return {path: problem for path in files if (problem := _file_problem(str(path), *file_version(path))) is not None}


@functools.lru_cache(maxsize=256)
def _file_problem(path: str, mtime_ns: int, size: int) -> str | None:
    """``rule_problem`` of the rule file ``path`` alone, read once per version of it (``config_files.file_version``)."""
    try:
        table = OmegaConf.load(path)
    except Exception:  # YAML it cannot read: config_file_problem's
        return None
    if not OmegaConf.is_dict(table):
        return None
    table.pop("defaults", None)
    return rule_problem(table, MESH_AXES)


def rule_file_problem(command: CommandLine) -> str | None:
    """The refusal of the rule table ``command`` composes, as the run would refuse it, naming the rule file that holds
    it; None where every job's table would run (or a job does not compose: Hydra's, or another check's, to name).

    Parameters
    ----------
    command : CommandLine
        The command line as ``override_grammar.parse`` reads it.

    Returns
    -------
    str or None
        E.g. ``"rule.embd is not a logical axis; ...; did you mean rule.embed? (written in conf/rule/my_rule.yaml:
        fix it there)"``.
    """
    from gensbi_sharding.harness.command_defaults import command_jobs, composed

    folders = [CONF] + [Path(p[len("file://"):]) for p in command.search_paths if p.startswith("file://")]
    refused = _refused_files(folders)
    # The rule's overrides composed too (a swept one's values are sweep_check's: it refuses each job before any folder
    # is made, but a swept axis the rule leaves out is said here, with the sweep's fix: was each job's own ++ value)
    typed = [o.arg for o in command.parsed if o.key.startswith("rule.") and not o.sweep]
    swept = any(o.key.startswith("rule.") and o.sweep for o in command.parsed)
    if not refused and not typed and not swept:
        return None  # the common case: nothing to compose
    for chosen, home, name in command_jobs(command) or []:
        cfg = composed((*chosen, *typed), home, name)[0]
        if (cfg is None or swept) and (problem := _left_out_problem(command, chosen, home, name)) is not None:
            return problem
        if cfg is None or OmegaConf.select(cfg, "rule") is None:
            continue
        axes = MESH_AXES if OmegaConf.select(cfg, "mesh.spec", default=None) is not None else None
        if (problem := rule_problem(cfg.rule, axes)) is None:
            continue
        saying = [path for path, said in refused.items() if said == problem]
        chosen_rule = [c.split("=", 1)[1] for c in chosen if c.startswith("rule=")]  # else a preset's or the default
        written = next(iter([p for p in saying if chosen_rule and p.stem == chosen_rule[-1]] + saying), None)
        return problem if written is None else f"{problem} (written in {_shown(written)}: fix it there)"
    return None


def _shown(path: Path) -> str:
    """``path`` as the user knows it: relative to the working folder where it lies under it."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def _left_out_problem(command: CommandLine, chosen: tuple[str, ...], home: str, name: str) -> str | None:
    """``rule.heads=model`` on a rule file that leaves ``heads`` out: the one-line fix, not Hydra's error.

    A file's left-out axes are not split, so the command meant to set one; Hydra refused it ("Could not override
    'rule.heads'. To append to your config use +rule.heads=model", several lines), and its ``+`` is refused in turn
    for a rule file listing the axis (a sweep over both: ``-m rule=fsdp,my_rule``). ``++`` sets it in either.
    """
    from gensbi_sharding.harness.command_defaults import composed

    cfg = composed(chosen, home, name)[0]
    table = OmegaConf.select(cfg, "rule") if cfg is not None else None
    if not OmegaConf.is_dict(table):
        return None
    for o in command.parsed:
        part = o.key.split(".")
        if part[0] == "rule" and len(part) == 2 and not o.typed.startswith("+") and part[1] not in table:
            shown = o.raw  # a sweep's values as typed (model,data): ++ sweeps them, in Hydra's syntax
            where = [c.split("=", 1)[1] for c in chosen if c.startswith("rule=")]
            rule = f"rule={where[-1]}" if where else f"the rule this command composes ({table.get('name')})"
            # a Refusal: command_problem types its fix and names the next axis the file leaves out in the same list
            return Refusal(f"{o.arg}: {rule} leaves {part[1]} out of its table (not split), so Hydra cannot override "
                           "it", f"++{o.key}={shown}", how="; write ", after=f" (sets it whether a rule's table lists "
                           f"{part[1]} or not), or add {part[1]}: {o.values()[0] if o.sweep else shown} to the "
                           "rule's file")
    return None

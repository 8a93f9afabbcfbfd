"""A yes/no word (``plot: yes``, ``on``, ``off``) in a config file the command reads, refused as on the command line.

YAML 1.1, which Hydra's loader follows, reads a bare ``yes``/``no``/``on``/``off`` as true/false, and OmegaConf turns
``y``/``n`` (quoted or not) into a yes/no field's true/false; the command line refuses all of these words
(``eval.plot=yes``: "eval.plot is a yes/no: true or false (or 1 or 0), not 'yes'", ``override_types``). Unchecked, a
group file of one's own (``conf/eval/my_eval.yaml``) or a preset with ``plot: yes`` runs with it on, silently; a bare
``no`` in a text setting runs with the text 'False', as does a bare ``true``/``false`` there (``hydra.job.env_set``'s
``MY_FLAG: true`` sets MY_FLAG=True, Python's spelling). ``yes_no_word_problem`` names the file, line, key and the fix.
Pure Python until a file holds such a word: then the command's choices are composed once (which files it reads).
"""

from __future__ import annotations

import functools
import re
import typing
from pathlib import Path

from gensbi_sharding.harness.groups import CONF
from gensbi_sharding.harness.override_grammar import CommandLine
from gensbi_sharding.harness.hydra_nulls import null_read_problem
from gensbi_sharding.harness.yaml_leaves import (composed_text, field_type, file_package, file_text, group_package,
                                                  scalar_leaves)

__all__ = ["yes_no_word_problem", "yes_no_words"]

#: YAML 1.1's words for true/false besides true/false themselves (its own spellings: ``yEs`` is text).
YAML_WORDS = re.compile(r"yes|Yes|YES|no|No|NO|on|On|ON|off|Off|OFF")
#: What OmegaConf converts to a yes/no field's true/false, any case, that the command line refuses.
OMEGACONF_WORDS = ("y", "yes", "on", "n", "no", "off")
TRUE_WORDS = ("y", "yes", "on")
#: A value that may be one of them (``key: yes``, ``{plot: 'n'}``), or a bare true/false (``MY_FLAG: true`` in a
#: text setting: the text 'True', Python's spelling): only a file holding one is parsed.
MAYBE_WORD = re.compile(r"""(?im):\s*['"]?(?:y|yes|n|no|on|off|true|false)['"]?\s*(?:[,}\]#]|$)""")
#: YAML's own true/false, bare (``True``, ``FALSE``): a yes/no setting's; a text setting reads 'True' / 'False'
#: (refused there only where that differs from what was written: ``true``, ``FALSE``).
BOOL_WORDS = re.compile(r"true|True|TRUE|false|False|FALSE")


@functools.lru_cache(maxsize=1024)
def _scalars(text: str) -> tuple[tuple[tuple[str, ...], str, int, bool], ...]:
    """Each ``(key path, word, line, bare)`` of the file's mappings whose value is one of ``OMEGACONF_WORDS``
    (``defaults`` and lists' items left out); parsed once per text (``file_text``). A file YAML cannot read: none
    (``config_files``')."""
    if not MAYBE_WORD.search(text):  # most files: YAML's parse of each cost a launch ~0.2 s
        return ()
    return tuple((name, node.value, node.start_mark.line + 1, node.style is None)
                 for name, node, item in scalar_leaves(composed_text(text))
                 if not item and name != ("defaults",) and (node.value.lower() in OMEGACONF_WORDS or (
                     node.style is None and BOOL_WORDS.fullmatch(node.value))))


def yes_no_words(path: Path) -> tuple[tuple[tuple[str, ...], str, int, bool], ...]:
    """``(key path, word, line, bare)`` of each yes/no word ``path`` sets (see ``_scalars``), its ``# @package``
    header not applied."""
    return _scalars(file_text(path))


def _read_files(command: CommandLine) -> list[tuple[Path, tuple[str, ...], str | None]]:
    """The config files the command's jobs read (each job of a sweep: ``-m eval=a,b`` reads both), with the package
    each one's keys land in and the job's model, in the jobs' order; a job whose choices do not compose reads none
    (another check names why)."""
    from gensbi_sharding.harness.command_defaults import command_jobs

    read: list[tuple[Path, tuple[str, ...], str | None]] = []
    for part in _parts(command):
        for job in command_jobs(part) or []:
            read += [f for f in _job_files(*job) if f not in read]
    return read


def _parts(command: CommandLine) -> list[CommandLine]:
    """``command``, or where its jobs number more than ``command_defaults.MAX_JOBS`` (which composes none of them:
    was, no file of such a sweep checked), commands that each take one value of its first swept group (Hydra's outer
    loop) and together run the same jobs, in Hydra's order; none where a group's choice is a glob."""
    from gensbi_sharding.harness.command_defaults import command_jobs
    from gensbi_sharding.harness.override_keys import option_groups
    from gensbi_sharding.harness.override_grammar import parse

    if command_jobs(command) is not None:
        return [command]
    groups = set(option_groups())
    swept = [o for o in command.parsed if o.key in groups and o.sweep and o.hydra.package is None and o.values()]
    if not swept:
        return []
    first, at = swept[0], command.args.index(swept[0].arg)
    return [part for value in first.values()
            for part in _parts(parse([*command.args[:at], f"{first.typed}={value}", *command.args[at + 1:]]))]


def _job_files(overrides: tuple[str, ...], config_dir: str,
               config_name: str) -> list[tuple[Path, tuple[str, ...], str | None]]:
    """``_read_files`` of one job (``command_defaults.command_jobs``' job)."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from omegaconf import OmegaConf

    from gensbi_sharding.harness.config import register_configs

    register_configs()
    try:
        if GlobalHydra.instance().is_initialized():
            cfg = compose(config_name=config_name, overrides=list(overrides), return_hydra_config=True)
        else:
            with initialize_config_dir(config_dir=config_dir, version_base="1.3"):
                cfg = compose(config_name=config_name, overrides=list(overrides), return_hydra_config=True)
    except Exception:
        return []
    folders = [Path(s.path) for s in cfg.hydra.runtime.config_sources if s.schema == "file"]
    model = OmegaConf.select(cfg, "model.name", default=None, throw_on_resolution_failure=False)  # its schema
    read = [(Path(config_dir) / f"{config_name}.yaml", (), model)]
    for choice, option in cfg.hydra.runtime.choices.items():
        group, _, package = str(choice).partition("@")
        if option is None or group.startswith("hydra/"):
            continue
        path = next((f / group / f"{option}.yaml" for f in folders if (f / group / f"{option}.yaml").is_file()), None)
        if path is not None:
            read.append((path, tuple(package.split(".")) if package else group_package(path, group), model))
    return read


def _text(kind: object) -> bool:
    """Whether a setting of schema type ``kind`` takes text and no yes/no (``str``, ``Optional[str]``)."""
    return kind is str or (str in typing.get_args(kind) and bool not in typing.get_args(kind))


def _suspect(path: Path, folder: Path) -> bool:
    """Whether ``path`` (a file under ``folder``) may hold a word refused below, judged without composing: a yes/no
    word, or a bare true/false in a setting typed as text where the file's group or package header puts it (the
    ``conf/*.yaml`` files' many ``plot: true`` compose nothing)."""
    words = yes_no_words(path)
    if any(not BOOL_WORDS.fullmatch(word) for _, word, _, _ in words):
        return True
    package = file_package(path, folder)
    model = path.stem if package[:1] == ("model",) else None  # conf/model/<name>.yaml: that model's schema
    return any(_text(field_type((*package, *keys), model))
               for keys, word, _, _ in words if word not in ("True", "False"))  # those read as written


def yes_no_word_problem(command: CommandLine) -> str | None:
    """A yes/no word that a config file the command reads sets (``conf/eval/my_eval.yaml, line 3: plot: yes ...;
    write plot: true there``), or a null that Hydra's setting cannot take (``hydra_null_problem``); None where none
    does.

    Parameters
    ----------
    command : CommandLine
        The parsed command line (its search path says which folders hold config files).

    Returns
    -------
    str or None
        One line naming the file, line, setting, how it is read and the fix.
    """
    folders = [CONF] + [Path(p[len("file://"):]) for p in command.search_paths if p.startswith("file://")]
    files = [(p, f) for f in folders if f.is_dir() for depth in ("*.yaml", "*/*.yaml", "*/*/*.yaml")
             for p in f.glob(depth) if p.is_file()]
    if null := null_read_problem(command, files):
        return null
    if not any(_suspect(p, f) for p, f in files):
        return None  # the common case: nothing composed
    for path, package, model in _read_files(command):
        for keys, word, line, bare in yes_no_words(path):
            full = (*package, *keys)
            kind = field_type(full, model)
            flag = kind is bool or bool in typing.get_args(kind)
            if BOOL_WORDS.fullmatch(word):  # YAML's own true/false: right for a yes/no, 'True' in a text setting
                read = str(word.lower() == "true")  # Python's spelling, what a text setting gets
                if _text(kind) and read != word:  # 'True' written is 'True' read: nothing to refuse
                    return (f"{path}, line {line}: {keys[-1]}: {word} ({'.'.join(full)}) is YAML's "
                            f"{word.lower()}, which this text setting takes as {read!r} (Python's spelling), not "
                            f"the text {word!r}; write {keys[-1]}: '{word}' there for the text")
                continue
            if full[0] == "hydra" and (flag or kind is None):
                continue  # Hydra's yes/no (hydra.job.chdir=no on the command line: false too), or a plugin's to type
            if not flag and not (bare and YAML_WORDS.fullmatch(word)):
                continue  # text: a quoted 'yes' stays text, as y/n do
            meant = "true" if word.lower() in TRUE_WORDS else "false"
            said = f"{path}, line {line}: {keys[-1]}: {word} ({'.'.join(full)}) is a yes/no word"
            if flag:
                return (f"{said}, read as {meant}, which the command line refuses ({'.'.join(full)}={word}); "
                        f"write {keys[-1]}: {meant} there")
            # a text setting takes the word quoted (its true/false is refused too); one no schema types: either
            either = f"{keys[-1]}: {meant} there for a yes/no, or " if kind is None else ""
            return (f"{said}, which YAML reads as {meant}, not the text {word!r} the command line gives "
                    f"({'.'.join(full)}={word}); write {either}{keys[-1]}: '{word}'{'' if either else ' there'} for "
                    "the text")
    return None

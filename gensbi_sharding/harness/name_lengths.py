"""``long_name_problem``: a file or folder name on the command line longer than the file system takes.

The checks look such names up (``conf/mesh/<option>.yaml``, ``--config-path``'s folder, a search path's), and Python's
``Path.is_file`` raises on a name too long instead of answering no: ``mesh=<300 characters>`` ended in an
``OSError: [Errno 36] File name too long`` traceback; ``hydra.run.dir=<300 characters>`` passed every check and ended
in Hydra's as it made the folder. Refused here first, in one line naming the value. Pure Python: no JAX.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from gensbi_sharding.harness.override_grammar import CommandLine, parse
from gensbi_sharding.harness.search_path import hydra_flag_values

__all__ = ["PATH_KEYS", "long_name_problem"]

#: Settings whose value is a file or folder name (a group's option is one too: ``conf/<group>/<option>.yaml``).
PATH_KEYS = ("hydra.run.dir", "hydra.sweep.dir", "hydra.sweep.subdir", "hydra.searchpath", "train.resume")
#: A value each of ``PATH_KEYS`` that names a folder takes, to show in the fix.
_EXAMPLES = {"hydra.run.dir": "outputs/my_run", "hydra.sweep.dir": "multirun/my_sweep"}
#: Hydra's flags whose value is a file or folder name: the flag as said, its short and long spelling.
_PATH_FLAGS = (("--config-dir", "-cd", "--config-dir"), ("--config-path", "-cp", "--config-path"),
               ("--config-name", "-cn", "--config-name"))


def _shown(text: str, most: int = 60) -> str:
    """``text``, cut to its first ``most`` characters and "..." where longer: a refusal stays a line."""
    return text if len(text) <= most else f"{text[:most]}..."


def _limits() -> tuple[int, int]:
    """The longest file name and path the file system here takes, in bytes (POSIX's usual 255 and 4096 if unsaid)."""
    try:
        return os.pathconf(".", "PC_NAME_MAX"), os.pathconf(".", "PC_PATH_MAX")
    except (AttributeError, OSError, ValueError):  # no pathconf (Windows), or a limit the system does not say
        return 255, 4096


def _too_long(text: str, name_max: int, path_max: int) -> str | None:
    """Why ``text`` can name no file or folder here (a part longer than ``name_max`` bytes, or the whole longer than
    ``path_max``); None where it can."""
    text = text.removeprefix("file://")
    if len(size := os.fsencode(text)) >= path_max:
        return f"a path of {len(size)} bytes, longer than a path can be here ({path_max - 1})"
    part = max(text.split("/"), key=lambda p: len(os.fsencode(p)))
    if len(os.fsencode(part)) > name_max:
        return (f"its name {_shown(part, 24)} is {len(os.fsencode(part))} bytes, longer than a file or folder name "
                f"can be here ({name_max})")
    return None


def long_name_problem(args: Sequence[str] | CommandLine) -> str | None:
    """The one-line refusal of the first file or folder name too long for the file system: a group's option
    (``mesh=<300 characters>``, looked up as ``conf/mesh/<option>.yaml``), a value of ``PATH_KEYS``, or the value of
    ``--config-dir``, ``--config-path`` or ``--config-name``; None when there is none.

    Parameters
    ----------
    args : sequence of str or CommandLine
        The command line after the program name (``sys.argv[1:]``).

    Returns
    -------
    str or None
        E.g. ``"mesh=xxx...: its name xxx... is 300 bytes, longer than a file or folder name can be here (255), so no
        mesh option has it; python launch.py --help lists the options"``.
    """
    command, (name_max, path_max) = parse(args), _limits()
    for said, short, long in _PATH_FLAGS:
        for value in hydra_flag_values(command.args, short, long):
            if why := _too_long(value, name_max, path_max):
                return f"{said} {_shown(value)}: {why}; give a shorter one, or leave {said} out"
    for o in command.parsed:
        group = "." not in o.key and o.hydra.package is None  # mesh=, hydra/launcher=: conf/<group>/<option>.yaml
        if not group and o.key not in PATH_KEYS:
            continue
        values = o.values() or [o.hydra.value()]  # [] for a glob; a list for hydra.searchpath
        for value in (v for item in values for v in (item if isinstance(item, list) else [item])):
            if isinstance(value, str) and (why := _too_long(value, name_max, path_max)):
                fix = (f", so no {o.key} option has it; leave {o.key}= out" if group and "/" in o.key else
                       f", so no {o.key} option has it; python launch.py --help lists the options" if group else
                       f"; give a shorter one, e.g. {o.key}={_EXAMPLES[o.key]}" if o.key in _EXAMPLES else
                       "; give a shorter one")
                return f"{_shown(o.arg)}: {why}{fix}"
    return None

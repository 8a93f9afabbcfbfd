"""One line for a check of ours that crashed (a fault of this package, not of the command) and what follows: a
warning where the command goes on without the check, an error and exit 1 where going on could cost the user's files.

Below ``preflight`` (Hydra's callback, whose checks it reports) and ``folder_verdict`` (process 0's crashed check of
the folder, told to the others): ``folder_verdict`` reading ``folder_check_crashed`` from ``preflight`` reached every
check ``preflight`` runs (``sweep_check``, ``hydra_room``, ...) through it, an import cycle.
"""

from __future__ import annotations

import sys
import traceback
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from gensbi_sharding.harness.console import tagged
from gensbi_sharding.harness.outputs import room_fix
from gensbi_sharding.harness.stop_record import DISK_REFUSALS

__all__ = ["check_crashed", "folder_check_crashed"]


def check_crashed(check: str, err: BaseException, config: Any, *, then: str, stop: bool = False) -> None:
    """Say in one line that a check of ours crashed (a fault of this package, not of the command) and what follows.

    Hydra turns an exception raised by a callback into a UserWarning quoting its own source line, and goes on: the
    check then passed unsaid. Here it is one ``[WARNING]`` line (the run goes on without the check), or with
    ``stop`` one ``[ERROR]`` line and ``SystemExit(1)`` (going on could cost the user's files).

    Parameters
    ----------
    check : str
        The check, as the line names it ("the pre-sweep check of every job's config").
    err : BaseException
        What it raised: its type and the first line of its message are named.
    config : DictConfig
        The command's config: with ``debug=true`` the check's traceback is printed too.
    then : str
        What happens instead.
    stop : bool
        Whether the command stops here.
    """
    reason = next(iter(str(err).strip().splitlines()), "")
    print(tagged("ERROR" if stop else "WARNING",
                 f"{check} could not run ({type(err).__name__}{': ' + reason if reason else ''}; a fault of "
                 f"gensbi_sharding's own, not of this command): {then} (debug=true prints the check's traceback)"),
          file=sys.stderr, flush=True)
    if OmegaConf.select(config, "debug", default=False):
        traceback.print_exc()
    if stop:
        raise SystemExit(1)


def folder_check_crashed(folder: Path, err: BaseException, config: Any) -> None:
    """The check of an output folder before Hydra writes into it crashed: stop if the folder holds files.

    Hydra writes ``.hydra/`` and the job's log into it next: a completed run's record of its command would be
    replaced by this one's (the check is what refuses such a folder). A folder that is new or empty has nothing to
    lose: the run goes on, and ``run`` checks the folder again before it writes anything of its own.

    Parameters
    ----------
    folder : pathlib.Path
        ``hydra.run.dir``, or a sweep's ``hydra.sweep.dir``.
    err : BaseException
        What the check raised.
    config : DictConfig
        The command's config (``debug``).
    """
    # A full or read-only disk is not a fault of ours, and "give a new hydra.run.dir" would be wrong for the resume of
    # a run there whose disk is still full: its checkpoint, in that folder, is what the resume continues.
    if isinstance(err, OSError) and err.errno in DISK_REFUSALS:
        print(tagged("ERROR", f"{err.filename2 or err.filename or folder} could not be written ({err.strerror}) as "
                     f"{folder} was checked before Hydra writes into it: its files are as they were; {room_fix(err)}, "
                     "then run the same command again"), file=sys.stderr, flush=True)
        raise SystemExit(1)
    held = folder.is_dir() and any(folder.iterdir())
    then = (f"stopped before Hydra writes into {folder}, which holds files (an earlier run's?) it would overwrite; "
            "give a new hydra.run.dir (or hydra.sweep.dir)" if held else
            f"{folder} is new, so nothing in it can be lost: the run goes on, and checks it again before writing")
    check_crashed(f"the check of {folder} before Hydra writes into it", err, config, then=then, stop=held)

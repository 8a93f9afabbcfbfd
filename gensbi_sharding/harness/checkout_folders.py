"""Output folders a run (a sweep) never writes into: a checkout's ``conf/`` (``config_folder_problem``) and a
checkout's own folder (``checkout_folder_problem``).

They name the fix as a ``hydra.run.dir=`` override Hydra reads back (``override_grammar.hydra_override``); living
above ``paste_command`` (whose ``CHECKOUT`` they read through the module, as tests replace it), they keep
``paste_command``, which ``groups`` imports, from importing ``override_grammar``, which imports ``groups``. Pure
Python: no JAX.
"""

from __future__ import annotations

import os
from pathlib import Path

from gensbi_sharding.harness import paste_command
from gensbi_sharding.harness.python_words import setting  # launch.py's override, or a Python caller's setting

__all__ = ["config_folder_problem", "checkout_folder_problem"]


def config_folder_problem(folder: Path, named: str, key: str) -> str | None:
    """Why ``folder`` (absolute), an output folder, cannot lie in a checkout's ``conf/`` (this one's, or another's:
    a ``conf/config.yaml`` beside a ``launch.py``); None where it does not.

    Hydra reads every folder there as a config group: a run written into ``conf`` (or ``conf/rule``) left its
    ``.hydra/`` files listed as options by ``launch.py --help`` (``.hydra: config, hydra, overrides``), its outputs
    beside the presets. ``named``: the override as typed (``hydra.run.dir=...``); ``key``: its key.
    """
    if (folder / "launch.py").is_file() and (folder / "conf" / "config.yaml").is_file():  # the checkout itself
        return checkout_folder_problem(folder, named, key)
    real = Path(os.path.realpath(folder))
    conf = next((p for p in (real, *real.parents) if p == paste_command.CHECKOUT / "conf" or p.name == "conf"
                 and (p / "config.yaml").is_file() and (p.parent / "launch.py").is_file()), None)
    if conf is None:
        return None
    top = "multirun" if key == "hydra.sweep.dir" else "outputs"
    return (f"{named} lies inside the harness's config folder {conf}, whose every folder Hydra reads as a config "
            f"group: outputs never go there; choose a folder outside it, e.g. "
            f"{setting(key, f'{top}/{folder.name}', typed=f'{key}={top}/{folder.name}')}")


def checkout_folder_problem(folder: Path, named: str, key: str) -> str:
    """The refusal of a checkout's own folder (``launch.py`` and ``conf/config.yaml`` there) as an output folder:
    its run's ``.hydra/`` and ``metrics.json`` (a sweep's ``multirun.yaml``) would make the checkout a run's (a
    sweep's) folder, inside which every later default run under ``outputs/`` (sweep under ``multirun/``) is refused."""

    sweep = key == "hydra.sweep.dir"
    what, top, files = ("sweep", "multirun", "its multirun.yaml and job folders") if sweep else (
        "run", "outputs", "its outputs")
    instead = setting(key, folder / top / ("new_sweep" if sweep else "new_run"))
    return (f"{named} is a checkout of the harness (launch.py, conf/): a {what} never writes {files} among its "
            f"files, where every later {what} under {top}/ would lie inside it; choose a new folder, e.g. {instead}")

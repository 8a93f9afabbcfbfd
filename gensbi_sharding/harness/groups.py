"""The config groups a user picks options from (``model=mlp``), and what Hydra chose for this job.

``conf/<group>/<option>.yaml`` makes an option; a few groups are the harness's own plumbing
(``INTERNAL_GROUPS``: ``experiment_model``, which ``conf/config.yaml`` selects by itself from
``experiment`` and ``model``) and are no user option, so ``--help`` leaves them out as it
leaves out the typed schemas (those are stored outside every group).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Sequence
from pathlib import Path

__all__ = ["INTERNAL_GROUPS", "CONF", "group_options", "option_groups_text", "chosen_options", "preset_is_multirun",
           "chosen_default"]

#: Groups no user picks from (not listed by ``--help``).
INTERNAL_GROUPS = ("experiment_model",)
#: The repository's config folder (launch.py's ``config_path``), read when Hydra is not running.
CONF = Path(__file__).resolve().parents[2] / "conf"


def _loader():
    """Hydra's config loader of the running app (its whole search path), or None outside Hydra."""
    from hydra.core.global_hydra import GlobalHydra

    return GlobalHydra.instance().config_loader() if GlobalHydra.instance().is_initialized() else None


def group_options(group: str) -> list[str]:
    """The options of ``group`` (``model`` -> ``["flux1", "mlp", ...]``), sorted; [] for no such group."""
    loader = _loader()
    if loader is not None:
        from hydra.core.object_type import ObjectType

        return sorted(loader.get_group_options(group, ObjectType.CONFIG))
    folder = CONF / group
    try:
        changed = folder.stat().st_mtime_ns  # a file made, removed or renamed there changes it
    except OSError:
        return []
    if time.time_ns() - changed < 2 * 10**9:  # changed just now: a second change may keep its coarse time, read it
        return sorted(p.stem for p in folder.glob("*.yaml"))
    return list(_yaml_stems(folder, changed))


@functools.lru_cache(maxsize=64)
def _yaml_stems(folder: Path, changed: int) -> tuple[str, ...]:
    """The ``*.yaml`` names in ``folder`` as it was at modification time ``changed``, sorted: read once per
    version (the command checks ask thousands of times in a test session, ~0.3 ms a read)."""
    return tuple(sorted(p.stem for p in folder.glob("*.yaml")))


def chosen_default(group: str) -> str | None:
    """The option ``conf/config.yaml``'s defaults list picks for ``group`` (``model`` -> ``mlp``); None for none."""
    from omegaconf import OmegaConf

    entries = OmegaConf.to_container(OmegaConf.load(CONF / "config.yaml")).get("defaults", [])
    return next((str(e[group]) for e in entries if isinstance(e, dict) and e.get(group) is not None), None)


def preset_is_multirun(group: str, option: str, search_paths: Sequence[str] = ()) -> bool:
    """Whether the preset ``group=option`` (``experiment=sbibm``) turns multirun on itself (its file sets
    ``hydra.mode: MULTIRUN``, as ``conf/experiment/sbibm.yaml`` does); True where its file cannot be read (not
    found, a ``pkg://`` search path, a defaults list naming another preset), so a check that relies on it stays
    on the safe side.
    """
    from omegaconf import OmegaConf

    folders = [CONF] + [Path(e[len("file://"):]) for e in search_paths if e.startswith("file://")]
    files = [f / group / f"{option}.yaml" for f in folders if (f / group / f"{option}.yaml").is_file()]
    if not files or len(folders) <= len(search_paths):  # not found, or a pkg:// path may hold it
        return True
    preset = OmegaConf.load(files[-1])  # a later search path's file wins, as Hydra reads them
    entries = [next(iter(d)) if OmegaConf.is_dict(d) else str(d) for d in OmegaConf.select(preset, "defaults") or []]
    nested = [e for e in entries if e != "_self_" and (not e.startswith("override /")  # another preset's file
                                                       or e.split("/", 1)[1].startswith(("sweep", "experiment",
                                                                                         "hydra")))]
    return nested != [] or str(OmegaConf.select(preset, "hydra.mode", default="")).upper() == "MULTIRUN"


def _groups(parent: str = "") -> list[str]:
    """Every group with options under ``parent``, nested ones as ``a/b`` (as Hydra's help walks them)."""
    loader = _loader()
    if loader is None:
        base = CONF / parent
        children = sorted(p.name for p in base.iterdir() if p.is_dir()) if base.is_dir() else []
    else:
        children = loader.list_groups(parent)
    found = []
    for child in children:
        name = f"{parent}/{child}" if parent else child
        if group_options(name):
            found.append(name)
        found += _groups(name)
    return found


def option_groups_text() -> str:
    """``--help``'s list of groups, ``group: option, option`` a line, without Hydra's and the internal ones.

    Hydra's ``$APP_CONFIG_GROUPS`` lists every group, so ``conf/config.yaml``'s help template
    uses this instead (as the OmegaConf resolver ``gensbi_option_groups``).
    """
    def internal(group: str) -> bool:
        top = group.split("/")[0]
        return top == "hydra" or top in INTERNAL_GROUPS

    return "".join(f"{g}: {', '.join(group_options(g))}\n" for g in sorted(_groups()) if not internal(g))


def chosen_options() -> dict[str, str]:
    """The option Hydra chose for each group of this job (``{"model": "mlp", ...}``); {} outside Hydra."""
    from hydra.core.hydra_config import HydraConfig

    if not HydraConfig.initialized():
        return {}
    return {group: option for group, option in HydraConfig.get().runtime.choices.items() if option is not None}

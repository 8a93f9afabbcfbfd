"""The overrides that give a run's checkpoint its own settings, read from the config saved with the checkpoint.

A stopped run's folder whose Hydra record (``.hydra/overrides.yaml``) is missing or unreadable still holds, in each
checkpoint, the whole config that saved it. The advice that continues it there compares the typed command with that
config (not "rerun with train.resume=auto" whatever was typed: ``seed=1`` over a seed-0 run would continue the seed-0
weights on seed 1's held-out pairs and draws).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["continue_settings", "saved_settings_overrides", "lacked_settings", "dotted_leaves", "composed_leaves",
           "FREE_KEYS"]

#: Keys a continued run may set as it likes (the step to reach, where from): never compared.
FREE_KEYS = ("train.steps", "train.resume")
#: A section's field that names its group's option (``model=mlp``): set by that choice first, then leaf by leaf.
_CHOICE = {"model": "name", "data": "name", "rule": "name", "mesh": "spec", "activation": "strategy",
           "distributed": "mode"}


def saved_settings_overrides(run_dir: Any, overrides: Sequence[str]) -> list[str] | None:
    """``overrides`` with each setting that differs from the config saved with ``run_dir``'s newest checkpoint
    replaced by the saved value (a group's option first, e.g. ``model=transformer``, then ``key=value``), checked to
    compose to that config (``train.steps`` and ``train.resume`` aside); None where no checkpoint's config can be
    read or no command composes to it.

    Parameters
    ----------
    run_dir : path-like
        The run's folder (``<run_dir>/checkpoints/<step>``).
    overrides : sequence of str
        The command's overrides as typed (Hydra's ``overrides.task``).

    Returns
    -------
    list of str or None
        ``overrides`` itself where it already composes to the saved settings.
    """
    return _fixed(_compared(run_dir, overrides))


def lacked_settings(run_dir: Any, overrides: Sequence[str]) -> str | None:
    """What the config saved with ``run_dir``'s newest checkpoint holds that ``overrides`` composes no setting for,
    and the fix, in words (e.g. its own model's fields, its search path not typed); None where nothing is lacked or
    nothing can be read.

    Parameters
    ----------
    run_dir : path-like
        The run's folder (``<run_dir>/checkpoints/<step>``).
    overrides : sequence of str
        The command's overrides as typed.

    Returns
    -------
    str or None
        E.g. ``"model=gated from a config folder of its own, which this command does not search (its checkpoint's
        config holds model.hidden=64, which nothing this command composes sets): add the hydra.searchpath=[file://...]
        that holds model/gated.yaml, model=gated and train.resume=auto"``.
    """
    return _lacked_words(_compared(run_dir, overrides))


def continue_settings(run_dir: Any, overrides: Sequence[str]) -> tuple[str | None, list[str] | None]:
    """``lacked_settings`` and, where it finds nothing lacked, ``saved_settings_overrides``, from one read of the
    checkpoint and one composition of each command: the advice that continues a run whose record is lost asks both.

    Parameters
    ----------
    run_dir : path-like
        The run's folder (``<run_dir>/checkpoints/<step>``).
    overrides : sequence of str
        The command's overrides as typed.

    Returns
    -------
    tuple of (str or None, list of str or None)
        What is lacked, in words (then no overrides: None), and the overrides that give the saved settings.
    """
    compared = _compared(run_dir, overrides)
    lacked = _lacked_words(compared)
    return lacked, None if lacked is not None else _fixed(compared)


def _lacked_words(compared: tuple) -> str | None:
    """``lacked_settings`` of a ``_compared``."""
    saved, _, now = compared
    if not saved or now is None or not (lacked := _lacked(saved, now)):
        return None
    held = ", ".join(f"{k}={_literal(saved[k])}" for k in lacked[:3]) + (", ..." if len(lacked) > 3 else "")
    section = lacked[0].split(".")[0]
    option = saved.get(f"{section}.{_CHOICE[section]}") if section in _CHOICE else None
    if not isinstance(option, str):  # a key of a preset of one's own: no group option to name
        return (f"settings this command does not compose (its checkpoint's config holds {held}, which nothing this "
                "command composes sets): add the preset and the hydra.searchpath=[file://...] it was launched with, "
                "and train.resume=auto")
    if _has_option(section, option):  # conf/'s own option lacks a field it saved: another version of the harness
        return (f"the settings it saved, which this version's {section}={option} lacks ({held}, in its checkpoint's "
                "config): continue it with the version of gensbi_sharding that saved it")
    return (f"{section}={option} from a config folder of its own, which this command does not search (its checkpoint's "
            f"config holds {held}, which nothing this command composes sets): add the hydra.searchpath=[file://...] "
            f"that holds {section}/{option}.yaml, {section}={option} and train.resume=auto")


def _fixed(compared: tuple) -> list[str] | None:
    """``saved_settings_overrides`` of a ``_compared``."""
    saved, fixed, now = compared
    if not saved or now is None:
        return None
    differ = [k for k, v in saved.items() if k in now and now[k] != v and k not in FREE_KEYS]
    fixed = [*(o for o in fixed if _key(o) not in differ), *(f"{k}={_literal(saved[k])}" for k in differ)]
    if differ and ((now := _composed(fixed)) is None
                   or any(k in now and now[k] != v for k, v in saved.items() if k not in FREE_KEYS)):
        return None
    if _lacked(saved, now):  # compared: pasted, the run's own model's fields would be others
        return None
    return fixed


def _compared(run_dir: Any, overrides: Sequence[str]) -> tuple[dict[str, Any] | None, list[str], dict[str, Any] | None]:
    """The saved config's leaves (one checkpoint read), ``overrides`` with its groups' saved options, and what those
    compose to: both public functions' start. Compared with conf/'s option it saved (with the typed one's, a run of
    model=transformer continued by a command without it would be told "this version's model=transformer lacks
    (model.embed=32, ...)", a field it has)."""
    saved = _saved(run_dir)
    if not saved or (now := _composed(overrides)) is None:
        return saved, list(overrides), None
    return (saved, *_with_saved_options(saved, overrides, now))


def _with_saved_options(saved: dict[str, Any], overrides: Sequence[str],
                        now: dict[str, Any]) -> tuple[list[str], dict[str, Any] | None]:
    """``overrides`` with each group's option ``saved`` names from conf/ in place of the one ``now`` composed (its
    leaves follow it), and what that composes to (None where nothing)."""
    fixed = list(overrides)
    for section, field in _CHOICE.items():
        key, option = f"{section}.{field}", saved.get(f"{section}.{field}")
        if key in now and now[key] != option and isinstance(option, str) and _has_option(section, option):
            fixed = [*_without(fixed, section), f"{section}={option}"]
    return fixed, (now if fixed == list(overrides) else _composed(fixed))


def _lacked(saved: dict[str, Any], now: dict[str, Any]) -> list[str]:
    """The saved keys of a section ``now`` has (``model.hidden``) that ``now`` lacks; a top-level key a caller
    added to the config (a test's ``output_dir``) is none."""
    sections = {k.split(".")[0] for k in now if "." in k}
    return [k for k in saved if k not in now and k not in FREE_KEYS and k.split(".")[0] in sections and "." in k]


def _saved(run_dir: Any) -> dict[str, Any] | None:
    """The leaves of the config saved with ``run_dir``'s newest checkpoint; None where there is none to read."""
    from gensbi_sharding.harness.launch_record import step_folder_names

    steps = step_folder_names(Path(run_dir))
    if not steps:
        return None
    from gensbi_sharding.checkpoint import saved_config
    from gensbi_sharding.harness.launch_record import quiet_absl

    try:
        with quiet_absl():  # Orbax's info line "Read Metadata={...}" (kept off the refusal's one line)
            return dotted_leaves(saved_config(Path(run_dir) / "checkpoints" / str(steps[-1])))
    except (OSError, ValueError, TypeError):  # FileNotFoundError too: a damaged step says nothing here
        return None


def _literal(value: Any) -> str:
    """``value`` as typed after ``key=``, a text quoted where Hydra's grammar would read it otherwise (bare,
    ``[fe80::1]:1234`` or ``a,b`` compose to nothing and no command is offered; ``'true'`` reads back a bool)."""
    from gensbi_sharding.harness.hints import override_literal
    from gensbi_sharding.harness.override_grammar import hydra_value

    if isinstance(value, (list, tuple)):
        return "[" + ",".join(map(_literal, value)) + "]"
    return hydra_value(value) if isinstance(value, str) and value else override_literal(value)


def _key(override: str) -> str:
    """The key an override sets (``+``/``++``/``~`` prefixes dropped)."""
    return override.split("=", 1)[0].lstrip("+~")


def _without(overrides: Sequence[str], section: str) -> list[str]:
    """``overrides`` less the choice of group ``section`` and its keys (the saved option and its values replace
    them)."""
    return [o for o in overrides if _key(o) != section and not _key(o).startswith(section + ".")]


def _has_option(section: str, option: str) -> bool:
    """Whether ``conf/<section>/<option>.yaml`` exists (a preset of one's own search path: set leaf by leaf)."""
    from gensbi_sharding.harness.groups import CONF

    return (Path(CONF) / section / f"{option}.yaml").is_file()


def dotted_leaves(tree: Any, prefix: str = "") -> dict[str, Any]:
    """Every leaf of a nested dict by its dotted key: ``{"model.width": 32, ...}`` (lists are leaves).

    Parameters
    ----------
    tree : Any
        A plain container (``OmegaConf.to_container``'s); anything but a dict is one leaf.
    prefix : str
        The dotted key of ``tree`` itself ("" at the top).

    Returns
    -------
    dict of str to Any
        The leaves; a saved config's and a composed one's compare key by key (``checkpoint_settings``,
        ``saving_record``, its one source).
    """
    if not isinstance(tree, dict):
        return {prefix: tree} if prefix else {}
    out: dict[str, Any] = {}
    for name, value in tree.items():
        out.update(dotted_leaves(value, f"{prefix}.{name}" if prefix else str(name)))
    return out


def composed_leaves(overrides: Sequence[str], *, resolve: bool,
                    config_name: str | None = None) -> dict[str, Any] | None:
    """The leaves of the config ``overrides`` compose to now, Hydra's section aside: inside Hydra's app as it runs
    (its search path), else from ``conf/``. One helper for ``saved_settings_overrides``' comparisons and
    ``saving_record.as_it_ran``'s, so the two cannot differ in resolving or the config name.

    Parameters
    ----------
    overrides : sequence of str
        Overrides as typed or recorded; ``hydra.*`` ones left out but ``hydra.searchpath=`` (where a preset of one's
        own is found: was, dropped with the others, so 'hydra.searchpath=[file://my_conf] model=small seed=1'
        composed to nothing).
    resolve : bool
        Whether interpolations are resolved (a checkpoint's saved config is; Hydra's ``config.yaml`` record is not).
    config_name : str, optional
        The primary config; by default the running app's (``launch.py -cn mine``'s), else ``config``.

    Returns
    -------
    dict of str to Any or None
        ``dotted_leaves`` of the config; None where it does not compose, or a ``--config-*`` flag names another
        primary config (a hint is worth no failure).
    """
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import OmegaConf

    from gensbi_sharding.harness.config import register_configs
    from gensbi_sharding.harness.groups import CONF
    from gensbi_sharding.harness.sweep_hints import SEARCH_PATH

    if any(o.startswith("--config-") for o in overrides):  # another primary config: not composed here
        return None
    register_configs()
    if config_name is None and HydraConfig.initialized():
        config_name = OmegaConf.select(HydraConfig.get(), "job.config_name", default=None)
    task = [o for o in overrides if not _key(o).startswith("hydra.") or _key(o) + "=" == SEARCH_PATH]
    try:
        if GlobalHydra.instance().is_initialized():
            cfg = compose(config_name or "config", overrides=task)
        else:
            with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
                cfg = compose("config", overrides=task)
        tree = OmegaConf.to_container(cfg, resolve=resolve)
    except Exception:  # noqa: BLE001 - any composition failure: no command is offered from it
        return None
    tree.pop("hydra", None)
    return dotted_leaves(tree)


def _composed(overrides: Sequence[str]) -> dict[str, Any] | None:
    """``composed_leaves`` resolved, in the running app's config (a checkpoint saved its config resolved)."""
    return composed_leaves(overrides, resolve=True)

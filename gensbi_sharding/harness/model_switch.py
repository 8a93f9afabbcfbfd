"""The resume's words for a checkpoint of another model section than this run's (``model_overrides``): the saved
sizes to add, or the preset the saving run chose that gives them; for another model, the model to choose and the saved
sizes that choice leaves differing, in one refusal (not only ``model=flux1``, whose sizes the resume would refuse in a
second try, ``add model.num_heads=3``). Moved from ``resume``, which imported this module back (an import cycle)."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from gensbi_sharding.harness.hints import override_literal
from gensbi_sharding.harness.python_words import fix_said
from gensbi_sharding.harness.saving_record import saving_overrides

__all__ = ["model_overrides", "switched_model_fix", "FREE_MODEL_FIELDS"]


#: Model fields a resumed run may change: how it is built and the compute dtype. Every other one decides what
#: the saved weights compute, even where all shapes fit (Flux1's rope base, or the heads one width is cut into).
FREE_MODEL_FIELDS = ("init", "dtype")


def model_overrides(step_dir: Path, model_cfg: DictConfig, command: list[str] | None = None,
                    also: list[str] | tuple = ()) -> str:
    """"the checkpoint was saved with model.width=128 (this run: model.width=32): add ...".

    When the saved sizes come from a preset the saving run chose and this one did not (``experiment=quick``),
    the preset leads: "saved under experiment=quick, which gives model.width=32 model.depth=1 (this run: ...):
    add experiment=quick (or model.width=32 model.depth=1)", with the values this run types over it added.
    ``command``: this run's overrides (Hydra's ``overrides.task``; None: read from Hydra, and no preset named
    outside a Hydra app). ``also``: other overrides the resume needs (``data.theta_transform=support``), added to
    each fix named, so that one refusal names them all.
    """
    from gensbi_sharding.checkpoint import saved_config

    saved = saved_config(step_dir).get("model") or {}
    now = OmegaConf.to_container(model_cfg, resolve=True)
    if saved.get("name", now.get("name")) != now.get("name"):  # the model, and the sizes it leaves differing
        return switched_model_fix(step_dir, saved, now.get("name"), command, list(also))
    differ = {k: v for k, v in saved.items() if k not in FREE_MODEL_FIELDS and now.get(k) != v}
    if not differ:
        return ""
    typed = lambda keys: [f"model.{k}={override_literal(differ[k])}" for k in keys]  # noqa: E731
    fix, this = " ".join(typed(differ)), " ".join(f"model.{k}={override_literal(now.get(k))}" for k in differ)
    presets, rest, searched, steps = _presets_giving(step_dir, differ, command)
    if not presets:  # the fix as data, said in the caller's words (python_words.fix_said)
        return f"the checkpoint was saved with {fix} (this run: {this}): {fix_said([*typed(differ), *also])}. "
    # A preset's train.steps short of the checkpoint's step: was refused in turn, a second try ("is at step 40,
    # beyond train.steps=20"); its step evaluates it. The rest: this run types other values of them, which win over
    # the preset (model.width=64).
    short = [f"train.steps={step_dir.name}"] if steps is not None and str(steps).isdigit() and \
        step_dir.name.isdigit() and int(steps) < int(step_dir.name) else []
    added = dict.fromkeys([*searched, *presets, *typed(rest), *short, *also])  # each once
    return (f"the checkpoint was saved under {' '.join(presets)}{' with' if rest else ', which gives'} {fix} "
            f"(this run: {this}): {fix_said(list(added))} (or {fix_said([*typed(differ), *also], lead='')}). ")


def switched_model_fix(step_dir: Path, saved: dict[str, Any], name: str, command: list[str] | None,
                       more: list[str]) -> str:
    """The resume's words for a checkpoint of another model: the model to choose, the sizes it leaves differing.

    Parameters
    ----------
    step_dir : Path
        The checkpoint's step folder.
    saved : dict
        The checkpoint's saved ``model`` section.
    name : str
        This run's model.
    command : list of str or None
        This run's overrides (None: read from Hydra; outside a Hydra app, no sizes are named). Its ``model.*`` ones
        are left out of the composition: they set fields of this run's model, not the saved one's.
    more : list of str
        Other overrides the resume needs (``data.theta_transform=support``), added to the fix.

    Returns
    -------
    str
        E.g. ``"the checkpoint holds model=flux1 (this run: model=mlp): add model=flux1 model.num_heads=3. "``.
    """
    choice = saved_model_choice(step_dir, saved["name"])  # shell words: a search path quoted
    if command is None:
        from hydra.core.hydra_config import HydraConfig

        command = [str(o) for o in HydraConfig.get().overrides.task] if HydraConfig.initialized() else None
    kept = [o for o in command or () if not o.startswith(("hydra.", "train.resume="))
            and o.split("=", 1)[0].lstrip("+~").split(".")[0] != "model"]
    chosen = [shlex.split(word)[0] for word in choice]
    sections = None if command is None else composed_sections(tuple([*kept, *chosen]))
    sizes = [] if sections is None else [f"model.{k}={override_literal(v)}" for k, v in saved.items()
                                         if k not in (*FREE_MODEL_FIELDS, "name") and sections["model"].get(k) != v]
    return f"the checkpoint holds model={saved['name']} (this run: model={name}): " \
        f"{fix_said([*choice, *sizes, *more])}. "


def saved_model_choice(step_dir: Path, name: str) -> list[str]:
    """``[model=<name>]``; or the preset of one's own the saving run chose for it, with the search path that finds it
    as shell words (``["'hydra.searchpath=[file://.../my_conf]'", "model=my_flux1"]``; was ``model=flux1``, whose
    sizes were refused next)."""
    from hydra.core.hydra_config import HydraConfig

    from gensbi_sharding.harness.sweep_hints import search_path_of

    searched, overrides = saving_overrides(step_dir) or ([], [])
    picked = [o for o in overrides if o.split("=", 1)[0] == "model"][-1:]
    if not picked or picked[0] == f"model={name}":
        return [f"model={name}"]
    this = search_path_of(HydraConfig.get().overrides.hydra) if HydraConfig.initialized() else []
    return [*(shlex.quote(o) for o in searched if o not in this), picked[0]]


def _presets_giving(step_dir: Path, differ: dict[str, Any], command: list[str] | None
                    ) -> tuple[list[str], list[str], list[str], Any]:
    """The group choices of the run that saved ``step_dir`` this run lacks (``experiment=quick``), when added to
    this run's overrides they give some of the saved ``differ`` values, the keys they leave differing, and the
    saving run's search path where this run needs it to find them (shell-quoted), and the ``train.steps`` they give
    (None: unknown); ``([], keys, [], None)`` where none helps or either command is unknown. Checked by composing: a
    value this run types (``model.width=128``) still wins over the preset. Only the choices that give a value are
    named: the saving run's ``rule=tensor`` gives none, and adding it would move a run resumed under ``rule=fsdp``
    back onto the saving run's rule."""
    from gensbi_sharding.harness.override_keys import option_groups
    from gensbi_sharding.harness.sweep_hints import search_path_of

    record, this_search = saving_overrides(step_dir), []
    if command is None:
        from hydra.core.hydra_config import HydraConfig

        command = [str(o) for o in HydraConfig.get().overrides.task] if HydraConfig.initialized() else None
        this_search = search_path_of(HydraConfig.get().overrides.hydra) if HydraConfig.initialized() else []
    if record is None or command is None or any(o.startswith("--config-") for o in record[0]):
        return [], list(differ), [], None  # (its presets in a config folder of its own: not composed here)
    choices = [o for o in record[1] if o not in command and "." not in o.split("=", 1)[0]]  # no group name has one
    groups = set(option_groups()) - {"sweep"} if choices else set()  # a sweep preset chooses no sizes of one job
    presets = [o for o in choices if o.split("=", 1)[0].lstrip("+~") in groups]
    kept = [o for o in command if not o.startswith(("hydra.", "train.resume="))]

    composed: dict[tuple[str, ...], dict | None] = {}  # chosen -> its model and train sections

    def left(chosen: list[str]) -> list[str] | None:  # the keys still differing with ``chosen`` added
        sections = composed[tuple(chosen)] = composed_sections(tuple([*record[0], *kept, *chosen]))
        return None if sections is None else [k for k, v in differ.items() if sections["model"].get(k) != v]

    rest = left(presets) if presets else None
    if rest is None or len(rest) == len(differ):
        return [], list(differ), [], None
    for preset in list(presets):  # drop each choice the others give the same without
        fewer = [p for p in presets if p != preset]
        if fewer and left(fewer) == rest:
            presets = fewer
    searched = [shlex.quote(o) for o in record[0] if o not in this_search]  # composed only if it adds a folder
    found = not searched or composed_sections(tuple([*this_search, *kept, *presets])) is not None  # without it
    return presets, rest, [] if found else searched, composed[tuple(presets)]["train"].get("steps")


def composed_sections(overrides: tuple[str, ...]) -> dict | None:
    """The ``model`` and ``train`` sections ``overrides`` compose to, by name (inside Hydra's app, its config folder
    and primary config, ``--config-name``; else ``conf/config.yaml``)."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.hydra_config import HydraConfig

    from gensbi_sharding.harness.config import register_configs
    from gensbi_sharding.harness.groups import CONF

    register_configs()  # conf/model/*.yaml pull in the schemas it stores
    name = OmegaConf.select(HydraConfig.get(), "job.config_name", default=None) if HydraConfig.initialized() else None
    try:
        if GlobalHydra.instance().is_initialized():
            cfg = compose(name or "config", overrides=list(overrides))
        else:
            with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
                cfg = compose("config", overrides=list(overrides))
        return {section: OmegaConf.to_container(cfg[section], resolve=True) for section in ("model", "train")}
    except Exception:  # a hint is worth no failure: the values themselves are named instead
        return None

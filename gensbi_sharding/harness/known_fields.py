"""Keys added to a typed config section (``+model.dpeth=2``) that its schema does not have, refused with a fix."""

from __future__ import annotations

import dataclasses

from omegaconf import DictConfig, OmegaConf

from gensbi_sharding.harness.config import Config, require
from gensbi_sharding.harness.hints import override_literal
from gensbi_sharding.harness.paste_command import command_for
from gensbi_sharding.harness.refusal import Refusal

__all__ = ["check_known_fields"]


def check_known_fields(cfg: DictConfig) -> None:
    """A key added to a typed section (``+mesh.modle_axis=2``, ``+model.dpeth=2``, as Hydra suggests for a
    typo) that its schema does not have: refused before any simulation. Hydra's ``+`` opens the section,
    so the run went on with the default and a model's factory got the key as a keyword.

    Raises
    ------
    ConfigError
        Naming the key, the setting it likely meant, and the override that drops it.
    """
    from gensbi_sharding.harness.hints import closest_name
    from gensbi_sharding.harness.task_fixed import task_fixed_problem

    top = [f.name for f in dataclasses.fields(Config)]
    for key in (k for k in cfg.keys() if k not in top and k != "output_dir"):  # output_dir: run(cfg)'s folder
        near, value = closest_name(str(key), top), override_literal(OmegaConf.to_container(cfg, resolve=False)[key])
        said, drop = f"{key} is not a setting" + (f" (did you mean {near}?)" if near else ""), f"~{key}={value}"
        require(False, Refusal(said, (drop, f"{near}={value}") if near else drop, how="; ",
                               after=f"; {command_for()} --help lists them"))
    for group in top:
        section = cfg.get(group)
        schema = OmegaConf.get_type(section) if isinstance(section, DictConfig) else None
        if not dataclasses.is_dataclass(schema):  # the rule table: any logical axis name
            continue
        fields = [f.name for f in dataclasses.fields(schema)]
        of = f"model={section.get('name')}" if group == "model" else group
        for key in (k for k in section.keys() if k not in fields):
            near, value = closest_name(str(key), fields), override_literal(OmegaConf.to_container(section)[key])
            fixed = group == "model" and task_fixed_problem([of, f"data={cfg.data.name}", f"+model.{key}={value}"])
            require(not fixed, fixed or "")  # run(cfg) from Python: as launch.py names it (true, not True)
            said = (f"{group}.{key} is not a setting of {of}" + (f" (did you mean {group}.{near}?)" if near else "")
                    + f"; its settings: {', '.join(f for f in fields if f != 'name')}")
            drop = f"~{group}.{key}={value}"  # the fix drops the key, as Hydra deletes it: a command that runs
            require(False, Refusal(said, (drop, f"{group}.{near}={value}") if near else drop, how="; "))

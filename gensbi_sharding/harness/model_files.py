"""launch.py's check of a model option's own file before Hydra composes it: ``model_file_problem``.

A model file of one's own (``conf/model/<name>.yaml`` or one under a ``hydra.searchpath`` folder) that lists no
schema, a schema no dataclass is stored as, or a key or value its schema refuses: Hydra's messages for these are
multi-line ("Key 'width' not in 'ModelConfig'", "Could not load 'tiny_schema'") and name no fix. Split out of
``override_types`` (which calls it for each ``model=`` override) to keep each module to one job. Pure Python: no JAX.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from omegaconf import OmegaConf

from gensbi_sharding.harness.config import assignment_reason
from gensbi_sharding.harness.groups import CONF
from gensbi_sharding.harness.hints import closest_name, override_literal
from gensbi_sharding.harness.override_keys import gensbi_name, meant_name, schema_default, settings

__all__ = ["model_file_problem"]


def _preset_key_problem(o, path: Path, name: str) -> str | None:
    """A key of the preset file ``path`` that its schema ``<name>_schema`` lacks (a GenSBI field the harness fixes,
    ``guidance_embed: false``, or a typo), or a value it cannot take (``num_heads: 2.5``): Hydra's multi-line
    "ConfigKeyError raised while composing config" named no fix. None where every key is a setting taking its
    value, or ``name`` is no model schema."""
    from gensbi_sharding.harness.override_keys import model_schemas

    # keys elsewhere: Hydra's; read as UTF-8 (under LC_ALL=C the locale's meets a comment's 'é' as a traceback)
    schema = None if "@package" in path.read_text(encoding="utf-8", errors="replace") else model_schemas().get(name)
    fields = settings(schema) if schema is not None else []
    preset = OmegaConf.to_container(OmegaConf.load(path), resolve=False)
    for key, value in ((k, v) for k, v in preset.items() if k != "defaults" and schema is not None):
        if key not in fields:
            gensbi, named = gensbi_name([name], str(key)), meant_name([name], str(key))
            guess = closest_name(str(key), fields) if named is None else None  # a name from elsewhere: its meaning
            near = gensbi or (named if named in fields else guess)
            meant = f" (GenSBI's config-file name for {near})" if gensbi else f" (did you mean {near}?)" if near else \
                f" ({named.replace('model.', '')})" if named else ""
            return (f"{o.arg}: {path} sets {key}, which is not a setting of /{name}_schema (model={name})"
                    + meant + f"; its settings: "
                    + f"{', '.join(f for f in fields if f != 'name')}; remove {key} from that file"
                    + (f" or rename it {near}" if near else ""))
        if isinstance(value, str) and "${" in value:  # resolved once composed
            continue
        if (reason := assignment_reason(schema, key, value)) is not None:
            return (f"{o.arg}: {path} sets {key}: {override_literal(value)}, which it cannot take "
                    f"({reason}); write e.g. {key}: "
                    f"{override_literal(schema_default(schema, key)[1])} there")
    return None



def model_file_problem(o, group: str, search_paths: Sequence[str]) -> str | None:
    """``model=tiny`` whose file lists ``/tiny_schema`` before ``config.py`` stores one (the README's steps for a
    model of one's own, half done): the step missing, where Hydra printed "Could not load 'tiny_schema'" and its
    search path; None for every other option."""
    from hydra.core.config_store import ConfigStore

    from gensbi_sharding.harness.config import register_configs

    if group != "model":
        return None
    register_configs()  # what Hydra's config store holds (a dataclass written but never stored is no schema)
    folders = [CONF] + [Path(e[len("file://"):]) for e in search_paths if e.startswith("file://")]
    stored = [n.removesuffix("_schema.yaml") for n in ConfigStore.instance().list("") if n.endswith("_schema.yaml")]
    for value in o.values():
        path = next((f / group / f"{value}.yaml" for f in folders if (f / group / f"{value}.yaml").is_file()), None)
        try:
            read = OmegaConf.load(path) if path is not None else OmegaConf.create()
            listed = [e for e in read.get("defaults", []) if isinstance(e, str)]
        except Exception:  # a file YAML cannot read: Hydra's own error names it
            continue
        # No schema listed (nor another option's file): Hydra's multi-line "Key 'width' not in 'ModelConfig'"
        if all(e == "_self_" for e in read.get("defaults") or []) and (keys := [k for k in read if k not in (
                "defaults", "name", "init")]) and "@package" not in path.read_text(encoding="utf-8", errors="replace"):
            schema = f"/{read.name}_schema" if read.get("name") in stored else "/<model>_schema"
            return (f"{o.arg}: {path} sets {keys[0]} but lists no schema: start it with defaults: [{schema}, _self_] "
                    f"(as conf/model/mlp.yaml does; stored: {', '.join(f'/{n}_schema' for n in sorted(stored))})")
        for name in (e.lstrip("/").removesuffix("_schema") for e in listed if e.endswith("_schema")):
            if name in stored and (problem := _preset_key_problem(o, path, name)) is not None:
                return problem
            if name not in stored:
                return (f"{o.arg}: {path} lists /{name}_schema, which no schema is stored as: add its settings' "
                        f"dataclass to gensbi_sharding/harness/config.py (subclassing ModelConfig, name: str = "
                        f"\"{name}\"), stored by register_configs as {name}_schema, or list one that is: "
                        f"{', '.join(f'/{n}_schema' for n in sorted(stored))} (README: A model of your own in the "
                        "harness)")
    return None

"""launch.py's check that an experiment's sizes exist for the chosen model: ``experiment_sizes_problem``.

``conf/config.yaml`` merges ``conf/experiment_model/<experiment>/<model>.yaml`` into ``model`` as an *optional*
default, so a model of one's own without its file under ``experiment=quick`` trained at its full default sizes, with
no word said: a smoke run meant to take a minute took as long as the model is large (``tests/test_presets.py`` catches
it for the harness's own models, ``test_every_model_has_a_quick_preset``). An experiment with no such folder
(``experiment=sbibm``) sets no model sizes and is not checked. Pure Python: no JAX.
"""

from __future__ import annotations

import os
from pathlib import Path

from hydra.core.override_parser.types import OverrideType

from gensbi_sharding.harness.config import HARNESS_FIELDS
from gensbi_sharding.harness.groups import CONF
from gensbi_sharding.harness.model_choice import chosen_models
from gensbi_sharding.harness.override_grammar import CommandLine

__all__ = ["experiment_sizes_problem"]


def _shown(path: Path) -> str:
    """``path`` relative to the current folder where it lies below it (``conf/experiment_model/quick/gated.yaml``)."""
    relative = os.path.relpath(path)
    return str(path) if relative.startswith("..") else relative


def _settings(model: str) -> list[str]:
    """The settings of ``<model>_schema`` as Hydra's config store holds it (``register_configs``); [] if none."""
    from hydra.core.config_store import ConfigStore

    from gensbi_sharding.harness.config import register_configs

    register_configs()
    try:
        return list(ConfigStore.instance().load(f"{model}_schema.yaml").node)
    except Exception:  # noqa: BLE001 (no such schema: model_file_problem's to name; the message says none)
        return []


def _builds(option: str, folders: list[Path]) -> str:
    """The model the ``model=<option>`` file builds: its ``name:``, else the model of the schema (``/<name>_schema``) or
    the option (``- mlp``) its defaults list names; ``option`` where the file says neither (or cannot be read)."""
    from omegaconf import OmegaConf

    path = next((f / "model" / f"{option}.yaml" for f in folders if (f / "model" / f"{option}.yaml").is_file()), None)
    try:
        read = OmegaConf.load(path) if path is not None else OmegaConf.create()
        if isinstance(name := read.get("name"), str):
            return name
        listed = [e.lstrip("/") for e in read.get("defaults") or [] if isinstance(e, str) and e != "_self_"]
    except Exception:  # noqa: BLE001 (a file YAML cannot read: the checks before this one name it)
        return option
    return next((e.removesuffix("_schema") for e in listed), option)


def experiment_sizes_problem(command: CommandLine) -> str | None:
    """The refusal of ``experiment=<e>`` with a model that has no ``experiment_model/<e>/<model>.yaml`` where other
    models have one; None where each has its file, or the experiment sets no model sizes.

    Parameters
    ----------
    command : CommandLine
        The parsed command line (``command_checks.parse``).

    Returns
    -------
    str or None
        E.g. ``"experiment=quick model=gated: no conf/experiment_model/quick/gated.yaml gives model=gated the sizes
        experiment=quick trains it at, so the run would train its full default sizes; write that file ..."``.
    """
    experiments = [o for o in command.parsed if o.key == "experiment" and o.hydra.type != OverrideType.DEL
                   and o.hydra.package is None]
    if not experiments or (choice := chosen_models(command)) is None:
        return None
    folders = [CONF] + [Path(p[len("file://"):]) for p in command.search_paths if p.startswith("file://")]
    # a pkg:// search path is a package's folder this check does not read: its file may be there, so not refused
    unread = len(folders) <= len(command.search_paths)
    for experiment in (str(v) for v in experiments[-1].values()):
        sized = [f / "experiment_model" / experiment for f in folders if (f / "experiment_model" / experiment).is_dir()]
        if not sized or unread:  # an experiment that sets no model's sizes, or one a package may give them
            continue
        for model in choice.models:
            # its own sizes, or a preset of a model that has them (name: mlp): the preset sets its sizes itself
            if any((f / f"{name}.yaml").is_file() for f in sized for name in {model, _builds(model, folders)}):
                continue
            # beside the model's own file: conf/, or the search path folder that holds conf/model/<model>.yaml
            home = next((f for f in folders if (f / "model" / f"{model}.yaml").is_file()), CONF)
            wanted = home / "experiment_model" / experiment / f"{model}.yaml"
            # the smallest model's file first, the harness's mlp (flux1's has a dozen GenSBI settings)
            example = next((p for f in sized for p in sorted(f.glob("*.yaml"), key=lambda p: (p.stem != "mlp", p))),
                           None)
            like = f", as {_shown(example)} does for model={example.stem}" if example is not None else ""
            fields = [f for f in _settings(model) if f not in HARNESS_FIELDS]
            which = f" (its settings: {', '.join(sorted(fields))})" if fields else ""
            return (f"experiment={experiment} model={model}: no {_shown(wanted)} gives model={model} the sizes "
                    f"experiment={experiment} trains it at, so the run would train model={model}'s full default "
                    f"sizes; write that file with its smallest sensible settings{which}, one 'key: value' a "
                    f"line{like} (docs/gensbi_models.md: A model of your own in the harness)")
    return None

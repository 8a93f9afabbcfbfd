"""A resume whose checkpoint holds another model than this run's: the model to choose and the saved sizes that
choice leaves differing, in one refusal (not only ``model=flux1``, whose sizes the resume would refuse in a second
try, ``add model.num_heads=3``)."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from gensbi_sharding.harness.hints import override_literal


def switched_model_fix(step_dir: Path, saved: dict[str, Any], name: str, command: list[str] | None, more: str) -> str:
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
    more : str
        Other overrides the resume needs (`` data.theta_transform=support``), added to the fix.

    Returns
    -------
    str
        E.g. ``"the checkpoint holds model=flux1 (this run: model=mlp): add model=flux1 model.num_heads=3. "``.
    """
    from gensbi_sharding.harness.resume import FREE_MODEL_FIELDS, composed_sections, saved_model_choice

    choice = saved_model_choice(step_dir, saved["name"])
    if command is None:
        from hydra.core.hydra_config import HydraConfig

        command = [str(o) for o in HydraConfig.get().overrides.task] if HydraConfig.initialized() else None
    kept = [o for o in command or () if not o.startswith(("hydra.", "train.resume="))
            and o.split("=", 1)[0].lstrip("+~").split(".")[0] != "model"]
    sections = None if command is None else composed_sections(tuple([*kept, *shlex.split(choice)]))
    sizes = [] if sections is None else [f"model.{k}={override_literal(v)}" for k, v in saved.items()
                                         if k not in (*FREE_MODEL_FIELDS, "name") and sections["model"].get(k) != v]
    fix = " ".join([choice, *sizes])
    return f"the checkpoint holds model={saved['name']} (this run: model={name}): add {fix}{more}. "

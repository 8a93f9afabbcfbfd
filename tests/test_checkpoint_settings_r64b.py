"""A stopped run's saved settings that the typed command cannot compose (its own model's fields) are named."""

import pytest
from omegaconf import OmegaConf

from faults_helpers import saved_checkpoint, under_command
from gensbi_sharding.harness.outputs import write_json
from gensbi_sharding.harness.run_folder import ensure_fresh


def test_a_run_of_ones_own_model_continued_without_its_search_path_names_the_fields_and_the_fix(tmp_path):
    # Was: its .hydra record lost, 'launch.py experiment=quick seed=0 hydra.run.dir=<a stopped run of model=gated
    # (hidden=64), found by a search path not typed>' was told "...launched with: python launch.py experiment=quick
    # seed=0 model.name=gated train.resume=auto ...": model.hidden never compared, so pasted, mlp's fields under gated's
    # name; now the field and the fix.
    run = tmp_path / "run"
    config = under_command(["experiment=quick", "seed=0"], lambda cfg: OmegaConf.to_container(cfg, resolve=True))
    config["model"] = {"name": "gated", "init": "eager", "hidden": 64}
    saved_checkpoint(run, config, {})
    write_json(run / "metrics.json", {"status": "interrupted", "final_step": 8})
    with pytest.raises(FileExistsError) as err:
        ensure_fresh(run, overrides=["experiment=quick", "seed=0"])
    assert str(err.value).endswith(
        "continue it in this folder with the settings it was launched with: model=gated from a config folder of its "
        "own, which this command does not search (its checkpoint's config holds model.hidden=64, which nothing this "
        "command composes sets): add the hydra.searchpath=[file://...] that holds model/gated.yaml, model=gated and "
        "train.resume=auto, or choose another hydra.run.dir"), str(err.value)


@pytest.mark.slow
def test_a_field_a_built_in_model_no_longer_has_is_named_as_another_versions(tmp_path):
    from gensbi_sharding.harness.checkpoint_settings import lacked_settings

    run = tmp_path / "run"
    config = under_command(["experiment=quick", "seed=0"], lambda cfg: OmegaConf.to_container(cfg, resolve=True))
    config["model"]["gate"] = True  # saved by a version whose mlp had a field this one lacks
    saved_checkpoint(run, config, {})
    assert lacked_settings(run, ["experiment=quick", "seed=0"]) == (
        "the settings it saved, which this version's model=mlp lacks (model.gate=true, in its checkpoint's config): "
        "continue it with the version of gensbi_sharding that saved it")
    assert lacked_settings(run, ["experiment=quick", "seed=1"]) is not None  # whatever else differs

"""The advice continuing a run whose record is lost asks its checkpoint both questions in one call (r66).

``checkpoint_settings.continue_settings`` gives ``lacked_settings``' words and ``saved_settings_overrides``' command
from one read of the checkpoint (was: further_hint called both, the first leaving its reading for the second).
"""

import pytest
import hydra
from omegaconf import OmegaConf

import gensbi_sharding.checkpoint as checkpoint
from faults_helpers import counted, saved_checkpoint, under_command
from gensbi_sharding.harness.checkpoint_settings import continue_settings


@pytest.mark.slow
def test_one_call_reads_the_checkpoint_once_and_gives_the_command_or_what_is_lacked(tmp_path, monkeypatch):
    # ~1.5 s: two checkpoints saved by Orbax, then three Hydra compositions.
    run, other, typed = tmp_path / "run", tmp_path / "other", ["experiment=quick", "seed=0"]
    saved_checkpoint(run, under_command([*typed, "model=transformer"],
                                        lambda cfg: OmegaConf.to_container(cfg, resolve=True)), {})
    config = under_command(typed, lambda cfg: OmegaConf.to_container(cfg, resolve=True))
    config["model"]["gate"] = True  # saved by a version whose mlp had a field this one lacks
    saved_checkpoint(other, config, {})
    reads, compositions = counted(monkeypatch, checkpoint, "saved_config"), counted(monkeypatch, hydra, "compose")
    assert continue_settings(run, typed) == (None, [*typed, "model=transformer"])
    assert (len(reads), len(compositions)) == (1, 2)  # the typed command, then with its saved model=transformer
    assert continue_settings(other, typed) == (
        "the settings it saved, which this version's model=mlp lacks (model.gate=true, in its checkpoint's config): "
        "continue it with the version of gensbi_sharding that saved it", None)
    assert (len(reads), len(compositions)) == (2, 3)  # the typed command only: no command offered

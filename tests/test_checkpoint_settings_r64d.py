"""A refusal's continue-advice for a run whose record is lost reads its checkpoint once and composes the command
once (with its saved options once more), not once per question asked of it."""

import pytest
import hydra
from omegaconf import OmegaConf

import gensbi_sharding.checkpoint as checkpoint
from faults_helpers import counted, saved_checkpoint, under_command


@pytest.mark.slow
def test_the_advice_reads_the_checkpoint_once_and_composes_each_command_once(tmp_path, monkeypatch):
    # ~5 s: a checkpoint saved by Orbax and four Hydra compositions, as test_review64's case of this run.
    # Was: lacked_settings then saved_settings_overrides (further_hint's order) read it twice and composed 4 times
    # (each: the typed command, then with the saved model=transformer); up to 5 where a setting differed. The advice
    # asks both in one call, continue_settings.
    from gensbi_sharding.harness.checkpoint_settings import continue_settings, saved_settings_overrides

    run, typed = tmp_path / "run", ["experiment=quick", "seed=0"]
    saved_checkpoint(run, under_command([*typed, "model=transformer"],
                                        lambda cfg: OmegaConf.to_container(cfg, resolve=True)), {})
    reads, compositions = counted(monkeypatch, checkpoint, "saved_config"), counted(monkeypatch, hydra, "compose")
    assert continue_settings(run, typed) == (None, [*typed, "model=transformer"])
    assert (len(reads), len(compositions)) == (1, 2)
    assert saved_settings_overrides(run, typed) == [*typed, "model=transformer"]  # alone: read and composed afresh
    assert (len(reads), len(compositions)) == (2, 4)

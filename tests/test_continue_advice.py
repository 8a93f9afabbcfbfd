"""The continue-here advice of a stopped run's folder: the saved run's own settings, ready to paste.

Was: a folder whose Hydra record (``.hydra/overrides.yaml``) was missing was told "rerun with train.resume=auto"
whatever was typed, so ``seed=1`` over a seed-0 run continued the seed-0 weights on seed 1's held-out pairs and draws.
"""

from __future__ import annotations

import shlex

import pytest
from omegaconf import OmegaConf

from faults_helpers import saved_checkpoint, under_command
from gensbi_sharding.harness.command_checks import command_problem
from gensbi_sharding.harness.outputs import write_json
from gensbi_sharding.harness.run_folder import ensure_fresh


def _stopped_run_without_record(tmp_path, status="interrupted"):
    """A run of ``experiment=quick seed=0`` stopped at step 8 (``status``; None: killed, no metrics.json), its
    ``.hydra/overrides.yaml`` lost: only its checkpoint's saved config says how it ran."""
    run = tmp_path / "run"
    config = under_command(["experiment=quick", "seed=0"], lambda cfg: OmegaConf.to_container(cfg, resolve=True))
    saved_checkpoint(run, config, {})
    (run / ".hydra").mkdir()
    (run / ".hydra" / "overrides.yaml").write_text("- experiment=quick\n- seed: [")  # unreadable
    if status is not None:
        write_json(run / "metrics.json", {"status": status, "final_step": 8})
    return run


@pytest.mark.parametrize("status", ["interrupted", None])
def test_continuing_a_run_without_its_record_carries_its_checkpoints_saved_settings(tmp_path, status):
    run = _stopped_run_without_record(tmp_path, status)
    with pytest.raises(FileExistsError) as err:
        ensure_fresh(run, overrides=["experiment=quick", "seed=1"])
    printed = str(err.value).split("with the settings it was launched with: ")[1].split(", or ")[0]
    assert printed == f"python launch.py experiment=quick seed=0 train.resume=auto hydra.run.dir={run}"
    args = shlex.split(printed)[2:]
    assert command_problem(args) is None  # pasted: it passes the launch's checks and composes the saved seed
    assert under_command(args, lambda cfg: (cfg.seed, cfg.train.resume, cfg.model.width)) == (0, "auto", 32)
    with pytest.raises(FileExistsError) as err:  # the saved settings typed (more steps too): the short advice
        ensure_fresh(run, steps=40, overrides=["experiment=quick", "train.steps=40"])
    assert "launched with" not in str(err.value) and "train.resume=auto" in str(err.value)

"""A folder refused where the config holds no ``distributed`` section is told as the refusal, not as a crash."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from gensbi_sharding.harness import folder_claim, outputs
from gensbi_sharding.harness.run_steps import tell_refusal


def test_tell_refusal_of_a_config_without_distributed_tells_no_one():
    # Was: ConfigAttributeError 'Missing key distributed'
    assert tell_refusal(OmegaConf.create({"train": {"resume": "auto"}}), FileExistsError("x")) is None
    assert tell_refusal(OmegaConf.create({"distributed": {"mode": "auto"}}), FileExistsError("x")) is None


def test_a_sweep_refused_for_its_completed_job_without_distributed_prints_the_refusal(tmp_path, capsys):
    # Was: ConfigAttributeError 'Missing key distributed' out of the callback after the refusal, exit code not 1
    sweep = tmp_path / "multirun"
    outputs.write_json(sweep / "0" / "metrics.json", {"status": "ok"})
    config = OmegaConf.create({"hydra": {"sweep": {"dir": str(sweep)}}, "train": {"resume": None}})
    with pytest.raises(SystemExit) as ended:
        folder_claim.RefuseCompletedRun().on_multirun_start(config)
    assert ended.value.code == 1
    printed = capsys.readouterr().err
    assert printed.startswith(f"[ERROR] hydra.sweep.dir={sweep}: ") and "already exists (status ok)" in printed, printed

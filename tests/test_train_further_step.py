"""A completed run's refusal names the step its newest checkpoint holds, not ``final_step`` of its metrics.json.

Was: for a run whose final step folder (20) had been deleted (disk space; ``train.keep`` lowered by hand), "to
train it further from its final checkpoint (step 20) ...: train.steps=<more than 20>", though the command resumes
from step 15 and train.steps=20 would do.
"""

from __future__ import annotations

import pytest

from gensbi_sharding.harness.outputs import write_json
from gensbi_sharding.harness.run_folder import ensure_fresh


def test_the_train_further_hint_names_the_newest_step_folder(tmp_path):
    run = tmp_path / "run"
    for step in (10, 15):
        (run / "checkpoints" / str(step)).mkdir(parents=True)
    (run / "checkpoints" / "20.orbax-checkpoint-tmp-1").mkdir()  # a save cut short: no step
    write_json(run / "metrics.json", {"status": "ok", "final_step": 20})
    with pytest.raises(FileExistsError) as err:
        ensure_fresh(run, resume_auto=True, steps=20)
    assert str(err.value).endswith(
        f"; to train it further from its final checkpoint (step 15) into a new folder: the same command with "
        f"train.steps=20 train.resume={run} hydra.run.dir={run}-steps20")

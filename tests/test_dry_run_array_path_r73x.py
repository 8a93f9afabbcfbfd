"""A dry run whose folder holds ``[x]`` or ``\\`` (TensorStore misreads such a path) is not refused: it saves no
checkpoint, so TensorStore never reads it.

Was (r73-break's refusal): ``launch.py dry_run=true 'hydra.run.dir=/tmp/b_${eval.observations}' eval.observations=[1]``
"[ERROR] ... its checkpoint folder /tmp/b_[1]/checkpoints holds '[1]' ...", as did a dry run started in a working
directory holding ``[1]`` and a dry-run sweep whose ``hydra.sweep.subdir`` gives a job ``0_[1]``; each ran on main.
Now only a run that saves checkpoints is refused (``folder_problem(..., saves=)``; the callback and ``RunFolder`` pass
whether the run saves).
"""

from __future__ import annotations

import pytest
from faults_helpers import compose_tiny
from omegaconf import OmegaConf

from gensbi_sharding.harness import folder_claim, run_folder
from gensbi_sharding.harness.config import ConfigError
from gensbi_sharding.harness.folder_lock import folder_problem


@pytest.mark.parametrize("sweep", [False, True])
@pytest.mark.parametrize("name", ["a[1]", "a\\b", "cwd[1]/outputs/run"])
def test_a_folder_tensorstore_misreads_passes_where_nothing_is_saved(tmp_path, sweep, name):
    assert folder_problem(tmp_path / name, sweep=sweep, before_hydra=True, saves=False) is None
    assert "TensorStore" in folder_problem(tmp_path / name, sweep=sweep, before_hydra=True)  # a training run's: refused


@pytest.mark.parametrize("dry_run", [True, False])
def test_the_callback_refuses_only_a_run_that_saves(tmp_path, capsys, dry_run):
    folder = tmp_path / "b_[1]"
    config = OmegaConf.create({"hydra": {"run": {"dir": str(folder)}}, "dry_run": dry_run,
                               "distributed": {"mode": "none", "process_id": None}})
    callback = folder_claim.RefuseCompletedRun()
    try:
        if dry_run:
            callback.on_run_start(config)
            assert (folder / ".run.lock").is_file()  # claimed
        else:
            with pytest.raises(SystemExit):
                callback.on_run_start(config)
            assert "holds '[1]', which TensorStore" in capsys.readouterr().err
    finally:
        callback.on_run_end(config)


@pytest.mark.parametrize("dry_run", [True, False])
def test_run_folder_claims_a_dry_runs_folder(tmp_path, dry_run):
    out = tmp_path / "b_[1]"
    folder = run_folder.RunFolder(out, compose_tiny(f"dry_run={str(dry_run).lower()}", output_dir=out))
    if not dry_run:
        with pytest.raises(ConfigError, match=r"holds '\[1\]', which TensorStore"):
            folder.claim()
        return
    folder.claim()
    assert folder.claimed
    folder.release()

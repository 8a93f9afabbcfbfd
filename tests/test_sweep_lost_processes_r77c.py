"""A shared-disk sweep of several processes (``distributed.mode=explicit``) whose folder was moved mid-sweep: every
process exits 1, not process 0 alone.

Was (measured: two ``launch.py -m ... distributed.mode=explicit`` on one sweep folder, ``mv`` after job 0): process 0
exited 1 ("... was deleted or moved while the sweep went on"), process 1 exited 0, as ``SweepSummary.on_multirun_end``
returned on process 1 before ``sweep_gone_note`` recorded the loss (``folder_gone.LOST_SWEEPS``, launch.py's exit code):
a scheduler reading each process's code saw the job both failed and complete.
"""

import shutil

from omegaconf import OmegaConf

from gensbi_sharding.harness import folder_gone
from gensbi_sharding.harness.summary import SweepSummary


def _process_config(sweep, rank):
    return OmegaConf.create({"hydra": {"sweep": {"dir": str(sweep)},
                                       "overrides": {"task": ["experiment=quick", "seed=0,1"]}},
                             "distributed": {"mode": "explicit", "num_processes": 2, "process_id": rank}})


def test_process_1_of_a_sweep_whose_folder_moved_records_the_loss_as_process_0_does(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(folder_gone, "LOST_SWEEPS", [])  # this process's earlier sweeps (other tests) left out
    (sweep := tmp_path / "sweep").mkdir()
    (sweep / ".run.lock").touch()  # process 0's claim, heard by process 1 before its callbacks go on
    callback = SweepSummary()
    callback.on_multirun_start(_process_config(sweep, 1))
    shutil.move(sweep, tmp_path / "moved")
    (sweep / "1").mkdir(parents=True)  # the next job makes the folder anew
    callback.on_multirun_end(_process_config(sweep, 1))
    assert folder_gone.sweep_lost() and folder_gone.LOST_SWEEPS == [sweep]
    assert capsys.readouterr().out == ""  # process 0 prints the table and the line; process 1 nothing
    assert not (sweep / "sweep_summary.csv").exists()


def test_process_1_of_a_sweep_whose_folder_stayed_records_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(folder_gone, "LOST_SWEEPS", [])
    (sweep := tmp_path / "sweep").mkdir()
    (sweep / ".run.lock").touch()
    callback = SweepSummary()
    callback.on_multirun_start(_process_config(sweep, 1))
    callback.on_multirun_end(_process_config(sweep, 1))
    assert not folder_gone.sweep_lost()
    # a process that never saw the claim says nothing of it, as process 0 does
    (other := tmp_path / "unclaimed").mkdir()
    (callback := SweepSummary()).on_multirun_start(_process_config(other, 1))
    shutil.rmtree(other)
    callback.on_multirun_end(_process_config(other, 1))
    assert not folder_gone.sweep_lost()

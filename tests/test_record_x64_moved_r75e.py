"""A sweep's folder moved just as its next job starts: the job's ``launch_record.record_x64`` wrote into the record
Hydra had made in the folder that moved.

Was (measured by FIX75, a timing race): job 1 failed "[ERROR] FileNotFoundError: [Errno 2] No such file or
directory: '<sweep>/1/.hydra/x64.yaml'", its traceback in error.txt. Now nothing is written there and the job goes on;
its last line says the folder was deleted or moved (``folder_gone.gone_note``), as for a folder moved later.
"""

import shutil

import pytest

from gensbi_sharding.harness import folder_gone, outputs
from gensbi_sharding.harness.folder_lock import FolderLock
from gensbi_sharding.harness.launch_record import X64_FILE, record_x64


def _claimed_job(tmp_path):
    (job := tmp_path / "sweep" / "1").mkdir(parents=True)
    (job / ".hydra").mkdir()
    (lock := FolderLock(job)).acquire()  # claimed, as the job's run_folder.claim does before record_x64
    lock.release()  # its lock file kept, as after a run
    return job


def _moved_as_it_writes(monkeypatch, sweep, moved):
    """``write_atomic`` meeting the race: the folder moved between its making the parent and opening its file."""
    def write(path, data, **_):
        if moved is not None:
            shutil.move(sweep, moved)
        raise FileNotFoundError(2, "No such file or directory", str(path))
    monkeypatch.setattr(outputs, "write_atomic", write)


def test_a_job_whose_sweep_folder_moved_as_it_started_is_not_failed_by_its_x64_record(tmp_path, monkeypatch):
    job = _claimed_job(tmp_path)
    _moved_as_it_writes(monkeypatch, tmp_path / "sweep", tmp_path / "better_name")
    record_x64(job, True)  # was: FileNotFoundError
    assert not (tmp_path / "better_name" / "1" / ".hydra" / X64_FILE).exists()
    assert (tmp_path / "better_name" / "1" / FolderLock.LOCK).is_file()  # the claim went with the folder
    monkeypatch.setattr("gensbi_sharding.harness.run_folder.is_writer", lambda: True)
    assert f"; but {job.absolute()} was deleted or moved while the run went on" in folder_gone.gone_note(job, {})


def test_a_file_not_found_in_a_folder_still_claimed_is_raised(tmp_path, monkeypatch):
    job = _claimed_job(tmp_path)
    _moved_as_it_writes(monkeypatch, tmp_path / "sweep", None)  # the folder stays: not the folder-gone case
    with pytest.raises(FileNotFoundError, match=X64_FILE):
        record_x64(job, True)

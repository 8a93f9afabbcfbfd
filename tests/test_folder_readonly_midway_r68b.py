"""A run or sweep folder turned read-only (or full) while a job runs: the job's end still frees the folder.

Was: ``FolderLock.release`` unlinked the owner note ``.run.owner.json`` first, so in a folder made read-only midway
(``chattr +i``, a remount) the ``PermissionError`` came out of the job's end: a sweep printed Hydra's traceback
("Error executing job ... PermissionError: ... .run.owner.json"), exited 1 and wrote no ``sweep_summary.*`` though its
other jobs completed; a single run printed "UserWarning: Callback RefuseCompletedRun.on_run_end raised
PermissionError"; and the lock itself was never released.
"""

import pathlib
import subprocess
import sys
from pathlib import Path

import pytest
from filelock import FileLock

from gensbi_sharding.harness.folder_lock import FolderLock

REPO = Path(__file__).resolve().parents[1]


def test_a_lock_whose_owner_note_cannot_be_removed_is_still_released(tmp_path, monkeypatch):
    lock = FolderLock(tmp_path)
    lock.acquire()
    real_unlink = pathlib.Path.unlink

    def refuse_note(path, *args, **kwargs):
        if path.name == FolderLock.OWNER:
            raise PermissionError(1, "Operation not permitted", str(path))
        return real_unlink(path, *args, **kwargs)

    monkeypatch.setattr(pathlib.Path, "unlink", refuse_note)
    lock.release()  # was: PermissionError
    other = FileLock(tmp_path / FolderLock.LOCK, timeout=0)  # another handle: acquires only if the lock is free
    other.acquire()
    other.release()
    assert (tmp_path / FolderLock.OWNER).exists()  # the note stays where it cannot go, as at the process's exit


# launch.py as run by a user, except that removing an owner note is refused as a read-only folder refuses it
_REFUSING_LAUNCH = """
import pathlib, runpy, sys
real = pathlib.Path.unlink
def unlink(path, *args, **kwargs):
    if path.name == ".run.owner.json":
        raise PermissionError(1, "Operation not permitted", str(path))
    return real(path, *args, **kwargs)
pathlib.Path.unlink = unlink
sys.argv = ["launch.py", *sys.argv[1:]]
runpy.run_path("launch.py", run_name="__main__")
"""


@pytest.mark.slow
def test_a_sweep_whose_job_folder_turned_read_only_still_writes_its_summary(tmp_path):
    sweep = tmp_path / "sweep"
    done = subprocess.run(
        [sys.executable, "-c", _REFUSING_LAUNCH, "-m", "experiment=quick", "train.steps=2", "eval.enabled=false",
         "rule=replicated,fsdp", f"hydra.sweep.dir={sweep}"],
        cwd=REPO, capture_output=True, text=True, timeout=300)
    said = done.stdout + done.stderr
    assert done.returncode == 0, said
    assert "Traceback" not in said and "PermissionError" not in said
    rows = (sweep / "sweep_summary.csv").read_text().splitlines()
    assert [row.split(",")[0] for row in rows[1:]] == ["0", "1"]
    assert all(row.split(",")[rows[0].split(",").index("status")] == "ok" for row in rows[1:])

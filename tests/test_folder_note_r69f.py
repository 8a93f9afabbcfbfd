"""An owner note an earlier run left beside a freed folder lock is not named as the lock's holder (round 69, LEFT69
item 2).

Was: a run whose folder turned read-only midway could not remove its ``.run.owner.json`` as it let go of the lock
(round 68 kept the note so the job's end went on). A later run refused that folder while another process held the lock
without its own note yet (it had just taken it, or the folder refused the note) was told the folder was "in use by
another run (pid <the ended run> ...)": wait for a process long gone. Now the note is checked: a process of this host
that has ended is said to be an earlier run's note, not the holder.
"""

import json
import os
import socket
import subprocess
import sys

import pytest

from gensbi_sharding.harness.folder_lock import FolderInUseError, FolderLock

# Takes the folder's lock as a run does before it writes its note, and holds it until its stdin closes
HOLD = ("import sys; from filelock import FileLock; lock = FileLock(sys.argv[1], timeout=0); lock.acquire(); "
        "print('held', flush=True); sys.stdin.read()")


@pytest.mark.slow
def test_a_note_of_an_ended_run_is_not_named_as_the_holder(tmp_path):
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    gone = int(ended.stdout)  # a pid of this host whose process has ended
    command = f"launch.py experiment=quick hydra.run.dir={tmp_path}"
    note = {"pid": gone, "host": socket.gethostname(), "started": "2026-12-06 18:51:26", "command": command}
    (tmp_path / FolderLock.OWNER).write_text(json.dumps(note))
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(tmp_path / FolderLock.LOCK)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(FolderInUseError) as refused:
            FolderLock(tmp_path).acquire()
    finally:
        holder.communicate("", timeout=30)
    said = (f"its owner note is not written yet; {tmp_path / FolderLock.OWNER} names pid {gone}, which has ended "
            f"(pid {gone} on {socket.gethostname()}, started 2026-12-06 18:51:26: {command}): an earlier run's note, "
            "not the holder's")  # was: f"pid {gone} on <host>, started ...: {command}", as the holder to wait for
    assert refused.value.holder == said
    assert str(refused.value) == (f"{tmp_path} is in use by another run ({said}): two runs must not write into one "
                                  "folder; wait for it to end, or choose another hydra.run.dir (or hydra.sweep.dir)")
    with FolderLock(tmp_path):  # the lock went with its holder: the next run's own note replaces the earlier one
        assert json.loads((tmp_path / FolderLock.OWNER).read_text())["pid"] != gone
    assert not (tmp_path / FolderLock.OWNER).exists()


def test_a_running_holders_note_is_named_as_before(tmp_path):
    with FolderLock(tmp_path):  # this process: running
        assert FolderLock(tmp_path).holder().startswith(f"pid {os.getpid()} on {socket.gethostname()}, ")

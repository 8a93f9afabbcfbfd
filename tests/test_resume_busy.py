"""``train.resume=<a run's folder>`` while that run is still writing there is refused naming the run and the fix.

Was: the newest step was picked, then deleted by the writing run (``train.keep``) before it was read, and the
resume stopped with "checkpoint path '<run>/checkpoints/1400' does not exist ...; pass a run dir", after
simulating, for a run dir it had been given.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from gensbi_sharding.harness.config import ConfigError
from gensbi_sharding.harness.folder_lock import FolderLock
from gensbi_sharding.harness.resume import resume_step_dir

HOLD = ("import sys, time; from filelock import FileLock; lock = FileLock(sys.argv[1], timeout=0); lock.acquire(); "
        "print('held', flush=True); sys.stdin.read()")


def _resume(path):
    return resume_step_dir(OmegaConf.create({"train": {"resume": str(path)}}))


@pytest.mark.slow
@pytest.mark.parametrize("given", ["", "checkpoints", "checkpoints/40"])
def test_resuming_from_a_folder_a_run_is_writing_is_refused(tmp_path, given):
    run = tmp_path / "run"
    (run / "checkpoints" / "40").mkdir(parents=True)
    (run / FolderLock.OWNER).write_text('{"pid": 4321, "host": "node7", "started": "2026-12-02 11:00:00", '
                                        '"command": "launch.py train.steps=3000"}')
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(run / FolderLock.LOCK)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(ConfigError) as err:
            _resume(run / given if given else run)
    finally:
        holder.communicate("", timeout=30)  # stdin closed: it lets go and ends
    assert str(err.value) == (
        f"train.resume={run / given if given else run}: a run is still writing in {run} (pid 4321 on node7, started "
        "2026-12-02 11:00:00: launch.py train.steps=3000), and deletes older checkpoints as it saves new ones, so "
        "the one picked may be gone before it is read; wait for that run to end, or copy its newest complete step "
        f"folder (mkdir -p <copy>/checkpoints; cp -r {run}/checkpoints/<step> <copy>/checkpoints/) and give "
        "train.resume=<copy>")
    # That run ended: no refusal for it (here the fake step folder is no checkpoint, which is said instead).
    with pytest.raises((ConfigError, FileNotFoundError), match="no checkpoint|does not exist|not a complete") as err:
        _resume(run)
    assert "still writing" not in str(err.value)


def test_a_folder_this_process_holds_is_no_other_run(tmp_path):
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    with FolderLock(run):  # this run's own folder (train.resume=<its own folder>)
        with pytest.raises((ConfigError, FileNotFoundError)) as err:
            _resume(run)
    assert "still writing" not in str(err.value)


@pytest.mark.slow
def test_the_running_jobs_own_folder_is_no_other_run(tmp_path, monkeypatch):
    # distributed=local: the parent holds the job folder's lock while its processes resume from it.
    from hydra.conf import HydraConf
    from hydra.core.hydra_config import HydraConfig

    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    hydra = OmegaConf.create({"hydra": OmegaConf.structured(HydraConf)})
    hydra.hydra.runtime.output_dir, hydra.hydra.runtime.cwd = str(run), str(tmp_path)
    monkeypatch.setattr(HydraConfig.instance(), "cfg", None)
    HydraConfig.instance().set_config(hydra)
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(run / FolderLock.LOCK)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises((ConfigError, FileNotFoundError)) as err:
            _resume(run)
    finally:
        holder.communicate("", timeout=30)
        HydraConfig.instance().cfg = None
    assert "still writing" not in str(err.value)


ENDINGS = ["raise SystemExit(75)", "raise KeyboardInterrupt", "remove_owner_notes(); os._exit(75)"]
HOLD_TWICE = ("import os, sys; from gensbi_sharding.harness.folder_lock import FolderLock, remove_owner_notes\n"
              "FolderLock(sys.argv[1]).acquire(); FolderLock(sys.argv[1]).acquire()\n"  # held twice, as the callback and run()
              "exec(ENDINGS[int(sys.argv[2])])\n")


@pytest.fixture(scope="module")
def ended(tmp_path_factory):
    """Per ending of ``ENDINGS``: a process that held a folder twice and ended so (its exit code and stderr), the
    folder's files after it, and, with this process holding every folder again, whether the note stayed while another
    process removed its own notes and went as this process let go. The processes are forked from one that imported
    the library once (tests/fork_launch.py: ~2 s of CPU less a process); each runs its script from the first line and
    ends as the interpreter ends it (exit code, atexit handlers)."""
    from fork_launch import run_forked

    root = tmp_path_factory.mktemp("ended")
    script, folders = root / "hold.py", [root / str(i) for i in range(len(ENDINGS))]
    script.write_text(f"ENDINGS = {ENDINGS!r}\n" + HOLD_TWICE)
    for folder in [*folders, root / "forks"]:
        folder.mkdir()
    repo = Path(__file__).resolve().parents[1]
    procs = run_forked([{"args": [str(folder), str(i)], "cwd": repo} for i, folder in enumerate(folders)],
                       env={**os.environ, "PYTHONPATH": str(repo)}, timeout=120, workdir=root / "forks",
                       script=script, imports=("gensbi_sharding.harness.folder_lock",))
    files = [sorted(p.name for p in folder.iterdir()) for folder in folders]
    with contextlib.ExitStack() as held:  # the locks went with the processes: taken again, the notes this process's
        for folder in folders:
            held.enter_context(FolderLock(folder))
        other = subprocess.run([sys.executable, "-c", "from gensbi_sharding.harness.folder_lock import "
                                "remove_owner_notes; remove_owner_notes()"], timeout=60)
        kept = [(folder / FolderLock.OWNER).is_file() for folder in folders]
    gone = [not (folder / FolderLock.OWNER).exists() for folder in folders]
    return [{"proc": proc, "files": files[i], "other": other.returncode, "kept": kept[i], "gone": gone[i]}
            for i, proc in enumerate(procs)]


@pytest.mark.slow
@pytest.mark.parametrize("ending", range(len(ENDINGS)), ids=ENDINGS)
def test_a_run_that_ends_holding_its_folder_leaves_no_owner_note(ended, ending):
    # Was: a run preempted (exit 75) or stopped by Ctrl-C ends inside Hydra's run, whose end-of-run callback releases
    # the folder's lock: its .run.owner.json stayed, naming a process long gone beside a lock the system had freed (and
    # read as the holder by a run refused before the next holder wrote its own note). A note another process wrote is
    # never removed; the lock file itself stays, as after a completed run.
    from gensbi_sharding.harness.folder_lock import remove_owner_notes

    run = ended[ending]
    assert run["proc"].returncode in (75, -2), run["proc"].stderr  # an uncaught KeyboardInterrupt ends by SIGINT
    assert run["files"] == [FolderLock.LOCK]
    assert run["other"] == 0 and run["kept"]  # held by this process: another's remove_owner_notes() left its note
    assert run["gone"]  # let go: its note went with it
    remove_owner_notes()  # nothing held: nothing to do

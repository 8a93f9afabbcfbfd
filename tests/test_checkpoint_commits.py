"""A checkpoint's commit as the disk and other processes make it: failed or slow commits, saves cut short, steps
``keep`` cannot delete, two writers of one folder; each named with what is complete and what is kept.
"""

import gc
import os
import shutil
import subprocess
import sys
from pathlib import Path

import jax
import pytest
from flax import nnx

from gensbi_sharding import checkpoint, checkpoint_steps
from gensbi_sharding.checkpoint import CheckpointWriter, committed_steps
from library_helpers import AxesBlock, lose_step_metadata, steps_with_the_newest_unconfirmed


def test_a_writer_removes_saves_cut_short_before_its_constructor_returns(tmp_path):
    # Was: Orbax's CheckpointManager(cleanup_tmp_directories=True) removed them in a thread that close() never waited
    # for: often still there when the constructor returned (2 runs in 3), the thread running on into the exit.
    folder = tmp_path / "checkpoints"
    (folder / "3.orbax-checkpoint-tmp" / "arrays").mkdir(parents=True)  # a save cut short, as Orbax names it
    (folder / "3.orbax-checkpoint-tmp" / "arrays" / "shard").write_bytes(b"\0" * 1024)
    (folder / "4.orbax-checkpoint-tmp-1700000000").mkdir()  # an older Orbax's name for one
    (folder / "1.orbax-checkpoint-tmp").mkdir()
    writer = CheckpointWriter(folder)
    assert list(folder.iterdir()) == []
    writer.close()


def test_a_step_folder_cut_short_is_refused_when_the_writer_is_built_naming_how_to_move_it_aside(tmp_path, devices):
    # Was: accepted; restore resumed from step 1, then the run's first save, of step 2, was refused: "step 2 is older
    # than step 7, the newest ... (steps [1, 7])", step 7 a copy cut short (no commit) Orbax lists and restore skips.
    model, folder = nnx.Linear(2, 2, rngs=nnx.Rngs(0)), tmp_path / "checkpoints"
    with CheckpointWriter(folder, async_save=False) as writer:
        writer.save(1, model, jax.random.key(0))
    for step in ("7", "9"):
        shutil.copytree(folder / "1", folder / step)
        lose_step_metadata(folder / step)
    assert committed_steps(folder) == [1] and checkpoint.find_checkpoint(folder / "1") == folder / "1"
    with pytest.raises(FileNotFoundError, match=rf"^step 9 in {folder} is newer than its newest complete step, 1, "):
        checkpoint.find_checkpoint(folder)  # was: step 1, without a word
    with pytest.raises(FileExistsError) as err:
        CheckpointWriter(folder)
    assert str(err.value) == (  # every item there, its step metadata alone left out of the copy: named so
        f"checkpoint directory {folder} holds step folders that are no complete checkpoints (every item there, but not "
        "Orbax's step metadata, the record of its commit (deleted, or left out of a copy)): 7, 9; restore of the folder "
        "refuses step 9, newer than its newest complete step, and saving any step up to 9 would be refused: copy step 7, 9 again whole from where it was saved, or move "
        f"them aside, e.g. {folder / '7'} to {folder / '7'}.incomplete, or delete them")
    for step in ("7", "9"):
        (folder / step).rename(folder / f"{step}.incomplete")
    with CheckpointWriter(folder, async_save=False) as writer:  # the refused writer let the folder go
        writer.save(2, model, jax.random.key(0))
    assert committed_steps(folder) == [1, 2] and (folder / "7.incomplete" / "arrays").is_dir()



def test_the_writer_names_a_step_that_lost_only_its_metadata_apart_from_one_cut_short(tmp_path):
    # Was: "(a save or copy cut short): 3, 5; ...: move them aside, ..., or delete them" for step 5, saved whole but for
    # its step metadata (deleted since), which find_checkpoint names "its items are there, but not Orbax's step
    # metadata ...: copy the step folder again whole from where it was saved"
    folder = tmp_path / "checkpoints"
    with CheckpointWriter(folder, async_save=False) as writer:
        writer.save(5, nnx.Linear(2, 2, rngs=nnx.Rngs(0)), jax.random.key(0))
    lose_step_metadata(folder / "5")
    (folder / "3" / "arrays").mkdir(parents=True)  # a save cut short: one item
    with pytest.raises(FileExistsError) as err:
        CheckpointWriter(folder)
    assert str(err.value) == (
        f"checkpoint directory {folder} holds step folders that are no complete checkpoints (step 3: a save or copy "
        "cut short; step 5: every item there, but not Orbax's step metadata, the record of its commit (deleted, or "
        "left out of a copy)): 3, 5; restore skips them, and saving any step up to 5 would be refused: copy step 5 "
        f"again whole from where it was saved, or move them aside, e.g. {folder / '3'} to {folder / '3'}.incomplete, "
        "or delete them")
    shutil.rmtree(folder / "5")  # the one cut short alone: as before
    with pytest.raises(FileExistsError) as err:
        CheckpointWriter(folder)
    assert str(err.value) == (
        f"checkpoint directory {folder} holds step folders that are no complete checkpoints (a save or copy cut short): "
        f"3; restore skips them, and saving any step up to 3 would be refused: move them aside, e.g. {folder / '3'} "
        f"to {folder / '3'}.incomplete, or delete them")


_OPEN_AND_CLOSE = """
import sys
from gensbi_sharding.checkpoint import CheckpointWriter
CheckpointWriter(sys.argv[1]).close()  # nothing saved: the script ends at once
"""


@pytest.mark.slow  # a subprocess
def test_a_script_opening_and_closing_a_writer_ends_without_orbax_traceback(tmp_path):
    # Was (3 runs in 5): "ERROR:absl ... cannot schedule new futures after interpreter shutdown" and its traceback,
    # Orbax's cleanup thread cut by the exit, the save cut short left behind.
    folder = tmp_path / "checkpoints"
    (folder / "5.orbax-checkpoint-tmp").mkdir(parents=True)
    done = subprocess.run([sys.executable, "-c", _OPEN_AND_CLOSE, str(folder)], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])})
    assert (done.returncode, done.stderr, list(folder.iterdir())) == (0, "", [])


def test_a_step_committed_whose_older_step_keep_cannot_delete_is_named_complete(tmp_path, devices):
    # Was: "checkpoint step 6 was not saved in ...: writing or committing it failed (OSError: Cannot call rmtree on a
    # symbolic link) ...; the latest complete checkpoint, .../6, is kept": step 6 named unsaved and kept at once. Here
    # keep=1 deletes step 5 after step 6's commit, and 5 is a link to another run's step (rmtree refuses links).
    model = nnx.Linear(2, 2, rngs=nnx.Rngs(0))
    with CheckpointWriter(tmp_path / "other", async_save=False) as writer:
        writer.save(5, model, jax.random.key(0))
    folder = tmp_path / "checkpoints"
    folder.mkdir()
    (folder / "5").symlink_to(tmp_path / "other" / "5", target_is_directory=True)
    with pytest.raises(RuntimeError) as err:
        with CheckpointWriter(folder, keep=1, async_save=False) as writer:
            writer.save(6, model, jax.random.key(0))
    assert str(err.value).startswith(f"checkpoint step 6 in {folder} is complete and kept ({folder / '6'}: resume "
                                     "from it), yet what follows its commit failed, e.g. deleting older steps (keep): "
                                     "OSError: Cannot call rmtree on a symbolic link; check")
    assert committed_steps(folder) == [5, 6] and committed_steps(tmp_path / "other") == [5]  # nothing lost


_HOLD = """import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDONLY); fcntl.flock(fd, fcntl.LOCK_EX)
print("held", flush=True); sys.stdin.read()"""


@pytest.mark.slow
def test_a_second_writer_of_one_folder_is_refused_and_the_first_keeps_its_steps(tmp_path, devices):
    # Was: the second writer's Orbax manager deleted the first's save under way (its temporary folder) and the next
    # saves of both failed with Orbax tracebacks (NOT_FOUND, "Directory not empty"): steps 1 and 2 were lost.
    model, key = AxesBlock(nnx.Rngs(0)), jax.random.key(0)
    first = checkpoint.CheckpointWriter(tmp_path / "ck", keep=5)
    first.save(1, nnx.state(model), key)  # asynchronous: still being written
    with pytest.raises(RuntimeError) as error:
        checkpoint.CheckpointWriter(tmp_path / "ck")
    assert str(error.value) == (f"checkpoint directory {tmp_path / 'ck'} is in use by another CheckpointWriter (open "
                                "in this process): two writers of one folder delete each other's saves under way; "
                                "close that one first (writer.close(), or a with block), or pass another directory")
    first.save(2, nnx.state(model), key)
    first.close()
    assert checkpoint.committed_steps(tmp_path / "ck") == [1, 2]
    assert sorted(p.name for p in (tmp_path / "ck").iterdir()) == ["1", "2"]  # the folder itself is locked: no file
    with checkpoint.CheckpointWriter(tmp_path / "ck", keep=5) as again:  # closed: the folder is free
        again.save(3, nnx.state(model), key)
    assert checkpoint.committed_steps(tmp_path / "ck") == [1, 2, 3]
    checkpoint.CheckpointWriter(tmp_path / "dropped")  # never closed nor kept: once collected, the folder is free
    gc.collect()
    checkpoint.CheckpointWriter(tmp_path / "dropped").close()


@pytest.mark.slow
def test_a_writer_of_another_process_holding_the_folder_is_named(tmp_path, devices):
    (tmp_path / "ck").mkdir()
    holder = subprocess.Popen([sys.executable, "-c", _HOLD, str(tmp_path / "ck")],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(RuntimeError, match=r"in use by another CheckpointWriter \(in another process\)"):
            checkpoint.CheckpointWriter(tmp_path / "ck")
    finally:
        holder.communicate("", timeout=30)
    with checkpoint.CheckpointWriter(tmp_path / "ck") as writer:  # its lock ended with it
        assert writer.save(1, nnx.state(AxesBlock(nnx.Rngs(0))), jax.random.key(0))


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:os.fork:RuntimeWarning", "ignore:.*fork:DeprecationWarning")  # no JAX in the child
def test_the_folder_lock_of_a_writer_let_go_a_forked_child_and_symbolic_links(tmp_path, devices):
    # Was: a writer collected unclosed let go of the folder with its asynchronous save still being written; the next
    # writer's Orbax manager deleted that save as unfinished (absl NOT_FOUND tracebacks) and step 1 was lost.
    model, key = AxesBlock(nnx.Rngs(0)), jax.random.key(0)
    dropped = checkpoint.CheckpointWriter(tmp_path / "ck", keep=5)
    dropped.save(1, nnx.state(model), key)
    del dropped
    gc.collect()
    with checkpoint.CheckpointWriter(tmp_path / "ck", keep=5) as writer:
        assert writer.steps() == [1]
    # Was "[Errno 17] File exists: '.../dangling'" from mkdir, naming neither the link's target nor a fix.
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    with pytest.raises(FileNotFoundError, match=r"dangling is a symbolic link to .*nowhere, which does not exist"):
        checkpoint.CheckpointWriter(tmp_path / "dangling")
    (tmp_path / "link").symlink_to(tmp_path / "ck")  # a live link to an open folder is the same folder: refused
    with checkpoint.CheckpointWriter(tmp_path / "ck"), pytest.raises(RuntimeError, match="open in this process"):
        checkpoint.CheckpointWriter(tmp_path / "link")
    # Was: a process forked while a writer was open (a fork-started data loader) shared its lock, so after close the
    # folder stayed "in use by another CheckpointWriter (in another process)" for as long as that child lived.
    writer = checkpoint.CheckpointWriter(tmp_path / "forked")
    read_end, write_end = os.pipe()
    ready_read, ready_write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: says it runs (its fork hooks ran), waits until the parent is done, leaves at once
        os.close(write_end)
        os.write(ready_write, b"r")
        os.read(read_end, 1)
        os._exit(0)
    os.close(read_end)
    os.close(ready_write)
    try:
        assert os.read(ready_read, 1) == b"r"
        writer.close()
        checkpoint.CheckpointWriter(tmp_path / "forked").close()
    finally:
        os.close(write_end)
        os.close(ready_read)
        os.waitpid(pid, 0)


def _refuse_commit_of(monkeypatch, name: str) -> None:
    """The folder turns read-only as step ``name`` is committed: Orbax's rename of its temporary folder fails."""
    rename = os.rename

    def refused(src, dst, *args, **kwargs):
        if str(src).endswith(".orbax-checkpoint-tmp") and Path(dst).name == name:
            raise PermissionError(1, "Operation not permitted", str(src))
        return rename(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "rename", refused)


def test_a_failed_commit_of_a_synchronous_save_names_the_step_folder_error_fix_and_kept_checkpoint(
        tmp_path, monkeypatch, devices):
    # Was: Orbax's bare PermissionError out of save(2) (no step, no fix), where async_save=True names all of them.
    import jax

    from gensbi_sharding.checkpoint import CheckpointWriter, committed_steps

    state, key, folder = {"w": jax.numpy.ones(3)}, jax.random.key(0), tmp_path / "checkpoints"
    with CheckpointWriter(folder, async_save=False) as writer:
        writer.save(1, state, key)
        _refuse_commit_of(monkeypatch, "2")
        with pytest.raises(RuntimeError, match=r"^checkpoint step 2 was not saved in .*checkpoints: writing or "
                           r"committing it failed \(PermissionError: .*Operation not permitted.*\)\. Keep the "
                           r"checkpoint folder writable .*; the latest complete checkpoint, .*checkpoints/1, is kept: "
                           r"resume from it$"):
            writer.save(2, state, key)
        monkeypatch.undo()
        assert committed_steps(folder) == [1] and writer.last_saved == 1
        assert writer.save(3, state, key)  # the writer goes on once the folder is writable again
    assert committed_steps(folder) == [1, 3]


def _timed_out_wait(patch) -> None:
    """Another process's wait for process 0's commit ran past commit_timeout_s (Orbax's barrier raises it): at Orbax's
    public ``CheckpointManager.wait_until_finished``, which the writer waits with."""
    import orbax.checkpoint as ocp

    def wait(manager):
        raise TimeoutError("Barrier timed out: async_commit_complete")

    patch.setattr(ocp.CheckpointManager, "wait_until_finished", wait)


@pytest.mark.parametrize("committed", [True, False])
def test_a_commit_slower_than_the_bound_says_it_did_not_finish_in_time_and_whether_the_step_is_complete(
        tmp_path, devices, committed):
    # Was: "checkpoint step 2 was not saved ...: the save did not finish on every process", also where process 0 had
    # committed step 2 after the others' 30 s wait (complete and kept); and no word on how to raise the bound.
    import jax

    from gensbi_sharding.checkpoint import CheckpointWriter
    from gensbi_sharding.checkpoint_lock import failed_save

    state, key, folder = {"w": jax.numpy.ones(3)}, jax.random.key(0), tmp_path / "checkpoints"
    with CheckpointWriter(folder, async_save=False) as writer:
        for step in (1, 2) if committed else (1,):
            writer.save(step, state, key)
    with CheckpointWriter(folder) as writer:
        writer.last_saved = 2  # the save under way, as the other processes see it
        with pytest.MonkeyPatch.context() as patch:  # undone before the writer closes (it waits too)
            _timed_out_wait(patch)
            with pytest.raises(RuntimeError) as raised:
                writer.steps()
    message = str(raised.value)
    bound = ("process 0's commit did not finish within 30 s (CheckpointWriter.commit_timeout_s, the other processes' "
             "bound on waiting for it; TimeoutError: Barrier timed out: async_commit_complete), so this process "
             "stopped waiting")
    if committed:
        assert message == (f"checkpoint step 2 in {folder} is complete and kept ({folder / '2'}: resume from it), yet "
                           f"{bound}. On a slow file system raise the bound before the writer is built, e.g. "
                           "CheckpointWriter.commit_timeout_s = 120")
    else:
        assert message.startswith(f"checkpoint step 2 was not saved in {folder} within 30 s: {bound}; it is not "
                                  "complete: process 0 may still be committing it"), message
        assert f"the latest complete checkpoint, {folder / '1'}, is kept" in message
    assert "commit_timeout_s = 120" in failed_save(TimeoutError(), 2, folder, 30.0).args[0]


_SLOW_COMMIT = """
import json, os, sys, time
from pathlib import Path
sys.path.insert(0, {tests!r})
from multihost_worker import start
port, p, folder = int(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3])
start(port, p, 2)
import jax, numpy as np
from jax.sharding import NamedSharding, PartitionSpec as P
from gensbi_sharding import make_mesh
from gensbi_sharding.checkpoint import CheckpointWriter, committed_steps
rename = os.rename

def slow(src, dst, *args, **kwargs):  # a slow file system: process 0's commit of step 2 takes 6 s
    if str(src).endswith(".orbax-checkpoint-tmp") and Path(dst).name == "2":
        time.sleep(6)
    return rename(src, dst, *args, **kwargs)

replicated = NamedSharding(make_mesh(), P())
state = {{"w": jax.make_array_from_callback((4,), replicated, lambda i: np.ones(4, np.float32)[i])}}
data = np.asarray(jax.random.key_data(jax.random.key(0)))
key = jax.random.wrap_key_data(jax.make_array_from_callback(data.shape, replicated, lambda i: data[i]))
CheckpointWriter.commit_timeout_s = 2.0
writer = CheckpointWriter(folder)
writer.save(1, state, key)
writer.steps()
if p == 0:
    os.rename = slow
writer.save(2, state, key)
error = None
try:
    writer.save(3, state, key)
except RuntimeError as err:
    error = str(err)
os.rename = rename
print("RESULT " + json.dumps({{"error": error, "steps": committed_steps(folder)}}), flush=True)
try:
    writer.close()
except RuntimeError:
    pass
"""


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_a_commit_that_outlasts_the_bound_in_two_processes_is_named_complete_not_failed(tmp_path):
    # Process 0's commit of step 2 takes 6 s, the bound is 2 s: was "checkpoint step 2 was not saved ...: the save did
    # not finish on every process", while step 2 was complete on disk (Orbax's all_steps lists it).
    import json
    import socket
    import subprocess
    import sys

    repo = Path(__file__).resolve().parents[1]
    script, folder = tmp_path / "slow_commit.py", tmp_path / "checkpoints"
    script.write_text(_SLOW_COMMIT.format(tests=str(repo / "tests")))
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(repo), "PYTHONUNBUFFERED": "1"}
    procs = [subprocess.Popen([sys.executable, str(script), str(port), str(p), str(folder)], env=env, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT) for p in range(2)]
    try:
        outputs = [proc.communicate(timeout=150)[0] for proc in procs]
    finally:
        for proc in procs:
            proc.kill()
    for p, (proc, output) in enumerate(zip(procs, outputs)):
        lines = [line for line in output.splitlines() if line.startswith("RESULT ")]
        assert proc.returncode == 0 and lines, f"process {p}: {output[-3000:]}"
        result = json.loads(lines[0][len("RESULT "):])
        assert result["steps"] == [1, 2], result
        assert result["error"].startswith(
            f"checkpoint step 2 in {folder} is complete and kept ({folder / '2'}: resume from it), yet process 0's "
            "commit did not finish within 2 s (CheckpointWriter.commit_timeout_s"), result["error"]
        assert result["error"].endswith("e.g. CheckpointWriter.commit_timeout_s = 120"), result["error"]


def test_a_step_folder_without_its_metadata_is_named_so_without_orbaxs_warning(tmp_path, caplog):
    # Was: a run folder whose checkpoints/5/_CHECKPOINT_METADATA was deleted printed Orbax's "Metadata file does not
    # exist: .../5/_CHECKPOINT_METADATA" twice on sample.py's and launch.py's console before the refusal naming step 5;
    # and that refusal called step 5 "cut short, no commit recorded", its items all there.
    import logging

    for item in ("arrays", "config", "meta"):  # CheckpointWriter's items
        (tmp_path / "checkpoints" / "5" / item).mkdir(parents=True)
    lost = r"step 5: its items are there, but not Orbax's step metadata, the record of its commit"
    with caplog.at_level(logging.WARNING), pytest.raises(FileNotFoundError, match=lost):
        checkpoint.find_checkpoint(tmp_path)
    assert committed_steps(tmp_path / "checkpoints") == []
    assert caplog.records == []
    logging.getLogger("absl").warning("Metadata file does not exist: elsewhere")  # said where we did not read
    assert [r.getMessage() for r in caplog.records] == ["Metadata file does not exist: elsewhere"]


def test_a_saved_step_that_lost_only_its_orbax_metadata_is_named_so_not_cut_short(tmp_path):
    # Was: "(step 5: cut short, no commit recorded)" and "<run>/checkpoints/5 is not a complete checkpoint (Orbax
    # recorded no commit: the save was cut short)", of a save that finished (its items and commit files there), its
    # step metadata deleted or left out of a copy since.
    folder = tmp_path / "run" / "checkpoints"
    with CheckpointWriter(folder, async_save=False) as writer:
        writer.save(5, nnx.Linear(2, 2, rngs=nnx.Rngs(0)), jax.random.key(0))
    lose_step_metadata(folder / "5")
    assert committed_steps(folder) == [] and checkpoint_steps.unconfirmed_steps(folder) == [5]
    lost = ("its items are there, but not Orbax's step metadata, the record of its commit (deleted, or left out of a "
            "copy): copy the step folder again whole from where it was saved")
    with pytest.raises(FileNotFoundError) as err:
        checkpoint.find_checkpoint(tmp_path / "run")
    assert str(err.value) == (f"no checkpoint in {tmp_path / 'run'}: looked for complete Orbax step folders <step>/ in "
                              f"{folder} (step 5: {lost}); pass a run dir, its checkpoints/ dir or one step dir")
    with pytest.raises(FileNotFoundError) as err:
        checkpoint.find_checkpoint(folder / "5")
    assert str(err.value) == (f"{folder / '5'} is not a complete checkpoint ({lost}); {folder} holds no complete step: "
                              "start without it")
    shutil.copytree(folder / "5" / "arrays", folder / "7" / "arrays")  # a save cut short beside it: named apart
    with pytest.raises(FileNotFoundError, match=r"\(step 5: its items are there, .*; step 7: cut short, no commit "
                                                r"recorded\); pass a run dir"):
        checkpoint.find_checkpoint(tmp_path / "run")
    assert checkpoint_steps.unconfirmed_steps(folder) == [5]


def test_orbaxs_warning_stays_off_while_another_thread_ends_its_read(tmp_path, caplog, monkeypatch):
    # Was: one absl filter added and removed by each read, so a second thread's read (the stop watchdog's beside the
    # run's own) ending in the middle of this one's took it off: "Metadata file does not exist" reached the console.
    import logging
    import threading

    import orbax.checkpoint as ocp

    for run in ("mine", "other"):
        for item in ("arrays", "config", "meta"):
            (tmp_path / run / "5" / item).mkdir(parents=True)
    read = ocp.metadata.get_step_metadata

    def read_beside(path):  # this thread's read of step 5 waits for another thread's whole read
        if "mine" in str(path):
            (other := threading.Thread(target=committed_steps, args=(tmp_path / "other",))).start()
            other.join(10)
        return read(path)

    monkeypatch.setattr(ocp.metadata, "get_step_metadata", read_beside)
    with caplog.at_level(logging.WARNING):
        assert committed_steps(tmp_path / "mine") == []
    assert [r.getMessage() for r in caplog.records] == []


def test_the_newest_step_of_a_folder_whose_newer_step_lost_its_metadata_is_refused_naming_both(tmp_path):
    # Was: find_checkpoint(<copy>) returned step 3 without a word, step 5 there whole but for its Orbax step metadata
    # (left out of a copy), so restore(<copy>/checkpoints, ...), saved_config and sample.py <copy> read an older model
    # than "the newest"; only train.resume refused it (harness/resume.py), now by this refusal.
    folder = tmp_path / "copy" / "checkpoints"
    steps_with_the_newest_unconfirmed(folder)
    said = (f"step 5 in {folder} is newer than its newest complete step, 3, but lost Orbax's step metadata, the record "
            "of its commit (deleted, or left out of a copy): copy that step folder again whole from where it was "
            f"saved; if the folder it was copied from is gone, pass the newest complete step left, {folder / '3'}")
    target = checkpoint.abstract_state_for(nnx.Linear(2, 2, rngs=nnx.Rngs(0)), None)
    for read in (checkpoint.find_checkpoint, checkpoint.saved_config, lambda path: checkpoint.restore(path, target)):
        for given in (tmp_path / "copy", folder):
            with pytest.raises(FileNotFoundError) as err:
                read(given)
            assert str(err.value) == said
    assert checkpoint.restore(folder / "3", target).step == 3  # the step named itself, as the fix says: as before

"""A stopped run continued (``train.resume=auto``) keeps the earlier attempt's ``metrics.json`` until this attempt
ends: sample.py's warning and a sweep-folder refusal read it as a run stopped, and offered the command that was
already running ("stopped (status preempted) at step 40 ...; to finish it: <command>"). Who holds the folder's run lock
says it trains: it is said to be training (sample.py), or not said stopped (a sweep folder's refusal).
"""

import fcntl
import json

import pytest

from gensbi_sharding.harness.best_job import best_note
from gensbi_sharding.harness.folder_lock import FolderLock
from gensbi_sharding.harness.unfinished_run import unfinished_note

COMMAND = "python launch.py train.steps=2000 train.resume=auto hydra.run.dir=/x/run"
STOPPED = {"status": "preempted", "data": "two_moons", "stopped_at_step": 40, "continue_with": COMMAND,
           "error": f"preempted by SIGTERM at step 40; continue with: {COMMAND}"}


@pytest.fixture
def held(tmp_path):
    """The run lock of the folders it is called with, held as a training process holds it (another open file)."""
    files = []

    def hold(folder):
        files.append(open(folder / FolderLock.LOCK, "w"))
        fcntl.flock(files[-1], fcntl.LOCK_EX | fcntl.LOCK_NB)

    yield hold
    for f in files:
        f.close()


def _stopped_in(folder):
    """``STOPPED`` as the run in ``folder`` records it, its command naming that folder (``COMMAND``'s made-up /x/run
    reads as a folder moved since, and is said as the run's folder now: tests/test_moved_folder_r76g.py)."""
    command = COMMAND.replace("/x/run", str(folder))
    return {**STOPPED, "continue_with": command, "error": STOPPED["error"].replace(COMMAND, command)}


def _run(folder, record):
    (folder / "checkpoints" / "40").mkdir(parents=True)
    (folder / "metrics.json").write_text(json.dumps(record))
    return folder


def test_sample_says_a_continued_run_is_training_not_stopped(tmp_path, held):
    run = _run(tmp_path / "run", stopped := _stopped_in(tmp_path / "run"))
    note = unfinished_note(run / "checkpoints" / "40", {"train": {"steps": 2000}})
    assert note.endswith(f"; to finish it: {stopped['continue_with']}, then sample again")  # no one trains it: stopped
    held(run)
    note = unfinished_note(run / "checkpoints" / "40", {"train": {"steps": 2000}})
    assert note.startswith(f"{run}'s run is still training (") and note.endswith(
        "its newest checkpoint is at step 40 of train.steps=2000: these samples are of a posterior trained 40 of its "
        "2000 steps, not the run's result: sample it again when it ends"), note


def test_a_sweep_refusal_does_not_call_a_continued_job_stopped(tmp_path, held):
    sweep = tmp_path / "sweep"
    _run(sweep / "0", {"status": "ok", "data": "two_moons", "c2st": 0.912})
    _run(sweep / "1", STOPPED)
    jobs = [sweep / "0", sweep / "1"]
    assert "; job 1 stopped before finishing (status preempted at step 40)" in best_note(jobs)
    held(sweep / "1")
    assert best_note(jobs) == f"the lowest C2ST, 0.912: {sweep / '0'} (jobs with a checkpoint: 0, 1)"


def test_a_record_whose_writer_set_no_command_is_not_given_one_from_its_text():
    # The text fallback is for records of versions before continue_with: a writer's null (a dry run's stop, an
    # at-once stop with no checkpoint) is its word, even where an error it quotes holds "continue with: ..."
    from gensbi_sharding.harness.continue_field import continue_of

    quoted = f"RuntimeError: worker said: continue with: {COMMAND}"
    assert continue_of({"status": "error", "error": quoted, "continue_with": None}) == ""
    assert continue_of({"status": "error", "error": quoted}) == COMMAND  # an older version's record
    assert continue_of(STOPPED) == COMMAND

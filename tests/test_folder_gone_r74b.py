"""A run's folder deleted or moved while the run went on: its last line says so, not a plain "outputs in <folder>".

The run made the folder anew as it wrote each output (without its launch.log, .hydra/ record or earlier checkpoints)
and ended "done in ...; outputs in <folder>", exit 0, as if everything were there.
"""

import logging
from pathlib import Path

import pytest

from gensbi_sharding.harness.folder_gone import gone_note
from gensbi_sharding.harness.folder_lock import CLAIMED

METRICS = {"status": "ok", "wall_s": 12.0, "c2st": 0.6, "samples_per_s": 1000.0}


def test_a_claimed_folder_without_its_lock_file_is_said_to_be_made_anew(tmp_path):
    (out := tmp_path / "run").mkdir()  # made anew by the outputs: no .run.lock
    CLAIMED.add(out)  # as FolderLock.acquire records its claim
    note = gone_note(out, METRICS)
    assert note.startswith(f"; but {out} was deleted or moved while the run went on (its .run.lock is gone)")
    assert "holds only what was written after it was made anew" in note and "launch.log, .hydra/" in note


def test_a_claimed_folder_gone_is_said_to_no_longer_exist(tmp_path):
    CLAIMED.add(tmp_path / "gone")
    note = gone_note(tmp_path / "gone", {**METRICS, "status": "interrupted"})
    assert f"{tmp_path / 'gone'} was deleted or moved" in note and "no longer exists" in note


def test_the_folder_still_claimed_or_never_claimed_adds_nothing(tmp_path):
    (out := tmp_path / "run").mkdir()
    (out / ".run.lock").touch()
    assert gone_note(out, METRICS) == ""
    assert gone_note(tmp_path / "x", {"status": "error", "wall_s": None}) == ""  # refused before it started


@pytest.mark.slow
def test_launch_says_it_on_its_last_line(tmp_path, monkeypatch, caplog):
    # launch.py's job function, its run(cfg) one that found its folder moved away ("mv outputs/... better_name")
    import shutil

    import launch
    from faults_helpers import compose_tiny

    def run_whose_folder_moves(cfg):
        (out := Path(cfg.output_dir)).mkdir(parents=True, exist_ok=True)
        (out / ".run.lock").touch()  # as claimed
        CLAIMED.add(out.absolute())
        shutil.move(out, tmp_path / "better_name")
        (out / "checkpoints").mkdir(parents=True)  # made anew by the next save
        return {"status": "ok", "wall_s": 3.0, "c2st": 0.6}

    for state in ("failed_jobs", "running", "ran", "in_sweep"):  # launch.py's per-process lists, this test's own
        monkeypatch.setattr(launch, state, [])
    monkeypatch.setattr(launch, "run", run_whose_folder_moves)
    with caplog.at_level(logging.INFO, logger="gensbi_sharding"):
        launch.main.__wrapped__(compose_tiny(output_dir=tmp_path / "run"))
    last = [r.getMessage() for r in caplog.records if r.name == "gensbi_sharding"][-1]
    assert last.startswith("done in 3.0 s: C2ST 0.600") and f"{tmp_path / 'run'} was deleted or moved" in last


def test_stop_watchdogs_last_line_says_it_too():
    # the last line of a run stopped inside a setup step is stop_watchdog's: the same words, where it claimed
    import inspect

    from gensbi_sharding.harness import stop_watchdog

    assert "gone_note(out, ended) if folder.claimed" in inspect.getsource(stop_watchdog.end_preempted_run)

"""Runs continuing other runs (``train.resume=<run>``, ``auto``), requeued, stopped and rerun as sweeps: each
continues the run it should, sets an earlier attempt's outputs aside, and names the commands that continue it.
"""

from faults_helpers import save_step_with_info


def test_a_requeued_continuation_continued_once_by_auto_still_resumes_its_own_checkpoint(tmp_path, monkeypatch,
                                                                                       caplog):
    # Was: `python launch.py train.resume=a hydra.run.dir=b`, preempted after b's own save, continued once by hand
    # with train.resume=auto (which saved b's newest checkpoint), then preempted and requeued with the original
    # command: refused, "rerun with train.resume=auto", as if b continued another run; the requeued job ended in error.
    import shutil

    import pytest
    from omegaconf import OmegaConf

    from gensbi_sharding.checkpoint import committed_steps
    from gensbi_sharding.harness import outputs, run_folder
    from gensbi_sharding.harness.resume import resume_point

    monkeypatch.chdir(tmp_path)  # the launch folder, which a relative train.resume is read against
    out = tmp_path / "b"
    save_step_with_info(tmp_path / "a", 10)
    save_step_with_info(out, 30, resume="a")  # the original command's own save
    save_step_with_info(out, 40, resume="auto")  # the attempt continued by hand
    outputs.write_json(out / "metrics.json", {"status": "preempted", "stopped_at_step": 40})
    assert run_folder.ensure_fresh(out, resume="a")["status"] == "preempted"
    with caplog.at_level("INFO", logger="gensbi_sharding"):
        assert resume_point(OmegaConf.create({"train": {"resume": "a"}}), out) == (out / "checkpoints" / "40").resolve()
    assert f"{out} already holds its own checkpoint (step 40) of this continuation" in caplog.text
    # Another lineage under the auto save: refused as before, naming the override that continues it here.
    save_step_with_info(tmp_path / "a2", 5)
    with pytest.raises(FileExistsError, match="rerun with train.resume=auto to continue it in this folder"):
        run_folder.ensure_fresh(out, resume="a2")
    # Every checkpoint kept saved by auto (the original's deleted, train.keep): which run b continues is not known,
    # so the requeue is refused, naming the one override that continues it.
    save_step_with_info(out, 50, resume="auto")
    shutil.rmtree(out / "checkpoints" / "30", ignore_errors=True)  # the writer keeps two: gone already
    assert committed_steps(out / "checkpoints") == [40, 50]
    with pytest.raises(FileExistsError, match="rerun with train.resume=auto to continue it in this folder"):
        run_folder.ensure_fresh(out, resume="a")

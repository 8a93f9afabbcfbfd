"""The command a failed run's record offers, read by its ``continue_with`` field: a sweep's refusal reads the error's
cause before that command, whatever words lead to it; a record the disk refused carries the command its line words.
"""

import json


def _job(folder, error, command):
    folder.mkdir(parents=True)
    (folder / "metrics.json").write_text(json.dumps({"status": "error", "error": error, "continue_with": command}))
    return folder


def test_a_failed_jobs_command_is_not_read_as_its_errors_cause(tmp_path):
    # A sweep job that failed on a full disk before its first checkpoint: its error ends "; once that is fixed, run it
    # again with: <command>", which repeats each override. The cause was cut at "continue with:" only, so the command
    # counted as the cause and a refused sweep said of the job "(its error names train.learning_rate=0.003: change it
    # in that command first)", for a disk that filled up.
    from gensbi_sharding.harness.sweep_retyped import failed_on, named_overrides

    command = f"python launch.py train.learning_rate=0.003 hydra.run.dir={tmp_path / 'job'} train.resume=auto"
    job = _job(tmp_path / "job", "OSError: [Errno 28] No space left on device; once that is fixed, run it again "
                                 f"with: {command}", command)
    assert named_overrides(job, ["train.learning_rate=0.003"]) == ""
    assert not failed_on(job, ["train.learning_rate"])
    # The error's own words still count, before the command ("continue with:" wording as before)
    named = _job(tmp_path / "named", "ConfigError: train.learning_rate=0.003 diverged; checkpoint 20 was saved before "
                                     f"it: once that is fixed, continue with: {command}", command)
    assert named_overrides(named, ["train.learning_rate=0.003"]) == (
        " (its error names train.learning_rate=0.003: change it in that command first)")
    assert failed_on(named, ["train.learning_rate"])


def test_the_cause_is_the_error_before_the_words_that_lead_to_its_command():
    from gensbi_sharding.harness.failed_weights import FAILED_WEIGHTS, error_cause

    command = "python launch.py train.steps=50 train.resume=auto"
    assert error_cause({"error": f"OSError: full; once that is fixed, run it again with: {command}",
                        "continue_with": command}) == ("OSError: full", "")
    assert error_cause({"error": f"OSError: full; continue with: {command}"}) == ("OSError: full", "")  # no field
    # A null field is its writer's word: no command to cut at, the whole error is the cause
    assert error_cause({"error": "process 0 refused: continue with: nothing", "continue_with": None}) == (
        "process 0 refused: continue with: nothing", "")
    cause, note = error_cause({"error": f"SamplingError: nan; checkpoint 40 {FAILED_WEIGHTS}, which ...",
                               "continue_with": None})
    assert cause == "SamplingError: nan; checkpoint 40 " and note.startswith(" (its weights failed its evaluation")


def test_a_record_the_disk_refused_after_a_checkpoint_carries_the_command_its_line_words(tmp_path, monkeypatch):
    # A completed run whose metrics.json met a full disk, its checkpoints kept: its outcome (status error) said "then
    # continue it with <command>" but set no continue_with, so continue_of read none from it (its words are not
    # "continue with: ").
    import errno
    import os

    from omegaconf import OmegaConf

    from gensbi_sharding.harness import outputs, run_folder
    from gensbi_sharding.harness.continue_field import continue_of
    from gensbi_sharding.harness.sweep_hints import continue_command

    def disk_full(path, data, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))

    (tmp_path / "checkpoints" / "20").mkdir(parents=True)
    monkeypatch.setattr(outputs, "write_atomic", disk_full)
    cfg = OmegaConf.create({"train": {"resume": None, "steps": 8}, "dry_run": False,
                            "distributed": {"mode": "none", "process_id": None}})
    folder = run_folder.RunFolder(tmp_path, cfg)
    folder.claimed = True  # claimed by this process, as run() does first
    metrics = {"status": "ok"}
    folder.record(metrics)
    assert metrics["status"] == "error"
    assert metrics["error"].endswith(f"then continue it with {continue_command(tmp_path)} (its checkpoints are kept)")
    assert continue_of(metrics) == continue_command(tmp_path)
    # A failed run's own error and command stay
    failed = {"status": "error", "error": "RuntimeError: x; continue with: mine", "continue_with": "mine"}
    folder.record(failed)
    assert failed == {"status": "error", "error": "RuntimeError: x; continue with: mine", "continue_with": "mine"}

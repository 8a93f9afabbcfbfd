"""Files and checkpoints the disk refuses mid-run (read-only, full): one error line naming what is kept and the
command that continues; Orbax's thread tracebacks stay in launch.log.
"""

import numpy as np
import pytest


def test_a_run_failing_after_a_checkpoint_names_it_and_the_command_that_continues(tmp_path):
    # launch.py ... hydra.run.dir=<folder that turns read-only mid-run>: was "[ERROR] OSError: [Errno 30] Read-only
    # file system: '.../checkpoints/1200.orbax-checkpoint-tmp'" alone, not that checkpoint 1150 was saved and
    # train.resume=auto continues from it (it does). A checkpoint of an earlier attempt is not named.
    import jax
    import jax.numpy as jnp

    from gensbi_sharding.checkpoint_save import CheckpointWriter
    from gensbi_sharding.harness.stop_record import failure_resume_hint

    with CheckpointWriter(tmp_path / "checkpoints", every=1) as writer:
        writer.save(5, {"w": jnp.ones(3)}, jax.random.key(0))
    failure = OSError(30, "Read-only file system")
    assert failure_resume_hint(tmp_path, [], failure) == (
        f"; checkpoint {tmp_path / 'checkpoints' / '5'} was saved before it: once that is fixed, continue with: run(cfg) "
        f"with cfg.train.resume='auto' and cfg.output_dir={str(tmp_path)!r} set in omegaconf.open_dict(cfg)")
    assert failure_resume_hint(tmp_path, [5], failure) == ""  # an earlier attempt's checkpoint
    assert failure_resume_hint(tmp_path, [], FloatingPointError("diverged")) == ""  # names the last finite one
    assert failure_resume_hint(tmp_path / "none", [], failure) == ""


def test_a_failed_checkpoint_saves_thread_tracebacks_stay_in_launch_log():
    # A folder turned read-only mid-save: Orbax's saving threads each logged "[ERROR] ... _SignalingThread.run()
    # raised an exception: PERMISSION_DENIED ..." with a traceback, four on the console before the run's own error
    # line (which names the failure and the checkpoint that continues it). launch.log keeps them.
    import logging

    from gensbi_sharding.harness.console import ConsoleFilter

    def shown(message):
        return ConsoleFilter().filter(logging.LogRecord("absl", logging.ERROR, "x.py", 1, message, None, None))

    failure = 'PERMISSION_DENIED: Error writing local file "/run/checkpoints/1200.orbax-checkpoint-tmp/_sharding"'
    assert not shown(f"[process=0][thread=serialize_shardings][operation_id=24] _SignalingThread.run() raised an "
                     f"exception: {failure}")
    assert not shown("[process=0] Failed to run 3 Handler Commit operations or the Commit callback in background save "
                     "thread, directory: /run/checkpoints/1200")
    assert not shown("[process=0][thread=MainThread][step=1200][wait_until_finished] Save Finalize thread "
                     "(save_finalize) failed.")
    assert shown(f"some other Orbax error: {failure}")


@pytest.mark.parametrize("status, traceback_text", [("ok", None), ("error", "Traceback ...\nRuntimeError: save failed\n")])
def test_a_record_the_disk_refuses_is_one_error_line_and_no_completed_run(tmp_path, monkeypatch, caplog, status,
                                                                          traceback_text):
    # A run on a disk that filled up: its checkpoint failed, then writing error.txt raised OSError out of the job
    # (Hydra's traceback; the run's own error line was the last line said of it). A completed run whose metrics.json
    # cannot be written ended "done ..." with exit code 0 and no record.
    import errno
    import logging
    import os

    from omegaconf import OmegaConf

    from gensbi_sharding.harness import outputs, run_folder

    def disk_full(path, data, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))

    monkeypatch.setattr(outputs, "write_atomic", disk_full)
    cfg = OmegaConf.create({"train": {"resume": None, "steps": 8}, "dry_run": False,
                            "distributed": {"mode": "none", "process_id": None}})
    folder = run_folder.RunFolder(tmp_path, cfg)
    folder.claimed = True  # claimed by this process, as run() does first
    metrics = {"status": status, **({"error": "RuntimeError: save failed"} if status == "error" else {})}
    with caplog.at_level(logging.ERROR, logger="gensbi_sharding"):
        folder.record(metrics, traceback_text)
    problem = (f"this run's record ({'error.txt, ' if traceback_text else ''}metrics.json) could not be written in "
               f"{tmp_path} (No space left on device): its outcome is on this console only; free space there (or make "
               "it writable) before continuing the run")
    assert [r.getMessage() for r in caplog.records] == [problem]
    assert metrics == {"status": "error", "error": problem if status == "ok" else "RuntimeError: save failed"}
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_a_record_whose_error_txt_was_written_before_the_disk_filled_names_only_metrics_json(tmp_path, monkeypatch):
    # launch.py experiment=quick hydra.run.dir=<a 300 KB tmpfs>: its posterior samples met the full disk, error.txt
    # (1.5 KB) still fitted, metrics.json did not; the run said "this run's record (error.txt, metrics.json) could not
    # be written ... its outcome is on this console only", then "error after 46.0 s; traceback in <run>/error.txt".
    import errno
    import os

    from gensbi_sharding.harness import outputs, run_record

    real = outputs.write_atomic

    def full_after_error_txt(path, data, **kwargs):
        if path.name == "error.txt":
            return real(path, data, **kwargs)
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))

    monkeypatch.setattr(outputs, "write_atomic", full_after_error_txt)
    problem = run_record.write_record(tmp_path, {"status": "error"}, "Traceback ...\nOSError: full\n")
    assert problem == (f"this run's record (metrics.json) could not be written in {tmp_path} (No space left on device)"
                       ": its outcome is on this console, its traceback in error.txt; free space there (or make it "
                       "writable) before continuing the run")
    assert (tmp_path / "error.txt").read_text() == "Traceback ...\nOSError: full\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["error.txt"]


def test_a_record_the_disk_refuses_after_a_checkpoint_names_how_to_continue_and_the_folder_says_why_it_waits(
        tmp_path, monkeypatch):
    # Round 43: a run trained, saved step 20 and scored its C2ST, then its metrics.json met a full disk: "free space
    # there before continuing the run" named no way to continue, and the same command again was refused as "an
    # interrupted run's checkpoints", which it was not.
    import errno
    import os

    from gensbi_sharding.harness import outputs, run_folder, run_record

    def disk_full(path, data, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))

    (tmp_path / "checkpoints" / "20").mkdir(parents=True)
    monkeypatch.setattr(outputs, "write_atomic", disk_full)
    # Its folder named, as the shell reads it back (was: "the same command plus train.resume=auto", which in the
    # default outputs/<date>/<time> is a new folder: train.resume=auto there starts from step 0).
    assert run_record.write_record(tmp_path, {"status": "ok"}).endswith(
        "free space there (or make it writable), then continue it with run(cfg) with "
        f"cfg.train.resume='auto' and cfg.output_dir={str(tmp_path)!r} set in omegaconf.open_dict(cfg) (its checkpoints are kept)")
    (spaced := tmp_path / "my runs" / "checkpoints" / "20").mkdir(parents=True)
    assert run_record.write_record(spaced.parent.parent, {"status": "ok"}).endswith(
        f"cfg.output_dir='{tmp_path}/my runs' set in omegaconf.open_dict(cfg) (its checkpoints are kept)")
    with pytest.raises(FileExistsError) as refused:
        run_folder.ensure_fresh(tmp_path)
    assert str(refused.value).startswith(f"{tmp_path / 'checkpoints'} holds the checkpoints of a run with no record "
                                         "(stopped, or its record could not be written); continue it here with the "
                                         "same command plus train.resume=auto")
    assert run_folder.ensure_fresh(tmp_path, resume_auto=True) is None  # which continues it


@pytest.mark.parametrize("refusal", ["ENOSPC", "EROFS"])
def test_a_file_the_disk_refuses_is_named_with_what_is_kept_and_the_command_that_continues(tmp_path, monkeypatch,
                                                                                          refusal):
    # Round 43: launch.py ... hydra.run.dir=<a tmpfs that fills at posterior_samples.npz> ended "[ERROR] OSError:
    # [Errno 28] No space left on device; checkpoint ... was saved before it", naming no file (a write's OSError
    # has none), and a refusal at the temp file's creation named the temp name.
    import errno
    import os

    from gensbi_sharding.harness import outputs, stop_record

    code = getattr(errno, refusal)

    def refused(fd):
        raise OSError(code, os.strerror(code))  # as a write that meets a full disk raises it: no file named

    samples = tmp_path / "posterior_samples.npz"
    samples.write_bytes(b"kept")  # an earlier attempt's file: whole or replaced, never cut
    monkeypatch.setattr(outputs.os, "fsync", refused)
    with pytest.raises(OSError) as failed:
        outputs.write_npz(samples, samples=np.zeros(3))
    monkeypatch.undo()
    assert (failed.value.errno, failed.value.filename) == (code, str(samples))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["posterior_samples.npz"]  # no temp file left
    assert samples.read_bytes() == b"kept"
    with pytest.raises(FileExistsError):  # an exclusive write's refusal keeps its kind
        outputs.write_atomic(samples, "new", exclusive=True)

    fix = "free space there" if refusal == "ENOSPC" else "make it writable"
    continues = f"run(cfg) with cfg.train.resume='auto' and cfg.output_dir={str(tmp_path)!r} set in omegaconf.open_dict(cfg)"
    assert stop_record.failure_error(tmp_path, [], failed.value) == (
        f"posterior_samples.npz could not be written in {tmp_path} ({os.strerror(code)}), no partial file left; no "
        f"checkpoint was saved: {fix}, then run it again with: {continues}")
    (tmp_path / "checkpoints" / "20").mkdir(parents=True)
    (tmp_path / "c2st.csv").write_text("observation,c2st\n1,0.6\n")
    assert stop_record.failure_error(tmp_path, [], failed.value) == (
        f"posterior_samples.npz could not be written in {tmp_path} ({os.strerror(code)}), no partial file left; "
        f"checkpoint {tmp_path / 'checkpoints' / '20'} and the scores so far (c2st.csv) kept: {fix}, then continue "
        f"with: {continues}")
    assert stop_record.failure_error(tmp_path, [20], failed.value) == stop_record.failure_error(  # an earlier
        tmp_path, [], failed.value)  # attempt's checkpoint too: the disk failed, not the run, so it is continued
    assert stop_record.failure_error(tmp_path, [], OSError(code, os.strerror(code))) == (  # no file known: as before
        f"OSError: [Errno {code}] {os.strerror(code)}; checkpoint {tmp_path / 'checkpoints' / '20'} was saved before "
        f"it: once that is fixed, continue with: {continues}")


def test_a_checkpoint_save_the_disk_refuses_names_the_command_once(tmp_path):
    # Round 43: a 4060k tmpfs refused checkpoint 20, the run's first: "... No space left on device
    # [os_error_code='28']) ... no earlier checkpoint was saved", no way named, and the same command was refused the
    # folder. A 6 MB one refused step 40: checkpoint 20 named kept twice ("is kept: resume from it; checkpoint ...
    # was saved before it").
    from gensbi_sharding.harness.stop_record import failure_error

    def save_failed(kept):
        return RuntimeError(f"checkpoint step 40 was not saved in {tmp_path / 'checkpoints'}: writing or committing it "
                            "failed (ValueError: RESOURCE_EXHAUSTED: Failed to write 12033 bytes to file 16: No space "
                            f"left on device [os_error_code='28']). Keep the checkpoint folder writable; {kept}")

    continues = f"run(cfg) with cfg.train.resume='auto' and cfg.output_dir={str(tmp_path)!r} set in omegaconf.open_dict(cfg)"
    first = save_failed("no earlier checkpoint was saved")
    assert failure_error(tmp_path, [], first) == (
        f"RuntimeError: {first}; once that is fixed, run it again with: {continues}")
    assert failure_error(tmp_path, [], RuntimeError("diverged")) == "RuntimeError: diverged"  # not the disk
    (tmp_path / "checkpoints" / "20").mkdir(parents=True)
    later = save_failed(f"the latest complete checkpoint, {tmp_path / 'checkpoints' / '20'}, is kept: resume from it")
    assert failure_error(tmp_path, [], later) == (
        f"RuntimeError: {later}; once that is fixed, continue with: {continues}")


def test_a_file_over_the_file_size_limit_names_that_limit_not_free_space(tmp_path, monkeypatch):
    # (ulimit -f 8; python launch.py experiment=quick hydra.run.dir=<run>): a disk with room, the shell's file-size
    # limit 8 KB; each refusal ("File too large", EFBIG) said "free space there (or make it writable)", which changes
    # nothing, and a file the run wrote past it (posterior_samples.npz) was no disk refusal: no file named, no command.
    import errno
    import os
    import resource

    from gensbi_sharding.harness import outputs, run_record, stop_record

    monkeypatch.setattr(resource, "getrlimit", lambda which: (8192, resource.RLIM_INFINITY))
    too_large = OSError(errno.EFBIG, os.strerror(errno.EFBIG), str(tmp_path / "posterior_samples.npz"))
    fix = ("raise the file-size limit of the shell that runs it (ulimit -f: 8 blocks of 1,024 B here; ulimit -f unlimited "
           "lifts it)")
    assert outputs.room_fix(too_large) == fix
    continues = f"run(cfg) with cfg.train.resume='auto' and cfg.output_dir={str(tmp_path)!r} set in omegaconf.open_dict(cfg)"
    assert stop_record.failure_error(tmp_path, [], too_large) == (
        f"posterior_samples.npz could not be written in {tmp_path} (File too large), no partial file left; no "
        f"checkpoint was saved: {fix}, then run it again with: {continues}")

    def over_the_limit(path, data, **kwargs):
        raise OSError(errno.EFBIG, os.strerror(errno.EFBIG), str(path))

    monkeypatch.setattr(outputs, "write_atomic", over_the_limit)
    assert run_record.write_record(tmp_path, {"status": "ok"}) == (
        f"this run's record (metrics.json) could not be written in {tmp_path} (File too large): its outcome is on "
        f"this console only; {fix} before continuing the run")
    monkeypatch.setattr(resource, "getrlimit", lambda which: (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    assert outputs.room_fix(too_large) == ("the file is larger than that file system takes: write to a folder on "
                                          "another disk")  # no limit of the process's: the file system's
    assert outputs.room_fix(OSError(errno.ENOSPC, "No space left on device")) == outputs.MAKE_ROOM


@pytest.mark.slow
def test_a_file_size_limit_that_is_also_the_hard_limit_is_not_told_to_be_lifted_in_that_shell(monkeypatch):
    # Was: 'ulimit -f 8' typed in a user's bash (which sets the soft and the hard limit), then launch.py: "... (ulimit
    # -f: 8 KB here; ulimit -f unlimited lifts it)", which pasted in that shell was refused: "ulimit: file size: cannot
    # modify limit: Operation not permitted". Now a new shell is named there, and 'ulimit -f hard' below a higher one.
    import errno
    import os
    import resource
    import subprocess

    from gensbi_sharding.harness import outputs

    too_large = OSError(errno.EFBIG, os.strerror(errno.EFBIG), "posterior_samples.npz")
    monkeypatch.setattr(resource, "getrlimit", lambda which: (8192, 8192))
    assert outputs.room_fix(too_large) == (
        "run it from a new shell: this one's file-size limit (8 blocks of 1,024 B) is its hard limit too, which only root raises "
        "(bash's ulimit -f <N> sets both); where a new shell has it too, ask the administrator")
    monkeypatch.setattr(resource, "getrlimit", lambda which: (8192, 65536))
    said = outputs.room_fix(too_large)
    assert said == ("raise the file-size limit of the shell that runs it (ulimit -f: 8 blocks of 1,024 B here; ulimit "
                    "-f hard raises it to its hard limit, 64 blocks)")  # the shell's unit, as ulimit -f prints it
    pasted = said.split("; ")[1].split(" raises")[0]  # the command, pasted in a bash of those limits
    done = subprocess.run(["bash", "-c", f"ulimit -Sf 8 && ulimit -Hf 64 && {pasted} && ulimit -Sf"],
                          capture_output=True, text=True, timeout=30)
    assert (done.returncode, done.stdout.strip()) == (0, "64"), done.stderr

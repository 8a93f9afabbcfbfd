"""Faults found by using the harness as a user would, round 34: features meeting states a real user gets into.

Each test names what was typed, what happened, and what happens now.
"""

import csv
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from faults_helpers import compose_tiny, saved_checkpoint
from gensbi_sharding.harness import local_cluster, memory_check
from gensbi_sharding.harness.config import ConfigError
from gensbi_sharding.harness.sweep_check import job_problem

REPO = Path(__file__).resolve().parents[1]


def test_local_processes_beyond_the_hosts_memory_are_refused_before_any_starts(monkeypatch, tmp_path):
    # launch.py distributed=local data.num_simulations=100000000: was refused by each started process (after JAX's
    # import, one refusal per process); the sweep's pre-check did not check it at all. Now the parent refuses.
    monkeypatch.setattr(memory_check, "host_available_bytes", lambda: 10**9)
    monkeypatch.setattr(local_cluster.subprocess, "Popen", lambda *a, **k: pytest.fail("a process started"))
    cfg = compose_tiny("distributed=local", "devices.cpu_count=8", "data.num_simulations=100000000")
    refusal = ("data.num_simulations=100000000 cannot fit: its simulations need about 6.4 GB on this host (2 processes "
               "of distributed=local share it) (4 copies of theta and x as float32), but 1.0 GB is available; set "
               "data.num_simulations=7800000 or fewer (half of it)")
    with pytest.raises(ConfigError) as err:
        local_cluster.run_local_processes(cfg, tmp_path)
    assert str(err.value) == refusal
    assert job_problem(cfg) == f"ConfigError: {refusal}"  # a sweep's pre-check: before its first job
    assert job_problem(compose_tiny("distributed=local", "devices.cpu_count=8", "data.num_simulations=7800000")) is None
    assert job_problem(compose_tiny("distributed=local", "devices.cpu_count=8", "data.num_simulations=100000000",
                                    "dry_run=true")) is None  # a dry run simulates none


WHERE = ["as job 1 starts", "as job 0 ends", "again as the summary is written"]


def _ctrl_c_script(where: str, sweep: Path) -> str:
    """``launch.py -m train.steps=1,2,3`` into ``sweep``, run() stubbed, Ctrl-C landing ``where``."""
    hook = ("import gensbi_sharding.harness.summary as s\ns.SweepSummary.on_job_start = interrupted\n"
            if where != "as job 0 ends" else
            "import gensbi_sharding.harness.run_report as rr\nrr.final_line = interrupted\n")
    if where.startswith("again"):  # a second Ctrl-C cuts the summary short: no traceback, still exit 130
        hook += "s.refresh_sweep_summary = interrupted\n"
    script = ("import json\nimport gensbi_sharding.harness.run as r\n"
              "from gensbi_sharding.harness.run_folder import output_dir\ncalls = []\n"
              "def interrupted(*args, **kwargs):\n    if calls:\n        raise KeyboardInterrupt\n"
              "    return 'x'\n" + hook +
              "def fake(cfg):\n    calls.append(1)\n"
              "    (output_dir(cfg) / 'metrics.json').write_text(json.dumps({'status': 'ok', 'c2st': 0.5}))\n"
              "    return {'status': 'ok', 'c2st': 0.5}\nr.run = fake\nimport runpy, sys\n"
              f"sys.argv = ['launch.py', '-m', 'train.steps=1,2,3', 'hydra.sweep.dir={sweep}']\n"
              "runpy.run_path('launch.py', run_name='__main__')\n")
    return script


def _no_record_script(sweep: Path) -> str:
    """``launch.py -m train.steps=1,2`` into ``sweep``, run() stubbed: job 1 refused before its metrics.json."""
    return ("import json\nimport gensbi_sharding.harness.run as r\n"
            "from gensbi_sharding.harness.run_folder import output_dir\n"
            "def fake(cfg):\n    if cfg.train.steps == 2:\n"
            "        return {'status': 'error', 'error': 'FolderInUseError'}\n"
            "    (output_dir(cfg) / 'metrics.json').write_text(json.dumps({'status': 'ok', 'c2st': 0.5}))\n"
            "    return {'status': 'ok', 'c2st': 0.5}\nr.run = fake\nimport runpy, sys\n"
            f"sys.argv = ['launch.py', '-m', 'train.steps=1,2', 'hydra.sweep.dir={sweep}']\n"
            "runpy.run_path('launch.py', run_name='__main__')\n")


#: What ``launch.py -m`` imports inside its functions, with run() stubbed (none starts a thread or JAX's backend).
SWEEP_IMPORTS = ("hydra._internal.core_plugins.basic_sweeper", "hydra._internal.core_plugins.basic_launcher",
                 "hydra_plugins.hydra_submitit_launcher.submitit_launcher", "gensbi_sharding.harness.sweep_check",
                 "gensbi_sharding.harness.models", "gensbi_sharding.harness.simulation_data", "matplotlib.figure",
                 "matplotlib.backends.backend_agg", "mpl_toolkits.mplot3d", "PIL.Image")


@pytest.fixture(scope="module")
def stubbed_sweeps(tmp_path_factory):
    """``{case: (its process, its sweep folder)}``: each script above as ``python -c <script>`` in the repository
    would run it, forked one after the other from one process that imported launch.py's modules once
    (tests/fork_launch.py: each still a process of its own, from the script's first line; ~2 s of CPU less each).
    What a sweep imports inside launch.py's functions (Hydra's sweeper and launchers, the pre-check's modules, the
    summary's figure) is imported there once too (~0.3 s of CPU less each)."""
    import os

    from fork_launch import REPO as FORK_REPO, run_forked, script_imports

    root = tmp_path_factory.mktemp("stubbed_sweeps")
    (root / "run.py").write_text("import runpy, sys\nrunpy.run_path(sys.argv[1], run_name='__main__')\n")
    sweeps = {**{where: root / f"ctrl_c{i}" / "sweep" for i, where in enumerate(WHERE)},
              "no record": root / "no_record" / "sweep"}
    runs = []
    for i, (case, sweep) in enumerate(sweeps.items()):
        sweep.parent.mkdir()
        script = _no_record_script(sweep) if case == "no record" else _ctrl_c_script(case, sweep)
        (root / f"{i}.py").write_text(script)
        runs.append({"args": [str(root / f"{i}.py")], "cwd": REPO})
    (root / "fork").mkdir()
    procs = run_forked(runs, env=dict(os.environ), timeout=120 * len(runs), workdir=root / "fork",
                       script=root / "run.py", imports=(*script_imports(FORK_REPO / "launch.py"), *SWEEP_IMPORTS))
    return {case: (proc, sweeps[case]) for case, proc in zip(sweeps, procs)}


@pytest.mark.slow  # three launch.py sweeps (run() stubbed)
@pytest.mark.parametrize("where", WHERE)
def test_ctrl_c_between_a_sweeps_jobs_writes_its_summary_as_a_preemption_there_does(stubbed_sweeps, where):
    # launch.py -m train.steps=1,2,3, Ctrl-C after job 0 ended: was one line and no sweep_summary.* (Hydra's end of
    # sweep never came; a SIGTERM there wrote them). Now: the summary, jobs 1 and 2 'not run', how to continue, the
    # sweep's outcome last, as for SIGTERM. The Ctrl-C lands once Hydra made job 1's folder, or before.
    proc, sweep = stubbed_sweeps[where]
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 130 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    if where.startswith("again"):
        assert lines[-2:] == ["interrupted by Ctrl-C after 1 job(s) ended, each recorded in its folder's metrics.json",
                              "Ctrl-C again: the sweep's summary was not rewritten"], lines
        return
    later = "job 1 and those after it did not start" if where == "as job 1 starts" else "no later job started"
    assert lines[-3:] == [
        f"interrupted by Ctrl-C between the sweep's jobs: 1 job(s) ended, each recorded in its folder's metrics.json; "
        f"{later}",
        "to continue the rest of the sweep, a sweep folder holding completed jobs is never rerun as a whole: continue "
        f"its unfinished jobs (2 never started) one by one: python launch.py train.steps=2 train.resume=auto "
        f"hydra.mode=RUN hydra.run.dir={sweep / '1'} ; python launch.py train.steps=3 train.resume=auto hydra.mode=RUN "
        f"hydra.run.dir={sweep / '2'}",
        f"sweep stopped: 1 ok, 0 failed, 2 not run; sweep_summary.csv/.md/.png in {sweep}"], lines
    with open(sweep / "sweep_summary.csv", newline="") as f:
        rows = [(row["job"], row["train.steps"], row["status"]) for row in csv.DictReader(f)]
    assert rows == [("0", "1", "ok"), ("1", "2", "not run"), ("2", "3", "not run")]


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


def _held_elsewhere(folder: Path) -> subprocess.Popen:
    """A process holding ``folder``'s run lock and owner note (as ``FolderLock`` does for a running run or sweep)."""
    code = ("import json, os, sys, time\nfrom filelock import FileLock\nfolder = sys.argv[1]\n"
            "lock = FileLock(os.path.join(folder, '.run.lock'), timeout=0)\nlock.acquire()\n"
            "json.dump({'pid': os.getpid(), 'host': 'here', 'started': 'now', 'command': 'launch.py'}, "
            "open(os.path.join(folder, '.run.owner.json'), 'w'))\nprint('held', flush=True)\ntime.sleep(120)\n")
    holder = subprocess.Popen([sys.executable, "-c", code, str(folder)], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    return holder


def test_a_run_and_a_sweep_never_share_a_job_folder_while_either_runs(tmp_path):
    # launch.py ... hydra.run.dir=<sweep>/1 while `-m` ran that sweep: the sweep, reaching job 1, had Hydra replace the
    # run's .hydra/ record, then failed the job (FolderInUseError) and still ended "sweep done: 1 ok, 0 failed" with
    # exit code 1. Now each is refused before Hydra writes: the run while the sweep runs, the sweep while the run does.
    from gensbi_sharding.harness.folder_lock import folder_problem

    sweep = tmp_path / "sweep"
    (sweep / "1").mkdir(parents=True)
    (sweep / "multirun.yaml").write_text("")
    holder = _held_elsewhere(sweep)
    try:
        refusal = folder_problem(sweep / "1", sweep=False, before_hydra=True)
        assert refusal == (f"hydra.run.dir={sweep / '1'} is a job folder of the sweep {sweep}, which is running (pid "
                           f"{holder.pid} on here, started now: launch.py): the sweep writes its jobs; wait for it to end, "
                           "or choose another hydra.run.dir")
        assert folder_problem(sweep / "1", sweep=False) is None  # the sweep's own job: its sweep holds the lock
    finally:
        holder.kill()
        holder.wait()
    assert folder_problem(sweep / "1", sweep=False, before_hydra=True) is None  # a stopped sweep's job, continued
    holder = _held_elsewhere(sweep / "1")
    try:
        refusal = folder_problem(sweep, sweep=True, before_hydra=True)
        assert refusal == (f"hydra.sweep.dir={sweep}: its job folder {sweep / '1'} is in use by a run (pid "
                           f"{holder.pid} on here, started now: launch.py); wait for that run to end, or choose another "
                           "hydra.sweep.dir")
    finally:
        holder.kill()
        holder.wait()
    assert folder_problem(sweep, sweep=True, before_hydra=True) is None


@pytest.mark.slow  # one launch.py sweep (run() stubbed)
def test_a_sweeps_job_that_ended_without_a_record_is_a_row_of_its_summary(stubbed_sweeps):
    # A job refused before run() could write its metrics.json (its folder in use by another run): the summary left it
    # out and the sweep ended "sweep done: 1 ok, 0 failed" while it exited 1. Now its row says 'not run'.
    proc, sweep = stubbed_sweeps["no record"]
    lines = proc.stdout.strip().splitlines()
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert lines[-1].startswith("sweep stopped after ") and lines[-1].endswith(
        f": 1 ok, 0 failed, 1 not run; sweep_summary.csv/.md/.png in {sweep}"), lines
    with open(sweep / "sweep_summary.csv", newline="") as f:
        assert [(row["job"], row["status"]) for row in csv.DictReader(f)] == [("0", "ok"), ("1", "not run")]


@pytest.mark.parametrize("given", [None, "mine.npz"])
def test_sample_py_refuses_an_output_folder_it_cannot_write_before_sampling(tmp_path, monkeypatch, capsys, given):
    # python sample.py <run> /data/readonly/x_o.npy: was the posterior drawn, then an OSError traceback as the default
    # output beside the observation (or --out's) was written. Now refused first, naming the folder and --out.
    from gensbi_sharding.harness import own_observation, sample_output
    from gensbi_sharding.harness.simulation_data import NORMALIZATION

    def read_only(**kwargs):
        raise OSError(30, "Read-only file system")

    saved_checkpoint(tmp_path, {"data": {"name": "two_moons", "x_transform": "none"}, "model": {"name": "mlp"},
                                "eval": {"num_samples": 8, "ode_steps": 4}, "seed": 0},  # as a run saves them
                     {NORMALIZATION: {"x_mean": [0.0, 0.0], "theta_mean": [0.0, 0.0]}})  # a run's folder, found good
    np.save(tmp_path / "x_o.npy", np.zeros(2))
    monkeypatch.setattr(sample_output.tempfile, "mkdtemp", read_only)
    monkeypatch.setattr(own_observation, "sample_posterior", lambda *a, **k: pytest.fail("sampled"))
    out = tmp_path / ("mine.npz" if given else "x_o_posterior.npz")
    with pytest.raises(SystemExit):
        own_observation.main([str(tmp_path), str(tmp_path / "x_o.npy"), *(["--out", str(out)] if given else [])])
    which = f"--out {out}" if given else f"the default output {out} (beside the observation file)"
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"sample.py: error: {which}: cannot write in {tmp_path} (Read-only file system); pass --out <a file in a folder "
        "you can write to>.npz")


def test_a_run_ctrl_c_stopped_at_once_names_the_step_it_continues_from(tmp_path):
    # Was "interrupted (Ctrl-C); continue with: ...": the first Ctrl-C's line names the step and its checkpoint
    # ("interrupted by Ctrl-C (SIGINT) at step 441; checkpoint ..."), the second's (at once) did not.
    from gensbi_sharding.harness.stop_record import at_once_error

    assert at_once_error(tmp_path, 4800) == (
        f"interrupted (Ctrl-C); stopped at once, saved up to step 4800 ({tmp_path / 'checkpoints' / '4800'}); continue "
        f"with: run(cfg) with cfg.train.resume='auto' and cfg.output_dir={str(tmp_path)!r} set in omegaconf.open_dict(cfg)")
    assert at_once_error(tmp_path, 40, "KeyboardInterrupt: c2st worker").startswith(
        "interrupted (Ctrl-C): KeyboardInterrupt: c2st worker; stopped at once, saved up to step 40 (")
    assert at_once_error(tmp_path, None) == "interrupted (Ctrl-C); stopped at once, with no checkpoint to continue from"


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


def test_a_record_the_disk_refuses_after_a_checkpoint_names_how_to_continue_and_the_folder_says_why_it_waits(
        tmp_path, monkeypatch):
    # Round 43: a run trained, saved step 20 and scored its C2ST, then its metrics.json met a full disk: "free space
    # there before continuing the run" named no way to continue, and the same command again was refused as "an
    # interrupted run's checkpoints", which it was not.
    import errno
    import os

    from gensbi_sharding.harness import outputs, run_folder

    def disk_full(path, data, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))

    (tmp_path / "checkpoints" / "20").mkdir(parents=True)
    monkeypatch.setattr(outputs, "write_atomic", disk_full)
    # Its folder named, as the shell reads it back (was: "the same command plus train.resume=auto", which in the
    # default outputs/<date>/<time> is a new folder: train.resume=auto there starts from step 0).
    assert outputs.write_record(tmp_path, {"status": "ok"}).endswith(
        "free space there (or make it writable), then continue it with run(cfg) with "
        f"cfg.train.resume='auto' and cfg.output_dir={str(tmp_path)!r} set in omegaconf.open_dict(cfg) (its checkpoints are kept)")
    (spaced := tmp_path / "my runs" / "checkpoints" / "20").mkdir(parents=True)
    assert outputs.write_record(spaced.parent.parent, {"status": "ok"}).endswith(
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

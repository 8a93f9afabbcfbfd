"""BREAK77's kill loop, made deterministic: a run killed outright (SIGKILL, out of memory, a node lost) leaves its
folder as the kill found it, with no record of its own; the continued run must end as the uninterrupted one did."""

import json
import os
from pathlib import Path

import numpy as np
import pytest

from faults_helpers import run_tiny


_KILLED_AFTER = """
import os, sys, time
from pathlib import Path
sys.path.insert(0, {tests!r})
import conftest  # the simulated devices and flags the tests run under
from faults_helpers import run_tiny
from gensbi_sharding.harness import train as train_module

out, real = Path({out!r}), train_module.train

def train(*args, on_step, **kwargs):
    def hook(at, state):
        if at == {after} + 2:  # killed outright two steps past the checkpoint, once it is committed
            deadline = time.monotonic() + 120
            while not (out / "checkpoints" / "{after}").is_dir() and time.monotonic() < deadline:
                time.sleep(0.05)
            os._exit(137)
        return on_step(at, state)
    return real(*args, on_step=hook, **kwargs)

train_module.train = train
run_tiny(out, "train.checkpoint_every={after}", "train.resume=auto")
"""


def _killed_after(out, step):
    """``out`` as a run of the tiny config (``train.checkpoint_every=step``) killed outright (``os._exit``: no handler,
    no record, as SIGKILL) two steps after its checkpoint ``step`` committed."""
    import subprocess
    import sys

    code = _KILLED_AFTER.format(tests=str(Path(__file__).parent), out=str(out), after=step)
    done = subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).parents[1], timeout=300,
                          capture_output=True, text=True)
    assert done.returncode == 137, done.stderr[-2000:]
    assert not (out / "metrics.json").exists() and (out / "checkpoints" / str(step)).is_dir()


@pytest.mark.slow  # two end-to-end runs in this process, one in a second interpreter
def test_a_run_killed_outright_keeps_the_losses_of_the_steps_its_checkpoint_holds(tmp_path, devices):
    # Was (the kill loop, scenario s02): SIGKILL at step ~20, continued by train.resume=auto from checkpoints/10;
    # the run ended ok, final_step 60, but train_losses.npz and losses.png held steps 11..60 only, where the docs
    # promise the whole curve (docs/checkpoints.md: "train_losses.npz keeps the whole curve").
    ref = tmp_path / "ref"
    assert run_tiny(ref, "train.checkpoint_every=4")["status"] == "ok"
    with np.load(ref / "train_losses.npz") as f:
        ref_steps, ref_losses = f["step"].copy(), f["losses"].copy()
    killed = tmp_path / "killed"
    _killed_after(killed, 4)
    resumed = run_tiny(killed, "train.checkpoint_every=4", "train.resume=auto")
    assert resumed["status"] == "ok" and resumed["resumed_from_step"] == 4 and resumed["final_step"] == 8
    with np.load(killed / "train_losses.npz") as f:
        np.testing.assert_array_equal(f["step"], ref_steps)   # was: [5 6 7 8]
        np.testing.assert_allclose(f["losses"], ref_losses, rtol=1e-6, atol=0)


def _dead_pid() -> int:
    """The pid of a process that has ended (and been reaped)."""
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait(timeout=60)
    return proc.pid


def test_a_continued_run_removes_the_cut_off_writes_of_an_attempt_killed_outright(tmp_path):
    # Was: outputs.write_atomic writes .<name>.<pid>.<hex>.tmp, then renames it; a SIGKILL in between (the kill loop's
    # window: metrics.json, posterior_samples.npz, sweep_summary.csv as they are written) left the hidden, cut-off copy
    # in the folder for good, through every later attempt, however many kills (megabytes each for a samples file).
    from faults_helpers import compose_tiny
    from gensbi_sharding.harness.run_folder import RunFolder

    out = tmp_path / "run"
    (out / "checkpoints" / "4").mkdir(parents=True)
    (out / ".hydra").mkdir()
    (out / "metrics.json").write_text('{"status": "preempted", "stopped_at_step": 4}')
    dead, alive = _dead_pid(), os.getppid()
    cut = [f".metrics.json.{dead}.0a1b2c3d.tmp", f".posterior_samples.npz.{dead}.deadbeef.tmp",
           f".hydra/.x64.yaml.{dead}.00000000.tmp"]
    kept = [f".c2st.csv.{alive}.0a1b2c3d.tmp",  # a process alive: its write may be under way
            f".c2st.csv.{os.getpid()}.0a1b2c3d.tmp",  # this one's
            f"notes.{dead}.0a1b2c3d.tmp", f".metrics.json.{dead}.xyz.tmp"]  # not write_atomic's names
    for name in cut + kept:
        (out / name).write_bytes(b"cut off")
    folder = RunFolder(out, compose_tiny("train.resume=auto", output_dir=out))
    folder.claim()
    folder.release()
    assert [name for name in cut if (out / name).exists()] == []  # was: all three left
    assert [name for name in kept if (out / name).exists()] == kept
    assert json.loads((out / "metrics.json").read_text())["status"] == "preempted"  # the record itself untouched


def test_drop_cut_writes_names_what_it_removed_and_leaves_a_fresh_folder_alone(tmp_path):
    from gensbi_sharding.harness.earlier_attempts import drop_cut_writes

    assert drop_cut_writes(tmp_path / "missing") == []
    assert drop_cut_writes(tmp_path) == []
    dead = _dead_pid()
    (tmp_path / f".train_losses.npz.{dead}.89abcdef.tmp").write_bytes(b"x")
    (tmp_path / f".losses.png.{dead}.89abcdef.tmp").mkdir()  # a folder of that name is no write of ours
    assert drop_cut_writes(tmp_path) == [f".train_losses.npz.{dead}.89abcdef.tmp"]
    assert (tmp_path / f".losses.png.{dead}.89abcdef.tmp").is_dir()


def _completed_sweep(sweep):
    """A sweep folder of two completed jobs (rule=fsdp,tensor) as a kill before its summary leaves it."""
    from gensbi_sharding.harness import outputs

    for job in (0, 1):
        outputs.write_json(sweep / str(job) / "metrics.json", {"status": "ok", "final_step": 20})
        (sweep / str(job) / "checkpoints" / "20").mkdir(parents=True)
        (sweep / str(job) / ".hydra").mkdir()
        (sweep / str(job) / ".hydra" / "overrides.yaml").write_text(
            f"- experiment=quick\n- rule={['fsdp', 'tensor'][job]}\n")
    from omegaconf import OmegaConf

    config = OmegaConf.create({"hydra": {"sweep": {"dir": str(sweep)},
                                         "overrides": {"task": ["experiment=quick", "rule=fsdp,tensor"]}},
                               "train": {"resume": None, "steps": 20}})
    OmegaConf.save(config, sweep / "multirun.yaml")  # Hydra's, written as the sweep started
    return config


def test_a_sweep_killed_before_its_summary_is_told_how_to_write_it_when_rerun(tmp_path, capsys):
    # Was (the kill loop: SIGKILL as the sweep's last job ended): no sweep_summary.csv/.md/.png, and the rerun (the
    # requeue) was refused "2 of its 2 jobs complete ... to train it further ... into a new folder", no word of the
    # missing summary nor of the command that writes it.
    import shlex

    from gensbi_sharding.harness import folder_claim
    from gensbi_sharding.harness.summary import write_summary

    sweep = tmp_path / "multirun"
    config = _completed_sweep(sweep)
    with pytest.raises(SystemExit):
        folder_claim.RefuseCompletedRun().on_multirun_start(config)
    printed = capsys.readouterr().err
    assert printed.startswith(f"[ERROR] hydra.sweep.dir={sweep}: 2 of its 2 jobs complete (0, 1); job 0: ")
    said = "every job completed, but the sweep's summary (sweep_summary.csv) was never written"
    assert said in printed
    code = shlex.split(printed.split("write it with: python -c ", 1)[1].strip())[0]
    assert "refresh_sweep_summary" in code and str(sweep / "0") in code
    # A summary there: the refusal says nothing of it.
    write_summary(sweep, ["rule"])
    with pytest.raises(SystemExit):
        folder_claim.RefuseCompletedRun().on_multirun_start(config)
    assert said not in capsys.readouterr().err


def test_a_sweep_rerun_removes_the_cut_off_summary_write_of_a_sweep_killed_while_writing_it(tmp_path, capsys):
    from gensbi_sharding.harness import folder_claim

    sweep = tmp_path / "multirun"
    config = _completed_sweep(sweep)
    cut = sweep / f".sweep_summary.csv.{_dead_pid()}.0a1b2c3d.tmp"
    cut.write_text("job,rule\n0,fs")
    with pytest.raises(SystemExit):  # refused (every job complete), the leftover gone all the same
        folder_claim.RefuseCompletedRun().on_multirun_start(config)
    assert not cut.exists()  # was: left for good


@pytest.mark.slow  # a second interpreter
def test_the_command_a_summaryless_sweep_is_told_writes_its_summary(tmp_path, capsys):
    import shlex
    import subprocess
    import sys

    from gensbi_sharding.harness import folder_claim

    sweep = tmp_path / "multirun"
    config = _completed_sweep(sweep)
    with pytest.raises(SystemExit):
        folder_claim.RefuseCompletedRun().on_multirun_start(config)
    code = shlex.split(capsys.readouterr().err.split("write it with: python -c ", 1)[1].strip())[0]
    subprocess.run([sys.executable, "-c", code], check=True, timeout=300, capture_output=True)
    assert (sweep / "sweep_summary.csv").read_text().count("\n") == 3  # the head and the two jobs

"""A run killed outright keeps its loss curve (BREAK77's F4), whichever of a save's two writes the kill falls between.

Each checkpoint save writes ``train_losses.npz`` (the curve up to that step) and then the checkpoint. Killed between
the two, the file is ahead of the newest checkpoint: the continued run keeps only its steps up to the checkpoint it
resumes from. Killed in the file's write, neither is written: the file holds the previous save's steps, the checkpoint
too. Either way the continued run ends with the uninterrupted run's curve, every step once.
"""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from faults_helpers import run_tiny

# A run of the tiny config (8 steps, a checkpoint every 4) killed outright (os._exit: no handler, no record) at the
# save of step 8: in its checkpoint's write (train_losses.npz written) or in train_losses.npz's (nothing written).
_KILLED_IN = """
import os, sys
from pathlib import Path
sys.path.insert(0, {tests!r})
import conftest  # the simulated devices and flags the tests run under
from faults_helpers import run_tiny
from gensbi_sharding import checkpoint_save
from gensbi_sharding.harness import outputs

out, in_write = Path({out!r}), {in_write!r}
real_save, real_npz = checkpoint_save.CheckpointWriter.save, outputs.write_npz

def save(self, step, *args, **kwargs):
    if step == 8 and in_write == "checkpoint":
        os._exit(137)
    return real_save(self, step, *args, **kwargs)

def write_npz(path, **arrays):
    if Path(path).name == "train_losses.npz" and in_write == "losses" and len(arrays["step"]) == 8:
        os._exit(137)
    return real_npz(path, **arrays)

checkpoint_save.CheckpointWriter.save, outputs.write_npz = save, write_npz
run_tiny(out, "train.checkpoint_every=4", "train.resume=auto")
"""


@pytest.fixture(scope="module")
def reference(tmp_path_factory, devices):
    ref = tmp_path_factory.mktemp("ref")
    assert run_tiny(ref, "train.checkpoint_every=4")["status"] == "ok"
    with np.load(ref / "train_losses.npz") as f:
        return {name: f[name].copy() for name in ("step", "losses", "val_step", "val_losses")}


@pytest.mark.slow  # an end-to-end run in this process, one in a second interpreter
@pytest.mark.parametrize("in_write, file_steps", [("checkpoint", 8), ("losses", 4)])
def test_a_run_killed_inside_a_save_continues_to_the_whole_curve(tmp_path, reference, in_write, file_steps):
    out = tmp_path / "run"
    code = _KILLED_IN.format(tests=str(Path(__file__).parent), out=str(out), in_write=in_write)
    done = subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).parents[1], timeout=300,
                          capture_output=True, text=True)
    assert done.returncode == 137, done.stderr[-2000:]
    # As the kill left it: checkpoint 4 the newest, the file at the save before the kill or at the one it cut
    assert sorted(p.name for p in (out / "checkpoints").iterdir() if p.name.isdigit()) == ["4"]
    assert not (out / "metrics.json").exists()
    with np.load(out / "train_losses.npz") as f:
        np.testing.assert_array_equal(f["step"], np.arange(1, file_steps + 1))
        np.testing.assert_array_equal(f["losses"], reference["losses"][:file_steps])
    resumed = run_tiny(out, "train.checkpoint_every=4", "train.resume=auto")
    assert resumed["status"] == "ok" and resumed["resumed_from_step"] == 4 and resumed["final_step"] == 8
    with np.load(out / "train_losses.npz") as f:
        np.testing.assert_array_equal(f["step"], reference["step"])  # steps 5-8 once: the file's own dropped
        np.testing.assert_allclose(f["losses"], reference["losses"], rtol=1e-6, atol=0)
        np.testing.assert_array_equal(f["val_step"], reference["val_step"])
        np.testing.assert_allclose(f["val_losses"], reference["val_losses"], rtol=1e-6, atol=0)
        np.testing.assert_array_equal(f["resumed_at"], [4])

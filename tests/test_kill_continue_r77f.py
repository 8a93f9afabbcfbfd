"""BREAK77's kill loop, made deterministic: a run killed outright (SIGKILL, out of memory, a node lost) leaves its
folder as the kill found it, with no record of its own; the continued run must end as the uninterrupted one did."""

import shutil

import numpy as np
import pytest

from faults_helpers import run_tiny


def _as_killed_after(folder, step):
    """``folder``, a finished run's, as a SIGKILL right after ``step``'s checkpoint committed would have left it: the
    Hydra record, the lock and owner note, launch.log, sharding.txt and the checkpoints up to ``step``; nothing the
    run writes at its end or stop (metrics.json, train_losses.npz, losses.png), no later checkpoint."""
    for name in ("metrics.json", "train_losses.npz", "losses.png", "error.txt"):
        (folder / name).unlink(missing_ok=True)
    for ckpt in (folder / "checkpoints").iterdir():
        if ckpt.name.isdigit() and int(ckpt.name) > step:
            shutil.rmtree(ckpt)


@pytest.mark.slow  # three end-to-end runs in this process
@pytest.mark.xfail(strict=True, reason="BREAK77: a killed attempt's train losses live nowhere its continuation reads "
                                       "(fix outside BREAK77's files: findings, 'lost losses')")
def test_a_run_killed_outright_keeps_the_losses_of_the_steps_its_checkpoint_holds(tmp_path, devices):
    # Was (the kill loop, scenario s02): SIGKILL at step ~20, continued by train.resume=auto from checkpoints/10;
    # the run ended ok, final_step 60, but train_losses.npz and losses.png held steps 11..60 only, where the docs
    # promise the whole curve (docs/checkpoints.md: "train_losses.npz keeps the whole curve").
    ref = tmp_path / "ref"
    assert run_tiny(ref, "train.checkpoint_every=4")["status"] == "ok"
    with np.load(ref / "train_losses.npz") as f:
        ref_steps, ref_losses = f["step"].copy(), f["losses"].copy()
    killed = tmp_path / "killed"
    shutil.copytree(ref, killed)
    _as_killed_after(killed, 4)
    resumed = run_tiny(killed, "train.checkpoint_every=4", "train.resume=auto")
    assert resumed["status"] == "ok" and resumed["resumed_from_step"] == 4 and resumed["final_step"] == 8
    with np.load(killed / "train_losses.npz") as f:
        np.testing.assert_array_equal(f["step"], ref_steps)   # was: [5 6 7 8]
        np.testing.assert_allclose(f["losses"], ref_losses, rtol=1e-6, atol=0)

"""A resumed run's progress bar shows the uninterrupted run's loss for the window it resumed in (round 67's review:
resumed at step 400 of 405 with train.log_every=30, the bar ended 'loss=0.6662', the mean of steps 401-405 alone,
above 'train loss 0.6798 (mean of the last 15 steps)', the mean of steps 391-405 that metrics.json records)."""

import re

import jax
import numpy as np
import optax
import pytest
from flax import nnx

from faults_helpers import ctrl_c_after, run_tiny
from gensbi_sharding.harness import train
from test_run_report import Velocity


@pytest.mark.slow
def test_the_first_windows_loss_counts_the_earlier_attempts_steps_of_it(devices, capsys):
    model = Velocity(nnx.Rngs(0))
    functions, state = train.make_step_functions(model, nnx.Optimizer(model, optax.adamw(1e-3), wrt=nnx.Param), None)
    rng = np.random.default_rng(0)
    batches = iter([{"theta": rng.normal(size=(8, 2)).astype(np.float32),
                     "x": rng.normal(size=(8, 2)).astype(np.float32)} for _ in range(4)])
    # resumed at step 4, log_every=3: windows 4-6 (step 4 the earlier attempt's, loss 10.0) and 7
    result = train.train(functions, state, batches, steps=3, key=jax.random.key(0), mesh=None, batch_size=8,
                         log_every=3, progress=True, start_step=4, window_head=[10.0])
    shown = [float(v) for v in re.findall(r"loss=(\d+\.\d{4})", capsys.readouterr().err)]
    assert shown[0] == pytest.approx((10.0 + result.losses[:2].sum()) / 3, abs=1e-4)
    assert shown[-1] == pytest.approx(float(result.losses[2]), abs=1e-4)  # the next window: this attempt's alone
    assert len(result.losses) == 3  # the earlier loss is shown, not returned as this attempt's


@pytest.mark.slow  # two end-to-end runs (stopped, resumed)
def test_a_resumed_runs_last_bar_loss_is_its_final_train_loss(tmp_path, monkeypatch, capsys, devices):
    # 6 steps, log_every=3 (windows 1-3, 4-6), stopped after step 5 and resumed from checkpoint 4: the resumed
    # attempt's one window holds step 4 (the earlier attempt's) and steps 5-6
    settings = ("train.log_every=3", "train.checkpoint_every=2", "train.steps=6")
    out = tmp_path / "run"
    with monkeypatch.context() as patch:
        ctrl_c_after(patch, 5)  # the run continues from checkpoint 4
        with pytest.raises(KeyboardInterrupt):
            run_tiny(out, *settings)
    capsys.readouterr()
    resumed = run_tiny(out, *settings, "train.resume=auto")
    assert resumed["resumed_from_step"] == 4 and resumed["final_step"] == 6
    shown = re.findall(r"loss=(\d+\.\d{4})", capsys.readouterr().err)
    # window 4-6: step 4 from the earlier attempt, 5-6 from this one; shown alone they gave another mean
    assert shown and shown[-1] == f"{resumed['final_train_loss']:.4f}"
    with np.load(out / "train_losses.npz") as f:
        assert resumed["final_train_loss"] == pytest.approx(float(f["losses"][3:6].mean()), rel=1e-6)

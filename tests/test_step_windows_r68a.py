"""The median step time leaves out the first (warm-up) window whenever another follows (review of session 68).

Was: ``windows[1:] if len(windows) > 2``: with exactly two windows the warm-up was averaged in (experiment=quick:
17,777 samples/s where its steady window ran 24,101).
"""

import itertools

import jax
import numpy as np
import pytest
from flax import nnx

from gensbi_sharding.harness import train as T
from gensbi_sharding.harness.data import iterate_batches
from gensbi_sharding.harness.models.mlp import make_mlp
from gensbi_sharding.harness.step_timer import StepTimer


def _run(steps: int, ends: list[float]) -> T.TrainResult:
    """``steps`` steps in windows of 2, the scripted clock's window ``i`` ending at ``ends[i]`` (no timings)."""
    readings = itertools.chain([0.0, 0.0], *([end, end] for end in ends), itertools.repeat(ends[-1]))
    model = make_mlp(dim_theta=2, dim_x=3, rngs=nnx.Rngs(0), width=8, depth=1, time_embed_dim=4)
    tx = T.make_optimizer(learning_rate=1e-3, weight_decay=0.0, steps=steps, schedule="constant")
    functions, state = T.make_step_functions(model, nnx.Optimizer(model, tx, wrt=nnx.Param), None)
    rng = np.random.default_rng(0)
    batches = iterate_batches(rng.standard_normal((32, 2)).astype(np.float32),
                              rng.standard_normal((32, 3)).astype(np.float32), batch_size=8, seed=0, mesh=None,
                              place=False)
    return T.train(functions, state, batches, steps=steps, key=jax.random.key(0), mesh=None, batch_size=8,
                   log_every=2, progress=False, timer=StepTimer(clock=lambda: next(readings), sync=lambda _: None))


@pytest.mark.slow
@pytest.mark.parametrize("ends, median", [
    ([8.0, 10.0], 1.0),              # two windows: 4 s/step warming up, then 1 (was their mean, 2.5)
    ([8.0, 10.0, 13.0], 1.25),       # three: the median of 1 and 1.5, as before
])  # one window: timed from its second step on since round 70 (tests/test_train_speed_r70c.py)
def test_the_median_step_leaves_out_the_first_window_when_another_follows(ends, median):
    result = _run(2 * len(ends), ends)
    assert result.median_step_s == pytest.approx(median) and result.samples_per_s == pytest.approx(8 / median)

"""losses.png's step axis has whole steps only: a 20-step run (one train window, one validation, both at step 20)
read 19.00, 19.25, 19.50, ... 21.00."""

import numpy as np
import pytest

from test_summary import drawn  # noqa: F401 (a fixture: the figures the plots save)


@pytest.mark.slow  # matplotlib draws a figure: seconds on 2 cores
def test_a_short_runs_loss_plot_ticks_whole_steps(tmp_path, drawn):
    from gensbi_sharding.harness.plots import plot_losses

    plot_losses(tmp_path / "losses.png", steps=np.arange(1, 21), losses=np.linspace(2, 1, 20), window=100,
                val_steps=[20], val_losses=[1.04], title="two_moons")
    ticks = [tick for tick in drawn[0].axes[0].get_xticks() if 19 <= tick <= 21]
    assert ticks and all(float(tick).is_integer() for tick in ticks), ticks

"""The training sweep's PNG names its memory panel for what it draws, and draws the collectives the table gives.

Was: its first panel was titled "memory per device (MB)" while stacking the training state (fsdp 8x1: 0.52 MB),
beside the table's "memory/device", the compiled step (2.1 MB): one name, two figures. And the table's
collectives/step/device (recorded by training since r75) had no panel, though a dry-run sweep's PNG draws one.
"""

import pytest

from gensbi_sharding.harness import plots

pytestmark = pytest.mark.slow  # each draws a figure (~1 s on 2 cores)


@pytest.fixture
def drawn(monkeypatch):
    """The figures ``plot_sweep`` saves, in order (each still written)."""
    from matplotlib.figure import Figure

    figures, save = [], Figure.savefig
    monkeypatch.setattr(Figure, "savefig", lambda fig, *a, **k: figures.append(fig) or save(fig, *a, **k))
    return figures


def _row(job, rule, **metrics):
    return {"job": str(job), "overrides": {"rule": rule}, "metrics": {
        "status": "ok", "param_bytes_per_device": 101_888, "opt_bytes_per_device": 203_788,
        "state_bytes_per_device": 407_564, "step_memory_bytes_per_device": 2_100_000, "median_step_s": 0.03,
        "c2st": 0.6, "c2st_sd_folds": 0.01, **metrics}}


def test_a_training_sweeps_panels_say_state_and_draw_its_collectives(tmp_path, drawn):
    rows = [_row(0, "fsdp", collective_bytes_per_step=2_138_773),
            _row(1, "tensor", collective_bytes_per_step=1_426_453)]
    plots.plot_sweep(rows, ["rule"], tmp_path / "sweep.png")
    axes = drawn[-1].axes
    assert [ax.get_title() for ax in axes] == ["state per device (KB)", "collectives per step, per device (MB)",
                                               "median step time (ms)", "C2ST (0.5 = perfect)"]
    assert sorted(round(bar.get_height(), 4) for bar in axes[1].patches) == [1.4265, 2.1388]  # MB, one bar a job
    state = {}
    for bar in axes[0].patches:  # the state stacked, not the step's 2.1 MB
        state[round(bar.get_x(), 3)] = state.get(round(bar.get_x(), 3), 0) + bar.get_height()
    assert sorted(round(h, 3) for h in state.values()) == [407.564, 407.564]


def test_a_sweep_recorded_before_r75_gets_no_empty_collectives_panel(tmp_path, drawn):
    rows = [_row(0, "fsdp"), _row(1, "tensor", status="error", error="boom")]
    plots.plot_sweep(rows, ["rule"], tmp_path / "sweep.png")
    assert [ax.get_title() for ax in drawn[-1].axes] == ["state per device (KB)", "median step time (ms)",
                                                         "C2ST (0.5 = perfect)"]

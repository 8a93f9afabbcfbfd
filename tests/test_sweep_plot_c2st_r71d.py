"""The sweep plot's C2ST panel shows every job's score: one under 0.4 (few samples: ``eval.num_samples=20``) was
below the panel's fixed lower limit, its bar and error bar hidden and no "n/a" beside it."""

import pytest

from test_summary import drawn  # noqa: F401 (a fixture: the figures the plots save)


def _job(job: str, rule: str, c2st: float, sd: float) -> dict:
    return {"job": job, "overrides": {"rule": rule},
            "metrics": dict(status="ok", mesh_shape=[8, 1], param_bytes_per_device=3016, opt_bytes_per_device=6040,
                            median_step_s=0.01, c2st=c2st, c2st_sd_folds=sd, wall_s=12.0)}


@pytest.mark.slow  # matplotlib draws a figure: seconds on 2 cores
def test_a_c2st_under_0_4_and_its_spread_lie_inside_the_panel(tmp_path, drawn):
    from gensbi_sharding.harness.plots import plot_sweep

    plot_sweep([_job("0", "replicated", 0.35, 0.08), _job("1", "fsdp", 0.9, 0.01)], ["rule"], tmp_path / "s.png")
    c2st = drawn[0].axes[2]
    assert c2st.get_title() == "C2ST (0.5 = perfect)"
    low, high = c2st.get_ylim()
    assert low == pytest.approx(0.2) and high == pytest.approx(1.02)  # 0.35 - 0.08 = 0.27 lies above 0.2


@pytest.mark.slow  # matplotlib draws a figure: seconds on 2 cores
def test_scores_above_0_42_keep_the_panel_from_0_4(tmp_path, drawn):
    from gensbi_sharding.harness.plots import plot_sweep

    plot_sweep([_job("0", "replicated", 0.52, 0.02), _job("1", "fsdp", 0.9, 0.01)], ["rule"], tmp_path / "s.png")
    assert drawn[0].axes[2].get_ylim() == pytest.approx((0.4, 1.02))

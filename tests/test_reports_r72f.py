"""Every number a run reports says what it is: checked against the run's own figures (REPORTS72).

Was: a run whose speed could not leave out the first step's warm-up (``train.steps=1``: ``speed_includes_warmup`` in
metrics.json) printed "N samples/s (median step)" on its final line and "N" in the sweep table, as any other run's:
a figure ~4x low (~37x on a loaded 2-core machine) read as the steady speed. Now both say so, and the CSV has the flag.
Also: the sweep CSV holds every memory figure its plot stacks, and a dry-run sweep says its collectives are per device.
"""

import csv
import json
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from gensbi_sharding.harness.run_report import final_line
from gensbi_sharding.harness.summary import write_summary


def _ok(**extra):
    return dict(status="ok", wall_s=12.3, c2st=0.61, c2st_sd_folds=0.01, samples_per_s=1234.0, median_step_s=0.2,
                mesh_shape=[8, 1], **extra)


def test_final_line_says_a_speed_that_includes_the_warm_up():
    line = final_line(_ok(speed_includes_warmup=True), Path("out"))
    assert "1,234 samples/s (one step, its warm-up included)" in line, line


def test_final_line_of_a_steady_speed_is_unchanged():
    assert "1,234 samples/s (median step)" in final_line(_ok(speed_includes_warmup=False), Path("out"))
    assert "1,234 samples/s (median step)" in final_line(_ok(), Path("out"))  # an older folder lacks the flag


def test_final_line_of_an_earlier_attempts_one_step_speed_says_both():
    line = final_line(_ok(speed_includes_warmup=True, training_figures_from_attempt=1), Path("out"))
    assert "1,234 samples/s (one step of attempt 1, which trained, its warm-up included)" in line, line


def _job(sweep, job, rule, **metrics):
    folder = sweep / str(job)
    (folder / ".hydra").mkdir(parents=True)
    OmegaConf.save(OmegaConf.create([f"rule={rule}"]), folder / ".hydra" / "overrides.yaml")
    (folder / "metrics.json").write_text(json.dumps({"config": {"dry_run": False}, **metrics}))


@pytest.mark.slow  # writes the sweep plot too (~1 s)
def test_sweep_table_and_csv_say_which_speed_includes_the_warm_up(tmp_path):
    _job(tmp_path, 0, "fsdp", **_ok(speed_includes_warmup=True))
    _job(tmp_path, 1, "tensor", **_ok(speed_includes_warmup=False))
    summary = write_summary(tmp_path, declared=["rule"])
    with open(summary.csv_path, newline="") as f:
        rows = list(csv.DictReader(f))
    assert [r["speed_includes_warmup"] for r in rows] == ["true", "false"]
    table = summary.md_path.read_text()
    fsdp = next(line for line in table.splitlines() if "| fsdp" in line)
    tensor = next(line for line in table.splitlines() if "| tensor" in line)
    assert "1,234 (warm-up incl.)" in fsdp and "warm-up" not in tensor, table


@pytest.mark.slow  # writes the sweep plot too (~1 s)
def test_sweep_csv_holds_every_figure_its_memory_bars_stack(tmp_path):
    """Was: the memory panel stacks parameters, optimizer state, the EMA and the best weights early stopping keeps
    (4.1 MB per device for a replicated mlp), but the CSV ("exact numbers") held the first two alone (2.4 MB): the
    bar could not be read back from it. Now it has the EMA, the best weights and the whole state per device."""
    _job(tmp_path, 0, "replicated", **_ok(param_bytes_per_device=815112, opt_bytes_per_device=1630236,
                                          ema_bytes_per_device=815112, state_bytes_per_device=3260460,
                                          best_weights_bytes_per_device=815112))
    _job(tmp_path, 1, "fsdp", **_ok())  # an older folder: blank, not 0
    summary = write_summary(tmp_path, declared=["rule"])
    with open(summary.csv_path, newline="") as f:
        rows = list(csv.DictReader(f))
    keys = ("ema_bytes_per_device", "best_weights_bytes_per_device", "state_bytes_per_device")
    assert [rows[0][k] for k in keys] == ["815112", "815112", "3260460"]
    assert [rows[1][k] for k in keys] == ["", "", ""]
    assert "ema" not in summary.md_path.read_text().lower()  # the table keeps its columns


@pytest.mark.slow  # writes the sweep plot (~1 s)
def test_dry_run_sweep_says_its_collectives_are_per_device(tmp_path, monkeypatch):
    """Was: the final line says "1.4 MB of collectives per step per device" (collective_bytes_per_step: what one
    device sends), yet the dry-run sweep's table titled the same figure "collectives/step" and its plot "collectives
    per step", beside "memory/device": readable as the mesh's sum. Now both say per device."""
    from matplotlib.figure import Figure

    figures, save = [], Figure.savefig
    monkeypatch.setattr(Figure, "savefig", lambda fig, *a, **k: (figures.append(fig), save(fig, *a, **k))[1])
    for job, rule in enumerate(("replicated", "fsdp")):
        _job(tmp_path, job, rule, status="ok", mesh_shape=[8, 1], step_memory_bytes_per_device=4_892_896,
             collective_bytes_per_step=1_426_453, compile_s=1.5, fallbacks={}, wall_s=20.0)
        data = json.loads((tmp_path / str(job) / "metrics.json").read_text())
        data["config"]["dry_run"] = True
        (tmp_path / str(job) / "metrics.json").write_text(json.dumps(data))
    summary = write_summary(tmp_path, declared=["rule"])
    header = [cell.strip() for cell in summary.text.splitlines()[1].split("|")[1:-1]]
    assert "collectives/step/device" in header and "1.4 MB" in summary.text, summary.text
    assert [ax.get_title() for ax in figures[0].axes][:2] == ["memory per device, one step (MB)",
                                                            "collectives per step, per device (MB)"]

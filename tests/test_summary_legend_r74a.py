"""A sweep's table says what its numbers measured (harness/summary_legend.py, under the table in summary.py).

Was: a training sweep's params/device and optimizer/device (the state a device holds: 104.6 KB + 209.2 KB for fsdp on
8x1) read as the memory the run needs, while the step's, batch and temporaries included, was 3.3 MB (the dry run's
memory/device); nothing said whether step time included compile, at which batch it was measured, or that KB is
1,000 B.
"""

import json

import pytest

from gensbi_sharding.harness.summary import write_summary
from gensbi_sharding.harness.summary_legend import legend


def _rows(batch):
    return [{"metrics": {"config": {"data": {"batch_size": b}}}} for b in batch]


def test_a_training_sweep_says_its_memory_is_the_state_and_its_step_leaves_compile_out():
    said = legend(_rows([256, 256]), dry=False)
    assert said.startswith("measured: params/device and optimizer/device are the training state a device holds, not "
                           "the step's peak")
    assert "dry_run=true" in said and "median time per step (global batch 256, data.batch_size), compile" in said
    assert said.endswith("bytes in decimal units (1 KB = 1,000 B), each per device")


def test_a_dry_run_sweep_says_its_memory_is_the_compiled_step_at_its_batches():
    said = legend(_rows([1024, 256, 1024]), dry=True)
    assert said.startswith("measured: memory/device is XLA's compiled train step (global batch 256, 1,024, "
                           "data.batch_size) on one device")
    assert "nothing trained or timed" in said
    assert "global batch" not in legend([{"metrics": {}}], dry=True)  # none known: no batch said


@pytest.mark.slow
def test_the_summary_carries_the_legend_and_its_table_file_stays_a_table(tmp_path):
    for job, rule in enumerate(("fsdp", "tensor")):
        folder = tmp_path / str(job)
        (folder / ".hydra").mkdir(parents=True)
        (folder / ".hydra" / "overrides.yaml").write_text(f"- rule={rule}\n")
        (folder / "metrics.json").write_text(json.dumps({
            "status": "ok", "rule": rule, "median_step_s": 0.02, "samples_per_s": 12800.0,
            "param_bytes_per_device": 104584, "opt_bytes_per_device": 209180,
            "config": {"data": {"batch_size": 256}, "dry_run": False}}))
    summary = write_summary(tmp_path, ["rule"])
    assert summary.legend == legend(summary.rows, dry=False)
    assert "(global batch 256, data.batch_size)" in summary.legend
    assert (tmp_path / "sweep_summary.md").read_text().splitlines()[-1].startswith("| 1 ")  # parsed as a table


@pytest.mark.slow
def test_a_sweeps_console_says_what_it_measured(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    done = subprocess.run([sys.executable, str(root / "launch.py"), "-m", "dry_run=true", "rule=fsdp",
                           "data.num_simulations=1000", "data.batch_size=256", f"hydra.sweep.dir={tmp_path}"],
                          cwd=root, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    said = [n for n, line in enumerate(lines) if line.startswith("measured: memory/device is XLA's compiled train "
                                                                   "step (global batch 256, data.batch_size)")]
    assert len(said) == 1 and lines[said[0] - 1].startswith("| 0 ")  # right under the table

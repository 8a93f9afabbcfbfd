"""A training run records the collectives of the step it compiled, as a dry run counts them, and a training sweep's
table, CSV and legend show them.

Was: ``train.train`` read its compiled step's report for the memory alone and threw the collectives away, so choosing
fsdp or tensor by what each moves between devices took a second, dry-run sweep joined by hand: a training sweep had no
``collective_bytes_per_step`` (metrics.json, table, CSV) nor the count per kind the dry run's report gives.
"""

import jax
import pytest

from compile_count import compiles
from faults_helpers import run_tiny
from gensbi_sharding import compiled_report, make_mesh
from gensbi_sharding.harness import train as T
from gensbi_sharding.harness.summary_columns import DRY_RUN_COLUMNS, TRAIN_COLUMNS
from gensbi_sharding.harness.summary_legend import legend
from test_train import batches, tiny_state

pytestmark = pytest.mark.filterwarnings("ignore::gensbi_sharding.sharding.ExperimentalRuleWarning")

BYTES = "collective_bytes_per_step"


def _cell(columns, metrics):
    column = next(c for c in columns if c.name == BYTES)
    return column.title, column.text(metrics), column.exact(metrics), column.optional


def test_a_training_sweeps_table_and_csv_show_the_collective_bytes_as_a_dry_runs_do():
    metrics = {BYTES: 1_234_567}
    assert _cell(TRAIN_COLUMNS, metrics)[:3] == _cell(DRY_RUN_COLUMNS, metrics)[:3] == (
        "collectives/step/device", "1.2 MB", "1234567")  # one column, one meaning, one unit
    assert _cell(TRAIN_COLUMNS, {})[1:] == ("", "", True)  # a sweep recorded before: no blank column in its table
    names = [c.name for c in TRAIN_COLUMNS]
    assert names.index(BYTES) == names.index("opt_bytes_per_device") + 1  # beside the memory columns


def test_the_training_legend_says_what_collectives_step_device_counts_only_where_a_row_has_it():
    rows = [{"metrics": {BYTES: 4096, "step_memory_bytes_per_device": 3_312_640,
                         "config": {"data": {"batch_size": 256}}}}]
    said = legend(rows, dry=False)
    assert ("collectives/step/device the bytes a device sends in one step, its compiled step's collectives counted as "
            "a dry-run sweep counts them (the same figure for the same job)") in said
    assert said.endswith("bytes in decimal units (1 KB = 1,000 B), each per device")
    rows[0]["metrics"].pop(BYTES)  # recorded before r75: the legend names no column the table lacks
    assert "collectives/step/device" not in legend(rows, dry=False)


@pytest.mark.slow
def test_train_records_the_collectives_of_the_step_it_compiled_once(devices):
    mesh = make_mesh(model_axis=4)
    model, optimizer, ema = tiny_state(mesh, width=28, rule="fsdp")  # a width of its own: compiled here
    functions, state = T.make_step_functions(model, optimizer, mesh, ema=ema)
    with compiles() as compiled:
        result = T.train(functions, state, batches(), steps=2, key=jax.random.key(0), mesh=mesh, batch_size=16,
                         progress=False)
    assert len([name for name in compiled if "train_step" in name]) == 1, compiled  # no second compile to count them
    # The dry run's figures: its step (over the split state) compiled for the same placements and batch
    dry = compiled_report(functions.train_step.lower(result.state, next(batches()), jax.random.key(0)).compile())
    assert result.collectives == dry["collectives"]
    assert result.collective_bytes_per_step == dry["collective_bytes"] > 0
    assert result.collective_bytes_per_step == sum(c["bytes"] for c in result.collectives.values())


@pytest.mark.slow
@pytest.mark.parametrize("rule", ["fsdp", "tensor"])
def test_a_training_runs_metrics_hold_the_dry_runs_collectives_to_the_byte(devices, tmp_path, rule):
    trained = run_tiny(tmp_path / "train", f"rule={rule}", "mesh.model_axis=2")
    dry = run_tiny(tmp_path / "dry", f"rule={rule}", "mesh.model_axis=2", "dry_run=true")
    assert trained["status"] == dry["status"] == "ok"
    assert trained["mesh_shape"] == dry["mesh_shape"] == [4, 2]
    assert trained[BYTES] == dry[BYTES] > 0
    assert trained["collectives"] == dry["dry_run"]["collectives"]  # the count and bytes of each kind alike
    assert trained["collectives"]["all-reduce"]["count"] >= 1


@pytest.mark.slow
def test_a_training_sweeps_files_carry_the_collectives_column_and_an_older_sweeps_do_not(tmp_path):
    import csv
    import json

    from gensbi_sharding.harness.summary import write_summary

    def sweep(folder, sent):
        for job, rule in enumerate(("fsdp", "tensor")):
            (folder / str(job) / ".hydra").mkdir(parents=True)
            (folder / str(job) / ".hydra" / "overrides.yaml").write_text(f"- rule={rule}\n")
            (folder / str(job) / "metrics.json").write_text(json.dumps({
                "status": "ok", "rule": rule, "median_step_s": 0.02, "samples_per_s": 12800.0,
                "param_bytes_per_device": 104584, "opt_bytes_per_device": 209180, **(
                    {BYTES: sent[job]} if sent else {}), "config": {"data": {"batch_size": 256}, "dry_run": False}}))
        return write_summary(folder, ["rule"])

    summary = sweep(tmp_path / "new", [2_138_773, 1_426_453])
    header = [cell.strip() for cell in summary.md_path.read_text().splitlines()[0].split("|")[1:-1]]
    assert header[header.index("optimizer/device") + 1] == "collectives/step/device"
    assert "| 2.1 MB " in summary.md_path.read_text() and "| 1.4 MB " in summary.md_path.read_text()
    with open(summary.csv_path, newline="") as f:
        assert [row[BYTES] for row in csv.DictReader(f)] == ["2138773", "1426453"]  # bytes, exact
    assert "collectives/step/device the bytes a device sends in one step" in summary.legend
    old = sweep(tmp_path / "old", None)  # recorded before r75: no blank column, no word of one
    assert "collectives/step/device" not in old.md_path.read_text() and "collectives/step" not in old.legend

"""A training run records its compiled step's memory per device, as a dry run names it, and a sweep's table and CSV
show it (with compile_s and data.batch_size in the CSV).

Was: a training sweep recorded no compiled-step memory (``device_peak_bytes`` is None on CPU), only the state's
bytes, so ranking the jobs by the memory their step needs took a second, dry-run sweep joined by hand; its CSV had no
``compile_s`` (metrics.json has it) and no ``data.batch_size``, on which step time, samples/s and memory depend.
"""

import jax
import pytest

from compile_count import compiles
from faults_helpers import run_tiny
from gensbi_sharding import compiled_report, make_mesh
from gensbi_sharding.harness import train as T
from gensbi_sharding.harness.summary_columns import DRY_RUN_COLUMNS, TRAIN_COLUMNS, provenance_columns
from gensbi_sharding.harness.summary_legend import legend
from test_train import batches, tiny_state

pytestmark = pytest.mark.filterwarnings("ignore::gensbi_sharding.sharding.ExperimentalRuleWarning")

MEMORY = "step_memory_bytes_per_device"


def _cells(columns, metrics):
    return {c.name: (c.title, c.text(metrics), c.exact(metrics)) for c in columns}


def test_a_training_sweeps_table_and_csv_show_the_step_memory_as_a_dry_runs_do():
    metrics = {MEMORY: 3_312_640, "compile_s": 1.23456, "param_bytes_per_device": 104584}
    train, dry = _cells(TRAIN_COLUMNS, metrics), _cells(DRY_RUN_COLUMNS, metrics)
    assert train[MEMORY] == dry[MEMORY] == ("memory/device", "3.3 MB", "3312640")  # one column serves both
    assert [c.name for c in TRAIN_COLUMNS][:2] == ["mesh_shape", MEMORY]
    assert train["compile_s"] == ("", "", "1.235")  # CSV-only: the console table keeps its columns
    names = [c.name for c in TRAIN_COLUMNS]
    assert names.index("compile_s") == names.index("wall_s") - 1


def test_the_csv_names_each_jobs_batch_size_unless_swept():
    row = {"metrics": {"config": {"data": {"batch_size": 256, "name": "two_moons"}}}, "overrides": {}}
    columns = {c.name: c for c in provenance_columns([], [row])}
    assert columns["data.batch_size"].exact(row["metrics"]) == "256"
    assert "data.batch_size" not in {c.name for c in provenance_columns(["data.batch_size"], [row])}


def test_the_training_legend_says_memory_device_is_the_compiled_step_and_the_csv_adds_compile_and_batch():
    rows = [{"metrics": {MEMORY: 3_312_640, "config": {"data": {"batch_size": 256}}}}]
    said = legend(rows, dry=False)
    assert "not the step's peak: memory/device is that, XLA's compiled train step on one device" in said
    assert "the CSV adds compile_s and data.batch_size" in said
    assert "median time per step (global batch 256, data.batch_size)" in said
    old = legend([{"metrics": {"config": {"data": {"batch_size": 256}}}}], dry=False)  # recorded before: none
    assert "memory/device is that" not in old and "dry_run=true, gives that as memory/device" in old


@pytest.mark.slow
def test_train_records_the_memory_of_the_step_it_compiled_once(devices):
    mesh = make_mesh(model_axis=2)
    model, optimizer, ema = tiny_state(mesh, width=24)  # a width of its own: compiled here, not reused from another
    functions, state = T.make_step_functions(model, optimizer, mesh, ema=ema)
    with compiles() as compiled:
        result = T.train(functions, state, batches(), steps=2, key=jax.random.key(0), mesh=mesh, batch_size=16,
                         progress=False)
    assert len([name for name in compiled if "train_step" in name]) == 1, compiled  # no second compile to measure
    # The dry run's figure: its step (over the split state) compiled for the same placements and batch
    batch = next(batches())
    dry = compiled_report(functions.train_step.lower(result.state, batch, jax.random.key(0)).compile())
    assert result.step_memory_bytes_per_device == dry["memory"]["total_bytes"] > 0


@pytest.mark.slow
def test_a_training_runs_metrics_hold_the_dry_runs_step_memory_for_the_same_job(devices, tmp_path):
    trained = run_tiny(tmp_path / "train", "rule=fsdp", "mesh.model_axis=2")
    dry = run_tiny(tmp_path / "dry", "rule=fsdp", "mesh.model_axis=2", "dry_run=true")
    assert trained["status"] == dry["status"] == "ok"
    assert trained[MEMORY] == dry[MEMORY] > trained["state_bytes_per_device"]

"""A dry run's metrics.json holds the collectives per kind at the path a training run's has them.

Was: ``dry_run_metrics`` kept the count and bytes of each kind only under ``dry_run.collectives``, a training run
top-level as ``collectives`` (r75): a reader of both records (a sweep of each, compared) looked them up at two paths.
The old path stays (readers may use it).
"""

import pytest

from faults_helpers import compose_tiny
from gensbi_sharding import make_mesh
from gensbi_sharding.harness.dry_run import dry_run_metrics
from gensbi_sharding.harness.rule_config import rule_table

pytestmark = pytest.mark.filterwarnings("ignore::gensbi_sharding.sharding.ExperimentalRuleWarning")


@pytest.mark.slow  # compiles a train step (~3 s on 2 cores)
def test_a_dry_runs_collectives_are_top_level_as_a_training_runs_are(devices):
    cfg = compose_tiny("dry_run=true", "rule=fsdp", "mesh.model_axis=2")
    name, table = rule_table(cfg.rule)
    metrics = dry_run_metrics(cfg, make_mesh(model_axis=2), name, table)
    assert metrics["collectives"] == metrics["dry_run"]["collectives"]  # the old path kept, the same figures
    assert metrics["collectives"]["all-reduce"]["count"] >= 1  # fsdp on 4x2: gradients reduced over data
    assert sum(c["bytes"] for c in metrics["collectives"].values()) == metrics["collective_bytes_per_step"] > 0

"""A dry run traces the train step under its mesh, as training does (MODELS71B: it lowered the step with no mesh
active, so the model's activation constraints were left out and, since this round's ``constrain`` says so, every
dry run of a model that constrains its activations warned "no mesh is active", blaming the model's own code)."""

import warnings

import pytest

from gensbi_sharding import PartitionAxis, make_mesh
from gensbi_sharding.harness.dry_run import dry_run
from gensbi_sharding.harness.rule_config import rule_table
from test_dry_run import config


@pytest.mark.slow  # compiles a train step
def test_a_dry_run_applies_the_models_activation_constraints_under_its_mesh():
    cfg = config("rule=tensor")
    name, table = rule_table(cfg.rule)
    mesh = make_mesh(model_axis=2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        report = dry_run(cfg, mesh=mesh, rule_name=name, table=table, dim_theta=2, dim_x=2,
                         partition_axis=PartitionAxis.for_rule(table, mesh))
    assert report["memory"]["total_bytes"] > 0
    assert [str(w.message) for w in caught if "no mesh is active" in str(w.message)] == []

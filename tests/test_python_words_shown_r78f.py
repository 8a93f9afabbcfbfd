"""``run(cfg)`` from Python reads every refusal's fix in cfg's settings, a refusal worded by hand (``shown=``) or with an
override in its other way out (``after=``) too; launch.py's words stay as they were.

Were (FIX78): from ``run(cfg)`` "use mesh=dict mesh.model_axis=2 instead of mesh=none", "set cfg.train.val_every=2,
or train.patience=0 for no early stopping", "drop dry_run=true and train it with model.init=eager", model_plan's
"set model.init=eager" and strict's "Set mesh.model_axis=4 or 2 ... or set strict=false", the batch size's "raise
data.num_simulations to at least 40 and set data.batch_size=8": launch.py's overrides, which a Python caller sets as
``cfg.mesh.spec = 'dict'``.
"""

import pytest

from faults_helpers import compose_tiny
from gensbi_sharding.harness.checked_fix import validate_every
from gensbi_sharding.harness.config import ConfigError
from gensbi_sharding.harness.python_words import in_python_words


def _refused(*overrides, python):
    cfg = compose_tiny(*overrides)
    with pytest.raises(ConfigError) as err:
        if python:
            with in_python_words(reword=False):
                validate_every(cfg)
        else:
            validate_every(cfg)
    return str(err.value)


@pytest.mark.parametrize("spec, held", [("none", "None"), ("auto", "'auto'")])
def test_a_model_axis_without_the_dict_mesh_names_cfgs_mesh_settings(spec, held):
    tail = "mesh.model_axis / mesh.devices need the dict form: use "
    assert _refused(f"mesh={spec}", "mesh.model_axis=2", python=False) == (
        f"{tail}mesh=dict mesh.model_axis=2 instead of mesh={spec}")
    assert _refused(f"mesh={spec}", "mesh.model_axis=2", python=True) == (
        f"{tail}cfg.mesh.spec='dict' and cfg.mesh.model_axis=2 instead of cfg.mesh.spec={held}")


def test_a_checked_fix_refused_in_turn_is_named_in_cfgs_settings():
    # with another refusal beside it (listed): the fix tried, refused by the devices, then the one that passes
    said = _refused("mesh=none", "mesh.model_axis=3", "seed=-1", python=True)
    assert "use cfg.mesh.spec='dict' and cfg.mesh.model_axis=2 (cfg.mesh.spec='dict' and cfg.mesh.model_axis=3 is " \
           "refused too: mesh.model_axis=3: 8 devices are not divisible by model_axis=3)" in said, said
    assert "use mesh=dict mesh.model_axis=2 (mesh=dict mesh.model_axis=3 is refused too: " in _refused(
        "mesh=none", "mesh.model_axis=3", "seed=-1", python=False)


def test_patience_without_validations_offers_cfgs_patience():
    said = _refused("train.val_every=0", "train.patience=3", python=True)
    assert said.endswith("; set cfg.train.val_every=2, or cfg.train.patience=0 for no early stopping"), said
    assert _refused("train.val_every=0", "train.patience=3", python=False).endswith(
        "; set train.val_every=2, or train.patience=0 for no early stopping")


def test_a_pos1d_dry_run_is_told_cfgs_settings():
    typed = ("model=flux1", "model.id_embedding_strategy=[pos1d,absolute]", "dry_run=true")
    assert _refused(*typed, python=False).endswith(
        "so this model has no dry run; drop dry_run=true and train it with model.init=eager; e.g. "
        "model.id_embedding_strategy=[absolute,absolute]")
    assert _refused(*typed, python=True).endswith(
        "so this model has no dry run; set cfg.dry_run=False and train it with cfg.model.init='eager'; e.g. "
        "cfg.model.id_embedding_strategy=['absolute', 'absolute']")


@pytest.mark.parametrize("needed_by, python", [
    ("sharded_init_traces", "set cfg.model.init='eager' (built whole on one device, then placed)"),
    ("dry_run_traces", "set cfg.dry_run=False and train it with cfg.model.init='eager'")])
def test_a_model_that_reads_back_while_traced_is_told_cfgs_settings(needed_by, python):
    import jax.numpy as jnp
    from flax import nnx

    from gensbi_sharding.harness import model_plan

    def build():  # int() of a traced value: what GenSBI's pos1d embedding does in its constructor
        return (nnx.Linear(int(jnp.ones(2).sum()), 2, rngs=nnx.Rngs(0)),)

    cfg, words = compose_tiny(), getattr(model_plan, needed_by)
    launch = words()
    with pytest.raises(ConfigError) as err:
        model_plan.trace_model(build, cfg, needed_by=words)
    assert str(err.value).endswith(f"; {launch}") and "cfg." not in launch
    with pytest.raises(ConfigError) as err, in_python_words(reword=False):
        model_plan.trace_model(build, cfg, needed_by=words)
    assert str(err.value).endswith(python), err.value


def test_strict_fallbacks_are_told_cfgs_mesh_and_strict(devices):
    import gensbi_sharding as gs
    from gensbi_sharding.harness.model_plan import strict_problem, trace_model
    from gensbi_sharding.harness.rule_config import as_rule, rule_table
    from gensbi_sharding.harness.state import builder

    cfg = compose_tiny("strict=true", "rule=fsdp", "model.width=36")  # embed 36 cannot split 8 ways
    model = trace_model(builder(cfg, dim_theta=2, dim_x=2, partition_axis=None), cfg, needed_by="")
    plan = gs.plan_shardings(model, gs.make_mesh(), as_rule(*rule_table(cfg.rule)))
    launch = strict_problem(model, plan)
    assert "Set mesh.model_axis=4 or 2 (every annotation honoured)" in launch and launch.endswith("set strict=false")
    with in_python_words(reword=False):
        python = strict_problem(model, plan)
    assert "Set cfg.mesh.model_axis=4 or cfg.mesh.model_axis=2 (every annotation honoured)" in python, python
    assert python.endswith("or set cfg.strict=False")


def test_a_batch_no_budget_fills_is_told_cfgs_data_settings():
    from gensbi_sharding.harness.hints import batch_size_problem

    def said():
        return batch_size_problem(64, shards=1, data_parallel=8, train_rows=3, budget=lambda rows: rows * 10)
    assert said().endswith("but the smallest shard holds 3; raise data.num_simulations to at least 80 and set "
                           "data.batch_size=8, or to at least 640 to keep data.batch_size=64")
    with in_python_words(reword=False):
        assert said().endswith("but the smallest shard holds 3; raise cfg.data.num_simulations to at least 80 and "
                               "set cfg.data.batch_size=8, or to at least 640 to keep cfg.data.batch_size=64")


@pytest.mark.slow  # a run(cfg) each
@pytest.mark.parametrize("overrides, said", [
    (("model=flux1", "model.dtype=float16"), "; set cfg.model.dtype='bfloat16' or cfg.model.dtype='float32', or run on "
                                              "a GPU"),
    (("strict=true", "rule=fsdp", "model.width=36"), "Set cfg.mesh.model_axis=4 or cfg.mesh.model_axis=2 (every "
                                                      "annotation honoured)")])
def test_run_cfgs_refusals_after_jax_starts_name_cfgs_settings(tmp_path, overrides, said):
    from faults_helpers import run_tiny

    metrics = run_tiny(tmp_path / "run", *overrides)
    assert metrics["status"] == "error" and said in metrics["error"], metrics["error"]


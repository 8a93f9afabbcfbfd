"""A fallback's fix said in the harness's words: the rule's override (launch.py) or cfg's setting (run(cfg)), the
library's own reason unchanged for library users (r79f). Each failed before: the harness passed on "map 'vocab' to
None", a rule table's fix, which neither launch.py nor run(cfg) takes."""

import logging

import jax.numpy as jnp
import pytest
from flax import nnx

import gensbi_sharding as gs
from gensbi_sharding.harness.fallback_words import harness_reason
from gensbi_sharding.harness.model_plan import model_plan, strict_problem
from gensbi_sharding.harness.python_words import in_python_words


def _warned(caplog, model, mesh, rule):
    with caplog.at_level(logging.WARNING, logger="gensbi_sharding"):
        plan = model_plan(model, mesh, rule, strict=False)
    return plan, [r.getMessage() for r in caplog.records if r.name == "gensbi_sharding"]


def test_the_library_still_says_its_table_fix(devices):
    mesh = gs.make_mesh(model_axis=4)
    plan = gs.plan_shardings(_odd_vocab(), mesh, "tensor")
    assert "map 'vocab' to None or to mesh axes of total size 2" in plan.fallbacks["table"]


def _odd_vocab():
    model = nnx.Module()
    model.table = nnx.Param(jnp.ones((6, 4)), **gs.axes("vocab", "embed"))
    return model


def test_a_run_says_the_rule_override_and_python_the_setting(devices, caplog):
    mesh = gs.make_mesh(model_axis=4)
    plan, said = _warned(caplog, _odd_vocab(), mesh, gs.resolve_rule("tensor"))
    assert "set rule.vocab=null or map it onto mesh axes of total size 2 (rule.vocab=data)" in said[0]
    assert "map 'vocab' to None" not in said[0] and "rule.vocab=null" in plan.fallbacks["table"]  # metrics.json's
    caplog.clear()
    with in_python_words(reword=False):  # run(cfg) from Python: no Hydra app
        plan, said = _warned(caplog, _odd_vocab(), mesh, gs.resolve_rule("tensor"))
    assert "set cfg.rule.vocab=None or map it onto mesh axes of total size 2 (cfg.rule.vocab='data')" in said[0]
    assert "rule.vocab=null" not in said[0]


def test_strict_refusal_says_the_override_too(devices):
    mesh = gs.make_mesh(model_axis=4)
    problem = strict_problem(_odd_vocab(), gs.plan_shardings(_odd_vocab(), mesh, "tensor"))
    assert "set rule.vocab=null" in problem and "map 'vocab' to None" not in problem


@pytest.mark.parametrize("reason, said", [
    ("logical axes 'mlp' and 'heads' both map to mesh axis 'model'; annotate one of those dimensions with another "
     "logical axis or None (unsplit), e.g. ('mlp', None), or a rule table with {'heads': None}",
     "logical axes 'mlp' and 'heads' both map to mesh axis 'model'; annotate one of those dimensions with another "
     "logical axis or None (unsplit), e.g. ('mlp', None), or set rule.heads=null"),
    ("size 6 of logical axis 'embed' is not divisible by mesh axis ('data', 'model') of size 8; map 'embed' to None "
     "or to mesh axes of total size 2 or 4, or annotate this dimension None",
     "size 6 of logical axis 'embed' is not divisible by mesh axis ('data', 'model') of size 8; set rule.embed=null "
     "or map it onto mesh axes of total size 2 or 4 (rule.embed=model or rule.embed=data), or annotate this "
     "dimension None"),
    ("logical axis 'heads' maps to mesh axis 'model' twice (['model', 'model']); map it onto 'model' once in the "
     "rule table", "logical axis 'heads' maps to mesh axis 'model' twice (['model', 'model']); map it onto 'model' "
     "once: rule.heads=model"),
    ("unknown logical axis 'layers' (known: embed); to split the other dimensions, leave it unsplit: a rule table "
     "with {'layers': None}",  # no rule file holds 'layers': added to the rule
     "unknown logical axis 'layers' (known: embed); to split the other dimensions, leave it unsplit: set "
     "+rule.layers=null"),
])
def test_every_rule_table_fix_is_said_as_a_setting(reason, said):
    assert harness_reason(reason, {"data": 4, "model": 2}) == said


def test_a_model_s_own_axis_is_added_to_the_rule_from_python():
    with in_python_words(reword=False):
        said = harness_reason("leave it unsplit: a rule table with {'layers': None}", {})
    assert said == "leave it unsplit: set cfg.rule.layers=None in omegaconf.open_dict(cfg.rule)"


def test_stacked_layers_name_the_rule_s_override(devices):
    model = nnx.Module()
    model.w = nnx.Param(jnp.ones((2, 8, 4)), **gs.axes("embed", "mlp"))  # one leading dimension more: stacked
    why = gs.plan_shardings(model, gs.make_mesh(model_axis=1), "fsdp").fallbacks["w"]
    assert "{**dict(gs.RULES['fsdp']), 'layers': None}" in why  # the library's, for a library user
    assert harness_reason(why, {}).endswith("with the rule mapping it, e.g. +rule.layers=null")


def test_the_library_texts_reworded_are_the_library_s(devices):
    # The reasons above are the library's own: a rewording there must fail here, not pass through unsaid.
    mesh = gs.make_mesh(model_axis=2)
    _, why = gs.partition_spec_for(("embed",), (6,), {"embed": ("data", "model")}, mesh)
    assert harness_reason(why, dict(mesh.shape)) != why
    _, why = gs.partition_spec_for(("mlp", "heads"), (4, 4), gs.RULES["tensor"], mesh)
    assert "or a rule table with {'heads': None}" in why and "set rule.heads=null" in harness_reason(why, {})

"""GenSBI's attention heads against the mesh (session 77, a GenSBI user's sweep over rules and model_axis sizes).

``python launch.py experiment=quick model=simformer rule=tensor mesh.model_axis=8``: the 4 heads do not split over
8 devices, so the rule replicates every attention kernel. The warning named the logical axis and "map 'heads' to
None, or annotate this dimension None, or use a mesh with an axis of size 2 or 4": GenSBI's annotation is not the
user's to change, and ``model.num_heads`` (the user's own lever) was named nowhere, nor by ``strict=true``. Now a
second line (and the strict refusal) names the ``model.num_heads`` that splits them; each test below plans again with
that value, so the hint is checked against the library, not against its own arithmetic.
"""

import logging

import pytest
from flax import nnx

import gensbi_sharding as gs
from gensbi_sharding.harness.config import ConfigError
from gensbi_sharding.harness.model_plan import heads_hint, model_plan
from gensbi_sharding.harness.models.flux1 import make_flux1
from gensbi_sharding.harness.models.simformer import make_simformer

pytestmark = pytest.mark.slow  # each traces GenSBI's constructors (about a second on 2 cores)

# experiment=quick's Simformer sizes (conf/experiment_model/quick/simformer.yaml): attention width 16
QUICK_SIMFORMER = dict(val_emb_dim=16, id_emb_dim=8, cond_emb_dim=8, qkv_features=16, depth=1, fourier_features=16,
                       mlp_ratio=2)


def _simformer(**sizes):
    return nnx.eval_shape(lambda: make_simformer(dim_theta=2, dim_x=2, rngs=nnx.Rngs(0), **{**QUICK_SIMFORMER,
                                                                                               **sizes}))


def _flux1(**sizes):  # GenSBI's own head layout (num_heads=6, axes_dim=[6,0]: width 36), one block of each kind
    return nnx.eval_shape(lambda: make_flux1(dim_theta=2, dim_x=2, rngs=nnx.Rngs(0), depth=1, depth_single_blocks=1,
                                             **sizes))


def _attention_fallbacks(plan):
    return sorted(p for p in plan.fallbacks if "attn" in p or "qkv" in p or "proj" in p)


def test_simformer_heads_that_do_not_split_name_the_num_heads_that_does(caplog):
    mesh = gs.make_mesh(model_axis=8)
    with caplog.at_level(logging.WARNING, logger="gensbi_sharding"):
        plan = model_plan(_simformer(num_heads=4), mesh, gs.resolve_rule("tensor"), strict=False)
    assert len(_attention_fallbacks(plan)) == 7  # query/key/value kernels and biases, the out kernel
    said = [r.getMessage() for r in caplog.records if r.name == "gensbi_sharding"]
    assert said[1] == ("model=simformer's attention stays whole: model.num_heads=4 heads do not split over mesh axis "
                       "'model' of size 8; model.num_heads=8 splits them (a multiple of 8 that divides the attention "
                       "width)"), said
    fixed = gs.plan_shardings(_simformer(num_heads=8), mesh, "tensor")
    assert _attention_fallbacks(fixed) == [] and heads_hint(_simformer(num_heads=8), fixed) is None


def test_simformer_width_that_no_multiple_divides_names_qkv_features_too():
    # Attention width 12 on model_axis=8: no multiple of 8 divides 12, so num_heads alone cannot split
    mesh = gs.make_mesh(model_axis=8)
    model = _simformer(num_heads=4, qkv_features=12)
    hint = heads_hint(model, gs.plan_shardings(model, mesh, "tensor"))
    assert "model.num_heads=8 model.qkv_features=16 splits them" in hint, hint
    fixed = gs.plan_shardings(_simformer(num_heads=8, qkv_features=16), mesh, "tensor")
    assert _attention_fallbacks(fixed) == []


def test_flux1_at_gensbi_defaults_names_the_num_heads_that_splits_its_attention():
    # GenSBI's Flux1 default, num_heads=6 of 6 features: width 36 (fused query/key/value 108), neither splits 8 ways
    mesh = gs.make_mesh(model_axis=8)
    model = _flux1(num_heads=6, axes_dim=(6, 0))
    plan = gs.plan_shardings(model, mesh, "tensor")
    assert len(_attention_fallbacks(plan)) == 6, plan.fallbacks  # qkv kernel + bias, proj kernel, 2 streams + single
    with pytest.raises(ConfigError) as err:
        model_plan(model, mesh, gs.resolve_rule("tensor"), strict=True)
    assert ("model=flux1's attention width 36 (model.num_heads=6 x 6 features) does not split over mesh axis 'model' "
            "of size 8, so its projections stay whole; model.num_heads=8 splits them.") in str(err.value)
    assert _attention_fallbacks(gs.plan_shardings(_flux1(num_heads=8, axes_dim=(6, 0)), mesh, "tensor")) == []


def test_no_hint_where_the_heads_split_or_the_rule_does_not_split_them():
    model = _flux1(num_heads=6, axes_dim=(6, 0))
    for model_axis, rule in ((4, "tensor"), (8, "fsdp"), (8, "replicated")):
        assert heads_hint(model, gs.plan_shardings(model, gs.make_mesh(model_axis=model_axis), rule)) is None

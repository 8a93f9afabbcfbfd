"""GenSBI model sections (model=flux1, model=simformer) refused before any simulation, one line naming the fix."""

import re

import pytest

from faults_helpers import compose_tiny, run_tiny
from gensbi_sharding.harness.config import ConfigError
from gensbi_sharding.harness.config_checks import validate

# (overrides, the whole refusal). Was, after the simulations: "ValueError: Unknown strategy: foo", "val_emb_dim and
# id_emb_dim required for 'concat' strategy", IndexError (mlp_ratio=0), ZeroDivisionError (axes_dim=[0,0]).
# Values are named as typed (model.axes_dim=[0,0], =null); they were Python reprs ([0, 0], None, ['pos2d', ...]).
REFUSED = [
    (("model=flux1", "model.id_merge_mode=foo"),
     "model.id_merge_mode=foo is not one of sum, concat; e.g. model.id_merge_mode=sum (GenSBI's default)"),
    (("model=flux1", "model.id_merge_mode=concat"),
     "model.val_emb_dim=null and model.id_emb_dim=null: model.id_merge_mode=concat needs val_emb_dim and id_emb_dim, "
     "integers >= 1 (features per head); e.g. model.val_emb_dim=4 model.id_emb_dim=4 (GenSBI suggests 1:1), "
     "or model.id_merge_mode=sum"),
    (("model=flux1", "model.id_merge_mode=concat", "model.val_emb_dim=4", "model.id_emb_dim=0"),
     "model.id_emb_dim=0: model.id_merge_mode=concat needs val_emb_dim and id_emb_dim, integers >= 1 (features per "
     "head); e.g. model.id_emb_dim=4 (GenSBI suggests 1:1), or model.id_merge_mode=sum"),
    (("model=flux1", "model.mlp_ratio=0"),
     "model.mlp_ratio=0.0 must be > 0 with an MLP width int(hidden size 16 * mlp_ratio) >= 1; "
     "e.g. model.mlp_ratio=4.0 (GenSBI's default)"),
    (("model=flux1", "model.axes_dim=[0,0]"),
     "model.axes_dim=[0,0] must list sizes >= 0 with a sum >= 1 (hidden size = sum * num_heads) for "
     "model.id_merge_mode=sum; e.g. model.axes_dim=[6,0] (GenSBI's default)"),
    (("model=flux1", "model.axes_dim=[7,0]", "model.id_embedding_strategy=[rope1d,rope1d]"),
     "model.axes_dim=[7,0] must hold even sizes for the rope1d id strategy (rotary pairs); e.g. model.axes_dim=[8,0]"),
    # Was, at the first step: "IndexError: list index out of range" inside GenSBI's rope ([8]), or
    # "mul got incompatible shapes for broadcasting" ([4,2,2]).
    (("model=flux1", "model.axes_dim=[8]", "model.id_embedding_strategy=[rope1d,rope1d]"),
     "model.axes_dim=[8] must list 2 sizes for the rope1d id strategy, one per axis of the 1-D token ids "
     "(position, then parameter or observation); e.g. model.axes_dim=[8,0] (every size on the position)"),
    (("model=flux1", "model.axes_dim=[4,2,1]", "model.id_embedding_strategy=[absolute,rope1d]"),
     "model.axes_dim=[4,2,1] must list 2 sizes for the rope1d id strategy, one per axis of the 1-D token ids "
     "(position, then parameter or observation); e.g. model.axes_dim=[8,0] (every size on the position)"),
    # Was, after the simulations: "ValueError: Hidden size (3) must be divisible by 2." from GenSBI's pos1d table.
    (("model=flux1", "model.id_embedding_strategy=[pos1d,absolute]", "model.init=eager", "model.axes_dim=[3,0]",
      "model.num_heads=1"),
     "model.axes_dim=[3,0] with model.num_heads=1: the pos1d id strategy needs an even hidden size "
     "(sum(axes_dim) * num_heads = 3, sine and cosine halves); e.g. model.axes_dim=[4,0]"),
    (("model=flux1", "model.id_embedding_strategy=[absolute,pos1d]", "model.init=eager", "model.id_merge_mode=concat",
      "model.val_emb_dim=2", "model.id_emb_dim=3", "model.num_heads=1"),
     "model.id_emb_dim=3 with model.num_heads=1: the pos1d id strategy needs an even id width "
     "(id_emb_dim * num_heads = 3, sine and cosine halves); e.g. model.id_emb_dim=4"),
    # Was, after the simulations (in every process of distributed=local): "model=flux1 cannot be traced ...".
    (("model=flux1", "model.id_embedding_strategy=[absolute,pos1d]"),
     "model.id_embedding_strategy=[absolute,pos1d] with model.init=sharded: GenSBI's pos1d id embedding sizes its "
     "table with jnp.maximum inside the constructor, which no trace can evaluate; e.g. model.init=eager (built whole "
     "on one device, then placed), or absolute or rope1d ids"),
    (("model=flux1", "model.id_embedding_strategy=[pos2d,absolute]"),
     "model.id_embedding_strategy=[pos2d,absolute]: give two of absolute, pos1d, rope1d (parameters, "
     "observations), e.g. model.id_embedding_strategy=[absolute,absolute] (GenSBI's default)"),
    (("model=flux1", "model.num_heads=0"),
     "model.num_heads=0 must be an integer >= 1; e.g. model.num_heads=6 (GenSBI's default)"),
    (("model=flux1", "model.theta=0"),
     "model.theta=0 (the rope base) must be >= 1; e.g. model.theta=null (10 * (dim_theta + dim_x), GenSBI's default)"),
    (("model=flux1", "model.dtype=float64"),
     "model.dtype='float64' is not one of float32, bfloat16, float16; e.g. model.dtype=float32"),
    # Was: NaN at steps 1..10 at any learning rate, and "lower train.learning_rate" as the advice.
    (("model=simformer", "model.param_dtype=float16"),
     "model.param_dtype=float16 trains to NaN from the first steps at any learning rate (AdamW keeps its "
     "moments in the parameters' dtype, where its eps=1e-8 and small squared gradients round to 0; "
     "model.dtype=float16, the compute dtype, is allowed where it compiles); e.g. model.param_dtype=bfloat16 (float32's range)"),
    (("model=flux1", "model.param_dtype=float16"),
     "model.param_dtype=float16 trains to NaN from the first steps at any learning rate (AdamW keeps its "
     "moments in the parameters' dtype, where its eps=1e-8 and small squared gradients round to 0; "
     "model.dtype=float16, the compute dtype, is allowed where it compiles); e.g. model.param_dtype=bfloat16 (float32's range)"),
    (("model=simformer", "model.depth=0"),
     "model.depth=0 must be an integer >= 1; e.g. model.depth=8 (GenSBI's default)"),
    (("model=simformer", "model.num_heads=7"),
     "model.num_heads=7 must divide the attention size 16 (model.qkv_features, or the token size when null); "
     "pick one of [1, 2, 4, 8, 16], e.g. model.num_heads=4"),
]


@pytest.mark.parametrize("overrides, message", REFUSED, ids=lambda o: " ".join(o) if isinstance(o, tuple) else "")
@pytest.mark.fast_cases(3)
def test_gensbi_model_values_are_refused_naming_a_value_that_works(overrides, message):
    with pytest.raises(ConfigError) as err:
        validate(compose_tiny(*overrides))
    assert str(err.value) == message
    hinted = re.search(r"e\.g\. ((?:model\.[a-z_]+=(?:\[[^\]]*\]|[^\s;,)]+) ?)+)", message)
    validate(compose_tiny(*overrides, *hinted.group(1).split()))  # following the hint, the section passes


def test_a_refused_model_section_stops_the_run_before_any_simulation(tmp_path, monkeypatch, devices):
    from gensbi_sharding.harness import data

    simulated = []
    monkeypatch.setattr(data, "simulate", lambda *a, **k: simulated.append(a) or pytest.fail("simulated"))
    metrics = run_tiny(tmp_path / "run", "model=flux1", "model.axes_dim=[0,0]")
    assert metrics["status"] == "error" and metrics["error"].startswith("ConfigError: model.axes_dim=[0,0] must")
    assert simulated == [] and "val_pairs" not in metrics

"""A refusal's fix as data (``Refusal.fix``), the override or the overrides typed together, and the check of it.

``command_checks`` puts the fix a command-line refusal offers through the run's own checks (the range checks and
GenSBI's model checks alike) and, where they refuse it, offers their fix instead. A fix of two overrides was words
only (``fix`` None): ``model=flux1 model.id_merge_mode=concat model.val_emb_dim=0.5`` was told "e.g.
model.val_emb_dim=null", which the concat check refuses, and the concat check's own fix (both emb dims) was never
tried. A refused suggestion read "(X is refused: is beyond ...)"; now a sentence, "(X is refused too: it is ...)".
"""

from __future__ import annotations

import pytest

from gensbi_sharding.harness.command_checks import _config_problem, command_problem
from gensbi_sharding.harness.refusal import Refusal, fix_of, fixes_of, rephrased

CONCAT = ["model=flux1", "model.id_merge_mode=concat"]


def test_a_fix_of_several_overrides_is_a_tuple_shown_as_typed_and_kept_when_rephrased():
    pair = Refusal("a=0 and b=0: need both", ("a=4", "b=4"), how="; e.g. ", after=" (1:1)")
    assert pair == "a=0 and b=0: need both; e.g. a=4 b=4 (1:1)" and fixes_of(fix_of(pair)) == ("a=4", "b=4")
    worded = Refusal("none fits", ("n=40", "b=8"), how="; ", shown="raise n to at least 40 and set b=8")
    assert worded == "none fits; raise n to at least 40 and set b=8" and worded.fix == ("n=40", "b=8")
    led = rephrased(worded, lead="ConfigError: ")
    assert led == "ConfigError: none fits; raise n to at least 40 and set b=8" and fix_of(led) == ("n=40", "b=8")
    assert Refusal("r", ("a=1",)).fix == "a=1" and fixes_of(None) == () and fixes_of("a=1") == ("a=1",)


def test_a_suggestion_the_model_checks_refuse_is_replaced_by_their_fix_of_two_overrides(devices):
    problem = command_problem([*CONCAT, "model.val_emb_dim=0.5"])
    assert fix_of(problem) == ("model.val_emb_dim=4", "model.id_emb_dim=4"), problem
    assert problem == (
        "model.val_emb_dim=0.5: model.val_emb_dim (model=flux1) takes a whole number (Value '0.5' of type 'float' "
        "could not be converted to Integer); e.g. model.val_emb_dim=4 model.id_emb_dim=4 (model.val_emb_dim=null is "
        "refused too: model.val_emb_dim=null and model.id_emb_dim=null: model.id_merge_mode=concat needs val_emb_dim "
        "and id_emb_dim, integers >= 1 (features per head))")
    # the pair, as offered, passes every check: the command line's and the run's (model checks too)
    fixed = [*CONCAT, *fix_of(problem)]
    assert command_problem(fixed) is None and _config_problem(fixed) is None
    # a key of the pair typed already is replaced, not typed twice
    problem = command_problem([*CONCAT, "model.id_emb_dim=null", "model.val_emb_dim=0.5"])
    assert fix_of(problem) == ("model.val_emb_dim=4", "model.id_emb_dim=4"), problem


@pytest.mark.parametrize("typed, note", [
    ("eval.num_samples=2.5", "e.g. eval.num_samples=4 (eval.num_samples=2 is refused too: it must be >= 2 * "
     "eval.c2st_folds (eval.c2st_folds=2))"),
    ("data.num_simulations=3e9", "e.g. data.num_simulations=10000 (data.num_simulations=3000000000 is refused too: it "
     "is beyond the largest whole number a run can use (2,147,483,647: JAX holds counts and seeds as 32-bit "
     "integers))"),
])
def test_a_refused_suggestion_is_said_as_a_sentence(devices, typed, note):
    # Was: "(eval.num_samples=2 is refused: must be >= ...)", "(... is refused: is beyond ...)"
    problem = command_problem(["experiment=quick", typed])
    assert problem.endswith(note), problem


def test_every_refusal_of_two_overrides_carries_both():
    from omegaconf import OmegaConf

    from faults_helpers import compose_tiny
    from gensbi_sharding.harness.hints import batch_size_problem
    from gensbi_sharding.harness.local_children import model_group_problem
    from gensbi_sharding.harness.sweep_check import job_problem

    concat = job_problem(compose_tiny(*CONCAT, "model.val_emb_dim=0", "model.id_emb_dim=0"))
    assert fix_of(concat) == ("model.val_emb_dim=4", "model.id_emb_dim=4"), concat
    assert concat.endswith("; e.g. model.val_emb_dim=4 model.id_emb_dim=4 (GenSBI suggests 1:1), or "
                           "model.id_merge_mode=sum")
    # no batch size fits the pairs: the budget that fills one batch and that batch, words as they were
    batch = batch_size_problem(12, shards=1, data_parallel=8, train_rows=4, budget=lambda rows: 10 * rows)
    assert fix_of(batch) == ("data.num_simulations=80", "data.batch_size=8")
    assert batch.endswith("but the smallest shard holds 4; raise data.num_simulations to at least 80 and set "
                          "data.batch_size=8")
    # without a budget to name, no override to type: no fix
    assert fix_of(batch_size_problem(12, shards=1, data_parallel=8, train_rows=4)) is None
    cfg = OmegaConf.create({"mesh": {"spec": "dict", "devices": None, "model_axis": 4},
                            "data": {"batch_size": 63, "shards": None}})
    group = model_group_problem(cfg, 2, 3)
    assert fix_of(group) == ("mesh.model_axis=3", "data.batch_size=62"), group
    assert "; set mesh.model_axis=3 and data.batch_size=62 (the batch is split over 2 data shards" in group


@pytest.mark.parametrize("overrides, fix, note", [
    # GenSBI's default 4 does not divide the attention size 10 that qkv_features sets
    (["model=simformer", "model.num_heads=0", "model.qkv_features=10"], "model.num_heads=2",
     "; e.g. model.num_heads=2 (model.num_heads=4 is refused too: it must divide the attention size 10 "
     "(model.qkv_features, or the token size when null); pick one of [1, 2, 5, 10])"),
    # a fix that passes is offered as it was, its note kept
    (["model=flux1", "model.num_heads=0"], "model.num_heads=6", "; e.g. model.num_heads=6 (GenSBI's default)"),
])
def test_a_config_refusals_fix_passes_every_check_of_the_run(devices, overrides, fix, note):
    # Was: a refusal made once the config composed (range checks, model checks, at launch or in a sweep's
    # preflight) offered its fix unchecked: "e.g. model.num_heads=4 (GenSBI's default)", refused next.
    from omegaconf import OmegaConf

    from faults_helpers import compose_tiny
    from gensbi_sharding.harness.sweep_check import job_problem

    cfg = compose_tiny(*overrides)
    problem = job_problem(cfg)
    assert fix_of(problem) == fix and problem.endswith(note), problem
    OmegaConf.update(cfg, fix.split("=")[0], int(fix.split("=")[1]), merge=False)
    assert job_problem(cfg) is None

"""A name typed in another case is offered back in its own case (``data=SLCP`` -> ``data=slcp``).

Was: difflib's ratio counts an upper-case letter as another letter, so ``SLCP`` was near no option: ``data=SLCP`` got
"pick one, e.g. data=bernoulli_glm" and ``data.name=SLCP`` "set data.name=two_moons", another task than the one meant
(``model=Flux1`` was offered ``model=flux1`` only because most of its letters are lower case already).
"""

import pytest
from omegaconf import OmegaConf

from gensbi_sharding.harness.hints import closest_name
from gensbi_sharding.harness.name_hints import registered_name_problem
from gensbi_sharding.harness.override_types import override_problem

TASKS = ["bernoulli_glm", "gaussian_linear", "gaussian_linear_uniform", "gaussian_mixture", "lotka_volterra", "sir",
         "slcp", "two_moons"]


@pytest.mark.parametrize("typed, meant", [
    ("SLCP", "slcp"), ("SIR", "sir"), ("Two_Moons", "two_moons"), ("TWO_MOONS", "two_moons"),
    ("TwoMoons", "two_moons"), ("Lotka_Volterra", "lotka_volterra"), ("GAUSSIAN_MIXTURE", "gaussian_mixture")])
def test_a_task_name_in_another_case_is_offered_in_its_own(typed, meant):
    assert closest_name(typed, TASKS) == meant


def test_a_group_option_in_another_case_is_offered_in_its_own():
    assert override_problem(["data=SLCP"]) == (
        "data=SLCP: Could not find 'data/SLCP' (data options: bernoulli_glm, gaussian_linear, gaussian_linear_uniform, "
        "gaussian_mixture, lotka_volterra, sir, slcp, two_moons); did you mean data=slcp?")
    assert override_problem(["rule=FSDP"]).endswith("did you mean rule=fsdp?")


def test_a_data_name_in_another_case_is_set_to_its_own():
    cfg = OmegaConf.create({"model": {"name": "mlp"}, "data": {"name": "SLCP"}, "rule": {"name": "replicated"}})
    problem = registered_name_problem(cfg)
    assert problem.startswith("unknown data 'SLCP' (data.name=SLCP); registered: ")
    assert "; set data.name=slcp, " in problem


def test_names_that_differ_more_than_in_case_are_matched_as_before():
    assert closest_name("mlpp", ["flux1", "mlp", "simformer", "transformer"]) == "mlp"
    assert closest_name("save_every", ["checkpoint_every", "val_every"]) == "checkpoint_every"  # GenSBI's own name
    assert closest_name("xyzzy", TASKS) is None

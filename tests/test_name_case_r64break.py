"""A name typed in another case is offered back in its own case (``data=SLCP`` -> ``data=slcp``).

Was: difflib's ratio counts an upper-case letter as another letter, so ``SLCP`` was near no option: ``data=SLCP`` got
"pick one, e.g. data=bernoulli_glm" and ``data.name=SLCP`` "set data.name=two_moons", another task than the one meant
(``model=Flux1`` was offered ``model=flux1`` only because most of its letters are lower case already).
"""

import pytest
from omegaconf import OmegaConf

from checkout_files import options_on_disk, shipped_options
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
    # Hydra lists every data file on disk, a user's too (docs/gensbi_models.md's conf/data/noisy_gauss.yaml); the
    # shipped ones are the tasks
    assert shipped_options("data") == TASKS and set(TASKS) <= set(options_on_disk("data"))
    assert override_problem(["data=SLCP"]) == (
        f"data=SLCP: Could not find 'data/SLCP' (data options: {', '.join(options_on_disk('data'))}); did you mean "
        "data=slcp?")
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


def data_problem(name):
    cfg = OmegaConf.create({"model": {"name": "mlp"}, "data": {"name": name}, "rule": {"name": "replicated"}})
    return registered_name_problem(cfg)


def test_a_task_sbibm_jax_ships_but_the_harness_does_not_register_is_named_so_not_taken_for_a_typo():
    # Was: "unknown data 'gaussian_random_field' (data.name=gaussian_random_field); ...; set
    # data.name=gaussian_mixture": another task, offered as if the name were misspelt.
    problem = data_problem("gaussian_random_field")
    assert problem.startswith("unknown data 'gaussian_random_field' (data.name=gaussian_random_field; a task of "
                              "sbibm_jax that the harness does not register); registered: bernoulli_glm, ")
    assert "; set data.name=two_moons, or drop data.name=gaussian_random_field and choose one with data=<name>; " \
           "to add 'gaussian_random_field', register its factory" in problem
    assert problem.endswith("with no sbibm reference posterior it trains with eval.enabled=false")
    assert "sbibm_jax" not in data_problem("gaussian_mixtur") and "set data.name=gaussian_mixture" in \
        data_problem("gaussian_mixtur")  # a typo of a registered task is still offered its nearest


def test_the_list_of_sbibm_jax_s_other_tasks_is_sbibm_jax_s_own():
    import sbibm_jax

    from gensbi_sharding.harness.tasks import SBIBM_JAX_OTHER_TASKS, TASKS

    assert sorted(SBIBM_JAX_OTHER_TASKS) == sorted(set(sbibm_jax.get_available_tasks()) - set(TASKS))

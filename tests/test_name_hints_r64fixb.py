"""Name matching (r64, HARNFIX64B): one case-insensitive matcher; sbibm_jax's other tasks are no typo as data=."""

import pytest
from gensbi_sharding.harness import hints, override_words
from gensbi_sharding.harness.command_checks import config_problem, command_problem
from gensbi_sharding.harness.tasks import SBIBM_JAX_OTHER_TASKS
from gensbi_sharding.harness.refusal import fix_of

TASKS = ["bernoulli_glm", "gaussian_linear", "slcp", "two_moons"]


def test_the_case_insensitive_match_is_override_words_own_and_hints_re_exports_it():
    # Was: override_words.closest_name("SLCP", ...) gave bernoulli_glm (difflib counts case); only hints' wrapper
    # folded case, so a caller importing the other matcher offered a wrong name.
    assert override_words.closest_name("SLCP", TASKS) == "slcp"
    assert override_words.closest_name("TwoMoons", TASKS) == "two_moons"
    assert override_words.closest_name("save_every", ["val_every", "checkpoint_every"]) == "checkpoint_every"
    assert override_words.closest_name("zzzz", TASKS) is None
    assert hints.closest_name is override_words.closest_name


@pytest.mark.slow
def test_an_unregistered_sbibm_jax_task_as_a_data_option_is_said_so_not_matched_to_a_near_name():
    assert "gaussian_random_field" in SBIBM_JAX_OTHER_TASKS
    problem = command_problem(["data=gaussian_random_field"])
    # was: "...; did you mean data=gaussian_mixture?"
    assert "gaussian_mixture?" not in problem and "did you mean" not in problem, problem
    assert "gaussian_random_field is a task of sbibm_jax that the harness does not register" in problem, problem
    assert problem.endswith("pick one, e.g. data=two_moons") and fix_of(problem) == "data=two_moons", problem
    assert command_problem([fix_of(problem)]) is None and config_problem([fix_of(problem)]) is None
    # a typo still gets its nearest option
    assert fix_of(command_problem(["data=two_moon"])) == "data=two_moons"

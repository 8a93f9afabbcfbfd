"""A group choice only Hydra's composition judges (group_compose): refused in one line, its fix passing the checks.

Was (found by round 67's fuzz of the command line): ``hydra/job_logging=x`` (and hydra_logging, output, help, env)
passed every check, then Hydra's "Could not find 'hydra/job_logging/x'" with its options and search path over ten
lines; ``rule=${nope}`` Hydra's "Error resolving interpolation"; ``rule=${mesh}`` its "Could not find 'rule/dict'";
``model=${oc.env:HOME} experiment=quick`` a refusal of the quick sizes of a model named ``${oc.env:HOME}``.
"""

import shlex

import pytest

from checkout_files import options_on_disk, shipped_options
from gensbi_sharding.harness.command_checks import command_problem
from gensbi_sharding.harness.group_compose import group_choice_problem, hydra_groups

OPTIONS = {"job_logging": "default, disabled, gensbi, none, stdout", "hydra_logging": "default, disabled, "
           "hydra_debug, none", "output": "default", "help": "default", "env": "default"}


@pytest.mark.parametrize("group", sorted(OPTIONS))
def test_an_option_hydras_group_lacks_is_named_with_its_options(group):
    problem = command_problem([f"hydra/{group}=x"])
    assert problem == (f"hydra/{group}=x: hydra/{group} has no option x (its options: {OPTIONS[group]}); pick one, "
                       f"or leave hydra/{group}=x out")
    assert command_problem([]) is None  # left out, as advised


@pytest.mark.slow
def test_a_near_option_of_hydras_group_is_offered_and_passes():
    problem = command_problem(["hydra/job_logging=defualt"])
    assert problem.endswith("; did you mean hydra/job_logging=default? Or leave hydra/job_logging=defualt out")
    assert command_problem(["hydra/job_logging=default"]) is None  # the advice, pasted
    assert command_problem(["hydra/hydra_logging=disabled"]) is None


def test_a_group_hydra_has_not_is_named_with_hydras_groups():
    problem = command_problem(["hydra/foo=x"])
    assert problem == f"hydra/foo=x: Hydra has no group hydra/foo; its groups: {', '.join(hydra_groups())}; drop " \
                      "hydra/foo=x"
    assert "hydra/job_logging" in hydra_groups() and "hydra/launcher" in hydra_groups()


@pytest.mark.parametrize("args", [["rule=${nope}"], ["model=${oc.env:HOME}", "experiment=quick"], ["model=${data}"],
                                  ["-m", "rule=${nope},fsdp"]])
@pytest.mark.fast_cases(2)
def test_an_interpolation_hydra_cannot_resolve_as_a_choice_is_refused_and_the_fix_passes(args):
    arg = next(a for a in args if "${" in a)
    key, value = arg.split("=", 1)[0], arg.split("=", 1)[1].split(",")[0]
    problem = command_problem(args)
    assert problem.startswith(f"{arg}: Hydra cannot resolve {value} as a choice of {key}: a choice interpolates only "
                              "the choice of another group (")
    assert "\n" not in problem
    fix = problem.rsplit("; pick an option, e.g. ", 1)[1]
    assert fix == {"rule": "rule=replicated" + (",fsdp" if "-m" in args else ""), "model": "model=mlp"}[key]
    assert command_problem([fix if a == arg else a for a in args]) is None  # the advice, pasted


@pytest.mark.parametrize("arg, resolved", [("rule=${mesh}", "dict"), ("rule=${distributed}", "none")])
def test_an_interpolation_that_resolves_to_no_option_names_what_it_resolves_to(arg, resolved):
    problem = command_problem([arg])
    # every rule on disk, a user's too (the README's conf/rule/my_rule.yaml); the shipped ones are these four
    assert shipped_options("rule") == ["fsdp", "fsdp_tensor", "replicated", "tensor"]
    assert problem == (f"{arg}: rule has no option {arg[5:]} (it resolves to {resolved}; its options: "
                       f"{', '.join(options_on_disk('rule'))}); pick one, e.g. rule=replicated")


def test_an_interpolation_hydra_resolves_to_an_option_runs():
    assert group_choice_problem(["mesh=${distributed}"]) is None  # mesh=none
    assert group_choice_problem(["rule=fsdp", "seed=1"]) is None  # nothing to compose


def test_the_refusal_reads_as_one_shell_word_pasted():
    problem = command_problem(shlex.split("'hydra/help=${x}'"))
    assert problem.endswith("; pick an option of hydra/help, or leave hydra/help=${x} out")

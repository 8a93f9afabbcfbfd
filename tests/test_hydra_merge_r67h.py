"""A ``hydra.*`` override Hydra's composition of the command refuses though every check passed (found by round 67's
fuzz of two overrides): refused in one line, the fix passing the checks and composing.

Was: ``hydra/launcher=slurm hydra.launcher.timeout_min=true`` and ``sweep=rules_x_model_axis
hydra.sweeper.params.rule=[a]``: Hydra's several-line "Error merging override ... full_key ... object_type";
``hydra/job_logging=none hydra.job_logging.root.level=INFO``: "Could not override" (the entry check composed the
default logging config, which holds root.level, not the one typed).
"""

import shlex

import pytest
from hydra import compose, initialize_config_dir

from gensbi_sharding.harness.command_checks import command_problem
from gensbi_sharding.harness.groups import CONF


def _hydra(overrides):
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose("config", overrides=overrides, return_hydra_config=True).hydra


@pytest.mark.slow
@pytest.mark.parametrize("value, reason", [("true", "Value 'True' of type 'bool' could not be converted to Integer"),
                                           ("yes", "Value 'yes' of type 'str' could not be converted to Integer"),
                                           ("null", "field 'hydra.launcher.timeout_min' is not Optional")])
def test_a_launcher_setting_of_another_type_is_refused_with_its_default(value, reason):
    args = ["hydra/launcher=slurm", f"hydra.launcher.timeout_min={value}"]
    assert command_problem(args) == (f"{args[1]}: Hydra cannot set it ({reason}); give it a value it takes, e.g. "
                                     "hydra.launcher.timeout_min=60 (its default), or leave it out")
    with pytest.raises(Exception, match="Error merging override"):  # what Hydra said of it
        _hydra(args)
    fixed = ["hydra/launcher=slurm", "hydra.launcher.timeout_min=60"]
    assert command_problem(fixed) is None and _hydra(fixed).launcher.timeout_min == 60  # the advice, pasted


@pytest.mark.slow
def test_a_presets_sweeper_param_given_a_list_is_refused_and_its_quoted_default_composes():
    args = ["sweep=rules_x_model_axis", "hydra.sweeper.params.rule=[a]"]
    problem = command_problem(args)
    assert problem == ("hydra.sweeper.params.rule=[a]: Hydra cannot set it (Cannot convert 'list' to string: "
                       "'['a']'); give it a value it takes, e.g. "
                       "'hydra.sweeper.params.rule=\"replicated,fsdp,tensor\"' (its default), or leave it out")
    pasted = [args[0], *shlex.split(problem.split("e.g. ", 1)[1].split(" (its default)")[0])]
    assert command_problem(pasted) is None
    assert _hydra(pasted).sweeper.params.rule == "replicated,fsdp,tensor"


@pytest.mark.slow
def test_an_entry_below_a_null_of_the_typed_logging_config_names_plus_plus():
    args = ["hydra/job_logging=none", "hydra.job_logging.root.level=INFO"]
    problem = command_problem(args)
    assert problem == ("hydra.job_logging.root.level=INFO: Hydra's config holds no hydra.job_logging.root.level to "
                       "override, and a key typed without + must be there; to add it, write "
                       "++hydra.job_logging.root.level=INFO")
    pasted = [args[0], "++hydra.job_logging.root.level=INFO"]
    assert command_problem(pasted) is None and _hydra(pasted).job_logging.root.level == "INFO"
    assert command_problem(args[1:]) is None  # the default logging config (gensbi) holds root.level


def test_values_hydra_merges_pass():
    assert command_problem(["hydra/launcher=slurm", "hydra.launcher.timeout_min=5"]) is None

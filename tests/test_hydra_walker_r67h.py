"""The walks of Hydra's schema are one (hydra_entries.hydra_type), and at a dict's entries they answer as Hydra's
compose does: an entry of ``hydra.job.env_set`` (Dict[str, str]) takes text (a number converted), not a list or a
dict; a callback's (Dict[str, Any]) anything.

Was: three walkers, two of which (hydra_values._hint, key_paths' loop) read an entry as of no type, so
``++hydra.job.env_set.A={b:1}`` passed every check, then Hydra's several-line "Error merging override".
"""

import pytest
from hydra import compose, initialize_config_dir

from gensbi_sharding.harness.command_checks import command_problem
from gensbi_sharding.harness.groups import CONF
from gensbi_sharding.harness.hydra_values import hydra_type_problem

ENTRIES = ["++hydra.job.env_set.A={b:1}", "++hydra.job.env_set.A=[1]", "++hydra.job.env_set.A=1",
           "+hydra.job.env_set.A=x", "++hydra.callbacks.a={_target_:gensbi_sharding.harness.summary.SweepSummary}"]


def _composes(arg):
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        try:
            compose("config", overrides=[arg], return_hydra_config=True)
        except Exception:  # noqa: BLE001 (Hydra's refusal, whichever)
            return False
    return True


@pytest.mark.parametrize("arg", ENTRIES)
@pytest.mark.fast_cases(2)
def test_the_checks_refuse_a_dict_entry_exactly_where_hydras_compose_does(arg):
    assert (command_problem([arg]) is None) == _composes(arg)


def test_an_entry_of_text_given_a_dict_names_why():
    assert hydra_type_problem(["++hydra.job.env_set.A={b:1}"]) == (
        "++hydra.job.env_set.A={b:1}: an entry of hydra.job.env_set is text (an environment variable's value), not a "
        "dict; as text: '++hydra.job.env_set.A=\"{b:1}\"', or leave it out")


# An entry of a dict of anything (Hydra's logging config: Dict[str, Any]) has no type to check: the one walker read it
# as Any and hydra_type_problem then merged it into the bare schema, whose job_logging is ???, and raised (found by
# this round's second fuzz of two overrides, 94 commands of hydra.job_logging.<key>).
@pytest.mark.parametrize("args", [["hydra/job_logging=gensbi", "hydra.job_logging.version=1"],
                                  ["hydra/job_logging=none", "hydra.job_logging.version=1"],
                                  ["hydra.job_logging.root.level=DEBUG"]])
@pytest.mark.fast_cases(1)
def test_an_entry_of_a_dict_of_anything_is_left_to_hydra_which_composes_it(args):
    assert hydra_type_problem(args) is None
    assert command_problem(args) is None
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        compose("config", overrides=args, return_hydra_config=True)

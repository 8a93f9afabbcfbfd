"""``???`` at an entry of one of Hydra's dict settings: refused in one line (key_paths.hydra_missing_problem).

Was (found by round 67's fuzz of two overrides): ``hydra/job_logging=gensbi hydra.job_logging.root.level=???`` was an
AttributeError traceback from the check itself ('str' object has no attribute 'get': the schema's job_logging is
???); ``+hydra.job.env_set.A=???`` and ``hydra.callbacks.sweep_summary._target_=???`` passed every check, then
Hydra's MissingMandatoryValue traceback as the job started.
"""

import pytest

from gensbi_sharding.harness.command_checks import command_problem
from gensbi_sharding.harness.hydra_entries import in_hydra_dict
from gensbi_sharding.harness.key_paths import hydra_missing_problem

MARK = "??? is OmegaConf's mark of a value still to be given, which no run can read; give a value or leave it out"


@pytest.mark.parametrize("args", [["hydra/job_logging=gensbi", "hydra.job_logging.root.level=???"],
                                  ["+hydra.job.env_set.A=???"], ["hydra.callbacks.sweep_summary._target_=???"]])
def test_missing_at_an_entry_of_a_dict_setting_of_hydras_is_refused_in_one_line(args):
    assert hydra_missing_problem(args) == f"{args[-1]}: {MARK}"
    assert command_problem(args) == f"{args[-1]}: {MARK}"
    assert command_problem(args[:-1]) is None  # left out, as advised


def test_which_keys_lie_in_a_dict_setting_of_hydras():
    assert in_hydra_dict("hydra.job_logging.root.level") and in_hydra_dict("hydra.job.env_set")
    assert in_hydra_dict("hydra.callbacks.a._target_")
    assert not in_hydra_dict("hydra.run.dir") and not in_hydra_dict("hydra.job.chdir")

"""The command checks' own compositions print nothing: a refusal is the one line it says.

Was (found by round 67's fuzz, with the real launch.py): ``hydra.searchpath=file://x`` printed Hydra's UserWarning
"provider=hydra.searchpath in command-line, path=x is not available" and its "warnings.warn(" line above the one-line
refusal: the check of its fix composed the folder that is not there.
"""

import warnings

import pytest

from gensbi_sharding.harness.command_checks import command_problem


@pytest.mark.parametrize("args", [["hydra.searchpath=file://r67_not_there"],
                                  ["hydra.searchpath=[file://r67_not_there]", "hydra.job.env_set.N=1"]])
@pytest.mark.fast_cases(1)
def test_a_refusal_whose_check_composes_a_missing_search_path_folder_warns_nothing(args):
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        problem = command_problem(args)
    assert problem is not None and "\n" not in problem
    assert [str(w.message) for w in said] == []

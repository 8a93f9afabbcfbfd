"""A bare true/false for a text setting of Hydra's on the command line is refused, as in a YAML file (r64)."""

import shlex

import pytest

from gensbi_sharding.harness.command_checks import command_problem
from gensbi_sharding.harness.override_grammar import parse
from gensbi_sharding.harness.refusal import fix_of


@pytest.mark.parametrize("typed, word", [("+hydra.job.env_set.MY_FLAG=true", "true"),
                                         ("hydra.job.env_set.OTHER=false", "false"),
                                         ("hydra.job.name=false", "false")])
@pytest.mark.fast_cases(1)
def test_a_yes_no_for_a_text_setting_of_hydras_is_refused_and_the_quoted_fix_gives_the_text(typed, word):
    # Was: no refusal; the job's variable was 'True' (Python's spelling), where a YAML file's MY_FLAG: true is refused
    problem = command_problem([typed])
    key = typed.split("=", 1)[0]
    assert problem == (f"{typed}: {key.lstrip('+')} takes text, and {word} is a yes/no, which it would read as "
                       f"'{word.title()}' (Python's spelling), as in a config file; for the text, quote it: "
                       f"\"{'++' * ('OTHER' in key)}{key}='{word}'\""), problem  # an entry Hydra lacks: ++ (r67)
    pasted = shlex.split(problem.rsplit("quote it: ", 1)[1])  # as a shell reads the words printed
    assert pasted == [fix_of(problem)] and command_problem(pasted) is None
    assert parse(pasted).parsed[0].hydra.value() == word  # the text itself


def test_a_yes_no_setting_of_hydras_and_a_quoted_word_pass():
    assert command_problem(["hydra.job.chdir=true"]) is None
    assert command_problem(["+hydra.job.env_set.MY_FLAG='true'", "+hydra.job.env_set.N=1"]) is None

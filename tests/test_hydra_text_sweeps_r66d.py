"""A sweep giving a text setting of Hydra's a bare true/false is refused as one run giving it is (r66).

Was: ``-m +hydra.job.env_set.MY_FLAG=true,false`` passed every check (a sweep's values were skipped), and its jobs
ran with MY_FLAG='True' and 'False' (Python's spelling), where ``+hydra.job.env_set.MY_FLAG=true`` is refused.
"""

import shlex

import pytest

from gensbi_sharding.harness.command_checks import command_problem
from gensbi_sharding.harness.override_grammar import parse
from gensbi_sharding.harness.refusal import fix_of


@pytest.mark.parametrize("typed, word, fix, values", [
    ("+hydra.job.env_set.MY_FLAG=true,false", "true", "+hydra.job.env_set.MY_FLAG='true','false'", ["true", "false"]),
    ("hydra.job.name=choice(x,false)", "false", "hydra.job.name=x,'false'", ["x", "false"]),
])
def test_a_sweep_of_yes_nos_for_a_text_setting_of_hydras_is_refused_and_the_quoted_fix_gives_the_text(
        typed, word, fix, values):
    problem = command_problem(["-m", typed])
    key, raw = typed.split("=", 1)
    assert problem == (f"{typed}: {key.lstrip('+')} takes text, and {word} (a value of the sweep {raw}) is a yes/no, "
                       f"which it would read as '{word.title()}' (Python's spelling), as in a config file; for the "
                       f"text, quote it: \"{fix}\""), problem
    pasted = shlex.split(problem.rsplit("quote it: ", 1)[1])  # as a shell reads the words printed
    assert pasted == [fix_of(problem)] == [fix] and command_problem(["-m", *pasted]) is None
    assert parse(pasted).parsed[0].values() == values  # the text itself, each job's


def test_a_fix_keeping_a_sweeps_quoted_values_is_quoted_for_the_shell_and_gives_each_value():
    problem = command_problem(["-m", 'hydra.job.env_set.MY_FLAG=TRUE,x,3,"a,b",null'])
    assert problem.startswith('hydra.job.env_set.MY_FLAG=TRUE,x,3,"a,b",null: hydra.job.env_set.MY_FLAG takes '
                              "text, and true (a value of the sweep "), problem
    pasted = shlex.split(problem.rsplit("quote it: ", 1)[1])
    assert pasted == [fix_of(problem)] == ["hydra.job.env_set.MY_FLAG='true',x,3,\"a,b\",null"]
    assert command_problem(["-m", *pasted]) is None
    assert parse(pasted).parsed[0].values() == ["true", "x", 3, "a,b", None]


def test_a_sweep_of_hydras_yes_no_setting_or_of_quoted_words_passes():
    assert command_problem(["-m", "hydra.job.chdir=true,false"]) is None
    assert command_problem(["-m", "+hydra.job.env_set.MY_FLAG='true','false'", "+hydra.job.env_set.N=1,2"]) is None


def test_a_presets_sweeper_param_of_yes_nos_for_a_text_setting_is_refused_and_the_line_it_gives_runs_the_text(
        tmp_path):
    # Was: a preset's hydra.sweeper.params '+hydra.job.env_set.MY_FLAG: true,false' passed the command's checks and
    # the sweep's, its two jobs run with MY_FLAG='True' and 'False'.
    from hydra import compose, initialize_config_dir

    from gensbi_sharding.harness.config import register_configs
    from gensbi_sharding.harness.groups import CONF
    from gensbi_sharding.harness.sweep_check import sweep_config_problem
    from gensbi_sharding.harness.sweep_plan import sweep_jobs

    preset = tmp_path / "sweep" / "mine.yaml"
    preset.parent.mkdir()
    head = "# @package _global_\nhydra:\n  mode: MULTIRUN\n  sweeper:\n    params:\n      "
    preset.write_text(f"{head}+hydra.job.env_set.MY_FLAG: true,false\n")
    typed = [f"hydra.searchpath=[file://{tmp_path}]", "sweep=mine", "experiment=quick"]
    register_configs()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        problem = sweep_config_problem(compose("config", overrides=typed, return_hydra_config=True))
        assert problem == (
            "+hydra.job.env_set.MY_FLAG=true,false (in the preset's hydra.sweeper.params): hydra.job.env_set.MY_FLAG "
            "takes text, and true (a value of the sweep true,false) is a yes/no, which it would read as 'True' "
            "(Python's spelling), as in a config file; for the text, write "
            "+hydra.job.env_set.MY_FLAG: \"'true','false'\" there"), problem
        preset.write_text(f"{head}{problem.rsplit('write ', 1)[1].removesuffix(' there')}\n")  # the line it gives
        master = compose("config", overrides=typed, return_hydra_config=True)
        assert sweep_config_problem(master) is None
    params = dict(master.hydra.sweeper.params)
    jobs = sweep_jobs([], params)
    assert [parse(job).parsed[0].values() for job in jobs] == [["true"], ["false"]]  # each job's text

"""A sweep of a setting of Hydra's: refused on the command line, as Hydra refuses it; a preset's sweeper params giving a
text setting a bare true/false refused as one run giving it is (r66).
"""

import shlex

import pytest

from gensbi_sharding.harness.command_checks import command_problem
from gensbi_sharding.harness.override_grammar import parse
from gensbi_sharding.harness.refusal import fix_of


@pytest.mark.parametrize("typed, fix", [
    ("+hydra.job.env_set.MY_FLAG=true,false", "+hydra.job.env_set.MY_FLAG='true'"),
    ('hydra.job.env_set.MY_FLAG=TRUE,x,3,"a,b",null', "++hydra.job.env_set.MY_FLAG='true'"),
    ("hydra.job.name=choice(x,false)", "hydra.job.name=x"),
    ("hydra.job.chdir=true,false", "hydra.job.chdir=true"),
    ("+hydra.job.env_set.N=1,2", '+hydra.job.env_set.N="1"'),
])
@pytest.mark.fast_cases(2)
def test_a_sweep_of_a_setting_of_hydras_with_m_is_refused_as_hydra_refuses_it_and_the_fix_gives_one_value(typed, fix):
    # Hydra sweeps none of its own settings from the command line, with -m too ("Sweeping over Hydra's configuration
    # is not supported"). Was (earlier this round): with -m a sweep of yes/nos for a text setting was told to quote
    # them, "+hydra.job.env_set.MY_FLAG='true','false'", which Hydra then refused; other sweeps passed every check.
    problem = command_problem(["-m", typed])
    assert problem.startswith(f"{typed}: several values are a sweep, and Hydra sweeps none of its own settings "
                              f"(hydra.*); give {typed.split('=', 1)[0].lstrip('+')} one value, e.g. "), problem
    pasted = shlex.split(problem.rsplit("e.g. ", 1)[1])  # as a shell reads the words printed
    assert pasted == [fix_of(problem)] == [fix] and command_problem(["-m", *pasted]) is None
    assert len(parse(pasted).parsed[0].values()) == 1  # one value: the text itself where the setting takes text


@pytest.mark.slow  # ~0.7 s on 2 cores
def test_a_single_yes_no_for_a_text_setting_of_hydras_is_still_refused_with_its_quoted_fix():
    problem = command_problem(["-m", "+hydra.job.env_set.MY_FLAG=true"])
    assert problem.endswith("for the text, quote it: \"+hydra.job.env_set.MY_FLAG='true'\""), problem
    assert command_problem(["-m", *shlex.split(problem.rsplit("quote it: ", 1)[1])]) is None


@pytest.mark.slow
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

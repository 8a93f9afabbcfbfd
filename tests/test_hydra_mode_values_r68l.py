"""An odd ``hydra.mode`` value is refused in one line that names it, the names the setting takes and one to write.

Was: ``hydra.mode=1,2`` said "give hydra.mode one value, e.g. hydra.mode=1" (Hydra's number for RUN, which a reader
cannot tell); ``hydra.mode=run`` (and ``3``, ``''``, ``[RUN]``, ...) "hydra.mode cannot take run (Invalid value 'run',
expected one of [RUN, MULTIRUN]); give it a value it takes, or leave it out", naming no value to write. Now each names
RUN or MULTIRUN to write, and that command passes the checks and composes.
"""

import shlex

import pytest
from hydra import compose, initialize_config_dir

from gensbi_sharding.harness.command_checks import command_problem
from gensbi_sharding.harness.groups import CONF
from gensbi_sharding.harness.refusal import fix_of

TAKES = "hydra.mode takes RUN or MULTIRUN by name (MULTIRUN: a sweep, as -m), not "
SEVERAL = "several (Hydra sweeps none of its own settings)"


@pytest.mark.parametrize("arg, given, fix", [
    ("hydra.mode=1,2", SEVERAL, "hydra.mode=RUN"),  # 1: RUN's number
    ("hydra.mode=MULTIRUN,RUN", SEVERAL, "hydra.mode=MULTIRUN"),
    ("hydra.mode=range(1,3)", SEVERAL, "hydra.mode=RUN"),
    ("hydra.mode=run", "run", "hydra.mode=RUN"),
    ("hydra.mode=a", "a", "hydra.mode=RUN"),  # was tests/test_unparsed_overrides_r66f.py's, in OmegaConf's words
    ("++hydra.mode=multirun", "multirun", "++hydra.mode=MULTIRUN"),
    ("hydra.mode=3", "3", "hydra.mode=RUN"),
    ("hydra.mode=", "''", "hydra.mode=RUN"),
    ("hydra.mode=[RUN]", "[RUN]", "hydra.mode=RUN"),
    ("hydra.mode='1,2'", "'1,2'", "hydra.mode=RUN"),
])
@pytest.mark.fast_cases(2)
def test_an_odd_hydra_mode_names_the_value_and_a_fix_that_passes_when_pasted(arg, given, fix):
    command = ["experiment=quick", arg, "hydra.run.dir=runs/a"]
    problem = command_problem(command)
    assert problem == f"{arg}: {TAKES}{given}; write {fix}, or leave it out"
    assert fix_of(problem) == fix and "\n" not in problem
    pasted = [fix if word == arg else word for word in shlex.split(shlex.join(command))]
    if fix.endswith("MULTIRUN"):  # a sweep writes into hydra.sweep.dir: the run's folder is the next refusal's
        pasted[-1] = "hydra.sweep.dir=runs/a"
    assert command_problem(pasted) is None
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        assert compose("config", overrides=pasted, return_hydra_config=True).hydra.mode.name == fix.split("=")[1]


@pytest.mark.parametrize("arg", ["hydra.mode=RUN", "hydra.mode=MULTIRUN", "hydra.mode=null"])
def test_a_mode_hydra_takes_passes(arg):
    assert command_problem([arg]) is None

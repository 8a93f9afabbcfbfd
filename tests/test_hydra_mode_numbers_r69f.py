"""``hydra.mode`` given Hydra's number for a mode, or the enum's printed form, is refused naming itself (round 69,
LEFT69 item 4).

Was: OmegaConf takes an enum's number and ``RunMode.<name>`` as well as its name, so ``hydra.mode=2`` passed the check
of Hydra's values as MULTIRUN and was refused for another reason, "hydra.run.dir=runs/a is not used here: a multirun
(-m, or a preset such as experiment=sbibm) writes into hydra.sweep.dir", naming neither hydra.mode nor its value
(without hydra.run.dir it ran a sweep); ``hydra.mode=1`` ran as RUN. Now each is refused as ``hydra.mode=run`` is: the
value, the names it takes, and the one it reads as to write, which passes when pasted.
"""

import shlex

import pytest
from hydra import compose, initialize_config_dir

from gensbi_sharding.harness.command_checks import command_problem
from gensbi_sharding.harness.groups import CONF
from gensbi_sharding.harness.refusal import fix_of

TAKES = "hydra.mode takes RUN or MULTIRUN by name (MULTIRUN: a sweep, as -m), not "


@pytest.mark.slow
@pytest.mark.parametrize("args, fix", [
    (["hydra.mode=2", "hydra.run.dir=runs/a"], "hydra.mode=MULTIRUN"),  # was: refused for hydra.run.dir
    (["hydra.mode=2", "seed=0,1"], "hydra.mode=MULTIRUN"),  # with -m: was, ran the sweep
    (["hydra.mode=1", "hydra.run.dir=runs/a"], "hydra.mode=RUN"),  # was: ran as RUN
    (["hydra.mode=2.0", "hydra.run.dir=runs/a"], "hydra.mode=MULTIRUN"),
    (["hydra.mode=RunMode.MULTIRUN", "hydra.sweep.dir=runs/a"], "hydra.mode=MULTIRUN"),  # was: ran the sweep
    (["++hydra.mode=RunMode.RUN"], "++hydra.mode=RUN"),
])
def test_a_mode_by_number_or_enum_form_is_refused_naming_it_and_its_name(args, fix):
    command = [*(["-m"] if "seed=0,1" in args else []), "experiment=quick", *args]
    arg = next(a for a in args if "hydra.mode=" in a)
    problem = command_problem(command)
    assert problem == f"{arg}: {TAKES}{arg.split('=', 1)[1]}; write {fix}, or leave it out"
    assert fix_of(problem) == fix
    pasted = [fix if word == arg else word for word in shlex.split(shlex.join(command))]
    if fix.endswith("MULTIRUN"):  # a sweep writes into hydra.sweep.dir: the run's folder is the next refusal's
        pasted = [w.replace("hydra.run.dir=", "hydra.sweep.dir=") for w in pasted]
    assert command_problem(pasted) is None
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        one_job = [w.replace("seed=0,1", "seed=0") for w in pasted if w != "-m"]  # compose() makes one job
        composed = compose("config", overrides=one_job, return_hydra_config=True)
        assert composed.hydra.mode.name == fix.split("=")[1]

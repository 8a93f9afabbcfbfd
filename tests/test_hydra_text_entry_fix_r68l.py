"""An entry of ``hydra.job.env_set`` (text: an environment variable's value) given a dict or a list, or a key below
one, is refused in one line whose fix, the entry as text, passes the checks, composes and runs.

Was: ``hydra.job.env_set={A:{b:1}}`` offered "to add it, write '++hydra.job.env_set={A:{b:1}}'", which every check
passed and Hydra's job then failed on ("TypeError: str expected, not DictConfig"); ``hydra.job.env_set.A.b=1`` offered
``++hydra.job.env_set.A.b=1``, "though ... is refused too"; ``hydra.job.env_set.A={b:1}`` "give it a value it takes",
naming none.
"""

import shlex
import subprocess
import sys

import pytest
from hydra import compose, initialize_config_dir

from faults_helpers import REPO
from gensbi_sharding.harness.command_checks import command_problem
from gensbi_sharding.harness.groups import CONF
from gensbi_sharding.harness.refusal import fix_of

TEXT = "an entry of hydra.job.env_set is text (an environment variable's value)"


@pytest.mark.parametrize("arg, said, fix", [
    ("hydra.job.env_set.A={b:1}", "not a dict; as text: ", '++hydra.job.env_set.A="{b:1}"'),
    ("++hydra.job.env_set.A=[1,2]", "not a list; as text: ", '++hydra.job.env_set.A="[1,2]"'),
    ("hydra.job.env_set={A:{b:1}}", "and hydra.job.env_set.A is a dict; as text: ",
     '++hydra.job.env_set={A:"{b:1}"}'),
    ("++hydra.job.env_set={A:[1],B:2}", "and hydra.job.env_set.A is a list; as text: ",
     '++hydra.job.env_set={A:"[1]",B:2}'),  # was passed by every check, then Hydra's TypeError as the job started
    ("hydra.job.env_set.A.b=1", "so hydra.job.env_set.A holds no b; set the entry itself: ",
     '++hydra.job.env_set.A="1"'),
])
@pytest.mark.fast_cases(2)
def test_a_text_entry_given_a_dict_names_it_as_text_and_the_fix_composes(arg, said, fix):
    problem = command_problem([arg])
    assert problem == f"{arg}: {TEXT}, {said}{shlex.quote(fix)}, or leave it out"
    assert fix_of(problem) == fix and "refused too" not in problem
    assert command_problem([fix]) is None
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        env = compose("config", overrides=[fix], return_hydra_config=True).hydra.job.env_set
    assert all(isinstance(value, str) for value in env.values()) and "A" in env, env


@pytest.mark.parametrize("arg", ["+hydra.job.env_set.A=x", "++hydra.job.env_set={A:1}", "hydra.job.env_set={}",
                                 "hydra.job_logging.root.level=DEBUG"])
@pytest.mark.fast_cases(2)
def test_text_entries_and_dicts_of_anything_pass(arg):
    assert command_problem([arg]) is None


@pytest.mark.slow  # a dry run launched with the fix (~10 s on 2 cores)
def test_the_fix_pasted_runs_with_the_entry_set(tmp_path):
    problem = command_problem(["hydra.job.env_set={A:{b:1}}"])
    fix = problem.split("; as text: ", 1)[1].removesuffix(", or leave it out")
    code = ("import os, runpy, sys\nimport gensbi_sharding.harness.run as r\n"
            "r.run = lambda cfg: print('A=' + os.environ['A']) or {'status': 'ok'}\n"
            "sys.argv = sys.argv[1:]\nrunpy.run_path(sys.argv[0], run_name='__main__')\n")
    done = subprocess.run([sys.executable, "-c", code, "launch.py", "experiment=quick", *shlex.split(fix),
                           f"hydra.run.dir={tmp_path / 'run'}"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "A={b:1}" in done.stdout.splitlines(), (done.stdout + done.stderr)[-3000:]

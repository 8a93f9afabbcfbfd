"""The "all fixed together: ..." line pastes into bash as is: each override one shell word (r66)."""

import shlex
import subprocess
import sys

import pytest

from faults_helpers import REPO, compose_tiny
from gensbi_sharding.harness.command_checks import command_problem
from gensbi_sharding.harness.refusal import Refusal, fix_of, fixes_of, listed
from gensbi_sharding.harness.job_check import job_problem

LEAD = "  all fixed together: "


def _tail(problem):
    """The words after "all fixed together...: " on the list's last line."""
    last = problem.splitlines()[-1]
    assert last.startswith("  all fixed together"), problem
    return last.split(": ", 1)[1]


FIXES = ["hydra.run.dir=runs/my run", "+hydra.job.env_set.A='true'", "train.resume=$HOME/run", "eval.observations=[1]",
         "hydra.sweep.dir=runs/*", "+hydra.job.env_set.B=x=y", "+hydra.job.env_set.C='it\"s'", "seed=0"]


def test_the_line_gives_bash_exactly_the_overrides_it_names():
    # Was: the overrides as typed, joined by spaces: bash split "runs/my run", took A='true''s quotes off (Hydra then
    # read the yes/no refused), expanded $HOME and globbed [1] and *
    problems = [Refusal(f"refused {n}", fix, how="; set ") for n, fix in enumerate(FIXES)]
    refusal = listed("8 settings are refused, each with its fix:", problems)
    assert fixes_of(fix_of(refusal)) == tuple(FIXES)
    assert shlex.split(_tail(refusal)) == FIXES, refusal
    assert refusal.splitlines()[-1] == LEAD + (
        "'hydra.run.dir=runs/my run' \"+hydra.job.env_set.A='true'\" 'train.resume=$HOME/run' 'eval.observations=[1]' "
        "'hydra.sweep.dir=runs/*' +hydra.job.env_set.B=x=y '+hydra.job.env_set.C='\"'\"'it\"s'\"'\"'' seed=0")


@pytest.mark.slow
def test_a_quoted_fix_of_the_command_line_keeps_its_quotes_and_the_command_it_leads_to_passes():
    args = ["experiment=quick", "+hydra.job.env_set.MY_FLAG=true", "seed=-1"]
    problem = command_problem(args)
    assert problem.splitlines()[-1] == LEAD + "\"+hydra.job.env_set.MY_FLAG='true'\" seed=0", problem
    words = shlex.split(_tail(problem))
    assert words == ["+hydra.job.env_set.MY_FLAG='true'", "seed=0"]  # was +hydra.job.env_set.MY_FLAG=true
    assert command_problem(["experiment=quick", *words]) is None


@pytest.mark.slow
def test_a_config_refusals_fixes_paste_as_words_and_a_key_to_drop_is_said_before_them():
    problem = job_problem(compose_tiny("eval.observations=[1,1]", "seed=-1"))
    assert shlex.split(_tail(problem)) == list(fixes_of(fix_of(problem))) == ["seed=0", "eval.observations=[1]"]
    assert job_problem(compose_tiny(*shlex.split(_tail(problem)))) is None
    # was "all fixed together: drop +model.dpeth=2 and set model.depth=2 seed=0": no words to paste
    problem = job_problem(compose_tiny("+model.dpeth=2", "seed=-1"))
    assert problem.splitlines()[-1] == "  all fixed together (drop +model.dpeth=2): model.depth=2 seed=0", problem
    assert job_problem(compose_tiny(*shlex.split(_tail(problem)))) is None


@pytest.mark.slow  # two launch.py processes each (--cfg job: composed, checked, nothing trained or written)
@pytest.mark.parametrize("refused", [["+hydra.job.env_set.MY_FLAG=true", "seed=-1"],
                                     ["eval.observations=[1,1]", "seed=-1"]])
def test_the_line_pasted_into_bash_gives_a_command_launch_py_accepts(tmp_path, refused):
    (tmp_path / "eval.observations=1").touch()  # bash globs an unquoted eval.observations=[1] to this file's name
    launch = [sys.executable, str(REPO / "launch.py"), "--cfg", "job", "experiment=quick"]
    said = subprocess.run([*launch, *refused], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert said.returncode != 0, said.stdout
    tail = _tail(said.stderr.strip())
    typed = f"{' '.join(map(shlex.quote, launch))} {tail}"  # the refused overrides replaced by the line's
    pasted = subprocess.run(["bash", "-c", typed], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert pasted.returncode == 0 and "[ERROR]" not in pasted.stderr, (typed, pasted.stderr)
    assert "seed: 0" in pasted.stdout.splitlines()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["eval.observations=1"]  # --cfg job writes nothing

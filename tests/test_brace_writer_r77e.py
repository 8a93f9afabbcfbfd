"""A folder named ``a${b}`` written into a recorded continue command (FIX77 1): Hydra cannot run a job in such a folder
at all, so the pasted command is refused in one line naming the folder and the rename (``hydra_values``), where
OmegaConf read it as an interpolation ("cannot be resolved ... give a folder whose ${...} resolves"). The writer does
not escape ``${``: it also writes back values the user typed, where ``${now:%H}`` is an interpolation meant as one
(``test_dry_run_mix_r69f``: escaped, the printed commands ran in a folder literally named so, and were refused)."""

import shlex

import pytest
from omegaconf import OmegaConf

from gensbi_sharding.harness.hydra_values import hydra_type_problem
from gensbi_sharding.harness.override_grammar import hydra_override, parse
from gensbi_sharding.harness.sweep_hints import job_command


@pytest.mark.parametrize("name", ["q'uote", 'd"quote', "sp ace", "e=q", "c,omma", "b[racket"])
def test_a_written_folder_reads_back_as_itself_through_the_shell_hydra_and_omegaconf(name):
    word, = shlex.split(hydra_override("hydra.run.dir", f"/t/{name}"))
    value = parse([word]).overrides[0].hydra.value()
    assert OmegaConf.create({"dir": value}).dir == f"/t/{name}"


def test_a_recorded_continue_command_for_a_brace_folder_is_refused_naming_it_when_pasted(tmp_path):
    folder = tmp_path / "a${b}"
    folder.mkdir()
    command = job_command(["experiment=quick"], folder, multirun=False)
    said = hydra_type_problem(shlex.split(command)[2:])
    assert said and f"Hydra cannot run a job in a folder whose path holds '${{' ({folder})" in said, said


@pytest.mark.slow  # starts a second interpreter (FIX77 4, the lead's patch to launch.py)
def test_launch_keeps_a_ctrl_c_that_lands_in_a_gc_callback():
    import subprocess
    import sys
    from pathlib import Path

    launch = Path(__file__).resolve().parents[1] / "launch.py"
    # The first SIGINT handler launch.py sets (once its jobs have ended, it sets signal_hold.exit_as_decided)
    probe = ("import runpy, signal, sys\n"
             "installed, setting = [], signal.signal\n"
             "signal.signal = lambda signum, handler: (signum == signal.SIGINT and installed.append(handler),\n"
             "                                         setting(signum, handler))[1]\n"
             f"sys.argv = [{str(launch)!r}, '--help']\n"
             "try:\n"
             f"    runpy.run_path({str(launch)!r}, run_name='__main__')\n"
             "except SystemExit:\n"
             "    pass\n"
             "from gensbi_sharding.harness.signal_hold import raise_interrupt\n"
             "print(installed[0] is raise_interrupt)\n")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300,
                          cwd=launch.parent)
    assert done.stdout.strip().splitlines()[-1] == "True", done.stdout + done.stderr

"""A command the harness prints runs where the user typed the one that printed it (was: always ``python launch.py``,
which, pasted in a folder without this checkout's launch.py, failed: "can't open file '.../launch.py'")."""

import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from gensbi_sharding.harness import paste_command
from gensbi_sharding.harness.paste_command import command_for

REPO = Path(__file__).resolve().parents[1]


def test_the_checkouts_own_folder_keeps_the_short_command():
    assert command_for(folder=REPO) == "python launch.py"
    assert command_for("benchmarks/sbibm.py", REPO) == "python benchmarks/sbibm.py"
    assert command_for("sample.py", REPO / "benchmarks") == "python ../sample.py"  # relative: shorter here


def test_another_folder_gets_the_scripts_path(tmp_path):
    other = tmp_path / "elsewhere"
    other.mkdir()
    (other / "launch.py").write_text("print('another checkout')\n")  # a launch.py, not this checkout's
    for folder in (tmp_path, other):
        said = shlex.split(command_for(folder=folder))
        assert said[0] == "python" and (folder / said[1]).resolve() == REPO / "launch.py", said


def test_a_path_with_spaces_is_quoted_for_the_shell(tmp_path, monkeypatch):
    checkout = tmp_path / "my checkout"
    checkout.mkdir()
    (checkout / "launch.py").write_text("")
    monkeypatch.setattr(paste_command, "CHECKOUT", checkout)
    assert command_for(folder=checkout) == "python launch.py"
    assert command_for(folder=tmp_path) == "python 'my checkout/launch.py'"
    assert command_for(folder=tmp_path / "a" / "b") == "python '../../my checkout/launch.py'"
    far = tmp_path.joinpath(*["d"] * 40)  # the absolute path is the shorter
    assert command_for(folder=far) == f"python {shlex.quote(str(checkout / 'launch.py'))}"


def test_every_printed_fix_names_the_launch_py_to_run(tmp_path, monkeypatch):
    """Was "...; put the flags first: python launch.py -m ..." from any folder (each message alike: groups,
    override_grammar, sweep_hints, stopped_jobs, ...)."""
    from gensbi_sharding.harness.hydra_flags import flag_order_problem, flag_use_problem
    from gensbi_sharding.harness.sweep_hints import job_command

    monkeypatch.chdir(tmp_path)
    typed = command_for(folder=tmp_path)
    assert typed != "python launch.py"
    assert flag_order_problem(["experiment=quick", "-m", "seed=0,1"]).endswith(
        f"put the flags first: {typed} -m experiment=quick seed=0,1")
    assert flag_use_problem(["--resolve", "seed=3"]).endswith(f"e.g. {typed} --cfg job --resolve seed=3")
    assert job_command(["seed=3"], tmp_path / "run", multirun=False).startswith(f"{typed} seed=3 train.resume=auto ")
    monkeypatch.chdir(REPO)
    assert flag_use_problem(["--resolve", "seed=3"]).endswith("e.g. python launch.py --cfg job --resolve seed=3")


@pytest.mark.slow  # a launch.py process
def test_a_printed_command_pasted_in_the_folder_it_was_printed_in_runs(tmp_path):
    refused = subprocess.run([sys.executable, str(REPO / "launch.py"), "--resolve", "seed=3"], cwd=tmp_path,
                             capture_output=True, text=True, timeout=120)
    command = refused.stderr.strip().rsplit("e.g. ", 1)[-1]
    assert refused.returncode != 0 and command.startswith("python ") and "launch.py" in command, refused.stderr
    words = shlex.split(command)
    pasted = subprocess.run([sys.executable, *words[1:]], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert pasted.returncode == 0 and "seed: 3" in pasted.stdout.splitlines(), pasted.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # --cfg job writes nothing

"""A job's folder whose path holds ``${`` (FIX77 1).

Hydra cannot run a job there at all: it records the folder (``hydra.runtime.output_dir``) unescaped and reads that
record as an interpolation. Given escaped (``hydra.run.dir='runs/a\\${b}'``) or below a folder so named, launch.py
ended in Hydra's traceback ("Interpolation key 'b' not found", full_key hydra.job_logging...), the folder made and
claimed; given as a continue command recorded it, unescaped (``hydra.run.dir=runs/a${b}``, the folder there), in
"cannot be resolved ... give a folder whose ${...} resolves (an environment variable set ...)", which names no fix.
Each is now one line naming the folder and the fix (rename it).
"""

import subprocess
import sys
from pathlib import Path

import pytest

from gensbi_sharding.harness.hydra_values import hydra_type_problem

ROOT = Path(__file__).resolve().parents[1]


def _said(folder, typed, key="hydra.run.dir"):
    return (f"{key}={typed}: Hydra cannot run a job in a folder whose path holds '${{' ({folder}): it reads its own "
            f"record of the folder as an interpolation; rename the folder without '${{' (e.g. mv '{folder}' "
            f"'{folder.replace('${', '_{')}') and give that, or choose another {key}")


def test_an_escaped_folder_is_refused_naming_it(tmp_path):
    folder = f"{tmp_path}/a${{b}}"
    typed = f"{tmp_path}/a\\${{b}}"
    assert hydra_type_problem(["experiment=quick", f"hydra.run.dir={typed}"]) == _said(folder, typed)
    assert hydra_type_problem(["-m", f"hydra.sweep.dir={typed}"]) == _said(folder, typed, "hydra.sweep.dir")


def test_an_unescaped_recorded_folder_that_exists_is_refused_naming_it(tmp_path):
    folder = f"{tmp_path}/a${{b}}"
    args = ["experiment=quick", "train.resume=auto", f"hydra.run.dir={folder}"]
    assert hydra_type_problem(args) is None  # no such folder: an interpolation, config_values' to say it fails
    Path(folder).mkdir()
    assert hydra_type_problem(args) == _said(folder, folder)


def test_an_interpolation_of_a_folder_is_left_to_hydra(tmp_path):
    assert hydra_type_problem([f"hydra.run.dir={tmp_path}/${{oc.env:HOME}}"]) is None
    # quoted for Hydra, two backslashes stay two: OmegaConf reads a backslash, then the interpolation
    assert hydra_type_problem([f"hydra.run.dir='{tmp_path}/\\\\${{oc.env:HOME}}'"]) is None


def test_a_command_run_below_a_brace_folder_is_refused_unless_its_folder_is_elsewhere(tmp_path, monkeypatch):
    here = tmp_path / "c${x}"
    here.mkdir()
    monkeypatch.chdir(here)
    said = hydra_type_problem(["experiment=quick"])
    assert said == (f"this command's folder, {here}, holds '${{': Hydra cannot run a job in a folder whose path holds "
                    "it (it reads its own record of the folder as an interpolation); run it from another folder, or "
                    "give an absolute hydra.run.dir (-m: hydra.sweep.dir) without '${'")
    assert hydra_type_problem(["hydra.run.dir=runs/a"]) == said  # relative: below it too
    assert hydra_type_problem([f"hydra.run.dir={tmp_path}/a"]) is None


@pytest.mark.slow  # starts launch.py
def test_launch_refuses_a_brace_folder_in_one_line_and_makes_nothing(tmp_path):
    folder = tmp_path / "a${b}"
    typed = f"{tmp_path}/a\\${{b}}"
    done = subprocess.run([sys.executable, str(ROOT / "launch.py"), "experiment=quick", f"hydra.run.dir={typed}"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.strip().splitlines() == [f"[ERROR] {_said(str(folder), typed)}"]
    assert not folder.exists()  # was: made, with the run's lock file in it

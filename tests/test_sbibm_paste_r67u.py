"""``benchmarks/sbibm.py run`` prints each job's command before running it: pasted into a shell, it runs that job.

Was: ``two_moons 1000: /.../launch.py -m experiment=sbibm ...``, the interpreter left out: pasted, the shell tried to
execute launch.py itself (not executable: "Permission denied", nothing ran).
"""

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from test_sbibm_runner import sbibm  # noqa: F401 (the script, loaded once per file)
# two_moons 1000 as a cell of no settings of its own (autouse): its TASK_SETTINGS line would come first
from test_sbibm_runner import plain_two_moons_1000  # noqa: F401

REPO = Path(__file__).resolve().parents[1]
# One observation of experiment=sbibm's ten, at 4 ODE steps: the pasted job is checked for running to its end, not for
# its scores (each observation more: a sampling and a C2ST's fits, ~1 s of CPU).
TINY = ["mesh=none", "data.batch_size=64", "train.steps=4", "eval.num_samples=100", "eval.c2st_folds=2",
        "eval.observations=[1]", "eval.ode_steps=4"]


def _printed_command(sbibm, root, monkeypatch, capsys) -> str:
    """The command ``run`` prints for two_moons 1000 under ``root`` (the job itself not run)."""
    ran = []
    monkeypatch.setattr(sbibm, "launch", lambda command, *a, **k: ran.append(command) or (0, None))
    with pytest.raises(SystemExit):  # the job, not run, ends with no record: run says so and exits 1
        sbibm.main(["run", "--root", str(root), "--tasks", "two_moons", "--budgets", "1000", "--", *TINY])
    lines = [li.split(": ", 1)[1] for li in capsys.readouterr().out.splitlines() if li.startswith("two_moons 1000: ")]
    assert shlex.split(lines[0]) == [str(c) for c in ran[0]], lines
    return lines[0]


def test_the_printed_command_starts_with_its_interpreter(sbibm, tmp_path, monkeypatch, capsys):
    words = shlex.split(_printed_command(sbibm, tmp_path / "root (1)", monkeypatch, capsys))
    assert words[:3] == [sys.executable, str(REPO / "launch.py"), "-m"], words


@pytest.mark.slow  # one tiny launch.py job (4 steps, 100 draws of one observation), pasted into bash elsewhere
def test_the_printed_command_runs_the_job_when_pasted(sbibm, tmp_path, monkeypatch, capsys):
    root = tmp_path / "root (1)"
    line = _printed_command(sbibm, root, monkeypatch, capsys)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    proc = subprocess.run(["bash", "-c", line], cwd=elsewhere, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, (line, proc.stderr[-2000:])
    metrics = json.loads((root / "two_moons_1000" / "job" / "metrics.json").read_text())
    assert (metrics["status"], metrics["final_step"]) == ("ok", 4), metrics

"""A job Hydra made a folder for but that never started says so in its ``launch.log`` (``mark_not_started``).

Was: a sweep stopped by Ctrl-C between two jobs (or before its first) left the next job's folder with ``.hydra/`` and
an empty ``launch.log``, no ``metrics.json``: it looked like a run that failed, with no word of what happened.
The folder is kept (its ``.hydra/`` records the config the job would have run with; the continue hints read it).
"""

import subprocess
import sys
from pathlib import Path

import pytest

from gensbi_sharding.harness.not_started import mark_not_started

REPO = Path(__file__).resolve().parents[1]


def _job_folder(root: Path, name: str = "1", sweep: bool = True) -> Path:
    if sweep:
        (root / "multirun.yaml").write_text("")
    job = root / name
    (job / ".hydra").mkdir(parents=True)
    (job / "launch.log").write_text("")
    return job


def test_a_folder_hydra_made_for_a_job_that_never_started_says_so(tmp_path):
    job = _job_folder(tmp_path)
    assert mark_not_started(job, "interrupted by Ctrl-C after 1 job(s) of the sweep ended") == job / "launch.log"
    assert (job / "launch.log").read_text() == (
        "job 1 of the sweep did not start (interrupted by Ctrl-C after 1 job(s) of the sweep ended): nothing ran in "
        "this folder; .hydra/ holds the config it would have run with\n")
    assert sorted(p.name for p in job.iterdir()) == [".hydra", "launch.log"]  # nothing removed
    single = _job_folder(tmp_path / "run", name="x", sweep=False)
    mark_not_started(single, "interrupted by Ctrl-C before it started")
    assert (single / "launch.log").read_text().startswith("this run did not start (interrupted by Ctrl-C before")


def test_a_job_that_ran_or_a_folder_hydra_never_made_is_left_alone(tmp_path):
    ran = _job_folder(tmp_path, "0")
    (ran / "launch.log").write_text("its lines\n")
    (ran / "metrics.json").write_text('{"status": "ok"}')
    assert mark_not_started(ran, "x") is None and (ran / "launch.log").read_text() == "its lines\n"
    assert mark_not_started(None, "x") is None
    assert mark_not_started(tmp_path / "mine", "x") is None and not (tmp_path / "mine").exists()


@pytest.mark.slow  # two launch.py sweeps (run() stubbed)
@pytest.mark.parametrize("after", [0, 1])
def test_ctrl_c_before_a_sweeps_job_marks_its_folder(tmp_path, after):
    # run() stands in for a job that ended; the Ctrl-C lands as Hydra starts the next job (its folder made).
    sweep = tmp_path / "sweep"
    script = ("import json\nimport gensbi_sharding.harness.run as r, gensbi_sharding.harness.summary as s\n"
              "from gensbi_sharding.harness.run_folder import output_dir\n"
              f"calls = []\ndef starting(self, **kwargs):\n    calls.append(1)\n    if len(calls) > {after}:\n"
              "        raise KeyboardInterrupt\ns.SweepSummary.on_job_start = starting\n"
              "def fake(cfg):\n    (output_dir(cfg) / 'metrics.json').write_text(json.dumps({'status': 'ok'}))\n"
              "    return {'status': 'ok', 'c2st': 0.5}\nr.run = fake\nimport runpy, sys\n"
              f"sys.argv = ['launch.py', '-m', 'train.steps=1,2', 'hydra.sweep.dir={sweep}']\n"
              "runpy.run_path('launch.py', run_name='__main__')\n")
    proc = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 130 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    why = (f"interrupted by Ctrl-C after {after} job(s) of the sweep ended" if after else
           "interrupted by Ctrl-C before it started")
    assert (sweep / str(after) / "launch.log").read_text().splitlines()[-1] == (
        f"job {after} of the sweep did not start ({why}): nothing ran in this folder; .hydra/ holds the config it "
        "would have run with")
    assert not (sweep / str(after) / "metrics.json").exists()
    if after:  # the job that ran: its log untouched
        assert "did not start" not in (sweep / "0" / "launch.log").read_text()

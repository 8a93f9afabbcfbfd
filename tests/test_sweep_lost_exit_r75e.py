"""A sweep whose folder was moved mid-sweep exits 1, as every other sweep with a job it could not count does.

Was: "sweep stopped: 1 ok, 0 failed, 1 not run; ...; but <sweep> was deleted or moved ..." and exit 0, so a script or a
scheduler read the sweep as complete while its summary lacked the job that went with the folder.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def _moving_sweep_script(sweep: Path, moved: Path) -> str:
    """``launch.py -m train.steps=1,2`` into ``sweep``, run() stubbed: job 0 records itself, then moves the folder."""
    return ("import json, shutil\nimport gensbi_sharding.harness.run as r\n"
            "from gensbi_sharding.harness.run_folder import output_dir\n"
            "def fake(cfg):\n"
            "    (output_dir(cfg) / 'metrics.json').write_text(json.dumps({'status': 'ok', 'c2st': 0.5}))\n"
            f"    if cfg.train.steps == 1:\n        shutil.move({str(sweep)!r}, {str(moved)!r})\n"
            "    return {'status': 'ok', 'c2st': 0.5}\nr.run = fake\nimport runpy, sys\n"
            f"sys.argv = ['launch.py', '-m', 'train.steps=1,2', 'hydra.sweep.dir={sweep}']\n"
            "runpy.run_path('launch.py', run_name='__main__')\n")


@pytest.mark.slow  # one launch.py sweep in a process of its own (run() stubbed)
def test_a_sweep_whose_folder_was_moved_mid_sweep_exits_1(tmp_path):
    sweep, moved = tmp_path / "sweep", tmp_path / "better_name"
    proc = subprocess.run([sys.executable, "-c", _moving_sweep_script(sweep, moved)], cwd=REPO, env=dict(os.environ),
                          capture_output=True, text=True, timeout=300)
    last = proc.stdout.strip().splitlines()[-1]
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert f"; but {sweep} was deleted or moved while the sweep went on" in last, last
    assert json.loads((moved / "0" / "metrics.json").read_text())["status"] == "ok"  # job 0 ran, in the moved folder
    assert proc.returncode == 1, (proc.returncode, last)

"""A dry run numbers the steps it runs: ``[1/3] devices``, ``[2/3] mesh``, ``[3/3] dry run: compile one train step``.

Was: each job of ``python launch.py -m dry_run=true ...`` printed "[1/7] devices" and "[2/7] mesh" as a training run
does, then "[dry run] compile ..." and its report: five of the seven steps it announced never came.
"""

import logging
import re
import subprocess
import sys

import pytest

from faults_helpers import REPO, compose_tiny
from gensbi_sharding.harness.console_lines import mesh_step_line, step_header


def test_step_headers_count_the_steps_of_each_kind_of_run():
    header = "[1/7] devices: cpu_count=%d (from %s), distributed=%s"
    assert step_header(header) == header
    assert step_header(header, dry_run=True) == "[1/3] devices: cpu_count=%d (from %s), distributed=%s"
    cfg = compose_tiny("mesh=none").mesh
    assert mesh_step_line(cfg, None, dry_run=True) == "[2/3] mesh: none (mesh=none): one device, nothing placed"
    assert mesh_step_line(cfg, None) == "[2/7] mesh: none (mesh=none): one device, nothing placed"


def _tags(lines):
    return [m.group(0) for line in lines if (m := re.match(r"\[\d+/\d+\]", line))]


@pytest.mark.slow  # a dry run, in this process
def test_a_dry_run_prints_its_three_steps_numbered_of_three(tmp_path, devices, caplog):
    from faults_helpers import run_tiny

    with caplog.at_level(logging.INFO, logger="gensbi_sharding"):
        assert run_tiny(tmp_path / "dry", "dry_run=true", "rule=fsdp")["status"] == "ok"
    assert _tags(caplog.messages) == ["[1/3]", "[2/3]", "[3/3]"], caplog.messages
    assert "[3/3] dry run: compile one train step: mlp on {'data': 8, 'model': 1}, rule 'fsdp'" in caplog.messages


@pytest.mark.slow  # a two-job dry-run sweep through launch.py
def test_each_job_of_a_dry_run_sweep_numbers_its_steps_of_three(tmp_path):
    proc = subprocess.run([sys.executable, "launch.py", "-m", "dry_run=true", "experiment=quick",
                           "rule=replicated,fsdp", f"hydra.sweep.dir={tmp_path / 'sweep'}"],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert _tags(proc.stdout.splitlines()) == ["[1/3]", "[2/3]", "[3/3]"] * 2, proc.stdout

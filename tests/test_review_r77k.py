"""REVIEW77A: faults found reviewing session 77's merged harness changes (letter k)."""

from __future__ import annotations

import subprocess
import sys


def _dead_pid() -> int:
    """The pid of a process that has ended (and been reaped): on another host, a live one may have that number."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait(timeout=60)
    return proc.pid


def test_a_continued_run_leaves_a_temporary_file_that_is_not_a_run_write(tmp_path):
    # Was: every ".<name>.<pid>.<8 hex>.tmp" whose pid is not alive on THIS host was deleted as a run claimed its
    # folder. Pids are per host: `python sample.py runs/a x.npy --out runs/a` running on another host sharing the disk
    # writes .x_posterior.npz.<its pid>.<hex>.tmp there, and the claim deleted it mid-write (its rename then failed).
    from gensbi_sharding.harness.earlier_attempts import drop_cut_writes

    dead = _dead_pid()
    out = tmp_path / "run"
    (out / ".hydra").mkdir(parents=True)
    others = [f".x_posterior.npz.{dead}.0a1b2c3d.tmp", f".notes.txt.{dead}.deadbeef.tmp"]
    ours = [f".metrics.json.{dead}.0a1b2c3d.tmp", f".posterior_samples_2.npz.{dead}.0a1b2c3d.tmp",
            f".hydra/.config.yaml.{dead}.0a1b2c3d.tmp"]
    for name in [*others, *ours]:
        (out / name).write_bytes(b"cut")
    assert drop_cut_writes(out) == sorted(ours)
    assert sorted(p.name for p in out.iterdir() if p.is_file()) == sorted(others)


def test_a_command_run_from_a_folder_holding_a_brace_is_refused_only_where_its_job_folder_is_below_it(tmp_path,
                                                                                                  monkeypatch):
    # Was: any absolute hydra.run.dir/sweep.dir let it through, the one the command does not use too (-m with an
    # absolute hydra.run.dir: the sweep's relative multirun/... folder, below this one, failed in Hydra), and an
    # interpolation naming an absolute folder (${oc.env:HOME}/r, which Hydra resolves) was refused.
    from gensbi_sharding.harness.hydra_values import hydra_type_problem

    here = tmp_path / "a${b}"
    here.mkdir()
    monkeypatch.chdir(here)
    assert hydra_type_problem(["hydra.run.dir=${oc.env:HOME}/r"]) is None
    assert hydra_type_problem(["hydra.run.dir=/tmp/r"]) is None
    assert hydra_type_problem(["-m", "hydra.sweep.dir=/tmp/s"]) is None
    said = hydra_type_problem(["-m", "hydra.run.dir=/tmp/r"])
    assert said is not None and said.startswith(f"this command's folder, {here}, holds '${{'")
    assert hydra_type_problem(["hydra.run.dir=runs/r"]).startswith(f"this command's folder, {here},")
    assert hydra_type_problem(["hydra.mode=RUN", "hydra.run.dir=/tmp/r"]) is None
    assert hydra_type_problem(["hydra.mode=MULTIRUN", "hydra.run.dir=/tmp/r"]) is not None

"""What a user sees, end to end: the issue's sweep, and the headline run resumed from one of its jobs.

One launch.py subprocess (the issue's sweep, 4 tiny jobs) is shared by every test here; the
headline run (``mesh=auto rule=tensor``, what ``make run`` runs) continues one of its jobs in
this process, with the console filter Hydra gives the console attached, quiet and verbose.
"""

import csv
import json
import logging
import os
import re
import subprocess
import sys
from io import StringIO
from pathlib import Path

import numpy as np
import pytest
from hydra import compose, initialize_config_dir
from omegaconf import open_dict
from PIL import Image

from gensbi_sharding.harness import console
from gensbi_sharding.harness.config import register_configs
from gensbi_sharding.harness.python_words import as_overrides

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
TINY = ("experiment=quick", "train.steps=4", "train.log_every=2", "eval.num_samples=64", "data.num_simulations=768")
PNG = b"\x89PNG\r\n\x1a\n"
MAX_CONSOLE_LINES = 25


@pytest.fixture(scope="module")
def issue_sweep(tmp_path_factory):
    """``-m experiment=quick 'rule.embed=data,model' 'activation={strategy:rule},{strategy:none}'``."""
    root = tmp_path_factory.mktemp("issue_sweep")
    env = {k: v for k, v in os.environ.items() if k != "HYDRA_FULL_ERROR"}
    env["JAX_PLATFORMS"] = "cpu"
    proc = subprocess.run([sys.executable, str(REPO / "launch.py"), "-m", *TINY, "eval.plot=true",
                           "rule.embed=data,model", "activation={strategy:rule},{strategy:none}",
                           f"hydra.sweep.dir={root / 'multirun'}"],
                          cwd=root, env=env, capture_output=True, text=True, timeout=400)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc, root / "multirun"


@pytest.fixture(scope="module")
def headline(issue_sweep, tmp_path_factory):
    """``mesh=auto rule=tensor`` resumed from sweep job 0, run here; its console as quiet and verbose."""
    from gensbi_sharding.harness.run import run

    _, sweep_dir = issue_sweep
    out = tmp_path_factory.mktemp("headline") / "run"
    register_configs()
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        cfg = compose("config", overrides=[*TINY, "train.steps=6", "mesh=auto", "rule=tensor", "eval.enabled=false",
                                           f"train.resume={sweep_dir / '0'}"])
    with open_dict(cfg):
        cfg.output_dir = str(out)
    streams = {verbose: StringIO() for verbose in (False, True)}
    handlers = []
    for verbose, stream in streams.items():
        handler = logging.StreamHandler(stream)
        handler.addFilter(console.ConsoleFilter(verbose=verbose))
        handler.setFormatter(console.ConsoleFormatter("%(message)s"))
        handlers.append(handler)
    root, level = logging.getLogger(), logging.getLogger().level
    root.setLevel(logging.INFO)
    for handler in handlers:
        root.addHandler(handler)
    try:
        # launch.py's words (run(cfg) from Python says cfg's settings: tests/test_run_logged_words_r79f.py)
        with console.warnings_to_log(), as_overrides():
            metrics = run(cfg)
    finally:
        root.setLevel(level)
        for handler in handlers:
            root.removeHandler(handler)
    assert metrics["status"] == "ok", metrics.get("error")
    return out, metrics, streams[False].getvalue(), streams[True].getvalue()


def png_title(path: Path) -> str:
    assert path.read_bytes()[:8] == PNG
    with Image.open(path) as image:
        return image.text.get("Title", "")


def test_sweep_table_has_a_column_per_swept_key_and_rows_that_differ(issue_sweep):
    proc, sweep_dir = issue_sweep
    with open(sweep_dir / "sweep_summary.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0])[:4] == ["job", "rule.embed", "activation", "mesh_shape"]
    swept = [(row["rule.embed"], row["activation"]) for row in rows]
    assert sorted(swept) == sorted((e, a) for e in ("data", "model") for a in ("{strategy:rule}", "{strategy:none}"))
    # What was swept shows in what was measured: embed over data splits 8 ways, over model (size 1) nothing.
    by_embed = {row["rule.embed"]: int(row["param_bytes_per_device"]) for row in rows}
    assert by_embed["data"] < by_embed["model"] / 4
    table = proc.stdout[proc.stdout.index("Sweep summary (4 jobs, 0 failed)"):]
    header = [cell.strip() for cell in table.splitlines()[1].split("|")[1:-1]]
    assert header[:4] == ["job", "rule.embed", "activation", "mesh"] and "C2ST" in header
    assert re.search(r"\| \d+\.\d KB +\|", table) and "e+" not in table  # readable bytes, no exponents
    assert (sweep_dir / "sweep_summary.md").read_text().splitlines()[0] == table.splitlines()[1]
    assert png_title(sweep_dir / "sweep_summary.png") == "4 jobs; swept: rule.embed, activation"
    # Was the table's last row: the console ends with the sweep's outcome, as a single run ends with its own.
    assert table.splitlines()[0] == "Sweep summary (4 jobs, 0 failed), as in sweep_summary.md:"
    assert re.fullmatch(rf"sweep done in [\d.]+ (s|min): 4 ok, 0 failed; sweep_summary.csv/.md/.png in {sweep_dir}",
                        proc.stdout.strip().splitlines()[-1]), proc.stdout[-300:]


def test_each_sweep_job_prints_a_short_block(issue_sweep):
    proc, sweep_dir = issue_sweep
    jobs = re.split(r"^.*\[HYDRA\] \t#\d+ : .*\n", proc.stdout.split("Sweep summary")[0], flags=re.M)[1:]
    assert len(jobs) == 4
    for job in jobs:
        assert len(job.strip().splitlines()) <= MAX_CONSOLE_LINES, job
        assert "optimizer/opt_state" not in job and "ConvergenceWarning" not in job
        assert job.strip().splitlines()[-1].startswith("done in ")
        # Was "[2/7] mesh: {'spec': 'dict', 'model_axis': 1, 'devices': None}"; one C2ST line, spelled with ±.
        assert "[2/7] mesh: data=8 x model=1 (8 devices; mesh=dict, mesh.model_axis=1)" in job, job
        assert sum("C2ST" in line and "indistinguishable" in line for line in job.splitlines()) == 1, job
        assert "+-" not in job
    # embed over "model" (size 1) splits nothing: those two jobs say so, and name the override that splits.
    hints = [job for job in jobs if "splits nothing here" in job]
    assert len(hints) == 2 and all("to split, run with mesh=dict mesh.model_axis=2" in job for job in hints)
    assert "ConvergenceWarning" not in proc.stderr
    log = (sweep_dir / "0" / "launch.log").read_text()
    assert "every variable of the model and optimizer state" in log and "optimizer/opt_state" in log


def test_sweep_job_files_show_the_full_table_and_titled_plots(issue_sweep):
    _, sweep_dir = issue_sweep
    job = sweep_dir / "0"
    table = (job / "sharding.txt").read_text()
    assert "logical axes" in table and "optimizer/opt_state/0/mu/blocks/0/up/kernel" in table
    assert re.search(r"model/blocks/0/up/kernel +\(32, 64\) +float32 +\(embed, mlp\) +P\('data', None\)", table)
    history = np.load(job / "train_losses.npz")
    assert history["step"].tolist() == [1, 2, 3, 4] and history["val_step"].tolist() == [4]
    assert png_title(job / "losses.png") == "two_moons, mlp | rule replicated+overrides on mesh 8x1"
    metrics = json.loads((job / "metrics.json").read_text())
    c2st, spread = metrics["c2st"], metrics["c2st_sd_folds"]
    assert png_title(job / "posterior.png") == (
        f"two_moons, observation 1 | rule replicated+overrides on mesh 8x1 | C2ST {c2st:.3f} ± {spread:.3f} over 2 "
        "folds")  # experiment=quick's eval.c2st_folds: the ± named, as the final line names it


def test_headline_run_is_quiet_and_says_it_splits_nothing(headline):
    out, metrics, quiet, _ = headline
    lines = quiet.splitlines()
    assert len(lines) <= MAX_CONSOLE_LINES, quiet
    assert "ConvergenceWarning" not in quiet and "optimizer/opt_state" not in quiet
    hint = [line for line in lines if "splits nothing" in line]
    assert hint == ["rule tensor splits nothing here: it splits over 'model', of size 1 on data=8 x model=1 "
                    "(mesh=auto); to split, run with mesh=dict mesh.model_axis=2"]
    train_line = next(line for line in lines if line.startswith("compile "))
    assert f"train loss {metrics['final_train_loss']:.4f} (mean of the last 2 steps)" in train_line
    assert re.search(r"val loss \d\.\d{4} over \d+ pairs$", train_line)


def test_verbose_prints_every_variable(headline):
    _, _, quiet, verbose = headline
    assert "optimizer/opt_state/0/mu/blocks/0/up/kernel" in verbose
    assert len(verbose.splitlines()) > len(quiet.splitlines()) + 30


def test_resumed_run_joins_the_loss_history(headline, issue_sweep):
    out, _, _, _ = headline
    before = np.load(issue_sweep[1] / "0" / "train_losses.npz")
    history = np.load(out / "train_losses.npz")
    assert history["step"].tolist() == [1, 2, 3, 4, 5, 6] and history["resumed_at"].tolist() == [4]
    np.testing.assert_array_equal(history["losses"][:4], before["losses"])
    assert history["val_step"].tolist() == [4, 6]
    # Steps 1-4 ran as the sweep job, not under tensor: was titled as if all 6 had.
    assert png_title(out / "losses.png") == "two_moons, mlp | rule tensor on mesh 8x1 from step 4"

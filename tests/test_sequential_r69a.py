"""``benchmarks/sequential.py`` by hand into a sequential job's folder holding scores (session 69, BREAK69A)."""

import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.append(str(REPO / "benchmarks"))  # the modules' siblings (sbibm_method, cli_args)


def load_sequential():
    """The script ``benchmarks/sequential.py`` as a module (its main() not run)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("sequential_script", REPO / "benchmarks" / "sequential.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def rounds_never_start(monkeypatch):
    """Past every check, the job fails at once with "the job started its rounds" (its rounds are never run)."""
    import sequential_rounds

    from gensbi_sharding.harness import devices

    def started(*args, **kwargs):
        raise AssertionError("the job started its rounds")

    monkeypatch.setattr(devices, "configure_devices", lambda *a: None)
    monkeypatch.setattr(sequential_rounds, "sequential_scores", started)


def sequential_job(job: Path, status: str, rows: list[int]) -> dict:
    """A sequential job's folder as sequential.py leaves it (its records), ``rows`` the observations scored."""
    from sbibm_method import Method, write_record

    write_record(job, Method(2, "box", 0.5))
    (job / ".hydra").mkdir()
    scored = [{"observation": k, "c2st": 0.6, "c2st_sd_folds": 0.01, "c2st_scores": [0.59, 0.61], "n": 300}
              for k in rows]
    files = {".hydra/config.yaml": "seed: 0\n", ".hydra/overrides.yaml": "- experiment=sbibm\n",
             "metrics.json": json.dumps({"method": "sequential rounds=2 region=box margin=0.5", "status": status,
                                         "c2st_observations": scored}),
             "c2st.csv": "observation,c2st\n" + "".join(f"{k},0.600000\n" for k in rows)}
    for name, text in files.items():
        (job / name).write_text(text)
    return {name: (job / name).read_text() for name in [*files, "sequential.json"]}


@pytest.mark.parametrize("status, rows", [("ok", [1, 2]), ("stopped", [1]), ("error", [1])])
@pytest.mark.parametrize("margin", ["0.5", "0.2"])  # a rerun by hand, or one with another setting
def test_a_sequential_job_holding_scores_is_refused_its_files_kept(rounds_never_start, tmp_path, capsys, status, rows,
                                                                    margin):
    # Was: its c2st.csv and metrics.json deleted and its sequential.json rewritten (margin 0.2 in a folder of 0.5)
    # before the first round: a finished job's scores, hours of rounds, lost to a rerun by hand.
    job = tmp_path / "two_moons_1000_sequential-2-box-0.5" / "job"
    job.mkdir(parents=True)
    kept = sequential_job(job, status, rows)
    with pytest.raises(SystemExit) as stop:
        load_sequential().main(["--job", str(job), "--task", "two_moons", "--budget", "1000", "--margin", margin])
    assert stop.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1].endswith(
        f"error: --job {job} holds a sequential job (sequential rounds=2 region=box margin=0.5, status "
        f"{status}) with the scores of observations {rows}, which starting it again would delete; pass a new --job, "
        f"or move {job} aside to run it again")
    assert {name: (job / name).read_text() for name in kept} == kept


def test_a_sequential_job_without_scores_is_still_started_again_in_place(rounds_never_start, tmp_path):
    job = tmp_path / "job"
    job.mkdir()
    sequential_job(job, "stopped", [])  # stopped before its first score: nothing to lose
    with pytest.raises(AssertionError, match="started its rounds"):
        load_sequential().main(["--job", str(job), "--task", "two_moons", "--budget", "1000"])


@pytest.mark.slow
@pytest.mark.parametrize("margin", [0.0, 0.5])
def test_a_box_holds_its_samples_when_one_lies_on_the_priors_face(margin):
    # Was: with --margin 0 a sample on the box prior's face (1.0: +inf in the support bijection's coordinates) made
    # that side of the box 0 * inf = nan, so the box held nothing, not even its own samples: 10^8 prior draws, then
    # "only 0 of 100000000 prior draws fell in the box [nan, ...]; raise --margin".
    import numpy as np

    from gensbi_sharding.harness import tasks

    sys.path.append(str(REPO / "benchmarks"))
    import sequential_rounds

    task = tasks.get_task("gaussian_linear_uniform")  # the prior: uniform on [-1, 1]^10
    samples = np.random.default_rng(0).uniform(-0.5, 0.5, (100, 10)).astype(np.float32)
    samples[0, 0] = 1.0
    inside, name = sequential_rounds.region_test(task, samples, margin)
    assert inside(samples).all() and "nan" not in name
    if margin == 0.0:  # no widening: the other dimensions stay at the samples' range
        assert not inside(np.full((1, 10), 0.9, np.float32)).any()

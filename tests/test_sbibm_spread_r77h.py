"""sbibm's columns carry their spread, and a row of fewer observations is compared like for like in the csv too.

The table printed sbibm's means alone (``| 0.536 +- 0.031 | 0.606 | 0.554 (SNPE) |``) and the README marked bold
"below sbibm's best" on means alone: gaussian_linear's 0.531 +- 0.025 against SNRE's 0.536 +- 0.006 read as a win,
a difference of a third of its standard error. ``sbibm_table.csv`` gave a row of observations 1-3 sbibm's means
over 1-10, where the md table gave the means over 1-3.
"""

import csv
import math
import re
import shutil
import statistics
from pathlib import Path

import pytest
from faults_helpers import load_benchmark

REPO = Path(__file__).resolve().parents[1]
PUBLISHED = REPO / "benchmarks" / "sbibm_published.csv"


@pytest.fixture(scope="module")
def sbibm():
    return load_benchmark("sbibm")


def by_observation(task: str, budget: int) -> dict[int, tuple[float, float]]:
    """sbibm's (NPE, best) C2ST per observation, read here apart from the code under test."""
    lines = [line for line in (REPO / "benchmarks" / "sbibm_published_observations.csv").read_text().splitlines()
             if line and not line.startswith("#")]
    return {int(r["observation"]): (float(r["npe"]), float(r["best"])) for r in csv.DictReader(lines)
            if r["task"] == task and int(r["num_simulations"]) == budget}


def write_results(path: Path, rows: list[tuple]) -> Path:
    path.write_text("task,num_simulations,observation,c2st,c2st_sd_folds,method\n"
                    + "".join(f"{t},{b},{k},{c},0.01,amortised\n" for t, b, k, c in rows))
    return path


@pytest.fixture
def made(sbibm, tmp_path, monkeypatch):
    """A table of observations 1-3 of two_moons 10^3, observation 2 of slcp 10^3 and all ten of sir 10^4."""
    monkeypatch.setattr(sbibm, "plot", lambda *a: b"")  # the table's numbers are under test, not its picture
    rows = [("two_moons", 1000, 1, 0.70), ("two_moons", 1000, 2, 0.72), ("two_moons", 1000, 3, 0.74),
            ("slcp", 1000, 2, 0.90), *[("sir", 10_000, k, 0.58) for k in range(1, 11)]]
    text = sbibm.table_from_results(write_results(tmp_path / "in.csv", rows), tmp_path / "out")
    with open(tmp_path / "out" / "sbibm_table.csv", newline="") as f:
        return text.splitlines(), {(r["task"], r["num_simulations"]): r for r in csv.DictReader(f)}


def test_the_csv_gives_a_partial_row_sbibms_means_over_the_same_observations(made):
    # Was: sbibm_table.csv gave observations 1-3 sbibm's means over 1-10 (0.7251, 0.6434), the md table those
    # over 1-3: the csv's reader compared 0.720 with the wrong numbers.
    _, table = made
    npe, best = ([by_observation("two_moons", 1000)[k][i] for k in (1, 2, 3)] for i in (0, 1))
    row = table[("two_moons", "1000")]
    assert (row["observations"], row["sbibm_npe_mean"], row["sbibm_best_algorithm"], row["sbibm_best_mean"]) == (
        "3", f"{statistics.mean(npe):.4f}", "SNPE", f"{statistics.mean(best):.4f}")
    slcp = by_observation("slcp", 1000)[2]
    assert (table[("slcp", "1000")]["sbibm_npe_mean"], table[("slcp", "1000")]["sbibm_best_mean"]) == (
        f"{slcp[0]:.4f}", f"{slcp[1]:.4f}")
    # all ten: the published means
    assert (table[("sir", "10000")]["sbibm_npe_mean"], table[("sir", "10000")]["sbibm_best_mean"]) == (
        "0.6796", "0.5609")


def test_sbibms_columns_show_its_sd_in_the_md_and_the_csv(made):
    lines, table = made
    npe, best = ([by_observation("two_moons", 1000)[k][i] for k in (1, 2, 3)] for i in (0, 1))
    # Observations 1-3: sbibm's mean and sd over the same three.
    assert (f"| two_moons | 1,000 | 0.720 +- 0.020 (3 obs.) | {statistics.mean(npe):.3f} +- {statistics.stdev(npe):.3f}"
            f" (obs. 1-3) | {statistics.mean(best):.3f} +- {statistics.stdev(best):.3f} (SNPE, obs. 1-3) |") in lines
    # One observation: its scores, no spread ("+- nan" would read as a failed computation).
    slcp = by_observation("slcp", 1000)[2]
    assert f"| slcp | 1,000 | 0.900 (1 obs., no spread) | {slcp[0]:.3f} (obs. 2) | {slcp[1]:.3f} (SNLE, obs. 2) |" \
        in lines
    # All ten: the published mean and sd.
    assert "| sir | 10,000 | 0.580 +- 0.000 | 0.680 +- 0.135 | 0.561 +- 0.028 (SNPE) |" in lines
    assert [[table[cell][f"sbibm_{c}"] for c in ("npe_sd", "best_sd")] for cell in
            (("two_moons", "1000"), ("slcp", "1000"), ("sir", "10000"))] == [
        [f"{statistics.stdev(npe):.4f}", f"{statistics.stdev(best):.4f}"], ["nan", "nan"], ["0.1354", "0.0276"]]


def test_the_committed_table_gives_every_published_sd(sbibm):
    # Each row of all 10 observations: sbibm_published.csv's sds beside its means, in the md and the csv.
    paper, _ = sbibm.published()
    md = (REPO / "benchmarks" / "results" / "sbibm_table.md").read_text().splitlines()
    with open(REPO / "benchmarks" / "results" / "sbibm_table.csv", newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["observations"] == "10"]
    assert len(rows) >= 13
    for r in rows:
        ref = paper[(r["task"], int(r["num_simulations"]))]
        assert [r[f"sbibm_{c}"] for c in ("npe_mean", "npe_sd", "best_mean", "best_sd")] == [
            f"{float(ref[c]):.4f}" for c in ("npe_mean", "npe_sd", "best_mean", "best_sd")]
        shown = (f"| {float(ref['npe_mean']):.3f} +- {float(ref['npe_sd']):.3f} | {float(ref['best_mean']):.3f} +- "
                 f"{float(ref['best_sd']):.3f} ({ref['best_algorithm']}) |")
        assert any(line.startswith(f"| {r['task']}") and line.endswith(shown) for line in md), shown


def mean_sd(cell: str) -> tuple[float, float]:
    m = re.match(r"\s*(?:\*\*)?([\d.]+)(?: \+- ([\d.]+))?", cell)
    return float(m[1]), float(m[2]) if m[2] else math.nan


@pytest.mark.parametrize("page", ["README.md", "docs/posterior_quality.md"])
def test_bold_marks_a_row_below_sbibms_best_by_more_than_the_standard_error(page):
    # Was: bold on every row below sbibm's best mean, e.g. gaussian_linear 0.531 +- 0.025 against 0.536 +- 0.006
    # (0.005 below; the difference's standard error 0.008) and two_moons 10^5 0.527 against 0.530.
    text = (REPO / page).read_text()
    header = text.index("| task | simulations | this harness: C2ST mean +- sd (observations) | sbibm NPE: mean +- sd")
    rows = [line for line in text[header:].splitlines()[2:] if line.startswith("|")][:15]
    bold = []
    for row in rows:
        cells = row.split("|")
        (ours, ours_sd), (best, best_sd) = mean_sd(cells[3]), mean_sd(cells[5])
        n = int(m[1]) if (m := re.search(r"\((\d+) obs\.", cells[3])) else 10
        assert ("**" in row) == (best - ours > math.hypot(ours_sd, best_sd) / math.sqrt(n)), row
        bold += [f"{cells[1].strip()} {cells[2].strip()}"] if "**" in row else []
    assert bold == ["two_moons 10,000", "gaussian_linear_uniform 10,000"]
    assert "sqrt((sd^2 + sd_best^2) / n)" in text


def test_a_published_sd_its_observations_do_not_give_is_refused(sbibm, tmp_path, monkeypatch):
    # The per-observation file is checked against the published sds too: the table prints them beside the means.
    published = PUBLISHED.read_text()
    assert "two_moons,10000,0.6064,0.0394,SNPE,0.5539,0.0237" in published
    (tmp_path / "sbibm_published.csv").write_text(published.replace("two_moons,10000,0.6064,0.0394,",
                                                                    "two_moons,10000,0.6064,0.0494,"))
    shutil.copy(REPO / "benchmarks" / "sbibm_published_observations.csv", tmp_path)
    monkeypatch.setattr(sbibm, "PUBLISHED", tmp_path / "sbibm_published.csv")
    with pytest.raises(SystemExit) as stop:
        sbibm.published()
    assert str(stop.value).startswith(f"{tmp_path / 'sbibm_published_observations.csv'}: two_moons at 10000 "
                                      "simulations has not the 10 observations whose means are sbibm_published.csv's "
                                      "(0.6064, 0.5539), with its sds (0.0494, 0.0237)")

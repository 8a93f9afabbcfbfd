"""Claims of the docs/ pages that a run checked against the code (session 72's read of every page): each test reads
the page's own words and compares them with what the code gives, so a page and the code cannot drift apart."""

import re
from pathlib import Path

import pytest
import yaml

from gensbi_sharding.harness.command_checks import command_problem
from gensbi_sharding.harness.config import DataConfig

REPO = Path(__file__).resolve().parents[1]


def _page(name):
    return " ".join((REPO / "docs" / name).read_text().split())  # a claim may wrap over lines


@pytest.mark.slow  # command_problem composes the configs: seconds on 2 cores
def test_harness_md_suggested_num_samples_is_the_one_the_refusal_names():
    # Was: "`eval.num_samples=2.5` names `eval.num_samples=4`", the fix under experiment=quick's 2 folds; typed as the
    # page gives it (the default 5 folds) the refusal names eval.num_samples=10 (2 x eval.c2st_folds).
    page = _page("harness.md")
    plain = re.search(r"`eval\.num_samples=2\.5` names `(eval\.num_samples=\d+)`", page)
    quick = re.search(r"`(eval\.num_samples=\d+)` beside `experiment=quick`'s 2 folds", page)
    assert plain and quick, "harness.md no longer gives the eval.num_samples=2.5 example"
    assert command_problem(["eval.num_samples=2.5"]).fix == plain[1] == "eval.num_samples=10"
    assert command_problem(["experiment=quick", "eval.num_samples=2.5"]).fix == quick[1] == "eval.num_samples=4"


def test_posterior_quality_md_says_which_theta_transform_a_plain_run_gets():
    # Was: "`support` (the harness's default)", where the settings table (harness.md) gives `none`, what
    # `python launch.py` composes for two_moons: support is the schema's default, which five tasks' files keep.
    page = _page("posterior_quality.md")
    claim = re.search(r"`support` \(the schema's default, which (\w+) of the (\w+) tasks' `conf/data/` files keep; "
                      r"two_moons, the default task, sets `(\w+)`\)", page)
    assert claim, "posterior_quality.md no longer says which theta_transform the default task gets"
    transforms = {path.stem: yaml.safe_load(path.read_text())["theta_transform"]
                  for path in (REPO / "conf" / "data").glob("*.yaml")}
    words = {w: n for n, w in enumerate("zero one two three four five six seven eight nine ten".split())}
    assert claim[1] in words and claim[2] in words, claim.groups()  # a number word, not a KeyError
    assert DataConfig().theta_transform == "support"
    assert (words[claim[1]], words[claim[2]]) == (sum(v == "support" for v in transforms.values()), len(transforms))
    assert transforms["two_moons"] == claim[3] == "none"


@pytest.mark.slow  # the page's 4-step run from Python, ~25 s
def test_harness_md_run_cfg_folder_holds_what_the_page_says(tmp_path):
    # Was: "holds the job's files as a launch writes them (...), without Hydra's `.hydra/` record": the folder has no
    # launch.log (Hydra's job logging writes it) and a .hydra/ holding the run's x64.yaml, which a resume reads.
    import subprocess
    import sys

    text = (REPO / "docs" / "harness.md").read_text()
    snippet = next(b for b in re.findall(r"```python\n(.*?)```", text, re.S) if "run(cfg)" in b)
    page = " ".join(text.split())
    assert "but no `launch.log`" in page and "only `.hydra/x64.yaml`" in page
    (tmp_path / "snippet.py").write_text(snippet)
    ran = subprocess.run([sys.executable, "snippet.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0 and ran.stdout.strip().splitlines()[-1] == "ok 4", ran.stderr[-3000:]
    folder = tmp_path / "runs" / "from_python"
    assert all((folder / name).exists() for name in ("metrics.json", "checkpoints", "losses.png", "sharding.txt"))
    assert not (folder / "launch.log").exists()
    assert sorted(p.name for p in (folder / ".hydra").iterdir()) == ["x64.yaml"]
    assert (folder / ".hydra" / "x64.yaml").read_text() == "jax_enable_x64: false\n"


@pytest.mark.slow  # three launches: a tiny run, then two resumes of it refused
def test_checkpoints_md_says_where_a_resume_of_another_model_is_refused(tmp_path):
    # Was: "such a refusal comes once the model is built (step 3 of 7), so a resume refused in the run's own folder is
    # recorded there": train.resume=<another run> is refused before any folder is made, and train.resume=auto in the
    # run's own folder at [3/7] data, before the model is built ([4/7]), recorded there (error.txt, launch.log).
    import shutil
    import subprocess
    import sys

    from faults_helpers import LAUNCH, TINY

    page = _page("checkpoints.md")
    assert "`train.resume=<another run>` is refused so before any folder is made" in page
    assert "is refused once the run holds that folder, at step 3 of 7 (`[3/7] data`, before any simulation" in page

    def launch(*args):
        return subprocess.run([sys.executable, str(LAUNCH), *TINY, *args], cwd=tmp_path, capture_output=True,
                              text=True, timeout=600)

    first = launch("hydra.run.dir=a")
    assert first.returncode == 0, first.stdout[-2000:] + first.stderr[-2000:]
    other = launch("model.width=64", "train.resume=a", "hydra.run.dir=b")
    assert other.returncode != 0 and "add model.width=32" in other.stdout + other.stderr
    assert not (tmp_path / "b").exists()
    (tmp_path / "c").mkdir()  # a stopped run's folder: its checkpoints and Hydra record, no metrics.json
    shutil.copytree(tmp_path / "a" / "checkpoints", tmp_path / "c" / "checkpoints")
    shutil.copytree(tmp_path / "a" / ".hydra", tmp_path / "c" / ".hydra")
    own = launch("model.width=64", "train.resume=auto", "hydra.run.dir=c")
    assert own.returncode != 0 and "add model.width=32" in own.stdout + own.stderr
    log = (tmp_path / "c" / "launch.log").read_text()
    assert "[3/7] data" in log and "[4/7]" not in log and (tmp_path / "c" / "error.txt").is_file()

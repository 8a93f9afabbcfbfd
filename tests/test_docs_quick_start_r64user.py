"""The README's Quick start, read as a new user's first page: what make run does, what its number means and where
its results land, each stated there and each true of the harness (files read as text, one line formatted)."""

import re
from pathlib import Path

import yaml

from gensbi_sharding.harness.run_report import final_line

REPO = Path(__file__).resolve().parents[1]


def _quick_start():
    text = (REPO / "README.md").read_text()
    return " ".join(text.split("## Quick start")[1].split("\n## ")[0].split())


def _as_readme_writes(folder):
    """``outputs/${now:%Y-%m-%d}/${now:%H-%M-%S-%f}`` as the README names it: ``outputs/<date>/<time>/``."""
    return re.sub(r"\$\{now:%H[^}]*\}", "<time>", re.sub(r"\$\{now:%Y[^}]*\}", "<date>", folder)) + "/"


def test_quick_start_names_the_folders_the_config_writes_and_the_last_line_that_names_them(tmp_path):
    # Read in a fresh clone: Quick start mixed the run, what C2ST means and the output folder in one paragraph, and
    # said nothing of a sweep's folder or how to find the run's own (its time has microseconds: 04-49-05-949281).
    # It now says each in a bullet of its own: the folders must be the config's, and the last line must name them.
    hydra = yaml.safe_load((REPO / "conf" / "config.yaml").read_text())["hydra"]  # as written: ${now:...} unresolved
    run_dir, sweep_dir = _as_readme_writes(hydra["run"]["dir"]), _as_readme_writes(hydra["sweep"]["dir"])
    assert (run_dir, sweep_dir) == ("outputs/<date>/<time>/", "multirun/<date>/<time>/")
    quick = _quick_start()
    assert f"**Where results land:** `{run_dir}`, named on the last line (a sweep's: `{sweep_dir}`" in quick
    out = tmp_path / "outputs" / "2026-12-06" / "04-49-05-949281"
    line = final_line({"status": "ok", "wall_s": 206.0, "c2st": 0.530, "samples_per_s": 22698.0}, out)
    assert line.endswith(f"; outputs in {out}"), line


def test_quick_start_says_what_c2st_means_as_the_console_does():
    # The console's own gloss, "0.5 = indistinguishable from the reference posterior", and Quick start's must agree:
    # a new user reads one, then the other.
    quick = _quick_start()
    assert "0.5 is perfect, 1.0 entirely separable" in quick and "reference posterior samples" in quick
    source = (REPO / "gensbi_sharding" / "harness").glob("*.py")
    assert any("0.5 = indistinguishable from the reference posterior" in path.read_text() for path in source)


def test_quick_start_says_which_python_the_pages_commands_mean():
    # Read in a fresh clone: after make run, Quick start's next links (your own observation) give `python sample.py`
    # and `python launch.py`, while .venv/bin/python was named only under "The harness", further down.
    assert "Every `python` command on this page is `.venv/bin/python`" in _quick_start()
    assert (REPO / "Makefile").read_text().count("VENV := .venv") == 1


def test_the_readmes_second_sample_command_is_accepted_where_the_default_output_is_refused(tmp_path, monkeypatch):
    # Typed in a fresh clone: the README's sample.py command for make run's run, then the same for a quick run at the
    # same outputs/x_o.npy: "outputs/x_o_posterior.npz exists and is never overwritten: pass --out <a new file>.npz".
    # The README said only "writes outputs/x_o_posterior.npz"; it now gives the second command, which must pass.
    import shlex

    from gensbi_sharding.harness.sample_output import out_path, output_problem

    text = " ".join((REPO / "README.md").read_text().split())
    command, = re.findall(r"`(python sample\.py [^`]* --out [^`]+)`", text)
    args = shlex.split(command)
    observation, given = Path(args[3]), args[args.index("--out") + 1]
    monkeypatch.chdir(tmp_path)
    (tmp_path / "outputs").mkdir()
    (tmp_path / observation).write_bytes(b"")
    out_path(None, observation).write_bytes(b"")  # the first sample.py's output
    assert "exists and is never overwritten" in output_problem(out_path(None, observation), None)
    assert out_path(given, observation) == Path("outputs/x_o_run2.npz")
    assert output_problem(out_path(given, observation), given) is None


def test_quick_start_c2st_is_the_latest_measured_make_run_s():
    # Read in a fresh clone (2026-12-06): make run printed "C2ST 0.530 ± 0.008", as the Tests section's latest line
    # says, while Quick start said 0.530 ± 0.007 (an older tree's): two numbers for one run on one page.
    text = " ".join((REPO / "README.md").read_text().split())
    quick = re.search(r"`make run` reads ([\d.]+ ± [\d.]+) over 5 folds", _quick_start())
    latest = re.search(r"Latest, in a fresh clone.*?`make run` [\d.]+ s \([^)]*\), C2ST ([\d.]+ ± [\d.]+)", text)
    assert quick and latest, "README's Quick start or Tests section no longer states make run's C2ST as read here"
    assert quick[1] == latest[1], (quick[1], latest[1])

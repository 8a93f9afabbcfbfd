"""docs/harness.md's run(cfg) from Python: its snippet's imports give what it calls, and it runs as printed (round 64).

Was: the docs named ``run(cfg)`` with no import; the import a reader guesses, ``from gensbi_sharding.harness import
run``, gives the module, and ``run(cfg)`` failed with "TypeError: 'module' object is not callable".
"""

import re
import subprocess
import sys

import pytest

from faults_helpers import REPO


def _snippet() -> str:
    text = (REPO / "docs" / "harness.md").read_text()
    return next(b for b in re.findall(r"```python\n(.*?)```", text, re.S) if "run(cfg)" in b)


def test_the_snippet_imports_run_the_function_and_compose_works_after_its_setup():
    # Its import lines and setup (everything up to the run), executed: run is callable (was the module, guessed)
    code = _snippet().split("metrics = run(cfg)")[0]
    scope: dict = {}
    exec(compile(code, "docs/harness.md", "exec"), scope)
    assert callable(scope["run"]) and scope["run"].__module__ == "gensbi_sharding.harness.run"
    assert scope["cfg"].train.steps == 4 and scope["cfg"].output_dir == "runs/from_python"
    import gensbi_sharding.harness as harness

    assert callable(harness.run) and harness.run.run is scope["run"]  # the guess: the module, callable as the page says


def test_the_page_names_the_import_for_every_run_cfg_it_mentions():
    text = (REPO / "docs" / "harness.md").read_text()
    assert "from gensbi_sharding.harness.run import run" in text and "## A job from Python: run(cfg)" in text
    assert "- [A job from Python: run(cfg)](#a-job-from-python-runcfg)" in text


@pytest.mark.slow  # a 4-step quick run, ~25 s
def test_the_snippet_runs_as_printed(tmp_path):
    (tmp_path / "snippet.py").write_text(_snippet())
    ran = subprocess.run([sys.executable, "snippet.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert ran.stdout.strip().splitlines()[-1] == "ok 4"
    assert (tmp_path / "runs" / "from_python" / "metrics.json").is_file()


def test_the_snippets_last_line_prints_a_refusal_instead_of_a_key_error(capsys):
    # Round 67: run again into runs/from_python, run(cfg) returns the folder's refusal as {"status": "error",
    # "error": ...} without final_step; the printed last line raised KeyError: 'final_step' there
    last = _snippet().split("metrics = run(cfg)")[1]
    refusal = {"status": "error", "error": "FileExistsError: runs/from_python/metrics.json already exists"}
    exec(compile(last, "docs/harness.md", "exec"), {"metrics": refusal})
    assert capsys.readouterr().out == f"error {refusal['error']}\n"
    exec(compile(last, "docs/harness.md", "exec"), {"metrics": {"status": "ok", "final_step": 4}})
    assert capsys.readouterr().out == "ok 4\n"

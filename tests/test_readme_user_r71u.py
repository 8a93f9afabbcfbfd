"""README statements a new user leaned on in session 71 (a fresh clone, README followed top to bottom)."""
import inspect
import re
from pathlib import Path

from gensbi_sharding.harness.own_observation import sample_posterior

REPO = Path(__file__).resolve().parents[1]


def test_readme_says_what_sample_posterior_returns_as_its_docstring_does():
    # Read in a fresh clone (2026-12-07): the README's "From Python" line gave sample_posterior's call but not what
    # it gives back, so a user had to run it to learn it returns an array (and writes no file, unlike sample.py).
    doc = inspect.getdoc(sample_posterior)
    returns = re.search(r"Returns\n-+\nndarray, shape (\([^)]*\)), (\w+)", doc)
    assert returns, "sample_posterior's docstring no longer states its return as 'ndarray, shape (...), dtype'"
    shape, dtype = returns[1], returns[2]
    text = " ".join((REPO / "README.md").read_text().split())
    said = re.search(r"sample_posterior\(run_dir, x_o, num_samples=10_000, seed=0\)` returns ([^;]*);", text)
    assert said, "README's 'From Python' line for sample_posterior no longer says what it returns"
    assert f"{shape} {dtype} array" in said[1], (said[1], shape, dtype)
    assert "writes no file" in said[1], said[1]

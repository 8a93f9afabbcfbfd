"""``from gensbi_sharding.harness import run`` gives what docs/harness.md's ``run(cfg)`` promises: a callable job.

Was: the import gives the module ``gensbi_sharding.harness.run`` (a package's submodule replaces its attribute of the
same name), and ``run(cfg)`` failed with "TypeError: 'module' object is not callable". Now the module is callable as
its function; ``import gensbi_sharding.harness.run as r`` and ``r.run`` (a test's patch of it) are as before.
"""

import importlib
import subprocess
import sys

import pytest
from faults_helpers import REPO, compose_tiny


def test_the_guessed_import_runs_the_job_and_returns_its_metrics(tmp_path):
    from gensbi_sharding.harness import run

    # An interpolation that cannot resolve: run(cfg) refuses it in its first lines, before any device or folder
    cfg = compose_tiny("train.steps=${nope}", output_dir=tmp_path / "run")
    metrics = run(cfg)
    assert metrics["status"] == "error" and metrics["error"].startswith("ConfigError: "), metrics
    assert "nope" in metrics["error"] and not (tmp_path / "run").exists()


def test_the_module_stays_the_module_and_its_call_is_its_function(monkeypatch):
    import gensbi_sharding.harness as harness
    import gensbi_sharding.harness.run as module
    from gensbi_sharding.harness.run import run as function

    assert harness.run is module is importlib.import_module("gensbi_sharding.harness.run")
    assert callable(function) and function is module.run and function.__name__ == "run"
    calls = []
    monkeypatch.setattr(module, "run", lambda cfg: calls.append(cfg) or {"status": "patched"})
    assert harness.run("cfg") == {"status": "patched"} and calls == ["cfg"]  # a patched run is the one called


@pytest.mark.slow
def test_the_package_gives_run_before_its_module_was_imported():
    # A fresh interpreter: gensbi_sharding.harness.run(cfg) with nothing but the package imported
    code = ("import sys, gensbi_sharding.harness as h\n"
            "assert 'gensbi_sharding.harness.run' not in sys.modules\n"
            "print(callable(h.run), h.run.run.__module__)\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split()[:2] == ["True", "gensbi_sharding.harness.run"], done.stdout

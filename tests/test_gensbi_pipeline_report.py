"""benchmarks/gensbi_pipeline.py's report, its two trainings stood in for (GenSBI's and the harness's)."""

import importlib.util
import sys

import pytest

from faults_helpers import REPO


@pytest.mark.parametrize("steps, said", [
    (30, "(no validation: it validates every 100 steps)"), (101, "(its 1 validation, one every 100 steps, included)"),
    (250, "(its 2 validations, one every 100 steps, included)")])
def test_gensbi_step_interval_names_the_validations_it_includes(monkeypatch, capsys, steps, said):
    # Was: '--steps 30' (docs/benchmarks.md's short run) printed "GenSBI's mean interval between steps (validation
    # every 100 steps included)", where GenSBI, validating at step 100, 200, ..., ran none.
    pytest.importorskip("gensbi")
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    spec = importlib.util.spec_from_file_location("gensbi_pipeline_script", REPO / "benchmarks" / "gensbi_pipeline.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    import gensbi_sharding.harness.run as harness_run

    monkeypatch.setattr(harness_run, "run", lambda cfg: {"status": "ok", "median_step_s": 0.05, "c2st": 0.9,
                                                         "compile_s": 1.0})
    monkeypatch.setattr(script, "run_gensbi", lambda cfg, args, out: ({
        "step_s": 0.09, "mean_step_s": 0.093, "wall_s": 20.0, "val_every": 100,
        "validations": script.validations_in(args.steps, 100),
        "c2st": 0.95, "c2st_last": 0.93, "params": 1000}, None))
    monkeypatch.setattr(sys, "argv", ["gensbi_pipeline.py", "--steps", str(steps)])
    script.main()
    out = capsys.readouterr().out
    assert f"GenSBI's mean interval between steps {said}: 0.0930 s" in out, out

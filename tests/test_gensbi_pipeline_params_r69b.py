"""benchmarks/gensbi_pipeline.py's GenSBI side builds the very Flux1 the harness's side trains, for every model.* field."""

import importlib.util

import pytest
from flax import nnx

from faults_helpers import REPO, compose_tiny

pytest.importorskip("gensbi")


def _script(monkeypatch):
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    spec = importlib.util.spec_from_file_location("gensbi_pipeline_r69b", REPO / "benchmarks" / "gensbi_pipeline.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    return script


def _shapes(module) -> dict:
    return {"/".join(map(str, path)): variable.get_value().shape
            for path, variable in nnx.state(module, nnx.Param).flat_state()}


@pytest.mark.slow
@pytest.mark.parametrize("overrides", [
    # Was: GenSBI's side left val_emb_dim / id_emb_dim out, so once the harness's side had trained (2000 steps by
    # default), Flux1Params raised "val_emb_dim and id_emb_dim required for 'concat' strategy": the run lost.
    ("model.id_merge_mode=concat", "model.val_emb_dim=4", "model.id_emb_dim=4"),
    # and with axes_dim null (only concat's tokens ignore it): list(None), a TypeError
    ("model.id_merge_mode=concat", "model.val_emb_dim=4", "model.id_emb_dim=2", "model.axes_dim=null"),
    ("model.id_embedding_strategy=[rope1d,absolute]", "model.theta=100", "model.qkv_bias=false"),
])
def test_gensbis_side_builds_the_harness_sides_flux1(monkeypatch, overrides):
    from gensbi.models import Flux1

    from gensbi_sharding.harness.state import builder

    cfg = compose_tiny("model=flux1", *overrides)
    params = _script(monkeypatch).gensbi_params(cfg, 2, 2)
    harness, _ = builder(cfg, dim_theta=2, dim_x=2, partition_axis=None)()
    assert (params.id_merge_mode, params.val_emb_dim, params.id_emb_dim, params.qkv_bias) == (
        cfg.model.id_merge_mode, cfg.model.val_emb_dim, cfg.model.id_emb_dim, cfg.model.qkv_bias)
    assert params.theta == (cfg.model.theta or 10 * (2 + 2))  # null: GenSBI's 10 * (dim_obs + dim_cond)
    theirs = _shapes(Flux1(params))
    assert theirs == {k.removeprefix("flux/"): v for k, v in _shapes(harness).items()}
    assert len(theirs) > 10


@pytest.mark.parametrize("dtypes, said", [
    ((), "parameters in float32, computing in float32)"),
    # Was: "(1000 parameters, float32)" whatever model.dtype / model.param_dtype the run trained in
    (("model.dtype=bfloat16",), "parameters in float32, computing in bfloat16)"),
    (("model.param_dtype=bfloat16", "model.dtype=bfloat16"), "parameters in bfloat16, computing in bfloat16)")])
def test_the_report_names_the_dtypes_the_run_used(monkeypatch, capsys, dtypes, said):
    import sys

    import gensbi_sharding.harness.run as harness_run

    script = _script(monkeypatch)
    monkeypatch.setattr(harness_run, "run", lambda cfg: {"status": "ok", "median_step_s": 0.05, "c2st": 0.9,
                                                         "compile_s": 1.0})
    monkeypatch.setattr(script, "run_gensbi", lambda cfg, args, out: ({
        "step_s": 0.09, "mean_step_s": 0.093, "wall_s": 20.0, "val_every": 100, "validations": 0,
        "c2st": 0.95, "c2st_last": 0.93, "params": 1000}, None))
    monkeypatch.setattr(sys, "argv", ["gensbi_pipeline.py", "--steps", "30", *dtypes])
    script.main()
    header = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("Flux1 {"))
    assert f"(1000 {said}, two_moons" in header, header

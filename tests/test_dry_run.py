"""dry_run=true: the step compiled for a (mesh, rule), its memory and collectives, no training."""

import functools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from gensbi_sharding import make_mesh
from gensbi_sharding.harness.config import register_configs
from gensbi_sharding.harness.dry_run import dry_run
from gensbi_sharding.harness.rule_config import rule_table

REPO = Path(__file__).resolve().parents[1]


def config(*overrides):
    register_configs()
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        return compose(config_name="config", overrides=["model.width=32", "model.depth=1", *overrides])


@functools.cache  # the report is only read: test_fsdp_... compares with the replicated one the test above made
def report_for(rule, model_axis):
    cfg = config(f"rule={rule}")
    name, table = rule_table(cfg.rule)
    return dry_run(cfg, mesh=make_mesh(model_axis=model_axis), rule_name=name, table=table,
                   dim_theta=2, dim_x=2, partition_axis=None)


@pytest.mark.slow
def test_replicated_data_parallel_step_all_reduces_the_gradient():
    report = report_for("replicated", 1)
    assert report["collectives"]["all-reduce"]["count"] >= 1
    assert report["collectives"]["all-gather"]["count"] == 0
    memory = report["memory"]
    assert memory["argument_bytes"] > 0 and memory["total_bytes"] >= memory["temp_bytes"]


@pytest.mark.slow
def test_fsdp_step_all_gathers_parameters_and_holds_less():
    fsdp, replicated = report_for("fsdp", 1), report_for("replicated", 1)
    assert fsdp["collectives"]["all-gather"]["count"] >= 1
    # Split parameters and moments: arguments shrink by about the data-parallel size (8).
    assert fsdp["memory"]["argument_bytes"] < replicated["memory"]["argument_bytes"] / 4
    assert fsdp["collective_bytes"] > replicated["collective_bytes"]


@pytest.mark.slow
def test_dry_run_sweep_ranks_configurations(tmp_path):
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    env.pop("HYDRA_FULL_ERROR", None)
    proc = subprocess.run(
        [sys.executable, str(REPO / "launch.py"), "-m", "dry_run=true", "model.width=32", "model.depth=1",
         "rule=replicated,fsdp", f"hydra.sweep.dir={tmp_path}"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "ranked by memory per device" in proc.stdout and "ranked by bytes of collectives" in proc.stdout
    assert "| all-reduce |" in proc.stderr + proc.stdout  # the per-job table is logged
    metrics = [json.loads((tmp_path / job / "metrics.json").read_text()) for job in ("0", "1")]
    assert all(m["status"] == "ok" and "steps" not in m for m in metrics)  # nothing trained
    replicated, fsdp = metrics
    assert fsdp["step_memory_bytes_per_device"] < replicated["step_memory_bytes_per_device"]
    assert not (tmp_path / "0" / "train_losses.npz").exists()
    summary = (tmp_path / "sweep_summary.csv").read_text().splitlines()
    assert len(summary) == 3 and summary[0].startswith("job,rule,mesh_shape,step_memory_bytes_per_device")
    assert (tmp_path / "sweep_summary.png").is_file()


def _preempted_folder(folder: Path) -> dict[Path, bytes]:
    """A folder as a preempted run leaves it (metrics.json + a checkpoint); returns its files' bytes."""
    from gensbi_sharding.harness import outputs

    outputs.write_json(folder / "metrics.json", {"status": "preempted", "preempted_at_step": 100})
    (folder / "checkpoints" / "100").mkdir(parents=True)
    (folder / "checkpoints" / "100" / "state").write_bytes(b"weights")
    return _files(folder)


def _files(folder: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in folder.rglob("*") if p.is_file() and p.name != ".run.lock"}


DRY_RESUME = ("dry_run=true with train.resume=auto: a dry run trains nothing, continues no run and never writes "
              "into a run's folder; drop train.resume (a dry run in another hydra.run.dir), or drop dry_run=true "
              "to continue the run")


@pytest.mark.slow  # ~0.7 s on 2 cores
def test_dry_run_with_resume_is_refused_and_leaves_a_resumable_run_intact(tmp_path, devices, capsys):
    # Was: exit 0, metrics.json rewritten with status ok, train.resume ignored; the requeue then refused forever.
    from faults_helpers import compose_tiny, run_tiny
    from omegaconf import OmegaConf, open_dict

    from gensbi_sharding.harness.config import ConfigError
    from gensbi_sharding.harness.config_checks import validate
    from gensbi_sharding.harness.folder_claim import RefuseCompletedRun
    from gensbi_sharding.harness.run_folder import ensure_fresh

    folder = tmp_path / "run"
    before = _preempted_folder(folder)
    metrics = run_tiny(folder, "dry_run=true", "train.resume=auto")
    # run(cfg) from Python: in the settings it sets (round 46; was launch.py's overrides, hydra.run.dir)
    assert metrics["status"] == "error" and metrics["error"] == (
        "ConfigError: cfg.dry_run=True with cfg.train.resume='auto': a dry run trains nothing, continues no run and "
        "never writes into a run's folder; set cfg.train.resume=None (a dry run in another cfg.output_dir), or set "
        "cfg.dry_run=False to continue the run; set cfg.output_dir in omegaconf.open_dict(cfg)")
    with pytest.raises(ConfigError, match="^dry_run=true with train.resume=/elsewhere: "):
        validate(compose_tiny("dry_run=true", "train.resume=/elsewhere"))
    # Hydra's folder check, before Hydra writes .hydra/ into the folder, says the same.
    cfg = compose_tiny("dry_run=true", "train.resume=auto")
    with open_dict(cfg):
        cfg.hydra = OmegaConf.create({"run": {"dir": str(folder)}})
    with pytest.raises(SystemExit):
        RefuseCompletedRun().on_run_start(cfg)
    assert capsys.readouterr().err.strip() == f"[ERROR] {DRY_RESUME}"
    # Without train.resume a dry run is still refused the folder: it would write over the run.
    metrics = run_tiny(folder, "dry_run=true")
    assert metrics["status"] == "error" and "a dry run writes only into a fresh folder" in metrics["error"]
    assert _files(folder) == before  # nothing lost
    (folder / "metrics.json").unlink()  # a killed run: checkpoints only
    with pytest.raises(FileExistsError, match="holds a run's checkpoints; a dry run writes only into a fresh"):
        ensure_fresh(folder, dry_run=True)
    assert ensure_fresh(folder, resume_auto=True) is None  # the real requeue still continues it


IDLE_MODEL_AXIS = ("rule=fsdp", "mesh.model_axis=2")  # fsdp splits nothing over "model": its 2 devices idle


@pytest.fixture(scope="module")
def idle_model_axis_runs(tmp_path_factory, devices):
    """``{"dry": (metrics, messages), "real": (metrics, messages)}``: ``IDLE_MODEL_AXIS`` as a dry run and as a
    training run, with the messages each logged (``gensbi_sharding`` at INFO, as caplog would read them). Two
    tests read each: the state per device (the figures) and the idle model axis (the messages)."""
    import logging

    from faults_helpers import run_tiny
    from gensbi_sharding.harness.python_words import as_overrides

    class Messages(logging.Handler):
        def emit(self, record):
            self.messages.append(record.getMessage())

    logger, root, runs = logging.getLogger("gensbi_sharding"), tmp_path_factory.mktemp("idle"), {}
    level = logger.level
    for name, extra in (("dry", ("dry_run=true",)), ("real", ())):
        handler = Messages()
        handler.messages = []
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        try:
            with as_overrides():  # launch.py's words (from Python, cfg's: tests/test_run_logged_words_r79f.py)
                runs[name] = run_tiny(root / name, *extra, *IDLE_MODEL_AXIS), handler.messages
        finally:
            logger.removeHandler(handler)
            logger.setLevel(level)
    return runs


@pytest.mark.slow  # a real run beside each dry run
@pytest.mark.parametrize("overrides", [IDLE_MODEL_AXIS, ("rule=tensor", "mesh.model_axis=4"), ("mesh=none",)])
def test_a_dry_run_reports_the_state_per_device_a_real_run_reports(tmp_path, devices, overrides, request):
    # Was: a dry run's metrics.json held only the compiled step's memory; parameter count and bytes per
    # device of parameters and optimizer state, what a run's placement block and the sweep table show,
    # were missing (benchmarks/gensbi_scale.py recomputed them itself).
    from faults_helpers import run_tiny

    if overrides == IDLE_MODEL_AXIS:  # the runs test_a_run_and_its_dry_run_say_once... reads too
        runs = request.getfixturevalue("idle_model_axis_runs")
        real, dry = runs["real"][0], runs["dry"][0]
    else:
        real = run_tiny(tmp_path / "real", *overrides)
        dry = run_tiny(tmp_path / "dry", "dry_run=true", *overrides)
    assert real["status"] == dry["status"] == "ok"
    keys = ("param_count", "param_bytes_per_device", "opt_bytes_per_device", "state_bytes_per_device",
            "ema_bytes_per_device", "best_weights_bytes_per_device")
    assert {k: dry[k] for k in keys} == {k: real[k] for k in keys}
    assert dry["param_bytes_per_device"] > 0 and dry["opt_bytes_per_device"] > dry["param_bytes_per_device"]
    # The copy of the best weights early stopping keeps on the device: the EMA's size (the quick preset has one).
    assert dry["best_weights_bytes_per_device"] == dry["ema_bytes_per_device"] == dry["param_bytes_per_device"]


@pytest.mark.slow  # end-to-end runs (two dry runs)
def test_a_dry_run_refuses_what_strict_refuses_in_training(tmp_path, devices):
    # Was: dry_run=true strict=true planned with strict off and reported "ok" for a rule the run then refused.
    from faults_helpers import run_tiny

    overrides = ("strict=true", "rule=fsdp", "model.width=36")
    dry = run_tiny(tmp_path / "dry", "dry_run=true", *overrides)
    assert dry["status"] == "error"
    assert dry["error"].startswith("ConfigError: strict=true and rule 'fsdp' cannot split 10 variable(s)")
    assert run_tiny(tmp_path / "lenient", "dry_run=true", *overrides[1:])["status"] == "ok"


@pytest.mark.slow  # an end-to-end run (a dry run)
def test_a_dry_run_says_when_the_rule_splits_nothing_on_its_mesh(tmp_path, devices, caplog):
    # Was: a training run said "rule tensor splits nothing here" under mesh=auto, its dry run did not, so a
    # dry-run sweep's tensor on (8, 1) read as a choice of its own (its figures are replicated's).
    import logging

    from faults_helpers import run_tiny

    from gensbi_sharding.harness.python_words import as_overrides

    # launch.py's words (run(cfg) from Python says cfg's settings: tests/test_run_logged_words_r79f.py)
    with caplog.at_level(logging.INFO, logger="gensbi_sharding"), as_overrides():
        dry = run_tiny(tmp_path / "dry", "dry_run=true", "mesh=auto", "rule=tensor")
    assert dry["status"] == "ok" and dry["mesh_shape"] == [8, 1]
    assert ("rule tensor splits nothing here: it splits over 'model', of size 1 on data=8 x model=1 (mesh=auto); "
            "to split, run with mesh=dict mesh.model_axis=2") in caplog.messages
    # Was "compile one train step: mlp on no mesh, rule 'tensor'", as if tensor were applied: the training run's
    # placement block says "no mesh (mesh=none): one device, nothing placed".
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="gensbi_sharding"):
        assert run_tiny(tmp_path / "none", "dry_run=true", "mesh=none", "rule=tensor")["status"] == "ok"
    assert ("[3/3] dry run: compile one train step: mlp on no mesh (mesh=none): one device, nothing placed, "
            "rule 'tensor' unused") in caplog.messages


@pytest.mark.slow  # a training run beside the dry run
def test_a_run_and_its_dry_run_say_once_when_the_rule_leaves_the_model_axis_idle(idle_model_axis_runs):
    # Was silent: rule=fsdp mesh.model_axis=2 trained with the 2 devices along "model" repeating the same work.
    for name, (metrics, messages) in idle_model_axis_runs.items():
        assert metrics["status"] == "ok", (name, metrics.get("error"))
        idle = [line for message in messages for line in message.splitlines() if "model axis idle" in line]
        assert idle == ["rule fsdp leaves the model axis idle: it splits nothing over 'model', of size 2 on data=4 x "
                        "model=2 (mesh=dict): the 2 devices along it repeat the same work; run with mesh.model_axis=1 "
                        "so every device takes data, or rule=tensor"], name


def test_a_dry_run_for_a_wider_model_axis_than_the_devices_names_the_device_count_that_plans_it(tmp_path, devices):
    # Was only "set mesh.model_axis=8": a dry run is how one plans for a larger machine, and devices.cpu_count
    # simulates one (a GPU-sized plan on this 8-device default was a dead end, the override unnamed).
    from faults_helpers import run_tiny

    dry = run_tiny(tmp_path / "dry", "dry_run=true", "mesh.model_axis=16")
    assert dry["status"] == "error" and dry["error"] == (
        "ConfigError: mesh.model_axis=16: 8 devices are not divisible by model_axis=16; set mesh.model_axis=8 "
        "(divisors of 8: [1, 2, 4, 8]); or, to plan for a machine with 16 devices, set devices.cpu_count=16 (the "
        "dry run compiles for that many simulated CPU devices)")
    # A training run keeps the one fix (it would train on 16 simulated devices); so does a narrower axis.
    assert run_tiny(tmp_path / "real", "mesh.model_axis=16")["error"].endswith("(divisors of 8: [1, 2, 4, 8])")
    assert run_tiny(tmp_path / "three", "dry_run=true", "mesh.model_axis=3")["error"].endswith(
        "(divisors of 8: [1, 2, 4, 8])")


@pytest.mark.slow  # an end-to-end run (a training or dry run, or processes)
def test_listed_devices_that_do_not_split_into_the_model_axis_name_the_list_that_keeps_it(tmp_path, devices):
    # Was only "set mesh.model_axis=3": the axis chosen on purpose (tensor over 4) given up for one that splits
    # nothing of width 32; dropping two of the listed devices keeps it.
    from faults_helpers import run_tiny

    refused = run_tiny(tmp_path / "six", "dry_run=true", "rule=tensor", "mesh.devices=[0,1,2,3,4,5]",
                       "mesh.model_axis=4")
    assert refused["error"] == (
        "ConfigError: mesh.model_axis=4: 6 devices are not divisible by model_axis=4; set mesh.model_axis=3 "
        "(divisors of 6: [1, 2, 3, 6]); or keep it with mesh.devices=[0,1,2,3]")
    kept = run_tiny(tmp_path / "four", "dry_run=true", "rule=tensor", "mesh.devices=[0,1,2,3]", "mesh.model_axis=4")
    assert kept["status"] == "ok" and kept["mesh_shape"] == [1, 4]


@pytest.mark.slow
def test_a_dry_run_says_when_a_real_run_on_this_host_would_be_refused_for_memory(devices, caplog, monkeypatch):
    # Was: dry_run=true model.width=30000 reported 25.2 GB per device on a 23 GB host, with no word that a real run
    # here would be refused (memory_check.check_fits). The dry run still runs: it sizes runs for larger machines.
    import logging

    from faults_helpers import compose_tiny
    from gensbi_sharding.harness import memory_check
    from gensbi_sharding.harness.dry_run import dry_run_metrics

    monkeypatch.setattr(memory_check, "host_available_bytes", lambda: 10_000_000)  # a host of 10 MB
    cfg = compose_tiny("dry_run=true", "model.width=300")  # 59.8 MB of state on the 8 simulated devices
    name, table = rule_table(cfg.rule)
    with caplog.at_level(logging.INFO, logger="gensbi_sharding"):
        metrics = dry_run_metrics(cfg, make_mesh(model_axis=cfg.mesh.model_axis), name, table)
    assert metrics["param_count"] > 0  # the report as before
    # Was "| collective | count | bytes |": not said whether per device or summed over the mesh (per device).
    # Assertion changed ("bytes per device" -> "bytes sent per device") with the bytes' meaning (r69 review).
    assert any("| collective | count | bytes sent per device |" in m for m in caplog.messages), caplog.messages
    said = [m for m in caplog.messages if m.startswith("a real run on this host would be refused")]
    assert said == ["a real run on this host would be refused by its memory check (memory_check.check_fits): the "
                    "training state cannot fit: model=mlp under rule 'replicated' needs at least 59.8 MB (8 simulated "
                    "devices x 7.5 MB: parameters x (1 + 2 AdamW moments + the EMA + the best weights), activations "
                    "not counted), but 10.0 MB is available; the setting(s) responsible: model.width=300 (at its "
                    "default 128: 11.4 MB); lower it, e.g. model.width=119"], said  # was 128 (over 10 MB), 64
    caplog.clear()
    monkeypatch.setattr(memory_check, "host_available_bytes", lambda: 100_000_000)  # where it fits: no such line
    with caplog.at_level(logging.INFO, logger="gensbi_sharding"):
        dry_run_metrics(cfg, make_mesh(model_axis=cfg.mesh.model_axis), name, table)
    assert not [m for m in caplog.messages if "would be refused" in m]


@pytest.mark.slow  # a training run beside the dry run
def test_a_run_and_its_dry_run_say_the_model_axis_is_idle_where_every_split_falls_back(tmp_path, devices, caplog):
    # Was silent: rule=tensor on data=1 x model=8 of a model whose widths 8 does not divide (here 36; GenSBI's Flux1
    # at model.num_heads=3 model.axes_dim=[5,0]) replicated every variable: 8 devices computing the same step, which a
    # sweep then ranked first by collectives (0 B).
    from faults_helpers import run_tiny
    from gensbi_sharding.harness.python_words import as_overrides

    for name, extra in (("dry", ("dry_run=true",)), ("real", ())):
        caplog.clear()
        # launch.py's words (run(cfg) from Python says cfg's settings: tests/test_run_logged_words_r79f.py)
        with caplog.at_level("INFO", logger="gensbi_sharding"), as_overrides():
            metrics = run_tiny(tmp_path / name, *extra, "rule=tensor", "mesh.model_axis=8", "model.width=36",
                               "model.mlp_ratio=1", "model.time_embed_dim=36")
        assert metrics["status"] == "ok", (name, metrics.get("error"))
        idle = [line for message in caplog.messages for line in message.splitlines() if "model axis idle" in line]
        assert idle == ["rule tensor leaves the model axis idle: every variable it splits over 'model', of size 8 on "
                        "data=1 x model=8 (mesh=dict), fell back to replicated: the 8 devices along it repeat the same "
                        "work; run with mesh.model_axis=1 so every device takes data, or mesh.model_axis=4 or 2, under "
                        "which it splits some"], (name, caplog.messages)
        assert metrics["model_axis_idle"] is True, name  # the sweep's summary marks the job by it


@pytest.mark.slow
def test_a_dry_run_records_whether_its_model_axis_is_idle(devices):
    # The sweep's summary marks such a job and ranks it after the others (was: said in the job's log alone).
    from faults_helpers import compose_tiny
    from gensbi_sharding.harness.dry_run import dry_run_metrics

    for width, idle in ((36, True), (32, False)):  # 36 is not divisible by 8: every split falls back
        cfg = compose_tiny("dry_run=true", "rule=tensor", "mesh.model_axis=8", f"model.width={width}",
                           "model.mlp_ratio=1", f"model.time_embed_dim={width}")
        name, table = rule_table(cfg.rule)
        assert dry_run_metrics(cfg, make_mesh(model_axis=8), name, table)["model_axis_idle"] is idle, width


@pytest.mark.slow  # launches launch.py (a Flux1 dry run, ~12 s)
def test_flux1s_rematerialization_warning_names_the_idle_model_axis_said_before_it(tmp_path):
    # Round 60: python launch.py experiment=quick model=flux1 rule=fsdp mesh.model_axis=2 dry_run=true said the idle
    # model axis's hint, then "XLA warned ...: [SPMD] Involuntary full rematerialization", which that axis causes in
    # the backward pass (mesh.model_axis=1: none); the warning's line now says so.
    # Its single-stream block alone (model.depth=0: no double-stream block) warns alike, at ~20 % less CPU.
    proc = subprocess.run([sys.executable, "launch.py", "experiment=quick", "model=flux1", "rule=fsdp",
                           "mesh.model_axis=2", "model.depth=0", "dry_run=true", f"hydra.run.dir={tmp_path / 'run'}"],
                          cwd=Path(__file__).resolve().parents[1], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stderr.splitlines() + proc.stdout.splitlines() if "XLA warned" in line]
    assert len(lines) == 1 and "Involuntary full rematerialization" in lines[0], proc.stderr
    assert lines[0].endswith("; the idle model axis said above causes these: mesh.model_axis=1 also removes them")

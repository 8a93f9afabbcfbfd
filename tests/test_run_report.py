"""What one run reports: the compact block, the "splits nothing" line, the table, the losses.

In this process, on conftest's 8 devices, with a toy model whose variables are annotated,
annotated-but-replicated-on-purpose, and not annotated at all.
"""

import re
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

import gensbi_sharding as gs
from gensbi_sharding.harness import train
from gensbi_sharding.harness.units import format_bytes
from gensbi_sharding.harness.loss_history import joined_loss_history, windows
from gensbi_sharding.harness.placement_hints import idle_model_axis_hint, left_whole, splits_nothing_hint
from gensbi_sharding.harness.run_report import annotations_of, final_line, placement_block, variable_table
from gensbi_sharding import RULES, bytes_per_device, describe


class Toy(nnx.Module):
    def __init__(self, rngs):
        self.up = nnx.Linear(16, 32, rngs=rngs,
                             kernel_init=gs.partitioned(nnx.initializers.lecun_normal(), ("embed", "mlp")),
                             bias_init=gs.partitioned(nnx.initializers.zeros_init(), ("mlp",)))
        self.raw = nnx.Param(jnp.ones((16, 64)))  # no annotation: looks like a forgotten one
        self.scale = nnx.Param(jnp.ones(16), **gs.axes("embed"))  # tensor maps embed to nothing: on purpose


class Velocity(nnx.Module):
    """The smallest velocity field ``v(theta_t, x, t)``: one linear map of theta_t."""

    def __init__(self, rngs):
        self.linear = nnx.Linear(2, 2, rngs=rngs)

    def __call__(self, theta, x, t):
        return self.linear(theta)


def placed(rule: str, model_axis: int):
    mesh = gs.make_mesh(model_axis=model_axis)
    model = Toy(nnx.Rngs(0))
    optimizer = nnx.Optimizer(model, optax.adamw(1e-3), wrt=nnx.Param)
    with pytest.warns((gs.ExperimentalRuleWarning, gs.ShardingFallbackWarning)):
        gs.shard_model(model, mesh, rule)
        gs.shard_model(optimizer, mesh, rule)
    nodes = {"model": model, "optimizer": optimizer}
    return mesh, nodes, describe(nodes, mesh), annotations_of(nodes)


def test_block_lists_only_variables_that_look_unannotated(devices):
    mesh, nodes, report, annotations = placed("tensor", 2)
    table = dict(RULES["tensor"])
    fallbacks = {"raw": "no annotation"}  # what the contract's plan reports for it
    whole = left_whole(report, annotations, table, fallbacks)
    assert whole == [("raw", 16 * 64 * 4)]  # not scale (replicated by the table), not the split kernel
    assert left_whole(report, annotations, table, {}) == whole  # no logical axes: listed as such too
    assert left_whole(report, annotations, dict(RULES["replicated"]), {}) == []  # a rule that splits nothing
    param_bytes = max(bytes_per_device(nodes["model"]).values())
    block = placement_block(report, rule_name="tensor", param_count=16 * 32 + 32 + 16 * 64 + 16,
                            param_bytes=param_bytes, opt_bytes=2 * param_bytes, fallbacks=fallbacks, whole=whole,
                            hint=splits_nothing_hint(dict(mesh.shape), table, "tensor", "dict"))
    assert block[0] == "mesh data=4 x model=2 (8 devices), rule tensor, 1,584 parameters"
    assert block[1] == (f"per device: parameters {format_bytes(param_bytes)} (of 6.3 KB), optimizer state "
                        f"{format_bytes(2 * param_bytes)} (of 12.7 KB)")
    assert block[2].startswith("fallbacks: 1 variable(s) the rule cannot split") and block[2].endswith(
        "largest: raw (4.1 KB)")
    assert len(block) == 4 and "sharding.txt" in block[3]  # no "splits nothing" line: model has size 2
    no_fallbacks = placement_block(report, rule_name="tensor", param_count=1, param_bytes=1, opt_bytes=1,
                                   fallbacks={}, whole=whole, hint=None)
    assert no_fallbacks[2] == "left whole without logical axes (missing annotation?): raw (4.1 KB)"
    assert no_fallbacks[-1] == "every variable's placement: sharding.txt (verbose=true prints it here)"
    verbose = placement_block(report, rule_name="tensor", param_count=1, param_bytes=1, opt_bytes=1,
                              fallbacks={}, whole=whole, hint=None, verbose=True)
    assert verbose[-1] == "every variable's placement: sharding.txt"  # the table follows on the console


def test_the_best_weights_early_stopping_keeps_on_the_device_are_counted(devices, tmp_path):
    # Was: every training run validates and keeps a device copy of the validated weights (the EMA, else the
    # model), placed alike, yet no figure counted it: the placement block, sharding.txt, metrics.json, the dry
    # run and the sweep plot reported the state without it (replicated, a device held a quarter more).
    from gensbi_sharding.harness.ema import EMA
    from gensbi_sharding.harness.plots import memory_parts
    from gensbi_sharding.harness.run_report import state_figures
    from gensbi_sharding.harness.validation import EarlyStopping, record_validation

    mesh, nodes, _, annotations = placed("fsdp", 2)
    for ema in (None, EMA(nodes["model"], 0.999)):
        with_ema = {**nodes, **({"ema": ema} if ema is not None else {})}
        functions, state = train.make_step_functions(nodes["model"], nodes["optimizer"], mesh, ema=ema)
        stopper = EarlyStopping()
        record_validation(stopper, functions, state, 1, 0.5)  # what the loop holds from the first validation
        held = max(bytes_per_device(stopper.best_weights).values())
        figures = state_figures(with_ema, mesh)
        copied = ema if ema is not None else nodes["model"]  # the whole model's state without an EMA
        assert figures["best_weights_bytes_per_device"] == held == max(bytes_per_device(copied).values())
        assert figures["ema_bytes_per_device"] == (held if ema is not None else 0)
    assert held == figures["param_bytes_per_device"] > 0  # the EMA: one more copy of the parameters
    report = describe(with_ema, mesh)
    block = placement_block(report, rule_name="fsdp", param_count=1, param_bytes=1, opt_bytes=1, fallbacks={},
                            whole=[], hint=None, ema_bytes=held, best_bytes=held)
    assert block[1].endswith(f", EMA {format_bytes(held)}, best weights kept for early stopping {format_bytes(held)}")
    table = variable_table(report, annotations, {}, best_bytes=held)
    assert table.splitlines()[2] == ("plus the best weights early stopping keeps (a copy of the ema below, placed "
                                     f"alike): {format_bytes(held)} per device")
    # The sweep plot stacks it on the state; an older folder without the figure draws the state alone.
    assert memory_parts(figures) == [figures["param_bytes_per_device"], figures["opt_bytes_per_device"],
                                     figures["state_bytes_per_device"] - figures["param_bytes_per_device"]
                                     - figures["opt_bytes_per_device"], held]
    assert memory_parts({**figures, "best_weights_bytes_per_device": None})[3] is None
    dry = {"status": "ok", "wall_s": 3.1, "dry_run": {"memory": {}}, "step_memory_bytes_per_device": 1_900_000,
           "collective_bytes_per_step": 620_000, "best_weights_bytes_per_device": 300_000}
    assert final_line(dry, tmp_path).startswith("dry run done in 3.1 s: 1.9 MB per device (+ 300.0 KB of best "
                                                "weights kept for early stopping), 620.0 KB of collectives")


def test_a_rule_that_leaves_the_model_axis_idle_says_so_and_names_both_fixes():
    # Was silent: rule=fsdp (or replicated) with mesh.model_axis=2 splits the batch over "data" only, so the
    # devices along "model" repeated the same work, as if the run had half its devices.
    fsdp, replicated, tensor = dict(RULES["fsdp"]), dict(RULES["replicated"]), dict(RULES["tensor"])
    assert idle_model_axis_hint({"data": 4, "model": 2}, fsdp, "fsdp", "dict") == (
        "rule fsdp leaves the model axis idle: it splits nothing over 'model', of size 2 on data=4 x model=2 "
        "(mesh=dict): the 2 devices along it repeat the same work; run with mesh.model_axis=1 so every device "
        "takes data, or rule=tensor")
    assert idle_model_axis_hint({"data": 2, "model": 4}, replicated, "replicated", "dict").startswith(
        "rule replicated leaves the model axis idle: it splits nothing over 'model', of size 4 on data=2 x model=4")
    assert idle_model_axis_hint({"data": 4, "model": 2}, tensor, "tensor", "dict") is None  # splits over it
    # Was silent: rule=tensor of a Flux1 whose widths 8 does not divide (model.num_heads=3 model.axes_dim=[5,0]) on
    # data=1 x model=8 replicated every variable, and a sweep ranked it first by collectives (0 B).
    assert idle_model_axis_hint({"data": 1, "model": 8}, tensor, "tensor", "dict", placed_on_model=False) == (
        "rule tensor leaves the model axis idle: every variable it splits over 'model', of size 8 on data=1 x model=8 "
        "(mesh=dict), fell back to replicated: the 8 devices along it repeat the same work; run with mesh.model_axis=1 "
        "so every device takes data, or a mesh.model_axis the widths divide by")
    assert idle_model_axis_hint({"data": 1, "model": 8}, tensor, "tensor", "dict", placed_on_model=True) is None
    assert idle_model_axis_hint({"data": 8, "model": 1}, fsdp, "fsdp", "auto") is None  # no model axis to idle
    assert idle_model_axis_hint(None, fsdp, "fsdp", "none") is None
    # Overrides that split over "model" use it: a table's value (a list too), or an activation the model reads.
    assert idle_model_axis_hint({"data": 4, "model": 2}, {**fsdp, "mlp": ["model"]}, "fsdp+overrides", "dict") is None
    assert idle_model_axis_hint({"data": 4, "model": 2}, fsdp, "fsdp", "dict", {"batch_axis": "data"}) is not None
    assert idle_model_axis_hint({"data": 4, "model": 2}, fsdp, "fsdp", "dict",
                                {"batch_axis": "data", "head_axis": "model"}) is None


def test_an_idle_model_axis_names_the_model_axes_that_split_a_variable_or_none():
    # Was "or a mesh.model_axis the widths divide by": rule=tensor of model=flux1 model.num_heads=3
    # model.axes_dim=[5,0] on data=1 x model=8, which a user then ran at mesh.model_axis=4 (the next size that
    # divides 8): idle again, as only 2 splits a width (30); where no size splits one, no such fix exists.
    from gensbi_sharding.harness.model_plan import model_axes_that_split

    class Wide(nnx.Module):
        def __init__(self, hidden):
            self.kernel = nnx.Param(jnp.zeros((4, hidden)), **gs.axes("embed", "mlp"))

    tensor, mesh = dict(RULES["tensor"]), gs.make_mesh(model_axis=8)
    assert model_axes_that_split(Wide(6), mesh, tensor) == [2]
    assert model_axes_that_split(Wide(12), mesh, tensor) == [4, 2]
    assert model_axes_that_split(Wide(5), mesh, tensor) == []
    assert model_axes_that_split(Wide(6), None, tensor) is None
    assert idle_model_axis_hint({"data": 1, "model": 8}, tensor, "tensor", "dict", None, False, [4, 2]).endswith(
        "run with mesh.model_axis=1 so every device takes data, or mesh.model_axis=4 or 2, under which it splits some")
    assert idle_model_axis_hint({"data": 1, "model": 8}, tensor, "tensor", "dict", None, False, []).endswith(
        "run with mesh.model_axis=1 so every device takes data, as no other mesh.model_axis splits a width")


def test_a_rule_that_splits_nothing_says_so_and_names_the_override():
    tensor, fsdp = dict(RULES["tensor"]), dict(RULES["fsdp"])
    hint = splits_nothing_hint({"data": 8, "model": 1}, tensor, "tensor", "auto")
    assert hint == ("rule tensor splits nothing here: it splits over 'model', of size 1 on data=8 x model=1 "
                    "(mesh=auto); to split, run with mesh=dict mesh.model_axis=2")
    assert "mesh=dict mesh.model_axis=1" in splits_nothing_hint({"data": 1, "model": 8}, fsdp, "fsdp", "dict")
    assert splits_nothing_hint({"data": 4, "model": 2}, tensor, "tensor", "dict") is None
    assert splits_nothing_hint({"data": 8, "model": 1}, fsdp, "fsdp", "auto") is None
    assert splits_nothing_hint({"data": 8, "model": 1}, dict(RULES["replicated"]), "replicated", "auto") is None
    assert splits_nothing_hint(None, tensor, "tensor", "none") is None


def test_table_shows_every_variable_with_its_logical_axes(devices):
    _, _, report, annotations = placed("tensor", 2)
    text = variable_table(report, annotations, {"raw": "why not"}, rule_name="tensor")
    assert text.splitlines()[0] == f"rule tensor, {report.mesh}"  # was: the mesh alone, the rule unsaid
    rows = {line.split()[0]: line for line in text.splitlines() if line.startswith(("model/", "optimizer/"))}
    assert len(rows) == report.n_leaves
    assert re.search(r"\(embed, mlp\)\s+P\(None, 'model'\)", rows["model/up/kernel"])
    assert re.search(r"\(16, 64\)\s+float32\s+-\s+P\(\)", rows["model/raw"])  # a fallback: replicated
    assert "optimizer/opt_state/0/mu/up/kernel" in rows and text.rstrip().endswith("raw: why not")


@pytest.mark.slow
def test_train_loss_is_the_window_mean_the_progress_bar_shows(devices, capsys):
    model = Velocity(nnx.Rngs(0))
    optimizer = nnx.Optimizer(model, optax.adamw(1e-3), wrt=nnx.Param)
    functions, state = train.make_step_functions(model, optimizer, None)
    rng = np.random.default_rng(0)
    batches = iter([{"theta": rng.normal(size=(8, 2)).astype(np.float32),
                     "x": rng.normal(size=(8, 2)).astype(np.float32)} for _ in range(7)])
    import jax

    result = train.train(functions, state, batches, steps=7, key=jax.random.key(0), mesh=None, batch_size=8,
                         log_every=3, progress=True)
    shown = re.findall(r"loss=(\d+\.\d{4})", capsys.readouterr().err)
    last = windows(np.arange(1, 8), result.losses, 3)[1][-1]  # the final train loss, as run_steps reads it
    assert shown and shown[-1] == f"{last:.4f}"  # steps 7: the last window is 1
    assert last == pytest.approx(float(result.losses[-1]))


def test_resumed_history_joins_the_earlier_run(tmp_path):
    earlier = tmp_path / "a"
    (earlier / "checkpoints" / "4").mkdir(parents=True)
    first = joined_loss_history(np.arange(1.0, 7.0), start_step=0, val_points=[(6, 0.5)], resume_dir=None)
    np.savez(earlier / "train_losses.npz", **first.arrays())  # trained to 6, checkpoint at 4
    second = joined_loss_history(np.array([10.0, 11.0]), start_step=4, val_points=[(6, 0.4)],
                                 resume_dir=earlier / "checkpoints" / "4")
    assert second.step.tolist() == [1, 2, 3, 4, 5, 6] and second.losses.tolist() == [1, 2, 3, 4, 10, 11]
    assert second.val_step.tolist() == [6] and second.val_losses.tolist() == pytest.approx([0.4])
    assert second.resumed_at.tolist() == [4]
    alone = joined_loss_history(np.array([10.0]), start_step=4, val_points=[], resume_dir=tmp_path / "x" / "y")
    assert alone.step.tolist() == [5] and alone.resumed_at.tolist() == [4]  # earlier history not found


def test_final_line(tmp_path):
    ok = {"status": "ok", "wall_s": 52.31, "c2st": 0.61234, "c2st_sd_folds": 0.0112, "samples_per_s": 18345.2}
    assert final_line(ok, tmp_path) == (f"done in 52.3 s: C2ST 0.612 ± 0.011, 18,345 samples/s (median step); "
                                        f"outputs in {tmp_path}")
    several = {**ok, "c2st_sd_observations": 0.002, "c2st_observations": [{}, {}, {}]}  # its spread: over them
    assert final_line(several, tmp_path).startswith("done in 52.3 s: C2ST 0.612 ± 0.002 over 3 observations, ")
    rejected = {**ok, "support_acceptance": 0.934}  # data.theta_transform=none
    assert final_line(rejected, tmp_path).startswith(
        "done in 52.3 s: C2ST 0.612 ± 0.011 (93% of draws inside the prior kept, the rest rejected), ")
    assert final_line({**ok, "support_acceptance": 1.0}, tmp_path) == final_line(ok, tmp_path)
    dry = {"status": "ok", "wall_s": 3.1, "dry_run": {"memory": {}}, "step_memory_bytes_per_device": 1_900_000,
           "collective_bytes_per_step": 620_000}
    assert final_line(dry, tmp_path).startswith("dry run done in 3.1 s: 1.9 MB per device, 620.0 KB of collectives")
    # Was "620.0 KB of collectives per step": not said whether per device or summed over the mesh.
    assert "620.0 KB of collectives per step per device; outputs in" in final_line(dry, tmp_path)
    (tmp_path / "error.txt").write_text("Traceback ...")
    assert final_line({"status": "error", "wall_s": 1.0}, tmp_path) == (
        f"error after 1.0 s; traceback in {tmp_path / 'error.txt'}")


def test_a_step_validated_again_on_resume_counts_once(tmp_path):
    # The checkpoint of step 4 is written before step 4's validation, which the resumed attempt runs again.
    earlier = tmp_path / "a"
    (earlier / "checkpoints" / "4").mkdir(parents=True)
    first = joined_loss_history(np.arange(1.0, 7.0), start_step=0, val_points=[(2, 0.7), (4, 0.5), (6, 0.45)],
                                resume_dir=None)
    np.savez(earlier / "train_losses.npz", **first.arrays())
    second = joined_loss_history(np.array([10.0, 11.0]), start_step=4, val_points=[(4, 0.5), (6, 0.4)],
                                 resume_dir=earlier / "checkpoints" / "4")
    assert second.val_step.tolist() == [2, 4, 6]
    assert second.val_losses.tolist() == pytest.approx([0.7, 0.5, 0.4])


def test_a_sweep_jobs_device_peak_is_its_own_not_an_earlier_jobs(monkeypatch):
    """The allocator's peak is the process's: in a multirun sharing one process, a small job after a
    large one reported the large one's peak (e.g. fsdp after replicated: 5.0 GB, its own 1.2 GB)."""
    from gensbi_sharding.harness import devices

    peaks = iter([0, 5_000_000_000, 5_000_000_000, 5_000_000_000, 5_000_000_000, 7_000_000_000])

    class Device:
        def memory_stats(self):
            return {"peak_bytes_in_use": next(peaks)}

    monkeypatch.setattr(devices.jax, "local_devices", lambda: [Device()])
    jobs = [devices.job_peak_metrics(devices.peak_bytes_in_use(), devices.peak_bytes_in_use()) for _ in range(3)]
    assert jobs == [{"device_peak_bytes": 5_000_000_000},  # the first job raised the peak: its own
                    {"device_peak_bytes": None, "device_peak_bytes_at_most": 5_000_000_000},  # only bounded
                    {"device_peak_bytes": 7_000_000_000}]  # a new high: its own again
    assert devices.job_peak_metrics(None, None) == {"device_peak_bytes": None}  # XLA:CPU keeps no statistics


def test_the_final_line_of_a_run_that_only_evaluated_says_whose_speed_it_shows(tmp_path):
    # A continued run that only evaluated takes its training figures from the last attempt that trained
    # (training_figures_from_attempt); its final line gave that speed as if this attempt had measured it.
    evaluated = {"status": "ok", "wall_s": 12.0, "c2st": 0.6, "c2st_sd_folds": 0.01, "samples_per_s": 18345.0,
                 "steps": 0, "training_figures_from_attempt": 1}
    assert final_line(evaluated, tmp_path) == (f"done in 12.0 s: C2ST 0.600 ± 0.010, 18,345 samples/s (median step "
                                               f"of attempt 1, which trained); outputs in {tmp_path}")


def test_a_sweep_job_refused_for_its_interpolation_reports_no_bogus_time(tmp_path):
    # Was: the job of `-m 'train.steps=${nope},4'` recorded wall_s 0.0, so its last line read "error after 0.0 us"
    # and the sweep table's wall cell "0.0 us", as if it had run and failed at once.
    from hydra import compose, initialize_config_dir
    from omegaconf import open_dict

    from gensbi_sharding.harness.config import register_configs
    from gensbi_sharding.harness.run import run
    from gensbi_sharding.harness.summary_columns import wall_cell

    register_configs()
    with initialize_config_dir(config_dir=str(Path(__file__).parents[1] / "conf"), version_base="1.3"):
        cfg = compose("config", overrides=["train.steps=${nope}"])
    with open_dict(cfg):
        cfg.output_dir = str(tmp_path)
    metrics = run(cfg)
    assert metrics["status"] == "error" and metrics["wall_s"] is None
    assert "train.steps=${nope} cannot be resolved" in metrics["error"] and "e.g. train.steps=3000" in metrics["error"]
    line = final_line(metrics, tmp_path)
    assert line == "not run: its config was refused before it started (the error above names the fix)", line
    assert wall_cell(metrics) == ""


@pytest.fixture(scope="module")
def plain_run(tmp_path_factory):
    """``(metrics, messages, folder)`` of one in-process ``run_tiny(folder, "eval.enabled=false")``, with the messages
    of every record that reached the root logger while it ran (``gensbi_sharding`` at INFO), as ``caplog`` would read
    them. Three tests read the same run (each made its own: ~1 s of CPU each)."""
    import logging

    from faults_helpers import run_tiny

    class Messages(logging.Handler):
        def emit(self, record):
            messages.append(record.getMessage())

    messages, folder = [], tmp_path_factory.mktemp("plain") / "r"
    logger, root, handler = logging.getLogger("gensbi_sharding"), logging.getLogger(), Messages()
    level = logger.level
    root.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        metrics = run_tiny(folder, "eval.enabled=false")
    finally:
        root.removeHandler(handler)
        logger.setLevel(level)
    return metrics, messages, folder


@pytest.mark.slow  # two tiny runs
def test_a_run_under_jax_enable_x64_says_so_and_records_it(tmp_path, caplog, monkeypatch, plain_run):
    # Was: JAX_ENABLE_X64 set in the shell trained other losses and C2ST than the same run without it, and neither
    # the console nor metrics.json said so: two runs of one config disagreed with nothing to tell them apart.
    import logging

    import jax

    from faults_helpers import run_tiny

    caplog.set_level(logging.WARNING, logger="gensbi_sharding")
    plain, plain_messages, _ = plain_run  # the plain run's records: those at WARNING and above, as caplog's here
    monkeypatch.setenv("JAX_ENABLE_X64", "1")  # set in the shell: JAX read it at import, so set it here too
    jax.config.update("jax_enable_x64", True)
    try:
        x64 = run_tiny(tmp_path / "x64", "eval.enabled=false")
    finally:
        jax.config.update("jax_enable_x64", False)
    assert plain["status"] == x64["status"] == "ok"
    assert (plain["jax_enable_x64"], x64["jax_enable_x64"]) == (False, True)
    assert plain["final_train_loss"] != x64["final_train_loss"]  # what the warning says: the runs differ
    warned = [m for m in plain_messages + [r.getMessage() for r in caplog.records] if "JAX_ENABLE_X64" in m]
    assert warned == ["JAX_ENABLE_X64 is on: JAX computes in 64 bits where it can, so this run's losses and C2ST "
                      "differ from the same run's without it (metrics.json: jax_enable_x64); unset JAX_ENABLE_X64 "
                      "to compare"]


@pytest.mark.slow  # a tiny run (plain_run's)
def test_a_run_names_its_folder_once(plain_run):
    # Was: "[7/7] outputs: <folder>" and, on the next line, "done in ...; outputs in <folder>"
    metrics, messages, folder = plain_run
    lines = [*messages, final_line(metrics, folder)]
    assert [line for line in lines if str(folder) in line] == [lines[-1]]
    assert lines[-1].startswith("done in ") and "[7/7] outputs: written (the last line names their folder)" in lines


@pytest.mark.slow  # a tiny run
def test_a_process_that_writes_no_outputs_does_not_say_it_wrote_them(tmp_path, caplog, monkeypatch):
    # Was "[7/7] outputs: written (the last line names their folder)" in process_1.log too, where the process wrote
    # none, and (distributed=local) no last line of its own followed
    import logging

    from faults_helpers import run_tiny

    from gensbi_sharding.harness import run_folder

    caplog.set_level(logging.INFO, logger="gensbi_sharding")
    monkeypatch.setattr(run_folder, "is_writer", lambda: False)  # as jax.distributed's process 1 is
    run_tiny(tmp_path / "r", "eval.enabled=false")
    said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("[7/7]")]
    assert said == ["[7/7] outputs: process 0 writes them (its last line names their folder)"]


@pytest.mark.slow  # a tiny run
def test_a_run_that_fails_after_placing_its_state_still_writes_sharding_txt(tmp_path):
    # Was: sharding.txt was written at [7/7] only: a run that diverged, was Ctrl-C'd or preempted had placed its
    # state (metrics.json listed every placement) but left no sharding.txt for a user's tools to read.
    from faults_helpers import run_tiny

    metrics = run_tiny(tmp_path, "train.learning_rate=1e25", "eval.enabled=false")
    assert metrics["status"] == "error" and "FloatingPointError" in metrics["error"]
    rows = {line.split()[0].removeprefix("model/"): re.search(r"P\([^)]*\)|single device", line).group(0)
            for line in (tmp_path / "sharding.txt").read_text().splitlines() if line.startswith("model/")}
    assert len(rows) == 12 and rows == metrics["placements"]


@pytest.mark.slow  # a tiny run (plain_run's)
def test_a_run_that_scores_nothing_names_no_weights_scored(plain_run):
    # Was: eval.enabled=false wrote c2st_weights "EMA at the best validation step" and c2st_step 8 beside c2st null,
    # and sweep_summary.csv's row named weights no C2ST had scored.
    metrics = plain_run[0]
    assert (metrics["status"], metrics["final_step"]) == ("ok", 8)
    assert (metrics["c2st"], metrics["c2st_weights"], metrics["c2st_step"]) == (None, None, None)

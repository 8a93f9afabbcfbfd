"""The sweep summary and the plots, on job folders written here (no runs): columns, units, files.

The end-to-end sweep of the issue (launch.py -m ...) is in test_user_view.py.
"""

import csv
import json
import shutil

import numpy as np
import pytest
from omegaconf import OmegaConf

from gensbi_sharding.harness.plots import plot_losses, plot_sweep, posterior_title, window_means
from gensbi_sharding.harness.summary import write_summary
from gensbi_sharding.harness.sweep_rows import declared_sweeps, summary_rows, swept_keys
from gensbi_sharding.harness.units import c2st_spread, format_bytes, format_c2st, format_count, format_seconds

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def drawn(monkeypatch):
    """The figures the plots save, in order; each is still written, so a test reads back what was drawn."""
    from matplotlib.figure import Figure

    figures, save = [], Figure.savefig

    def recorded(fig, *args, **kwargs):
        figures.append(fig)
        return save(fig, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", recorded)
    return figures


def make_job(sweep_dir, job, overrides, **metrics):
    folder = sweep_dir / str(job)
    (folder / ".hydra").mkdir(parents=True)
    OmegaConf.save(OmegaConf.create(list(overrides)), folder / ".hydra" / "overrides.yaml")
    (folder / "metrics.json").write_text(json.dumps({"config": {"dry_run": False}, **metrics}))


def ok_metrics(param_bytes, step_s, c2st, std=None):
    return dict(status="ok", mesh_shape=[8, 1], param_bytes_per_device=param_bytes,
                opt_bytes_per_device=2 * param_bytes + 8, median_step_s=step_s, samples_per_s=64 / step_s,
                c2st=c2st, c2st_sd_folds=std, wall_s=12.345)


@pytest.fixture
def sweep(tmp_path):
    """The issue's sweep, written by hand: rule.embed x activation, job 3 failed."""
    jobs = [("data", "rule", ok_metrics(3016, 0.0134, 0.61234, 0.0112)),
            ("data", "none", ok_metrics(3016, 0.0201, 0.6, 0.02)), ("model", "rule", ok_metrics(22280, 1e-5, 0.9)),
            ("model", "none", dict(status="error", error="ValueError: boom", mesh_shape=[8, 1]))]
    for job, (embed, strategy, metrics) in enumerate(jobs):
        make_job(tmp_path, job, ["experiment=quick", f"rule.embed={embed}", f"activation={{strategy:{strategy}}}"],
                 **metrics)
    return tmp_path


def test_declared_sweeps_are_the_keys_with_several_values():
    assert declared_sweeps(["experiment=quick", "rule.embed=data,model", "activation={strategy:rule},{strategy:none}",
                            "seed=range(3)"]) == ["rule.embed", "activation", "seed"]
    assert declared_sweeps(["experiment=quick"], {"rule": "fsdp,tensor", "mesh.model_axis": "1,2"}) == [
        "rule", "mesh.model_axis"]


def test_swept_keys_come_from_the_jobs_overrides(sweep):
    rows = summary_rows(sweep)
    assert [row["job"] for row in rows] == ["0", "1", "2", "3"]
    assert swept_keys(rows) == ["rule.embed", "activation"]  # experiment=quick is common: not swept
    assert swept_keys(rows, declared=["activation", "rule.embed"]) == ["activation", "rule.embed"]


@pytest.mark.slow
def test_summary_csv_has_a_column_per_swept_key_and_exact_numbers(sweep):
    summary = write_summary(sweep, declared=["rule.embed", "activation"])
    with open(summary.csv_path, newline="") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0])[:4] == ["job", "rule.embed", "activation", "mesh_shape"]
    assert [(r["rule.embed"], r["activation"]) for r in rows] == [
        ("data", "{strategy:rule}"), ("data", "{strategy:none}"), ("model", "{strategy:rule}"),
        ("model", "{strategy:none}")]
    assert rows[0]["param_bytes_per_device"] == "3016" and rows[0]["opt_bytes_per_device"] == "6040"
    assert rows[0]["c2st"] == "0.6123" and rows[0]["c2st_sd_folds"] == "0.0112" and rows[2]["c2st_sd_folds"] == ""
    assert rows[2]["median_step_s"] == "0.000010" and rows[2]["samples_per_s"] == "6400000.0"
    assert "e" not in "".join(rows[2][k] for k in ("median_step_s", "samples_per_s"))  # no exponents
    assert (rows[3]["status"], rows[3]["error"], rows[3]["c2st"]) == ("error", "ValueError: boom", "")


def test_summary_csv_names_what_produced_each_rows_numbers(tmp_path):
    """Was: only the swept keys; which task, model, seed, budget and steps, and which observations and weights each
    C2ST scored, were unsaid (two sweeps' CSVs read alike). A swept key of such a name keeps its one column."""
    for job, seed in enumerate((3, 4)):
        config = {"dry_run": False, "seed": seed, "data": {"name": "slcp", "num_simulations": 1000},
                  "model": {"name": "flux1"}, "train": {"steps": 20}}
        make_job(tmp_path, job, ["experiment=quick", f"seed={seed}"], **ok_metrics(3016, 0.01, 0.9, 0.01),
                 final_step=20, c2st_weights="EMA at the best validation step", c2st_step=10,
                 c2st_observations=[{"observation": 1, "c2st": 0.9}, {"observation": 3, "c2st": 0.9}])
        data = json.loads((tmp_path / str(job) / "metrics.json").read_text())
        data["config"] = config
        (tmp_path / str(job) / "metrics.json").write_text(json.dumps(data))
    summary = write_summary(tmp_path, declared=["seed"])
    with open(summary.csv_path, newline="") as f:
        header, *rows = list(csv.reader(f))
    assert header.count("seed") == 1 and header[1] == "seed" and header[-2:] == ["status", "error"]
    row = dict(zip(header, rows[1]))
    assert {k: row[k] for k in ("seed", "data.name", "model.name", "data.num_simulations", "train.steps", "final_step",
                                "c2st_observations", "c2st_weights", "c2st_step")} == {
        "seed": "4", "data.name": "slcp", "model.name": "flux1", "data.num_simulations": "1000", "train.steps": "20",
        "final_step": "20", "c2st_observations": "1 3", "c2st_weights": "EMA at the best validation step",
        "c2st_step": "10"}
    assert "c2st_weights" not in summary.md_path.read_text()  # the table stays as it was: the CSV holds them


def test_summary_csv_names_the_checkpoint_a_resumed_job_started_from(tmp_path):
    """Was: a job of `-m train.resume=runs/a model.width=32,64 train.steps=30` read as a fresh run of 30 steps (its
    step time, samples/s and losses are of steps 20..30 alone); a fresh job's cells stay empty."""
    make_job(tmp_path, 0, ["seed=0"], **ok_metrics(3016, 0.01, 0.9), final_step=30, resumed_from_step=20,
             resumed_from="/runs/a/checkpoints/20")
    make_job(tmp_path, 1, ["seed=1"], **ok_metrics(3016, 0.01, 0.9), final_step=30, resumed_from_step=None,
             resumed_from=None)
    summary = write_summary(tmp_path, declared=["seed"])
    with open(summary.csv_path, newline="") as f:
        rows = list(csv.DictReader(f))
    assert [(r["final_step"], r["resumed_from_step"], r["resumed_from"]) for r in rows] == [
        ("30", "20", "/runs/a/checkpoints/20"), ("30", "", "")]
    assert list(rows[0])[-2:] == ["status", "error"]


def test_summary_table_reads_at_a_glance(sweep):
    summary = write_summary(sweep, declared=["rule.embed", "activation"])
    lines = summary.md_path.read_text().splitlines()
    header = [cell.strip() for cell in lines[0].split("|")[1:-1]]
    assert header == ["job", "rule.embed", "activation", "mesh", "params/device", "optimizer/device", "step",
                      "samples/s", "best val loss", "C2ST", "wall", "fallbacks", "status", "error"]
    first = [cell.strip() for cell in lines[2].split("|")[1:-1]]
    assert first == ["0", "data", "{strategy:rule}", "8x1", "3.0 KB", "6.0 KB", "13.4 ms", "4,776", "",
                     "0.612 ± 0.011", "12.3 s", "", "ok", ""]
    assert "6,400,000" in lines[4] and "0.900" in lines[4]
    assert len({len(line) for line in lines}) == 1  # columns padded: it reads in a terminal too
    assert summary.png_path.read_bytes()[:8] == PNG


def test_training_sweep_shows_each_jobs_fallbacks(tmp_path):
    """Was: the dry-run table's column alone; a training sweep over rules did not show that rule=tensor fell back
    (flux1 on mesh.model_axis=4), its row read as split as its rule says though metrics.json listed the fallbacks."""
    fell_back = {"model/blocks/0/qkv/kernel": "dimension 3 of 6 not divisible by model=4",
                 "model/final/kernel": "dimension 1 of 2 not divisible by model=4"}
    for job, (rule, fallbacks) in enumerate([("fsdp", {}), ("tensor", fell_back)]):
        make_job(tmp_path, job, [f"rule={rule}"], **ok_metrics(3016, 0.01, 0.7), fallbacks=fallbacks)
    make_job(tmp_path, 2, ["rule=none"], status="error", error="ValueError: boom")  # failed before placing its state
    summary = write_summary(tmp_path, declared=["rule"])
    with open(summary.csv_path, newline="") as f:
        rows = list(csv.DictReader(f))
    assert [(r["rule"], r["fallbacks"]) for r in rows] == [("fsdp", "0"), ("tensor", "2"), ("none", "")]
    lines = summary.md_path.read_text().splitlines()
    header = [cell.strip() for cell in lines[0].split("|")[1:-1]]
    assert [[cell.strip() for cell in line.split("|")[1:-1]][header.index("fallbacks")] for line in lines[2:]] == [
        "0", "2", ""]


def test_dry_run_sweep_is_ranked_and_plotted(tmp_path):
    for job, (memory, comm) in enumerate([(4_100_000, 820_000), (1_900_000, 1_600_000), (2_500_000, 620_000)]):
        make_job(tmp_path, job, [f"rule={('replicated', 'fsdp', 'tensor')[job]}"], status="ok", mesh_shape=[4, 2],
                 step_memory_bytes_per_device=memory, collective_bytes_per_step=comm, compile_s=1.5, fallbacks={},
                 best_weights_bytes_per_device=memory // 10)
        data = json.loads((tmp_path / str(job) / "metrics.json").read_text())
        data["config"]["dry_run"] = True
        (tmp_path / str(job) / "metrics.json").write_text(json.dumps(data))
    summary = write_summary(tmp_path, declared=["rule"])
    by_memory, by_comm = summary.text.split("\n\n")
    assert [line.split("|")[2].strip() for line in by_memory.splitlines()[3:]] == ["fsdp", "tensor", "replicated"]
    assert [line.split("|")[2].strip() for line in by_comm.splitlines()[3:]] == ["tensor", "replicated", "fsdp"]
    assert "1.9 MB" in by_memory and "memory/device" in by_memory and "collectives/step" in by_memory
    # The copy of the best weights a training run keeps beside the step, which XLA's figure leaves out: named.
    head = [cell.strip() for cell in by_memory.splitlines()[1].split("|")]
    fsdp = [cell.strip() for cell in by_memory.splitlines()[3].split("|")]
    assert fsdp[head.index("+ best weights")] == "190.0 KB" and fsdp[head.index("memory/device")] == "1.9 MB"
    assert summary.png_path.read_bytes()[:8] == PNG


def test_units():
    assert [format_bytes(n) for n in (512, 3016, 22_280_000, 1.37e9, None)] == ["512 B", "3.0 KB", "22.3 MB",
                                                                                "1.4 GB", ""]
    assert format_count(13512.3) == "13,512" and format_count(float("nan")) == ""
    assert [format_seconds(s) for s in (0.0134, 5e-5, 52.31, 4000)] == ["13.4 ms", "50.0 us", "52.3 s", "66.7 min"]
    assert (format_c2st(0.61234, 0.0112), format_c2st(0.61234), format_c2st(None)) == ("0.612 ± 0.011", "0.612", "")
    assert c2st_spread({"c2st_sd_folds": 0.01, "c2st_sd_observations": 0.05}) == 0.05  # over observations first
    assert c2st_spread({"c2st_sd_folds": 0.01, "c2st_sd_observations": None}) == 0.01
    assert c2st_spread({}) is None


def test_window_means_cut_windows_like_the_training_loop():
    steps, losses = np.arange(1, 8), np.arange(1.0, 8.0)
    ends, means = window_means(steps, losses, 3)
    assert ends.tolist() == [3, 6, 7] and means.tolist() == [2.0, 5.0, 7.0]
    # Windows are counted from step 0, resumed or not: a history starting after a resume (steps 5-7, the earlier
    # losses not joined) has its first window cut short, and its last the uninterrupted run's.
    ends, means = window_means(steps[4:], losses[4:], 3)
    assert ends.tolist() == [6, 7] and means.tolist() == [5.5, 7.0]
    with pytest.raises(ValueError, match="train.log_every"):
        window_means(steps, losses, 0)


def test_losses_plot_says_how_many_steps_each_shorter_window_holds(tmp_path, monkeypatch):
    # Was: the legend said "mean of 100 steps" of every point, though the window cut at a resume and the last one are
    # shorter (the console gave their true count): each such point is hollow, labelled with its number of steps.
    from matplotlib.figure import Figure

    drawn = {}  # the legend's labels, the markers' faces and the texts, as the PNG is saved
    monkeypatch.setattr(Figure, "savefig", lambda fig, *a, **k: drawn.update(
        labels=[t.get_text() for t in fig.axes[0].get_legend().get_texts()],
        texts=[(t.get_text(), t.xy) for t in fig.axes[0].texts],
        lines={line.get_label(): (line.get_markerfacecolor(), list(np.asarray(line.get_xdata())), line.get_markevery())
               for line in fig.axes[0].lines}) or buffer_png(*a))
    # 330 steps of log_every=100, the losses of steps 121-150 missing (a resume whose earlier losses were not joined):
    # windows 1-100, 101-200 (70 steps: 101-120 and 151-200), 201-300, 301-330 (the last, 30 steps).
    steps = np.r_[1:121, 151:331]
    curve = np.linspace(2, 1, 330)
    plot_losses(tmp_path / "losses.png", steps=steps, losses=curve[steps - 1], window=100, resumed_at=[150],
                title="two_moons")
    assert drawn["labels"][:2] == ["train loss (mean of 100 steps)",
                                   "train loss, mean of a shorter window (its steps beside it)"]
    assert drawn["texts"] == [("70 steps", (200, pytest.approx(np.r_[curve[100:120], curve[150:200]].mean()))),
                              ("30 steps", (330, pytest.approx(curve[300:].mean())))]
    short = drawn["lines"]["train loss, mean of a shorter window (its steps beside it)"]
    assert short[0] == "none" and short[1] == [200, 330]  # hollow, at the cut windows' ends
    assert drawn["lines"]["train loss (mean of 100 steps)"][2] == [0, 2]  # the full windows' markers only
    # Every window shorter than log_every (8 steps of 100): no point claims 100 steps.
    plot_losses(tmp_path / "losses.png", steps=np.arange(1, 9), losses=np.linspace(2, 1, 8), window=100)
    assert drawn["labels"] == ["train loss", "train loss, mean of a shorter window (its steps beside it)"]
    assert [text for text, _ in drawn["texts"]] == ["8 steps"]


def buffer_png(buffer, *args):
    buffer.write(PNG)


@pytest.mark.slow
def test_plots_are_written(tmp_path):
    path = plot_losses(tmp_path / "losses.png", steps=np.arange(1, 9), losses=np.linspace(2, 1, 8), window=2,
                       val_steps=[8], val_losses=[1.1], resumed_at=[4], title="two_moons")
    assert path.read_bytes()[:8] == PNG
    rows = [{"job": "0", "overrides": {}, "metrics": ok_metrics(100, 0.01, 0.7)},
            {"job": "1", "overrides": {}, "metrics": ok_metrics(100, 0.01, None)}]  # eval.enabled=false: n/a
    assert plot_sweep(rows, [], tmp_path / "two.png").read_bytes()[:8] == PNG  # nothing swept: a bar per job


def test_posterior_title_names_task_observation_rule_mesh_and_c2st():
    assert posterior_title(task="two_moons", observation=1, rule="tensor", mesh_shape=[4, 2], c2st=0.61234,
                           c2st_sd=0.0112) == "two_moons, observation 1 | rule tensor on mesh 4x2 | C2ST 0.612 ± 0.011"
    assert posterior_title(task="slcp", observation=3, rule="replicated", mesh_shape=None,
                           c2st=None) == "slcp, observation 3 | rule replicated on mesh none"


@pytest.mark.slow
def test_a_job_continued_alone_is_put_back_into_its_sweeps_summary(sweep):
    from gensbi_sharding.harness.summary import refresh_sweep_summary

    OmegaConf.save(OmegaConf.create({"hydra": {"overrides": {"task": [
        "experiment=quick", "rule.embed=data,model", "activation={strategy:rule},{strategy:none}"]}}}),
        sweep / "multirun.yaml")
    assert "error" in write_summary(sweep, ["rule.embed", "activation"]).text
    # Job 3 continued on its own (train.resume=auto, as the unfinished-jobs hint says) and finished.
    shutil.rmtree(sweep / "3")
    make_job(sweep, 3, ["experiment=quick", "rule.embed=model", "activation={strategy:none}", "train.resume=auto"],
             **ok_metrics(22280, 0.02, 0.7))
    summary = refresh_sweep_summary(sweep / "3")
    assert summary.keys == ["rule.embed", "activation"]  # how the job was continued is not a swept key
    rows = list(csv.DictReader((sweep / "sweep_summary.csv").open()))
    assert [row["status"] for row in rows] == ["ok"] * 4
    assert rows[3]["c2st"] == "0.7000" and "error" not in (sweep / "sweep_summary.md").read_text()
    assert refresh_sweep_summary(sweep.parent / "not_a_sweep" / "0") is None  # no multirun.yaml: nothing


@pytest.mark.slow
def test_a_job_continued_with_another_override_is_still_its_sweeps_job(sweep):
    # Was: job 1 continued alone with activation={strategy:model} no longer matched its declared configuration,
    # which got a phantom "| 4 | data | {strategy:none} | ... | not run |" row: a 4-job sweep listed 5.
    from gensbi_sharding.harness.summary import refresh_sweep_summary

    OmegaConf.save(OmegaConf.create({"hydra": {"overrides": {"task": [
        "experiment=quick", "rule.embed=data,model", "activation={strategy:rule},{strategy:none}"]}}}),
        sweep / "multirun.yaml")
    shutil.rmtree(sweep / "1")
    make_job(sweep, 1, ["experiment=quick", "rule.embed=data", "activation={strategy:model}", "train.resume=auto"],
             **ok_metrics(3016, 0.02, 0.65))
    shutil.rmtree(sweep / "2")  # and a job that never started, between two that ran: its own number, in place
    summary = refresh_sweep_summary(sweep / "1")
    rows = list(csv.DictReader((sweep / "sweep_summary.csv").open()))
    assert [(row["job"], row["status"]) for row in rows] == [("0", "ok"), ("1", "ok"), ("2", "not run"),
                                                             ("3", "error")]
    assert rows[1]["activation"] == "{strategy:model}" and rows[2]["rule.embed"] == "model"
    assert len(summary.rows) == 4


def test_sweep_jobs_follow_hydras_order_with_a_presets_params():
    # Hydra puts the preset's hydra.sweeper.params first and a command-line value in its place: job numbers.
    from gensbi_sharding.harness.sweep_plan import never_started, sweep_jobs

    jobs = sweep_jobs(["seed=0,1", "rule=fsdp"], {"rule": "tensor,fsdp", "data": "a,b"})
    assert jobs == [["rule=fsdp", "data=a", "seed=0"], ["rule=fsdp", "data=a", "seed=1"],
                    ["rule=fsdp", "data=b", "seed=0"], ["rule=fsdp", "data=b", "seed=1"]]
    ran = {"0": {"rule": "fsdp", "data": "a", "seed": "0"}, "1": {"rule": "fsdp", "data": "a", "seed": "7"},
           "custom": {"rule": "fsdp", "data": "b", "seed": "1"}}
    assert never_started(jobs, ran) == [(2, ["rule=fsdp", "data=b", "seed=0"])]


def test_a_value_swept_twice_is_two_jobs_each_counted_not_run(tmp_path):
    # Was: -m rule=fsdp,fsdp,tensor stopped in job 0 counted "1 not run": job 1 (rule=fsdp) was taken for ran, as
    # folder 0 recorded its configuration; a folder stands for one job.
    from gensbi_sharding.harness.sweep_plan import never_started

    jobs = [["rule=fsdp"], ["rule=fsdp"], ["rule=tensor"]]
    assert never_started(jobs, {"0": {"rule": "fsdp"}}) == [(1, ["rule=fsdp"]), (2, ["rule=tensor"])]
    # A folder of another name (a subdir) stands for one job of its configuration, the first without a folder.
    assert never_started(jobs, {"a": {"rule": "fsdp"}, "b": {"rule": "tensor"}}) == [(1, ["rule=fsdp"])]
    make_job(tmp_path, 0, ["rule=fsdp"], status="preempted", mesh_shape=[8, 1])
    rows = write_summary(tmp_path, ["rule"], all_jobs=jobs).rows
    assert [(row["job"], row["metrics"]["status"]) for row in rows] == [("0", "preempted"), ("1", "not run"),
                                                                       ("2", "not run")]


def test_a_long_error_is_never_cut_inside_its_continue_command(tmp_path):
    """sweep_summary.md cuts errors; a cut command ('... continue with: python launch.py ') would run another
    job, so the cell names where the whole command is; the CSV keeps every character."""
    command = "python launch.py experiment=quick rule=fsdp train.resume=auto hydra.mode=RUN hydra.run.dir=" + "x" * 80
    stopped = "interrupted by Ctrl-C at step 40 (checkpoint saved); continue with: " + command
    long_reason = "ValueError: " + "y" * 200
    for job, error in enumerate([stopped, long_reason]):
        make_job(tmp_path, job, ["experiment=quick", f"rule={['fsdp', 'tensor'][job]}"], status="error",
                 error=error, mesh_shape=[8, 1])
    write_summary(tmp_path, ["rule"])
    md = (tmp_path / "sweep_summary.md").read_text()
    assert ("interrupted by Ctrl-C at step 40 (checkpoint saved); continue with: the command in its metrics.json"
            in md) and "python launch.py" not in md
    assert "ValueError: " + "y" * 105 + "..." in md and "y" * 106 not in md
    with open(tmp_path / "sweep_summary.csv") as f:
        assert [row["error"] for row in csv.DictReader(f)] == [stopped, long_reason]


def test_the_sweep_plots_memory_panel_stacks_the_whole_state_the_ema_too(tmp_path, drawn):
    """The panel titled "memory per device" stacked parameters + optimizer state only: the EMA a device
    also holds was left out (2.4 MB drawn for the default mlp's 3.3 MB per device, replicated)."""
    from gensbi_sharding.harness import plots

    figures = drawn
    # And the copy of the best weights early stopping keeps beside them (the EMA's, else the model's) was left out.
    replicated = dict(ok_metrics(815112, 0.03, 0.85), opt_bytes_per_device=1630236, state_bytes_per_device=3260460,
                      best_weights_bytes_per_device=815112)
    no_ema = dict(ok_metrics(815112, 0.03, 0.85), opt_bytes_per_device=1630236, state_bytes_per_device=2445348,
                  best_weights_bytes_per_device=815112)
    assert plots.memory_parts(replicated) == [815112, 1630236, 815112, 815112]
    assert plots.memory_parts(no_ema) == [815112, 1630236, None, 815112]  # train.ema_decay=0: no EMA
    older = {k: v for k, v in replicated.items() if k != "best_weights_bytes_per_device"}  # a folder before it
    assert plots.memory_parts(older) == [815112, 1630236, 815112, None]
    plots.plot_sweep([{"job": "0", "overrides": {}, "metrics": replicated},
                      {"job": "1", "overrides": {}, "metrics": no_ema}], [], tmp_path / "sweep.png")
    memory = figures[0].axes[0]
    heights = {}
    for bar in memory.patches:
        heights[round(bar.get_x(), 3)] = heights.get(round(bar.get_x(), 3), 0) + bar.get_height()
    # MB: the whole state of each job, and the best weights
    assert sorted(round(h, 4) for h in heights.values()) == [3.2605, 4.0756]
    # Title changed (was "memory per device (MB)", r75g brief): the table's memory/device is the compiled step, not this
    assert memory.get_title() == "state per device (MB)" and "EMA" in memory.get_ylabel()
    assert "best weights kept for early stopping (xx)" in memory.get_ylabel()
    assert [bar.get_hatch() for bar in memory.patches] == [None, None, "//", "xx", None, None, "xx"]


def test_a_continued_jobs_wall_time_counts_every_attempt(tmp_path):
    """A job preempted after 20.2 s and continued for 29.8 s read "29.8 s" in the table's wall column."""
    earlier = [{"status": "preempted", "wall_s": 20.2, "steps": 120}]
    make_job(tmp_path, 0, ["rule=fsdp"], **dict(ok_metrics(3016, 0.01, 0.6), wall_s=29.8, previous_attempts=earlier))
    make_job(tmp_path, 1, ["rule=tensor"], **ok_metrics(3016, 0.01, 0.6))
    summary = write_summary(tmp_path, declared=["rule"])
    lines = summary.md_path.read_text().splitlines()
    wall = [cell.strip() for cell in lines[0].split("|")[1:-1]].index("wall")
    assert [[cell.strip() for cell in line.split("|")[1:-1]][wall] for line in lines[2:]] == [
        "50.0 s in 2 attempts", "12.3 s"]
    with open(summary.csv_path, newline="") as f:
        rows = list(csv.DictReader(f))
    assert [(r["wall_s"], r["wall_s_all_attempts"]) for r in rows] == [("29.80", "50.00"), ("12.35", "12.35")]


def test_a_c2st_over_several_observations_says_its_spread_is_over_them(tmp_path):
    """Its ± was the spread over observations, the next row's over folds, and the cells read alike."""
    several = dict(ok_metrics(3016, 0.01, 0.9094, 0.0259), c2st_sd_observations=0.0243,
                   c2st_observations=[{"observation": k} for k in (1, 2, 3)])
    make_job(tmp_path, 0, ["eval.observations=[1,2,3]"], **several)
    make_job(tmp_path, 1, ["eval.observations=[1]"], **ok_metrics(3016, 0.01, 0.89, 0.0246))
    lines = write_summary(tmp_path, declared=["eval.observations"]).md_path.read_text().splitlines()
    c2st = [cell.strip() for cell in lines[0].split("|")[1:-1]].index("C2ST")
    assert [[cell.strip() for cell in line.split("|")[1:-1]][c2st] for line in lines[2:]] == [
        "0.909 ± 0.024 over 3 obs.", "0.890 ± 0.025"]


def test_a_value_just_below_a_unit_reads_in_that_unit():
    """999,999 B read "1000.0 KB" and 0.99996 s "1000.0 ms": the rounded digit decides the unit."""
    from gensbi_sharding.report import PlacementReport

    assert [format_bytes(n) for n in (999_999, 999_960_000, 950)] == ["1.0 MB", "1.0 GB", "950 B"]
    # The library's placement table reads its bytes the same way.
    report = PlacementReport(n_leaves=0, n_scalars=0, total_bytes=999_999, bytes_per_device={0: 950}, variables=(),
                             largest_replicated=(), mesh=None)
    assert report.table().splitlines()[1] == "state: 0 leaves, 0 scalars, 1.0 MB; per device max 950 B, min 950 B"
    assert [format_seconds(s) for s in (0.99996, 0.00099996, 599.97)] == ["1.0 s", "1.0 ms", "10.0 min"]


@pytest.mark.slow
def test_the_sweep_plot_marks_jobs_not_run_or_preempted_as_such_not_failed(tmp_path, drawn):
    """A stopped sweep's plot drew "failed" in red for its jobs never started and its preempted one,
    and its title counted them as failed ("4 jobs, 3 failed")."""
    from gensbi_sharding.harness import plots

    figures = drawn
    statuses = ["ok", "error", "preempted", "not run"]
    rows = [{"job": str(i), "overrides": {"rule": rule}, "metrics": dict(ok_metrics(3016, 0.01, 0.6), status=status)
             if status == "ok" else {"status": status}}
            for i, (rule, status) in enumerate(zip(("replicated", "fsdp", "tensor", "fsdp_tensor"), statuses))]
    plots.plot_sweep(rows, ["rule"], tmp_path / "sweep.png")
    fig = figures[0]
    assert fig.get_suptitle() == "4 jobs, 1 failed, 1 preempted, 1 not run; swept: rule"
    marks = {(t.get_text(), t.get_color()) for t in fig.axes[0].texts}
    assert marks == {("failed", "red"), ("preempted", "gray"), ("not run", "gray")}
    plots.plot_sweep(rows[:1], ["rule"], tmp_path / "one.png")  # a sweep of one job: was "1 jobs"
    assert figures[1].get_suptitle() == "1 job; swept: rule"
    from PIL import Image

    with Image.open(tmp_path / "sweep.png") as png:  # the title a reader finds in the saved picture
        assert png.info["Title"] == "4 jobs, 1 failed, 1 preempted, 1 not run; swept: rule"


def test_the_sweep_console_line_counts_each_status_as_the_plot_does():
    # "Sweep summary (4 jobs, 3 failed)" for a stopped sweep with one failed, one preempted and one job not run.
    from gensbi_sharding.harness.plots import status_counts

    assert status_counts(["ok", "error", "preempted", "not run"]) == ", 1 failed, 1 preempted, 1 not run"
    assert status_counts(["ok", "ok"]) == ", 0 failed"
    assert status_counts([None, "damaged", "interrupted"]) == ", 2 failed, 1 interrupted"


@pytest.mark.slow
@pytest.mark.parametrize("first", ["ok", "interrupted"])
def test_the_sweep_plots_status_marks_lie_inside_their_panels(tmp_path, drawn, first):
    """A Ctrl-C'd sweep's plot (one job interrupted, two not run) drew its marks outside the panels: at the
    data's y=0, below the C2ST panel's 0.4-1.02, and left of a panel that had no bar (its x limits were
    matplotlib's default 0-1, the first job's mark at -0.27)."""
    from gensbi_sharding.harness import plots

    figures = drawn
    rows = [{"job": "0", "overrides": {"rule": "replicated"}, "metrics": dict(ok_metrics(22280, 0.0027, 0.6),
                                                                              status=first)},
            {"job": "1", "overrides": {"rule": "fsdp"}, "metrics": {"status": "not run"}},
            {"job": "2", "overrides": {"rule": "tensor"}, "metrics": {"status": "error"}}]
    plots.plot_sweep(rows, ["rule"], tmp_path / "sweep.png")
    fig = figures[0]
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    marks = 0
    for ax in fig.axes:
        box = ax.get_window_extent(renderer)
        for text in ax.texts:
            mark = text.get_window_extent(renderer)
            assert (box.x0 <= mark.x0 and mark.x1 <= box.x1 and box.y0 <= mark.y0 and mark.y1 <= box.y1), (
                ax.get_title(), text.get_text(), mark, box)
            marks += 1
    assert marks == 3 * (2 if first == "ok" else 3)  # every panel marks each job without a bar
    (legend,) = fig.legends  # no bar, no legend: it was an empty box titled "rule"
    # The interrupted job's figures so far are drawn now, marked partial (they were not drawn at all).
    assert [t.get_text() for t in legend.get_texts()] == ["replicated"] + (
        [] if first == "ok" else ["partial: a stopped job, so far"])
    no_bars = [{"job": "0", "overrides": {"rule": "replicated"}, "metrics": {"status": "interrupted"}}, *rows[1:]]
    plots.plot_sweep(no_bars, ["rule"], tmp_path / "sweep.png")  # stopped before it measured anything
    assert not figures[-1].legends and figures[-1].axes[0].get_legend() is None


@pytest.mark.slow
def test_the_sweep_plot_draws_what_a_stopped_job_reached_marked_partial(tmp_path, drawn):
    """An interrupted or preempted job was a gray label only, though its metrics.json holds the memory and step
    time it measured and the step and validation loss it reached."""
    from gensbi_sharding.harness import plots

    figures = drawn
    stopped = dict(ok_metrics(22280, 0.004, None), status="interrupted", stopped_at_step=5, final_step=5,
                   final_val_loss=1.99230, config={"train": {"steps": 8}})
    preempted = dict(ok_metrics(22280, 0.005, None), status="preempted", stopped_at_step=300, final_step=300)
    rows = [{"job": "0", "overrides": {"rule": "replicated"}, "metrics": ok_metrics(22280, 0.002, 0.6)},
            {"job": "1", "overrides": {"rule": "fsdp"}, "metrics": stopped},
            {"job": "2", "overrides": {"rule": "tensor"}, "metrics": preempted}]
    plots.plot_sweep(rows, ["rule"], tmp_path / "sweep.png")
    fig = figures[0]
    memory, step_time, c2st = fig.axes
    # Each job's step time as a bar (ms); the stopped ones faded and dashed, the finished one solid.
    bars = sorted((round(b.get_height(), 6), b.get_alpha(), b.get_linestyle()) for b in step_time.patches)
    assert bars == [(2.0, 1.0, "-"), (4.0, 0.4, "--"), (5.0, 0.4, "--")]
    assert len(memory.patches) == 3 * 2 and {round(b.get_alpha(), 6) for b in memory.patches[2:]} == {0.4, 0.16}
    assert sorted(t.get_text() for t in step_time.texts) == [
        "interrupted at step 5 of 8 (partial)", "preempted at step 300 (partial)"]
    assert sorted(t.get_text() for t in c2st.texts) == [  # no C2ST: the last figure it has
        "interrupted at step 5 of 8; val loss 1.992", "preempted at step 300"]
    assert [t.get_text() for t in fig.legends[0].get_texts()] == [
        "replicated", "fsdp", "tensor", "partial: a stopped job, so far"]
    assert fig.get_suptitle() == "3 jobs, 1 interrupted, 1 preempted; swept: rule"  # never counted as done


def test_a_swept_key_named_as_a_measured_column_is_told_apart_from_it(tmp_path):
    # Was: -m mesh=none,auto gave a table headed 'job | mesh | mesh | ...' (the swept value, then the mesh's shape).
    for job, (mesh, shape) in enumerate([("none", None), ("auto", [8, 1])]):
        make_job(tmp_path, job, [f"mesh={mesh}"], **{**ok_metrics(3016, 0.01, 0.6), "mesh_shape": shape})
    lines = write_summary(tmp_path, declared=["mesh"]).text.splitlines()
    head = [cell.strip() for cell in lines[0].split("|")]
    assert head[1:4] == ["job", "mesh", "mesh_shape"]
    cells = [[cell.strip() for cell in line.split("|")][2:4] for line in lines[2:]]
    assert cells == [["none", "none"], ["auto", "8x1"]]


@pytest.mark.parametrize("dry_run", [False, True])
@pytest.mark.fast_cases(1)
def test_the_sweep_plots_legend_covers_no_bar(tmp_path, drawn, dry_run):
    """A stopped sweep's plot (job 0 done, job 1 interrupted, its bars as tall as job 0's) had its legend over the
    memory panel's second bar: "best" found no free place inside the panel."""
    from gensbi_sharding.harness import plots

    figures = drawn
    stopped = dict(ok_metrics(22280, 0.003, None), status="interrupted", stopped_at_step=523, final_step=523,
                   config={"train": {"steps": 50000}})
    rows = [{"job": "0", "overrides": {"train.steps": "4"}, "metrics": ok_metrics(22280, 0.012, None)},
            {"job": "1", "overrides": {"train.steps": "50000"}, "metrics": stopped}]
    if dry_run:
        for row in rows:
            row["metrics"].update(step_memory_bytes_per_device=90_000, collective_bytes_per_step=5_000)
    plots.plot_sweep(rows, ["train.steps"], tmp_path / "sweep.png", dry_run=dry_run)
    fig = figures[0]
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    (legend,) = [*fig.legends, *(ax.get_legend() for ax in fig.axes if ax.get_legend())]  # one, wherever it is
    box = legend.get_window_extent(renderer)
    bars = [patch.get_window_extent(renderer) for ax in fig.axes for patch in ax.patches]
    assert len(bars) >= 4
    assert not [bar for bar in bars if bar.overlaps(box)], box
    for ax in fig.axes:  # nor over a panel or its tick labels: below them all, inside the figure
        covered = [ax.get_window_extent(renderer), *(t.get_window_extent(renderer) for t in ax.get_xticklabels())]
        assert not [b for b in covered if b.overlaps(box)] and box.y0 >= 0, (ax.get_title(), box)


def test_a_swept_float_shows_compactly_not_as_hydra_records_it(tmp_path, drawn):
    """Hydra records a swept train.weight_decay=1e12 as 1000000000000.0: the sweep's table, CSV and plot showed
    that; now 1e12 (the same float), while other values stay as they are."""
    from gensbi_sharding.harness import plots
    from gensbi_sharding.harness.summary_columns import key_cell

    typed = {"1000000000000.0": "1e12", "10000000.0": "1e7", "0.0001": "0.0001", "1e-05": "1e-05", "3.0": "3.0",
             "100": "100", "fsdp": "fsdp", "nan": "nan", "True": "true", "False": "false", "None": "null"}
    for recorded, shown in typed.items():
        assert key_cell({"overrides": {"train.weight_decay": recorded}, "metrics": {}}, "train.weight_decay") == shown
        assert not shown[0].isdigit() or float(shown) == float(recorded)  # the same number
    assert key_cell({"overrides": {}, "metrics": {"config": {"train": {"weight_decay": 1e12}}}},
                    "train.weight_decay") == "1e12"  # a preset's value, from the job's config
    figures = drawn
    rows = [{"job": str(i), "overrides": {"rule": "fsdp", "train.weight_decay": wd}, "metrics": ok_metrics(3016, 0.01, 0.6)}
            for i, wd in enumerate(("1000000000000.0", "0.0001"))]
    plots.plot_sweep(rows, ["rule", "train.weight_decay"], tmp_path / "sweep.png")
    from matplotlib.text import Text

    legend = [t.get_text() for t in figures[0].findobj(Text)]  # the legend's, the tick labels', the title's
    assert "1e12" in legend and "1000000000000.0" not in legend, legend


@pytest.mark.slow
def test_the_sweep_plot_s_group_names_never_overlap(tmp_path, drawn):
    """Was: the 8 x 4 study (data=<every task>, model=<every model>) wrote data=gaussian_linear over
    data=gaussian_linear_uniform under every panel: the panels are at most 10 inches wide (round 43)."""
    from gensbi_sharding.harness import plots

    figures = drawn
    tasks = ("two_moons", "gaussian_linear", "gaussian_linear_uniform", "gaussian_mixture", "bernoulli_glm", "slcp",
             "sir", "lotka_volterra")
    rows = [{"job": str(i), "overrides": {"data": task, "model": model}, "metrics": ok_metrics(3016, 0.01, 0.6)}
            for i, (task, model) in enumerate((t, m) for t in tasks for m in ("mlp", "transformer", "flux1"))]
    plots.plot_sweep(rows, ["data", "model"], tmp_path / "sweep.png")
    fig = figures[0]
    fig.canvas.draw()
    for ax in fig.axes:
        boxes = [label.get_window_extent() for label in ax.get_xticklabels()]
        assert len(boxes) == len(tasks)
        assert not any(a.overlaps(b) for a, b in zip(boxes, boxes[1:])), [b.x0 for b in boxes]


def _dry_job(sweep_dir, job, overrides, **metrics):
    make_job(sweep_dir, job, overrides, **metrics)
    data = json.loads((sweep_dir / str(job) / "metrics.json").read_text())
    data["config"]["dry_run"] = True
    (sweep_dir / str(job) / "metrics.json").write_text(json.dumps(data))


def test_a_dry_run_sweep_marks_and_ranks_last_the_jobs_whose_model_axis_is_idle(tmp_path):
    # Was: `-m dry_run=true rule=tensor mesh.model_axis=1,8` of a model whose widths 8 does not divide ranked the
    # model_axis=8 job first by collectives (0 B: every variable replicated, 8 devices computing the same step), with
    # nothing in the table to say so; its log alone said the model axis was idle.
    from gensbi_sharding.harness.summary_columns import IDLE_NOTE

    for job, (axis, comm, idle) in enumerate([(1, 620_000, False), (8, 0, True), (2, 410_000, False)]):
        _dry_job(tmp_path, job, [f"mesh.model_axis={axis}"], status="ok", mesh_shape=[8 // axis, axis],
                 step_memory_bytes_per_device=4_100_000 + job, collective_bytes_per_step=comm, compile_s=1.5,
                 fallbacks={"w": "size 36 ..."} if idle else {}, model_axis_idle=idle)
    _dry_job(tmp_path, 3, ["mesh.model_axis=4"], status="error", error="ValueError: boom")
    summary = write_summary(tmp_path, declared=["mesh.model_axis"])
    by_memory, by_comm = summary.text.split("\n\n")
    for table, title in ((by_memory, "memory per device"), (by_comm, "bytes of collectives per step")):
        lines = table.splitlines()
        assert lines[0] == f"ranked by {title} (smallest first; jobs whose model axis is idle last):"
        header = [cell.strip() for cell in lines[1].split("|")[1:-1]]
        cells = [[cell.strip() for cell in line.split("|")[1:-1]] for line in lines[3:]]
        assert header[-3:] == ["model axis", "status", "error"]
        assert [(row[1], row[-3]) for row in cells] == [
            *((a, "") for a in (("2", "1") if "collectives" in title else ("1", "2"))), ("8", IDLE_NOTE), ("4", "")]
    with open(summary.csv_path, newline="") as f:
        assert [r["model_axis_idle"] for r in csv.DictReader(f)] == ["false", "true", "false", ""]


@pytest.mark.slow  # ~0.7 s on 2 cores
def test_the_model_axis_column_and_note_show_only_where_a_job_leaves_its_model_axis_idle(tmp_path):
    for job in range(2):
        _dry_job(tmp_path, job, [f"rule={('fsdp', 'tensor')[job]}"], status="ok", mesh_shape=[4, 2],
                 step_memory_bytes_per_device=100 + job, collective_bytes_per_step=10 - job, compile_s=1.5,
                 fallbacks={}, model_axis_idle=False)
    text = write_summary(tmp_path, declared=["rule"]).text
    assert text.startswith("ranked by memory per device (smallest first):\n") and "model axis" not in text
    make_job(tmp_path / "train", 0, ["seed=0"], **ok_metrics(3016, 0.01, 0.7), model_axis_idle=True)
    make_job(tmp_path / "train", 1, ["seed=1"], **ok_metrics(3016, 0.01, 0.7), model_axis_idle=False)
    lines = write_summary(tmp_path / "train", declared=["seed"]).md_path.read_text().splitlines()
    header = [cell.strip() for cell in lines[0].split("|")[1:-1]]
    assert [line.split("|")[1:-1][header.index("model axis")].strip() for line in lines[2:]] == [
        "idle: nothing split over it, its devices repeat the same work", ""]


@pytest.mark.slow
def test_a_swept_group_is_one_column_not_two_of_the_same_values(tmp_path):
    # Typed: python launch.py -m experiment=quick data=two_moons,slcp model=mlp,transformer. Was: sweep_summary.csv
    # held "data" and "data.name" (two_moons, slcp under both), "model" and "model.name" (mlp, transformer under
    # both): the same values under two names. A group whose option is not its name (a file of one's own) keeps both.
    for job, (data, model) in enumerate((("two_moons", "mlp"), ("slcp", "transformer"))):
        make_job(tmp_path, job, ["experiment=quick", f"data={data}", f"model={model}"],
                 **ok_metrics(3016, 0.01, 0.9, 0.01))
        metrics = json.loads((tmp_path / str(job) / "metrics.json").read_text())
        metrics["config"] = {"dry_run": False, "seed": 0, "data": {"name": data, "num_simulations": 1000},
                             "model": {"name": model}, "train": {"steps": 20}}
        (tmp_path / str(job) / "metrics.json").write_text(json.dumps(metrics))
    summary = write_summary(tmp_path, declared=["data", "model"])
    with open(summary.csv_path, newline="") as f:
        header, *rows = list(csv.reader(f))
    assert header[:3] == ["job", "data", "model"] and "data.name" not in header and "model.name" not in header
    assert [row[1:3] for row in rows] == [["two_moons", "mlp"], ["slcp", "transformer"]]
    assert "seed" in header and "data.num_simulations" in header and header[-2:] == ["status", "error"]
    metrics = json.loads((tmp_path / "1" / "metrics.json").read_text())
    metrics["config"]["model"]["name"] = "mine"  # model=transformer composed another name: both said
    (tmp_path / "1" / "metrics.json").write_text(json.dumps(metrics))
    with open(write_summary(tmp_path, declared=["data", "model"]).csv_path, newline="") as f:
        header = next(csv.reader(f))
    assert "model.name" in header and "data.name" not in header


def test_a_job_that_ran_and_lost_its_record_is_not_listed_as_not_run(tmp_path):
    # Was: a disk that refused job 1's metrics.json (a 440k tmpfs) left its folder with Hydra's record and its log,
    # and the rebuilt summary listed it "not run", as a job never started. Now what is known: it started, no record.
    from gensbi_sharding.harness.summary import refresh_sweep_summary

    OmegaConf.save(OmegaConf.create({"hydra": {"overrides": {"task": ["experiment=quick", "seed=0,1,2"]}}}),
                   tmp_path / "multirun.yaml")
    make_job(tmp_path, 0, ["experiment=quick", "seed=0"], **ok_metrics(3016, 0.02, 0.6))
    make_job(tmp_path, 1, ["experiment=quick", "seed=1"], status="error")
    (tmp_path / "1" / "metrics.json").unlink()  # refused by the disk
    (tmp_path / "1" / ".run.lock").touch()  # its run claimed the folder: left by every run, empty
    (tmp_path / "1" / "launch.log").write_text("[1/7] devices: cpu_count=8\n")
    (tmp_path / "2" / ".hydra").mkdir(parents=True)  # made by Hydra for a job the sweep stopped before: not run
    OmegaConf.save(OmegaConf.create(["experiment=quick", "seed=2"]), tmp_path / "2" / ".hydra" / "overrides.yaml")
    summary = refresh_sweep_summary(tmp_path / "0")
    rows = list(csv.DictReader((tmp_path / "sweep_summary.csv").open()))
    assert [(row["job"], row["seed"], row["status"]) for row in rows] == [("0", "0", "ok"), ("1", "1", "no record"),
                                                                          ("2", "2", "not run")]
    assert rows[1]["error"] == ("it started but left no metrics.json: the disk refused it, the job was killed, or it "
                                f"still runs; {tmp_path / '1' / 'launch.log'} says how far it got")
    assert len(summary.rows) == 3 and "| no record" in summary.text

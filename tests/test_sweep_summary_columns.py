"""A sweep's summary, table and plot: each job's held-out loss, and the group option a job continued alone ran with."""

import pytest
from omegaconf import OmegaConf


def test_a_sweeps_summary_shows_each_jobs_held_out_loss(tmp_path, monkeypatch):
    # Typed: python launch.py -m experiment=quick model=simformer rule=fsdp,tensor mesh.model_axis=2
    # eval.enabled=false (as every data set of one's own runs). Was: each job's console ended "train loss 1.9944 ...,
    # val loss 2.0873 over 77 pairs", but sweep_summary.md/.csv held speed and memory only, C2ST blank: nothing
    # there said how well any job trained.
    import csv
    import json

    from omegaconf import OmegaConf

    from gensbi_sharding.harness import plots
    from gensbi_sharding.harness.summary import write_summary

    monkeypatch.setattr(plots, "plot_sweep", lambda rows, keys, path, dry_run=False: path)  # no matplotlib here
    for job, (rule, val, train) in enumerate((("fsdp", 2.0872653, 1.99437898), ("tensor", 2.5, 2.4))):
        (tmp_path / str(job) / ".hydra").mkdir(parents=True)
        OmegaConf.save(OmegaConf.create(["experiment=quick", f"rule={rule}"]),
                       tmp_path / str(job) / ".hydra" / "overrides.yaml")
        (tmp_path / str(job) / "metrics.json").write_text(json.dumps(
            {"status": "ok", "config": {"dry_run": False}, "mesh_shape": [4, 2], "c2st": None, "wall_s": 3.3,
             "best_val_loss": val, "final_train_loss": train}))
    summary = write_summary(tmp_path, ["rule"])
    header, _, *lines = summary.text.splitlines()
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in (header, *lines)]
    column = cells[0].index("best val loss")
    assert [row[column] for row in cells[1:]] == ["2.0873", "2.5000"]
    rows = list(csv.DictReader((tmp_path / "sweep_summary.csv").open()))
    assert [(r["best_val_loss"], r["final_train_loss"]) for r in rows] == [("2.087265", "1.994379"),
                                                                          ("2.500000", "2.400000")]


@pytest.mark.slow
def test_a_sweeps_plot_without_c2st_shows_the_held_out_loss(tmp_path, monkeypatch):
    # The same sweep (eval.enabled=false): sweep_summary.png's third panel was "C2ST (0.5 = perfect)" with "n/a" for
    # every job. Now that panel is the best validation loss, one bar per job of its value; a scored sweep keeps C2ST.
    from gensbi_sharding.harness import plots

    from matplotlib.figure import Figure

    made, save = [], Figure.savefig
    monkeypatch.setattr(Figure, "savefig", lambda fig, *a, **k: made.append(fig) or save(fig, *a, **k))

    def row(job, rule, **metrics):
        return {"job": job, "overrides": {"rule": rule}, "metrics": {
            "status": "ok", "param_bytes_per_device": 8000, "opt_bytes_per_device": 16000, "median_step_s": 0.016,
            **metrics}}

    plots.plot_sweep([row(0, "fsdp", best_val_loss=2.087), row(1, "tensor", best_val_loss=2.5)], ["rule"],
                     tmp_path / "a.png")
    last = made[-1].axes[2]
    assert last.get_title() == "best validation loss"
    assert sorted(round(p.get_height(), 3) for p in last.patches) == [2.087, 2.5]
    plots.plot_sweep([row(0, "fsdp", best_val_loss=2.087, c2st=0.6), row(1, "tensor", best_val_loss=2.5)], ["rule"],
                     tmp_path / "b.png")
    assert made[-1].axes[2].get_title() == "C2ST (0.5 = perfect)"


def test_the_sweep_table_names_the_group_option_a_job_continued_alone_ran_with(tmp_path):
    # Typed: -m distributed=local ... rule=fsdp,tensor, stopped in job 0; job 0 continued alone in one process (its
    # printed command without distributed=local). Was: sweep_summary.md's "distributed" column empty for job 0 (no
    # override named it, and the config holds the group's fields, not its name), "local" for job 1.
    from gensbi_sharding.harness.sweep_rows import summary_rows
    from gensbi_sharding.harness.summary_columns import key_cell

    for number, overrides, choice in ((0, ["rule=fsdp", "train.resume=auto"], "none"),
                                      (1, ["distributed=local", "rule=tensor"], "local")):
        job = tmp_path / str(number)
        (job / ".hydra").mkdir(parents=True)
        (job / ".hydra" / "overrides.yaml").write_text("".join(f"- {o}\n" for o in overrides))
        OmegaConf.save({"hydra": {"runtime": {"choices": {"distributed": choice, "rule": "x", "hydra/env": None}}}},
                       job / ".hydra" / "hydra.yaml")
        (job / "metrics.json").write_text('{"status": "ok", "config": {"distributed": {"mode": "none"}}}')
    rows = summary_rows(tmp_path)
    assert [(key_cell(r, "distributed"), key_cell(r, "rule")) for r in rows] == [("none", "fsdp"), ("local", "tensor")]


def test_a_setting_a_config_file_edit_changed_between_jobs_gets_a_column(tmp_path, monkeypatch):
    # Typed: -m experiment=quick rule=replicated,fsdp,tensor hydra.sweep.dir=runs/sw, Ctrl-C in job 1; then
    # conf/experiment/quick.yaml edited (num_simulations 1024 -> 2048, num_samples 128 -> 256) and job 1 continued
    # by the printed command. Was: sweep_summary.md read "| 0 | replicated | ... 0.6571 | 0.809 |" beside
    # "| 1 | fsdp | ... 0.6018 | 0.822 |", nothing saying job 1 trained on twice the simulations and scored twice the
    # samples (its overrides were job 0's); now each such setting is a column. train.resume (how the job ran) is not.
    import json

    from gensbi_sharding.harness import plots
    from gensbi_sharding.harness.summary import write_summary

    monkeypatch.setattr(plots, "plot_sweep", lambda rows, keys, path, dry_run=False: path)  # no matplotlib here
    for job, (rule, sims, samples, resume, obs) in enumerate((("replicated", 1024, 128, None, [1]),
                                                              ("fsdp", 2048, 256, "auto", [1, 3]))):
        (tmp_path / str(job) / ".hydra").mkdir(parents=True)
        OmegaConf.save(OmegaConf.create(["experiment=quick", f"rule={rule}"]),
                       tmp_path / str(job) / ".hydra" / "overrides.yaml")
        config = {"dry_run": False, "rule": {"name": rule, "embed": None if rule == "replicated" else "data"},
                  "data": {"name": "two_moons", "num_simulations": sims}, "train": {"resume": resume, "steps": 400},
                  "eval": {"num_samples": samples, "observations": obs}}
        (tmp_path / str(job) / "metrics.json").write_text(json.dumps(
            {"status": "ok", "config": config, "mesh_shape": [8, 1], "c2st": 0.8, "wall_s": 3.3}))
    summary = write_summary(tmp_path, ["rule"])
    assert summary.keys == ["rule", "data.num_simulations", "eval.num_samples", "eval.observations"]
    header, _, *lines = summary.text.splitlines()
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in lines]
    assert [row[:5] for row in cells] == [["0", "replicated", "1024", "128", "[1]"], ["1", "fsdp", "2048", "256", "[1,3]"]]
    assert "train.resume" not in header and "rule.embed" not in header


@pytest.mark.slow
def test_the_sweep_plot_labels_each_job_by_the_value_its_table_row_shows(tmp_path):
    # The same sweep's sweep_summary.png: its groups were labelled from the overrides alone, so a setting the table
    # read from a job's config (data.num_simulations after the edit, a preset's train.steps) was drawn empty,
    # "data.num_simulations=" under every bar, where the table said 1024 and 2048.
    from matplotlib.figure import Figure

    from gensbi_sharding.harness import plots

    made, save = [], Figure.savefig
    try:
        Figure.savefig = lambda fig, *a, **k: made.append(fig) or save(fig, *a, **k)
        rows = [{"job": str(job), "overrides": {"rule": rule}, "metrics": {
            "status": "ok", "param_bytes_per_device": 8000, "opt_bytes_per_device": 16000, "median_step_s": 0.016,
            "c2st": 0.8, "config": {"data": {"num_simulations": sims}}}}
            for job, (rule, sims) in enumerate((("replicated", 1024), ("fsdp", 2048)))]
        plots.plot_sweep(rows, ["data.num_simulations", "rule"], tmp_path / "a.png")
    finally:
        Figure.savefig = save
    labels = [t.get_text() for t in made[-1].axes[0].get_xticklabels()]
    assert labels == ["data.num_simulations=1024", "data.num_simulations=2048"]


@pytest.mark.slow
def test_the_sweep_plot_colours_the_swept_key_not_a_setting_that_differs_in_the_configs(tmp_path):
    # The table's keys put a setting that differs only in the jobs' configs after the swept ones: -m rule=replicated,
    # fsdp with job 1 continued after conf/experiment/quick.yaml's edit. The plot coloured the last key, so its
    # legend read '128', '256' (eval.num_samples, no name) and each rule was a group of its own; the rule colours again.
    from matplotlib.figure import Figure

    from gensbi_sharding.harness import plots
    from gensbi_sharding.harness.sweep_rows import swept_keys

    made, save = [], Figure.savefig
    try:
        Figure.savefig = lambda fig, *a, **k: made.append(fig) or save(fig, *a, **k)
        rows = [{"job": str(job), "overrides": {"rule": rule}, "metrics": {
            "status": "ok", "param_bytes_per_device": 8000, "opt_bytes_per_device": 16000, "median_step_s": 0.016,
            "c2st": 0.8, "config": {"rule": {"name": rule}, "eval": {"num_samples": samples}}}}
            for job, (rule, samples) in enumerate((("replicated", 128), ("fsdp", 256)))]
        keys = swept_keys(rows)
        assert keys == ["rule", "eval.num_samples"]
        plots.plot_sweep(rows, keys, tmp_path / "a.png")
    finally:
        Figure.savefig = save
    assert [t.get_text() for t in made[-1].axes[0].get_xticklabels()] == ["eval.num_samples=128",
                                                                          "eval.num_samples=256"]
    assert made[-1].axes[0].get_legend_handles_labels()[1] == ["replicated", "fsdp"]


def test_a_local_sweeps_coordinator_port_gets_no_column():
    # Typed: -m train.learning_rate=0.003,0.001 distributed=local distributed.local_processes=2. Each job's
    # metrics.json holds its process 0's config, with the loopback port the job chose: the table gained a column
    # distributed.coordinator_address (127.0.0.1:35461, 127.0.0.1:56405), and the plot grouped its bars by it.
    from gensbi_sharding.harness.sweep_rows import swept_keys

    rows = [{"job": str(job), "overrides": {"train.learning_rate": lr}, "metrics": {"status": "ok", "config": {
        "train": {"learning_rate": float(lr)}, "distributed": {"mode": "explicit", "process_id": 0,
                                                               "coordinator_address": f"127.0.0.1:{port}"}}}}
            for job, (lr, port) in enumerate((("0.003", 35461), ("0.001", 56405)))]
    assert swept_keys(rows) == ["train.learning_rate"]

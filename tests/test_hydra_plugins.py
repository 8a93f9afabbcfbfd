"""Hydra's launcher and sweeper as users copy them from Hydra's docs (harness/hydra_plugins.py), refused in one line.

Was: ``-m rule=fsdp,tensor hydra/launcher=joblib`` ended in Hydra's multi-line "Could not find 'hydra/launcher/joblib'"
and its search path; ``hydra.launcher.n_jobs=2`` (or the README's ``hydra.launcher.nodes=2`` without
``hydra/launcher=slurm``) in "To append to your config use +hydra.launcher.n_jobs=2", which, typed, ended in
"TypeError: BasicLauncher.__init__() got an unexpected keyword argument 'n_jobs'".
"""

import pytest

from gensbi_sharding.harness.command_checks import command_problem
from gensbi_sharding.harness.hydra_plugins import hydra_plugin_problem, plugin_options, plugin_settings


def test_the_options_are_the_installed_plugins_and_the_config_folders():
    assert plugin_options("launcher") == ["basic", "slurm", "submitit_local", "submitit_slurm"]
    assert plugin_options("sweeper") == ["basic"]
    assert plugin_settings("launcher", "basic") == []
    assert {"nodes", "timeout_min", "signal_delay_s"} <= set(plugin_settings("launcher", "slurm"))
    assert plugin_settings("sweeper", "basic") == ["max_batch_size", "params"]
    assert plugin_settings("launcher", "joblib") is None


@pytest.mark.parametrize("arg, plugin, package", [
    ("hydra/launcher=joblib", "launcher", "hydra-joblib-launcher"),
    ("hydra/sweeper=optuna", "sweeper", "hydra-optuna-sweeper"),
])
def test_a_plugin_not_installed_names_its_package_and_the_options(arg, plugin, package):
    options = "basic, slurm, submitit_local, submitit_slurm" if plugin == "launcher" else "basic"
    assert hydra_plugin_problem(["-m", "rule=fsdp,tensor", arg]).startswith(
        f"{arg}: no {plugin} '{arg.split('=')[1]}' is installed here (hydra/{plugin} options: {options}); it is "
        f"Hydra's plugin {package}: .venv/bin/python -m pip install {package}, or leave hydra/{plugin}= out")


def test_a_misspelt_option_offers_the_nearest():
    assert hydra_plugin_problem(["-m", "hydra/launcher=submitit_locl"]).endswith(
        "; did you mean hydra/launcher=submitit_local?")


@pytest.mark.slow
def test_a_setting_of_another_launcher_names_the_launcher_to_add():
    problem = command_problem(["-m", "rule=fsdp,tensor", "hydra.launcher.nodes=2"])
    assert problem == ("hydra.launcher.nodes=2: hydra/launcher=basic (Hydra's default) has no setting nodes; its "
                       "settings: none (it runs the jobs one after another in this process); nodes is a setting of "
                       "hydra/launcher=slurm, submitit_local, submitit_slurm: add hydra/launcher=slurm")


def test_a_setting_no_launcher_here_has_names_the_plugin_it_comes_with():
    assert hydra_plugin_problem(["-m", "hydra.launcher.n_jobs=2"]).endswith(
        "its settings: none (it runs the jobs one after another in this process); a plugin's settings come with its "
        "option (hydra/launcher=<option>), installed first, e.g. n_jobs with hydra/launcher=joblib "
        "(pip install hydra-joblib-launcher)")
    assert hydra_plugin_problem(["-m", "hydra.sweeper.n_trials=3"]).startswith(
        "hydra.sweeper.n_trials=3: hydra/sweeper=basic (Hydra's default) has no setting n_trials; its settings: "
        "max_batch_size, params")


def test_a_misspelt_setting_of_the_chosen_launcher_offers_the_nearest():
    assert hydra_plugin_problem(["-m", "hydra/launcher=slurm", "hydra.launcher.nodez=2"]).endswith(
        "; did you mean hydra.launcher.nodes=2?")


@pytest.mark.parametrize("args", [
    ["-m", "hydra/launcher=slurm", "distributed=auto", "rule=fsdp", "hydra.launcher.nodes=2"],  # the README's
    ["-m", "hydra/launcher=slurm", "hydra.launcher.max_num_timeout=3", "hydra.launcher.additional_parameters.x=1"],
    ["-m", "rule=fsdp,tensor", "hydra.sweeper.max_batch_size=2"],
    ["-m", "hydra/launcher=submitit_local", "hydra.launcher.timeout_min=5"],
    ["-m", "hydra/launcher=slurm", "++hydra.launcher.additional_parameters.x=1"],  # adds inside a setting it has
    ["-m", "+hydra.sweeper.params.rule=fsdp,tensor"],
])
def test_settings_the_chosen_plugin_has_pass(args):
    assert hydra_plugin_problem(args) is None


@pytest.mark.parametrize("arg", ["+hydra.launcher.n_jobs=2", "++hydra.launcher.n_jobs=2"])
def test_a_setting_added_with_a_plus_is_refused_as_typed_without(arg):
    # Was: passed to Hydra, whose BasicLauncher(**hydra.launcher) ended the run in "TypeError: BasicLauncher.__init__()
    # got an unexpected keyword argument 'n_jobs'" (submitit's: a NameError, its sweep folder left behind).
    assert hydra_plugin_problem(["-m", arg]).startswith(
        f"{arg}: hydra/launcher=basic (Hydra's default) has no setting n_jobs; its settings: none")
    assert hydra_plugin_problem(["-m", "hydra/launcher=submitit_local", arg.replace("n_jobs", "nodez")]).endswith(
        "; did you mean hydra.launcher.nodes=2?")


@pytest.mark.parametrize("line", ["  - override /hydra/launcher: submitit_slurm", "  - override hydra/launcher: slurm",
                                  # were refused still: spellings Hydra composes as SlurmLauncher too
                                  "  - 'override /hydra/launcher': submitit_slurm",
                                  "  - {override /hydra/launcher: submitit_slurm}", "  [{override hydra/launcher: slurm}]"])
def test_a_launcher_a_preset_picks_is_not_taken_for_the_basic_one(tmp_path, line):
    # Was: "hydra.launcher.nodes=4: hydra/launcher=basic (Hydra's default) has no setting nodes" for a preset of the
    # user's own config folder whose defaults list picks the launcher, which Hydra composes (SlurmLauncher, nodes: 4).
    (tmp_path / "experiment").mkdir()
    (tmp_path / "experiment" / "cluster.yaml").write_text(f"# @package _global_\ndefaults:\n{line}\n")
    args = ["-m", "--config-dir", str(tmp_path), "experiment=cluster", "hydra.launcher.nodes=4", "rule=fsdp,tensor"]
    assert hydra_plugin_problem(args) is None
    (tmp_path / "experiment" / "cluster.yaml").write_text("# @package _global_\ntrain:\n  steps: 10\n")
    assert hydra_plugin_problem(args).startswith("hydra.launcher.nodes=4: hydra/launcher=basic (Hydra's default) has no")


def test_a_launcher_pick_commented_out_is_no_pick(tmp_path):
    # A preset whose pick is commented out composes Hydra's basic launcher: its setting is refused as before
    (tmp_path / "experiment").mkdir()
    (tmp_path / "experiment" / "cluster.yaml").write_text(
        "# @package _global_\ndefaults:\n  # - {override /hydra/launcher: submitit_slurm}\n  - _self_\n")
    args = ["-m", "--config-dir", str(tmp_path), "experiment=cluster", "hydra.launcher.nodes=4"]
    assert hydra_plugin_problem(args).startswith("hydra.launcher.nodes=4: hydra/launcher=basic (Hydra's default) has no")


def test_a_fifo_named_yaml_in_a_search_path_does_not_block_the_launch(tmp_path):
    # Was: picked_in_configs read every *.yaml up to three folders deep, a FIFO too, whose read blocks until a
    # writer opens it: the launch hung before any output. Run in a thread so the old code fails, not hangs.
    import os
    import threading

    (tmp_path / "experiment").mkdir()
    os.mkfifo(tmp_path / "experiment" / "pipe.yaml")
    (tmp_path / "experiment" / "cluster.yaml").write_text("# @package _global_\ndefaults:\n  - _self_\n")
    args = ["-m", "--config-dir", str(tmp_path), "experiment=cluster", "hydra.launcher.nodes=4"]
    answer = []
    reader = threading.Thread(target=lambda: answer.append(hydra_plugin_problem(args)), daemon=True)
    reader.start()
    reader.join(timeout=30)
    if reader.is_alive():  # unblock the old code's read so the worker does not keep a stuck thread
        with open(tmp_path / "experiment" / "pipe.yaml", "w"):
            pass
        reader.join(timeout=5)
        pytest.fail("hydra_plugin_problem blocked on a FIFO named *.yaml")
    assert answer[0].startswith("hydra.launcher.nodes=4: hydra/launcher=basic (Hydra's default) has no"), answer


def test_a_launcher_in_the_primary_configs_own_search_path_is_seen_as_hydra_sees_it(tmp_path):
    # Was: `--config-dir my_conf --config-name my_main hydra/launcher=mine`, my_main.yaml setting
    # hydra: {searchpath: [file://<other>]} where hydra/launcher/mine.yaml lives, refused "no launcher 'mine' is
    # installed here": the checks before Hydra read only a typed hydra.searchpath=, Hydra reads the primary config's.
    other, mine = tmp_path / "other", tmp_path / "my_conf"
    (other / "hydra" / "launcher").mkdir(parents=True)
    (other / "hydra" / "launcher" / "mine.yaml").write_text(
        "_target_: hydra._internal.core_plugins.basic_launcher.BasicLauncher\n")
    mine.mkdir()
    (mine / "my_main.yaml").write_text(f"defaults:\n  - config\n  - _self_\nhydra:\n  searchpath:\n    - file://{other}\n")
    args = ["-m", "--config-dir", str(mine), "--config-name", "my_main", "rule=fsdp,tensor"]
    assert hydra_plugin_problem([*args, "hydra/launcher=mine"]) is None
    assert "mine" in plugin_options("launcher", [f"file://{other}"])
    # a typed hydra.searchpath= replaces the primary config's, in Hydra as here: refused again
    typed = f"hydra.searchpath=[file://{tmp_path}]"
    assert hydra_plugin_problem([*args, typed, "hydra/launcher=mine"]).startswith(
        "hydra/launcher=mine: no launcher 'mine' is installed here")
    assert hydra_plugin_problem(["-m", "rule=fsdp,tensor", "hydra/launcher=mine"]) is not None  # conf/config.yaml's

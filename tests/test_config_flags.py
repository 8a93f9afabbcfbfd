"""Hydra's ``--config-dir`` / ``--config-name`` / ``--config-path`` flags travel with a run: into
``distributed=local``'s processes and into every command the harness prints to continue or resume it.

Was: they were dropped (Hydra records them apart from the overrides, in ``hydra.runtime.config_sources`` and
``hydra.job.config_name``), so ``python launch.py -cd my_conf -cn my distributed=local`` with ``my.yaml``
picking ``override model: transformer`` trained model=mlp in each process, status ok, and a printed continue
command composed conf/config.yaml instead of ``my``.
"""

from __future__ import annotations

import pytest
from hydra.conf import ConfigSourceInfo, HydraConf
from hydra.core.hydra_config import HydraConfig
from omegaconf import OmegaConf

from gensbi_sharding.harness.groups import CONF


def _hydra(tmp_path, config_name="my", own_dir=True):
    hydra = OmegaConf.create({"hydra": OmegaConf.structured(HydraConf)})
    hydra.hydra.runtime.output_dir, hydra.hydra.overrides.task = str(tmp_path), ["experiment=quick", "distributed=local"]
    hydra.hydra.job.config_name = config_name
    sources = [ConfigSourceInfo("hydra.conf", "pkg", "hydra"), ConfigSourceInfo(str(CONF), "file", "main")]
    sources += [ConfigSourceInfo(str(tmp_path / "my_conf"), "file", "command-line")] if own_dir else []
    hydra.hydra.runtime.config_sources = sources + [ConfigSourceInfo("", "structured", "schema")]
    return hydra


@pytest.fixture
def running(monkeypatch, tmp_path):
    """A Hydra job launched as ``-cd <tmp>/my_conf -cn my experiment=quick distributed=local``."""
    monkeypatch.setattr(HydraConfig.instance(), "cfg", None)
    HydraConfig.instance().set_config(_hydra(tmp_path))
    yield tmp_path
    HydraConfig.instance().cfg = None


@pytest.mark.slow
def test_local_processes_get_the_config_dir_and_name(monkeypatch, running):
    from gensbi_sharding.harness import local_cluster

    from faults_helpers import local_process_commands

    started = local_process_commands(monkeypatch, running)
    flags = [f"--config-dir={running / 'my_conf'}", "--config-name=my"]
    assert len(started) == 2 and all(c[2:6] == [*flags, "experiment=quick", "distributed=local"] for c in started)


def test_printed_commands_keep_the_config_dir_and_name(running):
    from gensbi_sharding.harness import further_hint, sweep_hints

    flags = f"--config-dir={running / 'my_conf'} --config-name=my"
    assert sweep_hints.continue_command("/runs/a") == (
        f"python launch.py {flags} experiment=quick distributed=local train.resume=auto hydra.run.dir=/runs/a")
    assert further_hint.train_further_hint("/runs/a", 20, 20, ["experiment=quick"]).endswith(
        f"python launch.py {flags} experiment=quick train.steps=40 train.resume=/runs/a hydra.run.dir=/runs/a-steps40")
    # a sweep's record (multirun.yaml) hands its flags to each unfinished job's command, once
    sweep = running / "sweep"
    for number, status in enumerate(("ok", "preempted")):
        (sweep / str(number) / ".hydra").mkdir(parents=True)
        (sweep / str(number) / ".hydra" / "overrides.yaml").write_text(f"- seed={number}\n")
        (sweep / str(number) / "metrics.json").write_text(f'{{"status": "{status}"}}')
    jobs = sweep_hints.unfinished_jobs_hint([sweep / "0", sweep / "1"], ("preempted",), sweep_dir=sweep,
                                            search_path=sweep_hints.config_flags(_hydra(running).hydra))
    assert f"python launch.py {flags} seed=1 train.resume=auto hydra.mode=RUN" in jobs


def test_the_run_that_saved_a_checkpoint_names_its_config_flags(tmp_path):
    from gensbi_sharding.harness.saving_record import launched_with

    run = tmp_path / "run"
    (run / ".hydra").mkdir(parents=True)
    (run / ".hydra" / "overrides.yaml").write_text("- experiment=quick\n")
    OmegaConf.save(_hydra(tmp_path), run / ".hydra" / "hydra.yaml")
    assert launched_with(run / "checkpoints" / "20") == (
        f"; the run that saved it was launched with: --config-dir={tmp_path / 'my_conf'} --config-name=my "
        "experiment=quick")
    OmegaConf.save(_hydra(tmp_path, "config", own_dir=False), run / ".hydra" / "hydra.yaml")  # launch.py's own conf/
    assert launched_with(run / "checkpoints" / "20") == "; the run that saved it was launched with: experiment=quick"


def test_the_saving_runs_command_is_written_as_the_shell_reads_it_back(tmp_path):
    # Round 43: "launched with: eval.observations=[1,2] hydra.job.name=my job" was pasted as typed: bash split the
    # name at its space and may expand [1,2] as a file pattern; each override is one shell word now, as in
    # job_command's continue command (plain words stay unquoted).
    import shlex

    from gensbi_sharding.harness.saving_record import launched_with

    run = tmp_path / "run"
    (run / ".hydra").mkdir(parents=True)
    (run / ".hydra" / "overrides.yaml").write_text("- experiment=quick\n- eval.observations=[1,2]\n- '+tag=my run'\n")
    said = launched_with(run / "checkpoints" / "20")
    assert said == ("; the run that saved it was launched with: experiment=quick 'eval.observations=[1,2]' "
                    "'+tag=my run'")
    assert shlex.split(said.split(": ", 1)[1]) == ["experiment=quick", "eval.observations=[1,2]", "+tag=my run"]


def test_a_damaged_record_of_the_saving_run_leaves_its_command_out_not_the_refusal(tmp_path):
    # A run folder whose .hydra/overrides.yaml was edited (a tab): resuming it with another model.depth raised
    # "ScannerError: while scanning for the next token" in place of the refusal naming model.depth.
    from gensbi_sharding.harness.saving_record import launched_with, saving_overrides

    run = tmp_path / "run"
    (run / ".hydra").mkdir(parents=True)
    (run / ".hydra" / "overrides.yaml").write_text("- experiment=quick\n\t- model=flux1\n")
    assert saving_overrides(run / "checkpoints" / "20") is None and launched_with(run / "checkpoints" / "20") == ""
    (run / ".hydra" / "overrides.yaml").write_text("- experiment=quick\n")
    (run / ".hydra" / "hydra.yaml").write_text("hydra: {overrides: [\n")  # cut off: its search path is not known
    assert launched_with(run / "checkpoints" / "20") == "; the run that saved it was launched with: experiment=quick"


def test_a_config_flag_typed_short_with_equals_is_read_as_hydra_reads_it(tmp_path):
    # Was: 'launch.py -cd=my_conf model=my_mlp' (argparse, so Hydra, takes -cd=x as -cd x) refused "model=my_mlp: Could
    # not find 'model/my_mlp' (model options: flux1, mlp, simformer, transformer)": only --config-dir=x was read; and
    # '--config-name=a -cn b' read as a (the '=' forms were put last), where Hydra keeps the last typed, b.
    from gensbi_sharding.harness.command_checks import command_problem
    from gensbi_sharding.harness.search_path import hydra_flag_values

    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "my_mlp.yaml").write_text("defaults:\n  - mlp\n  - _self_\n")
    assert command_problem([f"-cd={tmp_path}", "experiment=quick", "model=my_mlp"]) is None
    assert command_problem(["experiment=quick", "model=my_mlp"]).startswith("model=my_mlp: Could not find 'model/my_mlp'")
    assert hydra_flag_values(["--config-name=a", "-cn", "b", "-cn=c", "-cn"], "-cn", "--config-name") == ["a", "b", "c"]

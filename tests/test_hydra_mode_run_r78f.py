"""``hydra.mode=RUN`` typed is a single run, as Hydra reads it; ``-m`` sweeps whatever ``hydra.mode`` says.

Was (FIX78): ``CommandLine.multirun`` counted any ``hydra.mode=`` as a sweep, ``hydra.mode=RUN`` too (launch.py's own
continue commands add it): ``python launch.py hydra.mode=RUN model=mlp,flux1`` passed the checks and met Hydra's
multi-line "Ambiguous value for argument ... add --multirun", where ``model=mlp,flux1`` alone is told its one line;
``experiment=sbibm hydra.mode=RUN`` (one job: the typed mode is composed over the preset's) was checked as a sweep;
``-m hydra.mode=RUN`` (a sweep: Hydra's ``_run_app`` overrides RUN with MULTIRUN) had its folder read as
``hydra.run.dir``.
"""

import pytest

from gensbi_sharding.harness.command_checks import command_problem
from gensbi_sharding.harness.override_grammar import parse


@pytest.mark.parametrize("swept", ["model=mlp,flux1", "train.steps=1,2", "experiment=quick,sbibm"])
def test_a_sweep_under_hydra_mode_run_is_told_it_needs_m(swept):
    said = command_problem(["hydra.mode=RUN", swept])
    assert said is not None and said.startswith(f"{swept}: several values are a sweep, one job per value, which "
                                                "needs -m: "), said
    assert command_problem(["-m", "hydra.mode=RUN", swept]) is None


@pytest.mark.parametrize("args, multirun", [
    (["hydra.mode=RUN"], False), (["-m", "hydra.mode=RUN"], True), (["--multirun", "hydra.mode=RUN"], True),
    (["hydra.mode=MULTIRUN"], True), (["experiment=sbibm"], True), (["experiment=sbibm", "hydra.mode=RUN"], False),
    (["hydra.mode=RUN", "experiment=sbibm"], False), (["experiment=sbibm", "hydra.mode=null"], False),
    (["hydra.mode=MULTIRUN", "hydra.mode=RUN"], False), (["experiment=quick"], False)])
def test_multirun_follows_hydras_precedence(args, multirun):
    assert parse(args).multirun is multirun


@pytest.mark.parametrize("args", [["hydra.mode=RUN"], ["experiment=sbibm", "hydra.mode=RUN"], ["experiment=sbibm"],
                                  ["hydra.mode=MULTIRUN"], ["experiment=sbibm", "hydra.mode=null"], []])
def test_multirun_is_what_hydra_composes(args):
    # Hydra's own reading: the composed hydra.mode (hydra._internal.hydra.Hydra.get_mode), MULTIRUN or -m sweeps
    from hydra import compose, initialize_config_dir
    from hydra.types import RunMode

    from faults_helpers import REPO
    from gensbi_sharding.harness.config import register_configs

    register_configs()
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        mode = compose("config", overrides=args, return_hydra_config=True).hydra.mode
    assert parse(args).multirun is (mode == RunMode.MULTIRUN)

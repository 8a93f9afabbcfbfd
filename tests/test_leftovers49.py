"""Round 49's leftovers: a refused run writes nothing, carries its fix as data, and imports no JAX where none is needed.

Each test names what was typed, what happened, and checks what happens now.
"""

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gensbi_sharding.harness.command_checks import command_problem
from gensbi_sharding.harness.refusal import Refusal, fix_of, rephrased
from test_start_imports import LAUNCH, imported_after

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("args, said", [
    (["eval.num_samples=3"], "eval.num_samples=3 must be >= 2 * eval.c2st_folds (eval.c2st_folds=2); set "
                             "eval.num_samples=4"),
    (["mesh.model_axis=3"], "mesh.model_axis=3: 8 devices are not divisible by model_axis=3; set mesh.model_axis=2 "
                            "(divisors of 8: [1, 2, 4, 8])"),
])
def test_a_run_its_config_checks_refuse_leaves_no_folder(tmp_path, args, said):
    # Was: values the command-line checks pass but the run's own checks refuse (validate, the mesh against the
    # devices) were refused inside the run's folder, which Hydra had made: .hydra/, .run.lock, launch.log, error.txt
    # and metrics.json were left behind ("error after 27.7 ms; traceback in .../error.txt").
    out = tmp_path / "out"
    ran = subprocess.run([sys.executable, str(REPO / "launch.py"), "experiment=quick", *args, f"hydra.run.dir={out}"],
                         capture_output=True, text=True, cwd=tmp_path, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    assert ran.returncode == 1, ran.stderr
    assert not out.exists()
    assert ran.stderr.strip().splitlines() == [f"[ERROR] ConfigError: {said}"] and ran.stdout == ""  # the run's words
    assert "Traceback" not in ran.stderr + ran.stdout and "error.txt" not in ran.stderr + ran.stdout


def test_a_refused_run_imports_no_jax_where_its_check_needs_none(tmp_path):
    # A range refusal needs no device: the check of the run's config before its folder is made imports no JAX
    # (was: resolve_cpu_count's module and the activation fields' check imported it, ~1 s).
    imported, stop = imported_after(LAUNCH.format(
        f"'experiment=quick', 'train.val_every=0', 'train.patience=5', 'hydra.run.dir={tmp_path / 'out'}'"))
    assert (imported, stop) == ([], "1")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("args, fix", [
    (["eval.num_samples=2.5"], "eval.num_samples=4"),  # the type check's "e.g.", then the run's checks' fix
    (["mesh={model:3}"], "mesh.model_axis=2"),  # a dict's misspelt key's "set", then the mesh's fix
    (["train.steps=1.5"], "train.steps=2"),  # the type check's, which the run's checks pass
    (["train.stepz=5"], "train.steps=5"),  # a misspelt key's "set"
    (["+train.steps=5"], "train.steps=5"),  # + on a key that exists: "write"
    (["rule.embed=dta"], "rule.embed=data"),  # the rule table's check against the mesh
    (["data.batch_size=45.5"], "data.batch_size=48"),  # the type check's 46, then the batch check's
    (["eval.observations=3"], "eval.observations=[3]"),  # the list check's "write"
    (["experiment.steps=5"], "train.steps=5"),  # a preset group's "or set", said after its "e.g."
    (["~train.steps"], "train.steps=20"),  # a removal's "e.g."
    (["hydra.run.dirr=runs/a"], "hydra.run.dir=runs/a"),  # Hydra's own config's key
])
def test_a_refusals_fix_is_data_beside_its_words(args, fix):
    # Was: command_checks read the fix back out of the message's last word (after "set", "write" or "e.g.") and a
    # better one out of the next refusal's text. Now the check that suggests it keeps it: the message is a str as
    # before, its fix an attribute.
    problem = command_problem(["experiment=quick", *args])
    assert isinstance(problem, Refusal) and problem.fix == fix
    assert fix in problem and problem.startswith(args[0].split("=")[0])


def test_the_run_checks_refusals_carry_their_fix():
    from faults_helpers import compose_tiny
    from gensbi_sharding.harness.hints import model_axis_problem
    from gensbi_sharding.harness.sweep_check import job_problem

    assert fix_of(job_problem(compose_tiny("eval.num_samples=3"))) == "eval.num_samples=4"
    assert fix_of(job_problem(compose_tiny("train.val_every=0", "train.patience=5"))) == "train.val_every=2"
    assert fix_of(job_problem(compose_tiny("mesh.model_axis=3"))) == "mesh.model_axis=2"
    refused = model_axis_problem(4, 6, batch_size=63)
    assert refused.fix == "mesh.model_axis=2"
    assert refused.reason == "mesh.model_axis=4: 6 devices are not divisible by model_axis=4"
    assert job_problem(compose_tiny()) is None
    from gensbi_sharding.harness.held_out import val_pairs_problem
    from gensbi_sharding.harness.hints import batch_size_problem, mesh_devices_problem

    assert fix_of(batch_size_problem(45, shards=1, data_parallel=8, train_rows=900)) == "data.batch_size=48"
    assert fix_of(mesh_devices_problem([0, 1, 1], range(8))) == "mesh.devices=[0,1]"
    refused = val_pairs_problem(1000, 0.001, 64)  # the first of two fixes, each followed by what it keeps
    assert refused.fix == "data.val_fraction=0.01" and refused.endswith(
        "set data.val_fraction=0.01 (the smallest that holds out 10) or data.num_simulations=10000 at this fraction "
        "(the smallest that also leaves data.batch_size=64 training pairs)")


def test_a_refusal_keeps_its_fix_as_it_is_reworded():
    refused = Refusal("a.b=3 must be >= 4", "a.b=4", after=" (or a.c=2)")
    assert refused == "a.b=3 must be >= 4; set a.b=4 (or a.c=2)" and refused.fix == "a.b=4"
    led = rephrased(refused, lead="x={b:3} stands for a.b=3: ", drop="a.b=3 ", more="; more")
    assert led == "x={b:3} stands for a.b=3: must be >= 4; set a.b=4 (or a.c=2); more" and fix_of(led) == "a.b=4"
    better = refused.fixed_by("a.b=5", " (a.b=4 is refused: odd)")
    assert better == "a.b=3 must be >= 4; set a.b=5 (a.b=4 is refused: odd) (or a.c=2)" and better.fix == "a.b=5"
    assert rephrased("plain words", lead="ConfigError: ") == "ConfigError: plain words" and fix_of("plain") is None


def test_the_activation_fields_checked_without_jax_are_partition_axis_fields():
    # validate's check of the activation keys reads them from the config's schema (no JAX); they must stay the
    # library's PartitionAxis fields, in its order (the refusal lists them).
    from gensbi_sharding.activations import PartitionAxis
    from gensbi_sharding.harness.config import ActivationConfig

    assert tuple(f.name for f in dataclasses.fields(ActivationConfig) if f.name != "strategy") == PartitionAxis._fields

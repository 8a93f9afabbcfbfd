"""A sweep of dry runs and training together is refused, naming the two sweeps to run instead (round 69, LEFT69
item 5).

Was: ``python launch.py -m dry_run=true,false ...`` ran both jobs, and its summary gave the dry run's job a training row,
status ok, with its step time, losses and score blank, as if it had trained and measured nothing (the dry-run table,
ranked by memory and communication, was not written); stopped, its continue command (``train.resume=auto``) would be
refused for the dry runs. Now it is refused before anything is written, naming a command for each, which passes.
"""

import shlex

import pytest

from gensbi_sharding.harness.command_checks import command_problem
from gensbi_sharding.harness.override_hydra_text import preset_sweep_problem

SAID = ("a sweep runs dry runs or training, not both (its summary would show a dry run's job as a trained one that "
        "measured nothing, and a dry run continues nothing); run each as a sweep of its own")


def _commands(problem):
    """The two commands the refusal names, as the words after ``python launch.py``."""
    tail = problem.split(f"{SAID}: ", 1)[1]
    dry, _, train = tail.partition(" (the dry runs), then ")
    return [shlex.split(text.removesuffix(" (training)"))[2:] for text in (dry, train)]


def test_a_sweep_of_dry_runs_and_training_is_refused_naming_both_sweeps(tmp_path):
    sweep = tmp_path / "s"
    command = ["-m", "experiment=quick", "dry_run=true,false", "rule=fsdp,tensor", f"hydra.sweep.dir={sweep}"]
    problem = command_problem(command)  # was: None, the sweep ran
    assert problem == (f"dry_run=true,false: {SAID}: python launch.py -m experiment=quick rule=fsdp,tensor "
                       f"dry_run=true hydra.sweep.dir={sweep}-dry_run (the dry runs), then python launch.py -m "
                       f"experiment=quick rule=fsdp,tensor hydra.sweep.dir={sweep} dry_run=false (training)")
    for pasted in _commands(problem):  # each passes as printed, in a folder of its own
        assert command_problem(pasted) is None, pasted
    assert _commands(problem)[0][-1] != _commands(problem)[1][-2]


@pytest.mark.parametrize("values", ["false,true", "yes,no", "true,false,true"])
def test_every_spelling_of_the_mix_is_refused_and_one_kind_passes(values):
    problem = command_problem(["-m", f"dry_run={values}", "experiment=quick"])
    assert problem is not None and problem.startswith(f"dry_run={values}: {SAID}: ")
    assert [words[-1] for words in _commands(problem)] == ["dry_run=true", "dry_run=false"]
    assert command_problem(["-m", "dry_run=true,true", "experiment=quick", "rule=fsdp,tensor"]) is None


def test_a_presets_sweep_of_both_is_refused():
    assert preset_sweep_problem(["dry_run=true,false"]) == (
        f"dry_run=true,false (in the preset's hydra.sweeper.params): {SAID}: give dry_run one value")


@pytest.mark.parametrize("folder", ["sw/${now:%H}", "my sweeps/a"])
def test_a_sweep_folder_that_needs_quoting_gives_commands_that_pass_as_printed(tmp_path, folder):
    # Was (a review of the merged work): the dry runs' folder, already one quoted shell word, was quoted again
    # (''"'"'hydra.sweep.dir=...'"'"''), read back by Hydra as the key "'hydra.sweep.dir".
    problem = command_problem(["-m", "experiment=quick", "dry_run=true,false", f"hydra.sweep.dir={tmp_path}/{folder}"])
    dry, train = _commands(problem)
    assert dry[-1].startswith("hydra.sweep.dir=") and dry[-1].endswith("-dry_run"), dry
    for pasted in (dry, train):
        assert command_problem(pasted) is None, pasted

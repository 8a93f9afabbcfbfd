"""``~`` on an entry of one of Hydra's dict settings or of a preset's sweeper params is Hydra's to remove, and runs;
one the config does not hold is refused in one line (round 67's review: ``~hydra.callbacks.sweep_summary`` and
``-m sweep=rules_x_model_axis ~hydra.sweeper.params.rule`` were refused as "Hydra's own settings cannot be removed",
though Hydra removes them and the run, or the sweep over the preset's other param, completes)."""

import pytest
from hydra import compose, initialize_config_dir

from faults_helpers import REPO
from gensbi_sharding.harness.command_checks import command_problem
from gensbi_sharding.harness.config import register_configs


def _hydra(args):
    register_configs()
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        return compose("config", overrides=[a for a in args if a != "-m"], return_hydra_config=True).hydra


@pytest.mark.parametrize("args, gone", [
    (["~hydra.callbacks.sweep_summary"], ("callbacks", "sweep_summary")),
    (["~hydra.callbacks.refuse_completed"], ("callbacks", "refuse_completed")),
    (["-m", "sweep=rules_x_model_axis", "~hydra.sweeper.params.rule"], ("sweeper.params", "rule")),
    (["+hydra.job.env_set.FOO=1", "~hydra.job.env_set.FOO"], ("job.env_set", "FOO")),
])
@pytest.mark.fast_cases(2)
def test_an_entry_hydra_holds_is_removed_as_hydra_removes_it(args, gone):
    assert command_problem(args) is None
    parent, key = gone
    held = _hydra(args)
    for part in parent.split("."):
        held = held[part]
    assert key not in held  # what Hydra composes: the entry removed


@pytest.mark.slow
@pytest.mark.parametrize("args, said", [
    (["~hydra.callbacks.nope"], "~hydra.callbacks.nope: Hydra's config holds no hydra.callbacks.nope to remove (it "
                                "holds launcher_preflight, refuse_completed, sweep_summary); leave ~hydra.callbacks.nope "
                                "out"),
    (["~hydra.job.env_set.NOPE"], "~hydra.job.env_set.NOPE: Hydra's config holds no hydra.job.env_set.NOPE to remove; "
                                  "leave ~hydra.job.env_set.NOPE out"),
    (["~hydra.run.dir"], "~hydra.run.dir: Hydra's own settings cannot be removed; leave ~hydra.run.dir out "
                         "(hydra.run.dir keeps its default)"),  # a field of Hydra's schema, as before
])
def test_what_hydra_cannot_remove_is_refused_in_one_line(args, said):
    assert command_problem(args) == said
    with pytest.raises(Exception):  # Hydra's own several-line error, which the refusal stands for
        _hydra(args)

"""The default a config refusal suggests ("e.g. key=value") is the one the command composes, never the value refused.

Was the schema's (``override_keys.schema_default``): ``experiment=quick data.batch_size=0`` said "e.g.
data.batch_size=256" where quick composes 64 (and two_moons alone 1024), ``train.steps=-5`` "e.g. train.steps=4000"
where quick runs 20, and where a preset composed the refused value that value could be offered as its own fix.
"""

from __future__ import annotations

import re

import pytest

from gensbi_sharding.harness.config import ConfigError
from gensbi_sharding.harness.config_checks import validate

from faults_helpers import under_command


def _refusal(cfg):
    with pytest.raises(ConfigError) as err:
        validate(cfg)
    return str(err.value)


@pytest.mark.parametrize("bad, quick, plain", [
    ("data.batch_size=0", "data.batch_size=64", "data.batch_size=1024"),  # conf/data/two_moons.yaml's, not 256
    ("train.steps=-5", "train.steps=20", "train.steps=3000"),
    ("model.width=0", "model.width=32", "model.width=128"),  # model_checks named the schema's 128 itself
    ("eval.ode_steps=3000000000", "eval.ode_steps=8", "eval.ode_steps=32"),  # check_numbers' fix
    ("train.log_every=${nope}", "train.log_every=10", "train.log_every=100"),  # interpolation_problem's
])
@pytest.mark.parametrize("preset", [("experiment=quick",), ()])
@pytest.mark.fast_cases(2)
def test_a_refusal_suggests_the_default_the_command_composes(devices, bad, quick, plain, preset):
    fix = quick if preset else plain
    message = under_command((*preset, bad), _refusal)
    assert message.startswith(bad.split("=")[0]) and re.search(rf"e\.g\. {re.escape(fix)}(?![\w.])", message), message
    under_command((*preset, fix), validate)  # the fix is accepted


@pytest.mark.slow
def test_a_suggestion_is_never_the_value_refused(devices):
    from gensbi_sharding.harness.composed_defaults import suggested_default

    # quick composes 64: refused there (as a cross-key check may refuse it), 64 is no fix; the schema's 256 is.
    assert under_command(("experiment=quick", "data.batch_size=64"),
                          lambda cfg: suggested_default(cfg, "data.batch_size")) == (True, 256)
    # experiment=sbibm composes the schema's 256 too: no default differs from the refused value, none is offered.
    assert under_command(("experiment=sbibm", "data.batch_size=256"),
                          lambda cfg: suggested_default(cfg, "data.batch_size")) == (False, None)
    assert under_command(("experiment=quick",), lambda cfg: suggested_default(cfg, "train.steps")) == (True, 3000)
    assert under_command(("experiment=quick", "train.steps=3000"),
                          lambda cfg: suggested_default(cfg, "train.steps")) == (True, 20)


@pytest.mark.parametrize("args, fix", [
    (("experiment=quick", "train.steps=abc"), "train.steps=20"),  # was the schema's train.steps=4000
    (("experiment=quick", "train.steps=null"), "train.steps=20"),
    (("-m", "experiment=quick", "train.steps=1,abc"), "train.steps=1,20"),  # the sweep with that value replaced
    (("experiment=quick", "~train.steps"), "train.steps=20"),  # override_prefixes' "set it instead"
    (("experiment=quick", "~train.stepz"), "train.steps=20"),  # its "did you mean"
    (("experiment=quick", "model.width=abc"), "model.width=32"),  # was 128
    (("experiment=quick", "model=flux1", "model.depth=abc"), "model.depth=1"),  # conf/experiment_model/quick/flux1
    (("model=flux1", "experiment=quick", "~model.depth"), "model.depth=1"),
    (("data.batch_size=abc",), "data.batch_size=1024"),  # conf/data/two_moons.yaml's, not the schema's 256
    (("experiment=sbibm", "eval.observations=abc"), "eval.observations=[1,2,3,4,5,6,7,8,9,10]"),  # was [1]
    (("-m", "experiment=quick,sbibm", "train.steps=abc"), "train.steps=3000"),  # jobs compose 20, 20000: the schema's
    # A swept group: each job composed (was the schema's for any swept group: train.steps=4000, flux1's depth 2).
    (("-m", "experiment=quick", "model=mlp,transformer", "train.steps=abc"), "train.steps=20"),
    (("-m", "experiment=quick", "model=flux1,transformer", "model.depth=abc"), "model.depth=1"),
    (("-m", "model=transformer,flux1", "experiment=quick", "model.depth=abc"), "model.depth=1"),
    (("-m", "experiment=quick", "data=two_moons,slcp", "data.batch_size=abc"), "data.batch_size=64"),
    (("-m", "data=two_moons,slcp", "data.batch_size=abc"), "data.batch_size=256"),  # 1024, 256: the schema's
])
@pytest.mark.fast_cases(2)
def test_a_check_before_composing_suggests_the_value_the_commands_groups_compose(args, fix):
    from gensbi_sharding.harness.command_checks import command_problem

    message = command_problem(list(args))
    assert message and re.search(rf"e\.g\. {re.escape(fix)}(?![\w.,])", message), message
    assert command_problem([*args[:-1], fix]) is None  # typed in place of the refused override, it passes the checks


@pytest.mark.slow
def test_a_check_before_composing_suggests_a_preset_of_ones_own(tmp_path):
    from gensbi_sharding.harness.command_checks import command_problem

    (tmp_path / "experiment").mkdir()
    (tmp_path / "experiment" / "mine.yaml").write_text("# @package _global_\ntrain:\n  steps: 7\n")
    message = command_problem([f"hydra.searchpath=[file://{tmp_path}]", "experiment=mine", "train.steps=abc"])
    assert message and message.endswith("; e.g. train.steps=7"), message  # its hydra.searchpath composed too


@pytest.mark.slow
def test_a_check_before_composing_reads_the_commands_config_dir_and_name(tmp_path):
    """--config-dir's preset and --config-name's own values are what the command composes (was: conf/config.yaml's,
    so -cd my_conf experiment=mine said the schema's train.steps=4000)."""
    from gensbi_sharding.harness.command_checks import command_problem

    (tmp_path / "experiment").mkdir()
    (tmp_path / "experiment" / "mine.yaml").write_text("# @package _global_\ntrain:\n  steps: 7\n")
    message = command_problem(["--config-dir", str(tmp_path), "experiment=mine", "train.steps=abc"])
    assert message and message.endswith("; e.g. train.steps=7"), message
    (tmp_path / "my.yaml").write_text("defaults:\n  - config\n  - _self_\ntrain:\n  learning_rate: 0.0005\n")
    message = command_problem(["-cd", str(tmp_path), "-cn", "my", "train.learning_rate=abc"])
    assert message and message.endswith("; e.g. train.learning_rate=0.0005"), message

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
    ("train.steps=-5", "train.steps=20", "train.steps=4000"),
    ("model.width=0", "model.width=32", "model.width=128"),  # model_checks named the schema's 128 itself
    ("eval.ode_steps=3000000000", "eval.ode_steps=8", "eval.ode_steps=32"),  # check_numbers' fix
    ("train.log_every=${nope}", "train.log_every=10", "train.log_every=100"),  # interpolation_problem's
])
@pytest.mark.parametrize("preset", [("experiment=quick",), ()])
def test_a_refusal_suggests_the_default_the_command_composes(devices, bad, quick, plain, preset):
    fix = quick if preset else plain
    message = under_command((*preset, bad), _refusal)
    assert message.startswith(bad.split("=")[0]) and re.search(rf"e\.g\. {re.escape(fix)}(?![\w.])", message), message
    under_command((*preset, fix), validate)  # the fix is accepted


def test_a_suggestion_is_never_the_value_refused(devices):
    from gensbi_sharding.harness.composed_defaults import suggested_default

    # quick composes 64: refused there (as a cross-key check may refuse it), 64 is no fix; the schema's 256 is.
    assert under_command(("experiment=quick", "data.batch_size=64"),
                          lambda cfg: suggested_default(cfg, "data.batch_size")) == (True, 256)
    # experiment=sbibm composes the schema's 256 too: no default differs from the refused value, none is offered.
    assert under_command(("experiment=sbibm", "data.batch_size=256"),
                          lambda cfg: suggested_default(cfg, "data.batch_size")) == (False, None)
    assert under_command(("experiment=quick",), lambda cfg: suggested_default(cfg, "train.steps")) == (True, 4000)
    assert under_command(("experiment=quick", "train.steps=4000"),
                          lambda cfg: suggested_default(cfg, "train.steps")) == (True, 20)

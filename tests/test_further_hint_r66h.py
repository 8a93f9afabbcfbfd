"""further_hint's advice takes only what it reads (r66)."""

import inspect

import pytest

from gensbi_sharding.harness.further_hint import rerun_hint, stopped_hint


@pytest.mark.parametrize("hint", [rerun_hint, stopped_hint])
def test_the_continue_hints_take_no_steps_they_never_read(hint):
    # Was: rerun_hint(..., steps=None) and stopped_hint(..., steps=None), unused; fresh_folder passed train.steps.
    assert "steps" not in inspect.signature(hint).parameters
    assert list(inspect.signature(hint).parameters)[-2:] == ["overrides", "multirun"]

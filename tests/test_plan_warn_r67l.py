"""``Plan.warn`` given a stacklevel beyond 64 bits: refused by name before any warning, not Python's OverflowError.

Found by round 67's fuzzer: ``plan.warn(-2**70)`` raised "OverflowError: Python int too large to convert to C
ssize_t" from warnings.warn, after the plan's first warning had been given.
"""

import warnings

import pytest

import gensbi_sharding as gs
from library_helpers import Annotated


@pytest.mark.parametrize("stacklevel", [-2**70, 2**63, 2**63 - 1])
def test_a_stacklevel_beyond_64_bits_is_named_before_any_warning(devices, stacklevel):
    plan = gs.plan_shardings(Annotated(), gs.make_mesh(model_axis=2), "tensor")
    with warnings.catch_warnings(record=True) as seen, pytest.raises(
            ValueError, match=rf"^stacklevel={stacklevel} is beyond 64 bits, which warnings\.warn takes: e\.g\. "
                              r"stacklevel=2$"):
        warnings.simplefilter("always")
        plan.warn(stacklevel)
    assert seen == []
    with warnings.catch_warnings(record=True) as seen:  # the advice, followed
        warnings.simplefilter("always")
        plan.warn(2)
    assert [type(w.message) for w in seen] == [gs.ExperimentalRuleWarning]

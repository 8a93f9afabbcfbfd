"""A scalar key inside rule/activation swept without -m is not told to paste a list (r71-sweep fixed the groups only)."""

import pytest

from gensbi_sharding.harness.override_types import override_problem


@pytest.mark.parametrize("arg", ["activation.strategy=fixed,none", "rule.name=a,b"])
def test_a_scalar_key_inside_rule_or_activation_is_told_only_m(arg):
    # Was told ", or one list for this run: activation.strategy=[fixed,none]", and pasting that was refused in turn
    # ("activation.strategy takes one value, not a list").
    assert override_problem([arg]) == (
        f"{arg}: several values are a sweep, one job per value, which needs -m: python launch.py -m ... {arg}")


@pytest.mark.parametrize("arg", ["activation.batch_axis=data,model", "rule.mlp=data,model"])
def test_an_axes_key_is_still_offered_its_list_and_the_list_passes(arg):
    key, values = arg.split("=")
    assert override_problem([arg]).endswith(f", or one list for this run: {key}=[{values}]")
    assert override_problem([f"{key}=[{values}]"]) is None  # the list it names passes

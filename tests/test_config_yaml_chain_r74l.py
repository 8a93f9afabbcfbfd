"""The YAML error a config refusal looks for in an exception's chain of causes: found, or None, never a hang."""

import yaml

from gensbi_sharding.harness.config_files import yaml_error_in


def _marked() -> yaml.MarkedYAMLError:
    try:
        yaml.safe_load("a: [1\nb: 2")
    except yaml.MarkedYAMLError as err:
        return err
    raise AssertionError("YAML read a broken list")


def test_the_yaml_error_behind_two_wrappers_is_found():
    inner = _marked()
    middle = RuntimeError("composing")
    middle.__cause__ = inner
    outer = ValueError("Hydra")
    outer.__context__ = middle
    assert yaml_error_in(outer) is inner
    assert yaml_error_in(inner) is inner


def test_a_chain_that_loops_ends_with_none():
    # Was: `while not MarkedYAMLError: err = err.__cause__ or err.__context__` walked a looping chain for ever
    first, second = RuntimeError("a"), ValueError("b")
    first.__cause__, second.__cause__ = second, first
    assert yaml_error_in(first) is None
    assert yaml_error_in(None) is None

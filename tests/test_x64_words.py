"""The x64 warning names the fix that fits how this process came to compute in 64 bits."""

import logging

import jax
import pytest

from gensbi_sharding.harness.run_report import x64_warning


@pytest.fixture
def x64_on():
    jax.config.update("jax_enable_x64", True)
    try:
        yield
    finally:
        jax.config.update("jax_enable_x64", False)


def _warned(caplog) -> list[str]:
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="gensbi_sharding"):
        on = x64_warning()
    return [on, *(r.getMessage() for r in caplog.records)]


def test_x64_set_from_python_is_warned_with_the_python_call_that_undoes_it(x64_on, caplog, monkeypatch):
    # Was: "JAX_ENABLE_X64 is on: ...; unset JAX_ENABLE_X64 to compare", the variable never set: no fix.
    monkeypatch.delenv("JAX_ENABLE_X64", raising=False)
    assert _warned(caplog) == [
        True, "jax_enable_x64 is on (set from Python): JAX computes in 64 bits where it can, so this run's losses and "
        "C2ST differ from the same run's without it (metrics.json: jax_enable_x64); call "
        "jax.config.update('jax_enable_x64', False) before run(cfg) (this process set it from Python) to compare"]
    jax.config.update("jax_enable_x64", False)  # the advice, followed: nothing to warn, 32 bits recorded
    assert _warned(caplog) == [False]


def test_x64_set_by_the_variable_is_warned_with_the_variable(x64_on, caplog, monkeypatch):
    monkeypatch.setenv("JAX_ENABLE_X64", "true")
    assert _warned(caplog)[1].endswith("(metrics.json: jax_enable_x64); unset JAX_ENABLE_X64 to compare")
    monkeypatch.setenv("JAX_ENABLE_X64", "0")  # the variable says off, Python turned it on: the Python call
    assert _warned(caplog)[1].endswith("call jax.config.update('jax_enable_x64', False) before run(cfg) (this "
                                       "process set it from Python) to compare")

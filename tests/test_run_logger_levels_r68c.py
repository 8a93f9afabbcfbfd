"""``run(cfg)`` from Python quiets JAX's and Orbax's (absl's) loggers while it runs and leaves them as it found them."""

import logging

import pytest
from faults_helpers import compose_tiny

from gensbi_sharding.harness.run import quiet_libraries, run

NAMES = ("jax", "absl")


@pytest.fixture
def levels():
    before = {name: logging.getLogger(name).level for name in NAMES}
    yield
    for name, level in before.items():
        logging.getLogger(name).setLevel(level)


@pytest.mark.parametrize("level", [logging.NOTSET, logging.INFO, logging.ERROR])
def test_run_puts_the_library_loggers_back_as_it_found_them(tmp_path, levels, level):
    # Was: WARNING for good after the first run() (a notebook's INFO or DEBUG for absl silenced; its ERROR made louder).
    for name in NAMES:
        logging.getLogger(name).setLevel(level)
    cfg = compose_tiny("+data.unread=${nowhere}", output_dir=tmp_path / "run")  # refused at once: no JAX started
    assert run(cfg)["error"].startswith("ConfigError: ")
    assert [logging.getLogger(name).level for name in NAMES] == [level, level]


def test_inside_the_library_loggers_say_warnings_only_and_a_stricter_level_is_kept(levels):
    logging.getLogger("jax").setLevel(logging.NOTSET)
    logging.getLogger("absl").setLevel(logging.ERROR)
    with quiet_libraries():
        assert [logging.getLogger(name).level for name in NAMES] == [logging.WARNING, logging.ERROR]
    assert [logging.getLogger(name).level for name in NAMES] == [logging.NOTSET, logging.ERROR]

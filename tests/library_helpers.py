"""Modules, fixtures and helpers shared by the library's input tests (test_*_inputs.py, test_argument_types.py)."""

import os
import tempfile
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

import gensbi_sharding as gs


def _refusal(call):
    with pytest.raises((ValueError, TypeError)) as err:
        call()
    return type(err.value), str(err.value)


class Annotated(nnx.Module):
    def __init__(self):
        self.kernel = nnx.Param(jnp.arange(32.0).reshape(8, 4), **gs.axes("embed", "mlp"))
        self.bias = nnx.Param(jnp.zeros((4,)), **gs.axes("mlp"))


class Block(nnx.Module):
    def __init__(self, rngs):
        self.up = nnx.Linear(8, 16, rngs=rngs,
                             kernel_init=gs.partitioned(nnx.initializers.lecun_normal(), ("embed", "mlp")))


@pytest.fixture(scope="module")
def mesh(devices):
    return gs.make_mesh(model_axis=2)


@pytest.fixture
def model():
    return Block(nnx.Rngs(0))


class OddAnnotation(nnx.Module):
    def __init__(self, entry):
        self.w = nnx.Param(jnp.ones((8, 8)), out_sharding=(entry, "mlp"), eager_sharding=False)


class AxesBlock(nnx.Module):
    def __init__(self, rngs, hidden=16):
        self.up = nnx.Linear(8, hidden, rngs=rngs, kernel_metadata=gs.axes("embed", "mlp"),
                             bias_metadata=gs.axes("mlp"))


class Small(nnx.Module):
    def __init__(self, rngs, first="up"):
        setattr(self, first, nnx.Linear(4, 8, rngs=rngs, kernel_init=gs.partitioned(
            nnx.initializers.lecun_normal(), ("embed", "mlp"))))
        self.down = nnx.Linear(8, 4, rngs=rngs)


BIG = np.array([2**40 + i for i in range(8)], np.int64)  # an id or a nanosecond clock: beyond int32


class WithIds(nnx.Module):
    def __init__(self, rngs, ids=BIG):
        self.ids = nnx.Variable(ids)
        self.lin = nnx.Linear(2, 4, rngs=rngs)


class Counted(nnx.Module):
    """A step count and a seed kept as Python numbers (values, not arrays), one beyond int32."""

    def __init__(self):
        self.seen = nnx.Variable(2**40)
        self.flag = nnx.Variable(True)
        self.stats = nnx.Variable({"n": 2**40, "mean": jnp.ones((8,))})
        self.w = nnx.Param(jnp.ones((8, 4)), **gs.axes("embed", None))


@pytest.fixture
def unwritable(tmp_path):
    """(an existing folder nothing can be created in, the reason): a 0o555 folder, or, for root, who ignores mode
    bits, /sys (read-only for every user on Linux); skipped where neither refuses a new entry. One fixture for the
    library's and the harness's tests (a checkpoint writer, an output folder, a benchmark root)."""
    folder = tmp_path / "readonly"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        for candidate in (folder, Path("/sys")):
            if not candidate.is_dir():
                continue
            try:
                os.rmdir(tempfile.mkdtemp(dir=candidate))
            except OSError as err:
                yield candidate, err.strerror
                return
        pytest.skip("no folder here refuses a new entry")
    finally:
        folder.chmod(0o755)


def lose_step_metadata(step_dir: Path) -> None:
    """Delete Orbax's step metadata of ``step_dir`` (a copy that left it out): its items stay, its commit record goes.
    The one place the tests name Orbax's file; the library reads it through ``ocp.metadata`` only."""
    (Path(step_dir) / "_CHECKPOINT_METADATA").unlink()


def steps_with_the_newest_unconfirmed(folder: Path, steps: tuple[int, ...] = (3, 5)) -> None:
    """Save an ``nnx.Linear(2, 2)`` at each of ``steps`` into ``folder``, then lose the newest step's metadata."""
    import jax

    from gensbi_sharding.checkpoint import CheckpointWriter

    with CheckpointWriter(folder, async_save=False, keep=len(steps)) as writer:
        for step in steps:
            writer.save(step, nnx.Linear(2, 2, rngs=nnx.Rngs(0)), jax.random.key(0))
    lose_step_metadata(Path(folder) / str(steps[-1]))

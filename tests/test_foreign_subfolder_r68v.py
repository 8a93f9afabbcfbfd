"""A plain Orbax checkpoint saved to a subfolder (Flax's NNX guide: ``StandardCheckpointer().save(ckpt_dir /
'state', state)``) and its parent, ``ckpt_dir``, passed to restore (round 68, a user's script)."""

import re

import numpy as np
import orbax.checkpoint as ocp
import pytest
from flax import nnx
from jax.sharding import PartitionSpec as P

from gensbi_sharding.checkpoint import abstract_state_for, restore
from library_helpers import AxesBlock, mesh  # noqa: F401  (mesh: a fixture)


@pytest.mark.parametrize("composite", [False, True])
def test_a_checkpoint_saved_to_a_subfolder_is_named_with_the_orbax_call_that_reads_it(tmp_path, mesh, composite):
    # Was: "no checkpoint in .../ckpt: looked for complete Orbax step folders <step>/ in it; pass a run dir, its
    # checkpoints/ dir or one step dir", naming neither the checkpoint in ckpt/state nor how to read it
    model = AxesBlock(nnx.Rngs(3))
    state = nnx.split(model)[1]
    (tmp_path / "ckpt" / "logs").mkdir(parents=True)  # a folder beside it, no checkpoint: passed over
    if composite:
        with ocp.Checkpointer(ocp.CompositeCheckpointHandler()) as saver:
            saver.save(tmp_path / "ckpt" / "state", args=ocp.args.Composite(params=ocp.args.StandardSave(state)))
    else:
        with ocp.StandardCheckpointer() as saver:
            saver.save(tmp_path / "ckpt" / "state", state)
    target = abstract_state_for(AxesBlock(nnx.Rngs(0)), mesh, "tensor")
    with pytest.raises(FileNotFoundError) as refused:
        restore(tmp_path / "ckpt", target)
    said = str(refused.value)
    assert said.startswith(f"no checkpoint in {tmp_path / 'ckpt'}: its subfolder 'state' holds one: "
                           f"{tmp_path / 'ckpt' / 'state'} is an Orbax checkpoint another writer saved in the folder "
                           f"itself ({'its item ' + repr('params') if composite else 'one unnamed item'})")
    call = re.search(r"target = abstract_state_for\(model, mesh, rule\); (.*)$", said).group(1)
    assert repr(str(tmp_path / "ckpt" / "state")) in call
    read = eval(call, {"ocp": ocp, "target": target})  # the suggested call, as printed
    restored = read["params"] if composite else read
    assert restored["up"]["kernel"].get_value().sharding.spec == P(None, "model")
    np.testing.assert_array_equal(restored["up"]["kernel"].get_value(), model.up.kernel.get_value())

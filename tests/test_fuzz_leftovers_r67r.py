"""A fuzz's leftovers: refusals that named no choice, printed a whole repr, or gave advice that cannot work."""

import numpy as np
import pytest

import gensbi_sharding as gs


@pytest.mark.parametrize("value", ["FULL", "ful", 3, None, np.arange(3), ["full"]])
def test_a_value_no_data_partition_type_holds_names_the_choices(value):
    # Was: Python's "'FULL' is not a valid DataPartitionType", naming no choice; an array: "The truth value of an
    # array with more than one element is ambiguous".
    with pytest.raises(ValueError, match=r"^DataPartitionType\(.*\) is none of its values \['full', 'data', "
                                         r"'replicated'\]: pass one of them, e.g. DataPartitionType\('full'\), or "
                                         r"DataPartitionType.FULL$") as err:
        gs.DataPartitionType(value)
    assert "\n" not in str(err.value) and len(str(err.value)) < 200
    advice = str(err.value).split("e.g. ")[1]
    assert {eval(text, {"DataPartitionType": gs.DataPartitionType}) for text in advice.split(", or ")} == {
        gs.DataPartitionType.FULL}  # pasted, each works


def test_data_partition_type_still_looks_members_up():
    assert gs.DataPartitionType("data") is gs.DataPartitionType.DATA
    assert gs.DataPartitionType(gs.DataPartitionType.REPLICATED) is gs.DataPartitionType.REPLICATED
    assert gs.DataPartitionType.FULL == "full"


def test_check_batch_divisible_refuses_a_what_that_is_no_str_in_one_short_line():
    # Was: what=list(range(10_000)) stood whole in the message (its repr, 48,890 characters).
    mesh = gs.make_mesh(model_axis=1)
    batch = {"x": np.ones((3, 2))}
    with pytest.raises(TypeError, match=r"^what=\[0, 1, 2, .* must be a str naming the batch in messages, e.g. "
                                        r"what='train'$") as err:
        gs.check_batch_divisible(batch, mesh, list(range(10_000)))
    assert len(str(err.value)) < 200
    with pytest.raises(ValueError, match=r"^train batch size 3 is not divisible"):  # the advice, pasted
        gs.check_batch_divisible(batch, mesh, what="train")


def test_make_mesh_offers_no_simulation_of_more_cpu_devices_than_jax_starts():
    # Was: make_mesh(model_axis=10**30) advised jax.config.update('jax_num_cpu_devices', 1000...0).
    with pytest.raises(ValueError, match=r"not divisible by model_axis=10{30}: choose a model_axis among "
                                         r"\[1, 2, 4, 8\]$"):
        gs.make_mesh(model_axis=10**30)
    with pytest.raises(ValueError, match=r"choose a model_axis among \[1, 2, 4, 8\], or simulate 1024 CPU devices: "
                                         r"jax.config.update\('jax_num_cpu_devices', 1024\) first thing"):
        gs.make_mesh(model_axis=1024)

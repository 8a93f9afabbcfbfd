"""A batch given as a list of per-sample rows, never stacked (a data loader that forgot ``np.stack``), passed to the
batch helpers (round 68, a user's script): each row read as a batch leaf of its own."""

import re

import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

from gensbi_sharding.batch import check_batch_divisible, pad_for_mesh, shard_batch
from gensbi_sharding.host_input import host_to_global_array
from library_helpers import mesh  # noqa: F401  (mesh: a fixture, data 4 x model 2)


def _pasted(said: str, rows: list, mesh):
    """The call the refusal ends with, run as printed with ``rows`` (and the names it uses) bound."""
    call = re.search(r": ((?:shard_batch|host_to_global_array)\(.*?mesh(?:=mesh)?\)); if they are", said).group(1)
    return eval(call, {"np": np, "rows": rows, "mesh": mesh, "shard_batch": shard_batch,
                       "host_to_global_array": host_to_global_array})


@pytest.mark.parametrize("n", [8, 6])
def test_shard_batch_names_a_list_of_rows_and_the_stack_that_fixes_it(mesh, n):
    # Was: "batch leaf [0] (shape (3,)) has leading size 3, not divisible by the data-parallel size 4; use 4 rows",
    # though the user has 8 rows, as a list; now the list is named, and the call that stacks (and pads) it works
    rows = [np.full(3, i, np.float32) for i in range(n)]
    with pytest.raises(ValueError) as refused:
        shard_batch(rows, mesh)
    said = str(refused.value)
    assert said.startswith(f"batch is a list of {n} arrays of shape (3,), read as a pytree of {n} leaves, each a "
                           f"batch of its own (3 rows); if they are the {n} rows of one batch, stack them into one "
                           f"array of shape ({n}, 3)")
    placed = _pasted(said, rows, mesh)
    assert placed.shape == (8, 3) and placed.sharding.spec == P(("data",))
    np.testing.assert_array_equal(np.asarray(placed)[:n, 0], np.arange(n))
    np.testing.assert_array_equal(np.asarray(placed)[n:], 0)  # the padding, zeros
    assert (" and pad it to 8 rows, a multiple of the data-parallel size, 4" in said) == (n == 6)
    # the leaf-wise fix kept, for leaves of one batch that are no rows
    assert said.endswith(f"; if they are {n} leaves of one batch, each of 3 rows: use 4 rows (pad_for_mesh(3, mesh) "
                         "returns the rows to pad to and the real ones, (4, 3): mask the padding out of a mean)")


def test_host_to_global_array_names_a_list_of_rows_with_its_partition(mesh):
    # Was: "process 0 passes leading size 3 for leaf [0] (shape (3,)), not a multiple of 4 ...; pass a multiple of 4
    # per process"
    rows = [np.full(3, i, np.float32) for i in range(8)]
    with pytest.raises(ValueError) as refused:
        host_to_global_array(rows, partition="data", mesh=mesh)
    said = str(refused.value)
    assert said.startswith("host_arrays is a list of 8 arrays of shape (3,), read as a pytree of 8 leaves")
    assert said.endswith(": host_to_global_array(np.stack(rows), partition='data', mesh=mesh); if they are 8 leaves "
                         "of one batch, each of 3 rows: pass 4 rows per process")
    placed = _pasted(said, rows, mesh)
    assert placed.shape == (8, 3) and placed.sharding.spec == P(("data",))
    np.testing.assert_array_equal(np.asarray(placed)[:, 0], np.arange(8))


def test_check_batch_divisible_and_a_list_beside_other_leaves_name_the_list(mesh):
    rows = [np.zeros(3)] * 8
    # Was: "train batch size 3 is not divisible by the data-parallel size 4 ...; nearest valid batch sizes: 4"
    with pytest.raises(ValueError, match=r"^train batch is a list of 8 arrays of shape \(3,\), read as a pytree of 8 "
                                         r"leaves.*: np\.stack\(rows\); if they are 8 leaves of one batch, each of 3 "
                                         r"rows: use 4 rows \(pad_for_mesh\(3, mesh\) .*\)$"):
        check_batch_divisible(rows, mesh, "train")
    # Was: "batch leaves have differing leading sizes [3, ..., 3, 8]": each row's size taken for the batch's
    with pytest.raises(ValueError, match=r"^batch \['x'\] is a list of 8 arrays of shape \(3,\).*: np\.stack\(rows\) "
                                         r"in its place; if they are 8 leaves of one batch, every leaf of a batch "
                                         r"needs the same number of rows$"):
        shard_batch({"x": rows, "theta": np.zeros((8, 2))}, mesh)


def test_pad_for_mesh_given_a_list_of_rows_names_their_count(mesh):
    # Was: "... got a list of arrays; pad_for_mesh counts rows, it pads nothing: pass their leading size, 3"
    with pytest.raises(ValueError, match=r"got a list of 6 arrays of shape \(3,\); .*if they are the rows of one "
                                         r"batch, pass len\(rows\), 6 "):
        pad_for_mesh([np.zeros(3)] * 6, mesh)
    assert pad_for_mesh(len([np.zeros(3)] * 6), mesh) == (8, 6)


def test_a_batch_of_leaves_that_splits_is_placed_as_before(mesh):
    # (x, theta) of one shape is a batch of two leaves, not rows: placed, each split over its rows
    x, theta = np.zeros((8, 3)), np.ones((8, 3))
    placed = shard_batch((x, theta), mesh)
    assert [leaf.sharding.spec for leaf in placed] == [P(("data",))] * 2


def test_leaves_of_one_shape_that_do_not_split_keep_the_leaf_wise_fix(mesh):
    # (x, theta) of one shape reads as a list of rows too: the padding fix for leaves is kept beside the stacking one
    with pytest.raises(ValueError) as refused:
        shard_batch((np.zeros((6, 3)), np.zeros((6, 3))), mesh)
    assert str(refused.value).endswith("; if they are 2 leaves of one batch, each of 6 rows: use 4 or 8 rows "
                                       "(pad_for_mesh(6, mesh) returns the rows to pad to and the real ones, (8, 6): "
                                       "mask the padding out of a mean)")
    assert pad_for_mesh(6, mesh) == (8, 6)

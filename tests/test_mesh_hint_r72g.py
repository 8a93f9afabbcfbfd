"""``mesh_sizes.mesh_sizes_hint`` (the advice after ``mesh={data:D,model:M}``): NumPy sizes and huge sizes.

Found reviewing AUDIT72's one integer check (``units.is_int`` now takes NumPy integers here): ``{"data": np.int64(3),
"model": 2}`` passed the check, then ``'s' * (n != 1)`` (a NumPy bool) raised ``TypeError: can't multiply sequence by
non-int of type 'numpy.bool'``. And ``launch.py 'mesh={data:1000000,model:2}'`` printed a 14 MB refusal, every one of
2,000,000 device ids in ``mesh.devices=[0,1,...]`` (data=2000000000: a list too big to build, no refusal at all).
"""

import numpy as np
import pytest

from gensbi_sharding.harness.mesh_sizes import mesh_sizes_hint


@pytest.mark.parametrize("value", [{"data": 3, "model": 2}, {"data": 3}, {"data": 3, "model": None}])
def test_numpy_sizes_get_the_hint_python_sizes_get(value):
    as_numpy = {k: (None if v is None else np.int64(v)) for k, v in value.items()}
    assert mesh_sizes_hint(as_numpy) == mesh_sizes_hint(value) != ""


def test_a_small_mesh_still_lists_its_devices():
    assert mesh_sizes_hint({"data": 2, "model": 2}).endswith(
        "(devices.cpu_count=4, or mesh.devices=[0,1,2,3])")


@pytest.mark.parametrize("data", [1000, 1_000_000, 2_000_000_000])
def test_a_huge_mesh_is_named_without_listing_every_device(data):
    hint = mesh_sizes_hint({"data": data, "model": 2})
    assert len(hint) < 300
    assert hint.endswith(f"mesh.model_axis=2 on {2 * data} devices (devices.cpu_count={2 * data})")
    assert mesh_sizes_hint({"data": data}).endswith(f"(devices.cpu_count={data})")

"""``units.is_number`` and ``units.is_int`` agree on NumPy integers (AUDIT72's one integer and one number check).

AUDIT72 said fitting_values and memory_check "now accept NumPy integers": they test ``is_number(v, finite=False)``
first, which took ``int | float`` only, so ``np.int64(3)`` was an integer (``is_int``) but not a number: a NumPy size
was never halved by ``largest_fitting`` (offered as not fitting at all) nor compared by the memory check's
``_raised``. ``numbers.Real`` holds Python's and NumPy's ints and floats (not ``bool``, not ``np.bool_``).
"""

import numpy as np

from gensbi_sharding.harness.fitting_values import largest_fitting
from gensbi_sharding.harness.units import is_int, is_number


def test_every_integer_is_a_number():
    for value in (3, np.int64(3), np.uint8(1), np.int32(-2)):
        assert is_int(value) and is_number(value) and is_number(value, finite=False)
    assert [is_number(v) for v in (np.float32(2.5), np.float64(1.0))] == [True, True]
    assert [is_number(v) for v in (np.float32("nan"), np.float64("inf"), np.bool_(True), True, "3", None)] == [
        False] * 6
    assert is_number(np.float32("inf"), finite=False)


def test_a_numpy_size_is_halved_as_a_python_one():
    def size(values):
        return 100 * int(values["w"])

    assert largest_fitting(size, {"w": 3}, 150) == ({"w": 1}, None)
    assert largest_fitting(size, {"w": np.int64(3)}, 150) == ({"w": 1}, None)

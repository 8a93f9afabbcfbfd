"""CheckpointWriter's refusals name a bad value on one line (round 67's API fuzzer: ``every=``, ``keep=`` and a
``step`` given an array printed it whole, over 8 lines, inside the one-line refusal)."""

import numpy as np
import pytest

from gensbi_sharding.checkpoint import CheckpointWriter

BIG = np.ones((8, 4))


@pytest.mark.parametrize("setting", ["every", "keep"])
def test_a_writer_setting_given_an_array_is_named_on_one_line(tmp_path, setting):
    with pytest.raises(ValueError, match=rf"^{setting} must be an integer") as refused:
        CheckpointWriter(tmp_path / "c", **{setting: BIG})
    assert len(str(refused.value).splitlines()) == 1 and len(str(refused.value)) < 300
    assert not (tmp_path / "c").exists()  # refused before any folder


@pytest.mark.parametrize("call", ["due", "save"])
def test_a_step_given_an_array_is_named_on_one_line(tmp_path, call):
    writer = CheckpointWriter(tmp_path / "c", every=1)
    try:
        with pytest.raises(ValueError, match=r"^step=array\(.* must be an integer >= 0") as refused:
            writer.due(BIG) if call == "due" else writer.save(BIG, {}, None)
    finally:
        writer.close()
    assert len(str(refused.value).splitlines()) == 1 and len(str(refused.value)) < 300
    assert writer.steps() == []

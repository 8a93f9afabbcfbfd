"""The commands sample.py advises for an observation file it cannot take never overwrite a file that exists.

Was: ``obs.npy`` holding 3 rows advised ``np.save('obs' + f'_{i}.npy', row) ...``, which, pasted, overwrote the
user's own ``obs_1.npy`` (another observation) without a word; a text file's conversion command overwrote an earlier
conversion's ``<stem>_x_o.npy`` alike.
"""

import numpy as np
import pytest

from gensbi_sharding.harness.observation_input import check_observation, load_observation


def _advice(call, *args, **kwargs) -> str:
    with pytest.raises(ValueError) as refused:
        call(*args, **kwargs)
    return str(refused.value)


def test_splitting_rows_never_names_a_file_that_exists(tmp_path):
    np.save(source := tmp_path / "obs.npy", np.arange(6.0).reshape(3, 2))
    np.save(tmp_path / "obs_1.npy", np.array([9.0, 9.0]))  # the user's own
    said = _advice(check_observation, source, dim_x=2, x_transform="none", task="two_moons", source=source)
    assert f"np.save({str(tmp_path / 'obs_x_o')!r} + f'_{{i}}.npy', row)" in said
    assert said.endswith("then run sample.py on each obs_x_o_<i>.npy")
    (tmp_path / "obs_x_o_0.npy").symlink_to(tmp_path / "nowhere.npy")  # a link to no file counts as taken
    said = _advice(check_observation, source, dim_x=2, x_transform="none", task="two_moons", source=source)
    assert f"np.save({str(tmp_path / 'obs_x_o_2')!r} + f'_{{i}}.npy', row)" in said


def test_rows_split_under_the_plain_names_where_none_exists(tmp_path):
    np.save(source := tmp_path / "obs.npy", np.arange(4.0).reshape(2, 2))
    said = _advice(check_observation, source, dim_x=2, x_transform="none", task="two_moons", source=source)
    assert f"np.save({str(tmp_path / 'obs')!r} + f'_{{i}}.npy', row)" in said


def test_converting_a_text_file_never_names_a_file_that_exists(tmp_path):
    (source := tmp_path / "o.v2.csv").write_text("0.1 0.2\n")
    assert f"np.save({str(tmp_path / 'o.v2_x_o.npy')!r}, np.loadtxt(" in _advice(load_observation, source)
    np.save(tmp_path / "o.v2_x_o.npy", np.zeros(2))  # an earlier conversion (or the user's own file)
    said = _advice(load_observation, source)
    assert f"np.save({str(tmp_path / 'o.v2_x_o_2.npy')!r}, np.loadtxt(" in said and said.endswith("o.v2_x_o_2.npy")

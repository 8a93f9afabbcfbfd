"""sample.py's observation file holding no numbers: no conversion command that fails (session 69, BREAK69A)."""

import pytest

from gensbi_sharding.harness.observation_input import load_observation


@pytest.mark.parametrize("name, data, what", [
    ("x_o.npy", b"", "is empty (0 bytes)"),  # was: "convert it once: ... np.loadtxt('x_o.npy')": saved shape (0,)
    ("x_o.csv", b"x1,x2\n", "is neither a .npy file nor text holding a row of numbers"),  # column names alone
    ("x_o.pt", bytes(range(1, 256)) * 4, "is neither a .npy file nor text holding a row of numbers"),  # binary
])
def test_a_file_without_numbers_gets_no_loadtxt_command(tmp_path, name, data, what):
    (tmp_path / name).write_bytes(data)
    with pytest.raises(ValueError) as refused:
        load_observation(tmp_path / name)
    saved = tmp_path / "x_o_x_o.npy"
    assert str(refused.value) == (f"observation file {tmp_path / name} {what}; save your observation with "
                                  f"numpy.save('{saved}', x_o) and pass {saved}")
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]  # nothing written


def test_a_text_file_with_numbers_still_gets_its_command(tmp_path):
    (tmp_path / "x.csv").write_text("x1,x2\n0.5,-0.25\n")
    with pytest.raises(ValueError, match=r"np.loadtxt\('.*x.csv', delimiter=',', skiprows=1\)\)"):
        load_observation(tmp_path / "x.csv")


def test_an_npz_archive_holding_no_array_gets_no_command_that_fails(tmp_path):
    # Was: "(its arrays: none) ... np.load('x_o.npz')['x_o']", a KeyError when pasted.
    import numpy as np

    np.savez(tmp_path / "x_o.npz")
    with pytest.raises(ValueError) as refused:
        load_observation(tmp_path / "x_o.npz")
    saved = tmp_path / "x_o_x_o.npy"
    assert str(refused.value) == (f"observation file {tmp_path / 'x_o.npz'} is a .npz archive holding no array; save "
                                  f"your observation with numpy.save('{saved}', x_o) and pass {saved}")

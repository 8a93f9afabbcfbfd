"""A file of several observations in a folder whose name holds a quote or a $ (``John's $data``): the command the
refusal names, pasted into a shell, writes one file per row (was: the path pasted in single quotes inside the code,
which the quote ended: a SyntaxError, and a $ the shell expanded inside the double quotes)."""

import shlex

import numpy as np
import pytest


def test_the_split_command_of_a_quoted_folder_writes_one_file_per_row(tmp_path, monkeypatch):
    from gensbi_sharding.harness.observation_input import check_observation, load_observation

    folder = tmp_path / "John's $data"
    folder.mkdir()
    path = folder / "many.npy"
    np.save(path, np.array([[0.1, -0.2], [0.3, 0.4]]))
    with pytest.raises(ValueError) as refused:
        check_observation(load_observation(path), dim_x=2, x_transform="none", task="two_moons", source=path)
    message = str(refused.value)
    command = message.split("save one file per row: python -c ", 1)[1].rsplit(", then run sample.py on each ", 1)[0]
    (code,) = shlex.split(command)  # one shell word, read as a POSIX shell reads it ($ left as it is: quoted)
    monkeypatch.chdir(tmp_path)  # the files land beside the observation file, wherever the command runs
    exec(code)
    assert [np.load(folder / f"many_{i}.npy").tolist() for i in range(2)] == [[0.1, -0.2], [0.3, 0.4]]
    assert message.endswith(", then run sample.py on each many_<i>.npy")

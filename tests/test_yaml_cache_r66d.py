"""A config file edited to the same size and modification time is read again by the yes/no-word and null checks (r66).

Was: each kept a file's parse by its path, mtime and size (``functools.lru_cache``), so a file rewritten to the same
size within one clock tick, or written back with its old time (``touch -r``, ``cp -p``, ``rsync -t``), was judged by
its old text in the same process: a ``plot: yes`` fixed by hand still refused, a ``null`` put in passed.
"""

import os

from gensbi_sharding.harness.hydra_nulls import hydra_null_problem
from gensbi_sharding.harness.yaml_words import yes_no_words


def _rewrite_same_size_and_time(path, old, new):
    assert len(new.encode()) == len(old.encode())  # same size: only the content tells the versions apart
    stat = path.stat()
    path.write_text(new)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert (path.stat().st_mtime_ns, path.stat().st_size) == (stat.st_mtime_ns, stat.st_size)


def test_a_yes_no_word_edited_to_the_same_size_and_time_is_read_again(tmp_path):
    path = tmp_path / "my_eval.yaml"
    path.write_text("plot: yes\n")
    assert yes_no_words(path) == ((("plot",), "yes", 1, True),)
    _rewrite_same_size_and_time(path, "plot: yes\n", "plot: 'a'\n")
    assert yes_no_words(path) == ()  # was: ((('plot',), 'yes', 1, True),), the old text's
    _rewrite_same_size_and_time(path, "plot: 'a'\n", "plot: off\n")
    assert yes_no_words(path) == ((("plot",), "off", 1, True),)


def test_a_hydra_null_edited_to_the_same_size_and_time_is_read_again(tmp_path):
    path = tmp_path / "mine.yaml"
    head = "hydra:\n  job:\n    env_set:\n"
    unset, null = f"{head}      MY_FLAG: 'ab'\n", f"{head}      MY_FLAG: null\n"
    path.write_text(unset)
    assert hydra_null_problem(path, ()) is None
    _rewrite_same_size_and_time(path, unset, null)
    assert hydra_null_problem(path, ()) == (
        f"{path}, line 4: MY_FLAG: null (hydra.job.env_set.MY_FLAG) is YAML's null, which Hydra's "
        "hydra.job.env_set.MY_FLAG cannot take; write MY_FLAG: '' there for an empty value, or delete that line to "
        "leave it unset")  # was: None, the old text's


def test_a_group_file_of_ones_own_edited_to_the_same_size_and_time_is_read_again(tmp_path):
    from gensbi_sharding.harness.config_files import config_file_problem
    from gensbi_sharding.harness.override_grammar import parse

    path = tmp_path / "my_conf" / "train" / "mine.yaml"
    path.parent.mkdir(parents=True)
    path.write_text("speed: 5\n")
    command = parse([f"hydra.searchpath=[file://{tmp_path / 'my_conf'}]", "train=mine"])
    assert config_file_problem(command).startswith(f"{path} sets speed, which is not a setting of train; ")
    _rewrite_same_size_and_time(path, "speed: 5\n", "steps: 5\n")
    assert config_file_problem(command) is None  # was: the refusal of speed, no longer in the file

"""A list setting of Hydra's given an entry it cannot use: refused in one line naming it (key_paths.hydra_list_problem).

Was (found by round 67's fuzz): ``hydra.searchpath=[1,[2]]`` (a number, a list, a dict, null, a yes/no in it) passed
every check, then Hydra's "hydra.searchpath must be a list of strings. Got: [1, [2]]";
``hydra.job.config.override_dirname.exclude_keys=[1,[2]]`` ran with a list as a key's name.
"""

import pytest
from hydra import compose, initialize_config_dir

from gensbi_sharding.harness.command_checks import command_problem
from gensbi_sharding.harness.groups import CONF

FOLDERS = "hydra.searchpath takes a list of folders (a path, file://<path>) or packages (pkg://<name>)"


def _compose(arg):
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose("config", overrides=[arg], return_hydra_config=True)


@pytest.mark.parametrize("arg, entry", [("hydra.searchpath=[1,[2]]", "1"), ("hydra.searchpath=[{a:1}]", "{a:1}"),
                                        ("hydra.searchpath=[null]", "null"), ("hydra.searchpath=[true]", "true"),
                                        ("hydra.searchpath=[pkg://hydra.conf,2.5]", "2.5"),
                                        ("hydra.searchpath=[pkg://hydra.conf,[a]]", "[a]")])
def test_a_search_path_entry_that_is_no_text_is_named(arg, entry):
    assert command_problem([arg]) == f"{arg}: {FOLDERS}, and {entry} is not one; give each entry as one word, the " \
                                     "folder's path for a folder"
    with pytest.raises(Exception, match="must be a list of strings"):  # what Hydra said of it
        _compose(arg)


@pytest.mark.parametrize("arg, entry", [("hydra.job.config.override_dirname.exclude_keys=[1,[2]]", "[2]"),
                                        ("hydra.job.env_copy=[{a:1}]", "{a:1}")])
def test_a_list_or_dict_in_a_list_of_text_is_named(arg, entry):
    key = arg.split("=", 1)[0]
    assert command_problem([arg]) == f"{arg}: {key} takes a list of text entries, and {entry} is not one; give each " \
                                     "entry as one word"


@pytest.mark.parametrize("arg", ["hydra.searchpath=[]", "hydra.searchpath=[pkg://hydra.conf]",
                                 "hydra.job.config.override_dirname.exclude_keys=[seed,1]"])
def test_entries_hydra_uses_pass(arg):
    assert command_problem([arg]) is None
    _compose(arg)

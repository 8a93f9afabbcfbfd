"""--config-path of no folder or of no primary config, and an empty --config-dir/--config-name: one line each.

Was (found by round 67's fuzz): ``-cp nope`` passed every check, then Hydra's "Primary config directory not found";
``-cp /tmp`` and ``-cp ''`` (launch.py's own folder) its "Cannot find primary config 'config'" and its search path;
``--config-dir ''`` was refused as "<the launch folder> is no folder", ``--config-name ''`` as "no .yaml in conf/".
"""

import pytest

from gensbi_sharding.harness.command_checks import command_problem
from gensbi_sharding.harness.groups import CONF

HOME = CONF.parent
FIX = f"give the folder that holds your config.yaml, or leave --config-path out (launch.py reads its own {CONF})"


def test_a_config_path_of_no_folder_is_named_from_launch_pys_folder():
    assert command_problem(["-cp", "nope"]) == (f"--config-path nope: Hydra reads it from launch.py's folder ({HOME}), "
                                                f"and {HOME / 'nope'} is no folder; {FIX}")


def test_a_config_path_of_no_primary_config_is_named(tmp_path):
    assert command_problem(["-cp", str(tmp_path)]) == (f"--config-path {tmp_path}: Hydra reads it from launch.py's "
                                                       f"folder ({HOME}), and {tmp_path} holds no config.yaml; {FIX}")
    assert command_problem(["-cp", ""]) == (f"--config-path '': Hydra reads it from launch.py's folder ({HOME}), and "
                                            f"{HOME} holds no config.yaml; {FIX}")
    (tmp_path / "config.yaml").write_text("seed: 0\n")
    assert command_problem(["-cp", str(tmp_path)]) is None  # it holds one now


def test_a_config_path_that_holds_the_config_passes():
    assert command_problem(["-cp", "conf"]) is None
    assert command_problem([f"--config-path={CONF}"]) is None
    assert command_problem([]) is None  # left out, as advised


@pytest.mark.parametrize("args", [["-cd", ""], ["--config-dir="]])
def test_an_empty_config_dir_is_named_as_empty(args):
    assert command_problem(args) == ("--config-dir '': no folder named; give the folder that holds your config files "
                                     "(relative to where you launch), or leave --config-dir out")


@pytest.mark.parametrize("args", [["-cn", ""], ["--config-name="]])
def test_an_empty_config_name_is_named_as_empty(args):
    assert command_problem(args) == ("--config-name '': no config named; its configs: config; leave --config-name out "
                                     "(launch.py's is config)")


# Found by the same fuzz with the real launch.py: -cp pkg://hydra.conf was left to Hydra, whose "Cannot find primary
# config 'config'" and search path came in several lines.
def test_a_config_path_package_without_the_config_or_not_installed_is_named():
    assert command_problem(["-cp", "pkg://hydra.conf"]) == f"--config-path pkg://hydra.conf: the package hydra.conf " \
                                                          f"holds no config.yaml; {FIX}"
    assert command_problem(["-cp", "pkg://r67_no_such_pkg"]) == ("--config-path pkg://r67_no_such_pkg: the package "
                                                                 f"r67_no_such_pkg is not installed here; {FIX}")
    assert command_problem(["-cp", "pkg://hydra.conf", "-cn", "hydra/help/default"]) is None  # a config it holds

"""The parsed config files a process keeps (harness.config_loads): each caller gets a config of its own, an edited
file or one of the user's own is read again, a broken one raises each time."""

import os

import pytest
from omegaconf import OmegaConf

from gensbi_sharding.harness.config_loads import keep_parsed_config_files
from gensbi_sharding.harness.groups import CONF

ROOT = CONF.parent


def test_a_kept_conf_file_is_a_config_of_its_own_for_each_caller():
    keep_parsed_config_files()  # idempotent: the conftest installed it already
    first = OmegaConf.load(CONF / "train" / "default.yaml")
    first.steps = -12345
    with open(CONF / "train" / "default.yaml", encoding="utf-8") as stream:  # as Hydra reads it: a named stream
        again = OmegaConf.load(stream)
    assert again.steps != -12345 and again == OmegaConf.load(str(CONF / "train" / "default.yaml"))
    assert not OmegaConf.is_readonly(again) and OmegaConf.get_type(again) is dict


def test_a_file_outside_conf_is_read_again_after_each_edit(tmp_path):
    keep_parsed_config_files()
    mine = tmp_path / "my_rule.yaml"
    mine.write_text("name: a\n")
    assert OmegaConf.load(mine).name == "a"
    stat = os.stat(mine)
    mine.write_text("name: b\n")  # the same size, and the same modification time: no key could tell it apart
    os.utime(mine, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert OmegaConf.load(mine).name == "b"


def test_a_broken_file_raises_at_every_load(tmp_path):
    keep_parsed_config_files()
    broken = tmp_path / "bad.yaml"
    broken.write_text("a:\n\tb: 1\n")
    for _ in range(2):
        with pytest.raises(Exception, match="cannot start any token"):
            OmegaConf.load(broken)


@pytest.mark.slow
def test_launchs_checks_parse_each_conf_file_once_a_process():
    # Was: each of a refused launch.py's compositions (the command's checks, Hydra's mode, the run's) parsed every
    # file of conf/ again; a fresh interpreter, as launch.py's, without the tests' conftest: a refused command
    # composed conf/train/default.yaml, so loading it twice after parses it no more
    import subprocess
    import sys

    script = ("import runpy, sys, yaml; parsed = []; load = yaml.load\n"
              "yaml.load = lambda *a, **k: parsed.append(1) or load(*a, **k)\n"
              f"sys.argv = [{str(ROOT / 'launch.py')!r}, 'experiment=quick', 'train.steps=abc']\n"
              "try:\n"
              f"    runpy.run_path({str(ROOT / 'launch.py')!r}, run_name='__main__')\n"
              "except SystemExit:\n"
              "    pass\n"
              "from omegaconf import OmegaConf\n"
              "before = len(parsed)\n"
              f"first, again = (OmegaConf.load({str(CONF / 'train' / 'default.yaml')!r}) for _ in range(2))\n"
              "print(len(parsed) - before, first == again, first is not again)")
    ran = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                         env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert ran.stdout.split() == ["0", "True", "True"], ran.stderr


@pytest.mark.slow
def test_importing_the_harness_leaves_omegaconf_and_hydra_as_they_are():
    # Was: importing command_checks (as run(cfg)'s callers do, a notebook's) replaced OmegaConf.load and
    # ConfigStore.__deepcopy__ for the whole process: launch.py, the program, sets them now
    import subprocess
    import sys

    script = ("from omegaconf import OmegaConf; from hydra.core.config_store import ConfigStore; import copy\n"
              "load = OmegaConf.load\n"
              "import gensbi_sharding.harness.command_checks, gensbi_sharding.harness.run\n"
              "print(OmegaConf.load is load, copy.deepcopy(ConfigStore.instance()) is not ConfigStore.instance())")
    ran = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                         env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert ran.stdout.split() == ["True", "True"], ran.stderr


def test_a_schemas_structured_config_is_built_once_to_judge_many_values(monkeypatch):
    # Was: each value a check judged against a schema (config_files' check of every conf/ group file, the override
    # checks) built the schema's structured config again: ~1 ms each, ~60 ms of a launch.py's checks
    from gensbi_sharding.harness.config import TrainConfig, assignment_reason

    built = []
    structured = OmegaConf.structured
    monkeypatch.setattr(OmegaConf, "structured", lambda *a, **k: built.append(a[0]) or structured(*a, **k))
    reasons = [assignment_reason(TrainConfig, "steps", value) for value in (-987_651, "abc-987652", 987_653.5)]
    assert reasons == [None, "Value 'abc-987652' of type 'str' could not be converted to Integer",
                       "Value '987653.5' of type 'float' could not be converted to Integer"]
    assert built.count(TrainConfig) <= 1, built
    assert OmegaConf.structured(TrainConfig).steps != -987_651  # the judged values landed in no shared config


@pytest.mark.slow
def test_a_conf_file_edited_to_the_same_size_and_time_is_read_again(tmp_path):
    # Was: known by its modification time and size, so a notebook's second run(cfg) after an edit of conf/ that kept
    # both (written back with its old time: touch -r, cp -p, rsync -t; or within one clock tick) composed the old
    # values. A fresh interpreter whose conf/ is tmp_path, since this process's cache reads the project's own.
    import subprocess
    import sys

    mine = tmp_path / "train" / "default.yaml"
    mine.parent.mkdir()
    script = ("import os, pathlib\n"
              "from omegaconf import OmegaConf\n"
              "from gensbi_sharding.harness import groups\n"
              f"groups.CONF = pathlib.Path({str(tmp_path)!r})\n"
              "from gensbi_sharding.harness.config_loads import keep_parsed_config_files\n"
              "keep_parsed_config_files()\n"
              f"mine = pathlib.Path({str(mine)!r})\n"
              "mine.write_text('steps: 3000\\n'); seen = [OmegaConf.load(mine).steps]; stat = os.stat(mine)\n"
              "mine.write_text('steps: 4000\\n'); os.utime(mine, ns=(stat.st_atime_ns, stat.st_mtime_ns))\n"
              "with open(mine, encoding='utf-8') as stream:\n"
              "    seen.append(OmegaConf.load(stream).steps)\n"
              "print(*seen, OmegaConf.load(mine).steps)")
    ran = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                         env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert ran.stdout.split() == ["3000", "4000", "4000"], ran.stderr

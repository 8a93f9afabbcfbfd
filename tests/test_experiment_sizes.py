"""experiment=quick with a model of one's own that has no conf/experiment_model/quick/<model>.yaml is refused."""

from dataclasses import dataclass

import pytest
from hydra.core.config_store import ConfigStore

from gensbi_sharding.harness.command_checks import command_problem
from gensbi_sharding.harness.config import ModelConfig, register_configs


@dataclass
class GatedConfig(ModelConfig):
    name: str = "gated_t"
    hidden: int = 64


@pytest.fixture
def own_conf(tmp_path):
    """A search path folder holding conf/model/gated_t.yaml (its schema stored), as a new user's model has it."""
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "gated_t.yaml").write_text("defaults:\n  - /gated_t_schema\n  - _self_\n")
    register_configs()
    ConfigStore.instance().store(name="gated_t_schema", node=GatedConfig)
    yield tmp_path
    ConfigStore.instance().repo.pop("gated_t_schema.yaml")


def test_a_model_without_its_quick_sizes_is_refused_naming_the_file_to_write(own_conf):
    # Was: experiment=quick model=gated_t composed with no word said, and trained the model's full default sizes
    # (conf/experiment_model/quick/<model>.yaml is an optional default of conf/config.yaml).
    search = f"hydra.searchpath=[file://{own_conf}]"
    wanted = own_conf / "experiment_model" / "quick" / "gated_t.yaml"  # beside the model's own file
    assert command_problem([search, "experiment=quick", "model=gated_t"]) == (
        f"experiment=quick model=gated_t: no {wanted} gives model=gated_t the sizes experiment=quick trains it at, so "
        "the run would train model=gated_t's full default sizes; write that file with its smallest sensible settings "
        "(its settings: hidden), one 'key: value' a line, as conf/experiment_model/quick/mlp.yaml does for model=mlp "
        "(docs/gensbi_models.md: A model of your own in the harness)")
    # in a sweep too, and whichever order the models come in
    assert "experiment=quick model=gated_t: no " in command_problem(["-m", search, "experiment=quick",
                                                                    "model=mlp,gated_t"])
    assert command_problem([search, "model=gated_t"]) is None  # no experiment: its own sizes are asked for
    assert command_problem([search, "experiment=quick", "model=mlp"]) is None  # the harness's own have theirs
    (own_conf / "model" / "small.yaml").write_text("defaults:\n  - /mlp_schema\n  - _self_\nname: mlp\nwidth: 8\n")
    assert command_problem([search, "experiment=quick", "model=small"]) is None  # a preset of mlp sets its own sizes
    wanted.parent.mkdir(parents=True)
    wanted.write_text("hidden: 8\n")  # the fix, as named
    assert command_problem([search, "experiment=quick", "model=gated_t"]) is None


def test_a_model_whose_quick_sizes_a_package_search_path_may_hold_is_not_refused(own_conf):
    # Was refused, naming conf/experiment_model/quick/gated_t.yaml to write, though Hydra reads the package's
    # experiment_model/quick/gated_t.yaml: this check reads file:// folders only, so a pkg:// one may hold the file.
    assert command_problem(["hydra.searchpath=[pkg://my_models.conf]", "experiment=quick", "model=gated_t"]) is None
    # a file:// folder without the file is still refused (the test above, in a search path of its own)
    assert "experiment=quick model=gated_t: no " in command_problem([f"hydra.searchpath=[file://{own_conf}]",
                                                                    "experiment=quick", "model=gated_t"])

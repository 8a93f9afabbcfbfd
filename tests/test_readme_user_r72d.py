"""README statements a new user leaned on in session 72 (a fresh clone, README followed top to bottom), each checked
against the config files it describes (read as text: no process, no JAX)."""

import re
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]


def _readme():
    return " ".join((REPO / "README.md").read_text().split())


def _defaults():
    """conf/config.yaml's defaults list as {group: option}."""
    entries = yaml.safe_load((REPO / "conf" / "config.yaml").read_text())["defaults"]
    return {k: v for e in entries if isinstance(e, dict) for k, v in e.items()}


def test_first_harness_command_names_the_default_it_runs_and_that_it_is_a_full_run():
    # Read in a fresh clone (2026-12-07): `python launch.py  # the embedded default: mesh (8, 1), rule replicated`
    # left a user guessing what "embedded" meant and which task and model it trains, and gave no time, so a user
    # trying the commands in order waited minutes on the first one.
    defaults = _defaults()
    model_axis = yaml.safe_load((REPO / "conf" / "mesh" / f"{defaults['mesh']}.yaml").read_text())["model_axis"]
    block = (REPO / "README.md").read_text().split("## The harness")[1].split("```bash\n")[1]
    first = " ".join(re.sub(r"\n\s+# ", " ", block.split("\npython launch.py mesh=auto")[0]).split())
    assert first.startswith("python launch.py #"), first
    assert f"{defaults['model']} on {defaults['data']}" in first, (first, defaults)
    assert f"mesh ({8 // model_axis}, {model_axis})" in first and f"rule {defaults['rule']}" in first, first
    # "as long as make run's": make run changes only the mesh and rule, not the steps, data or model.
    make_args = re.search(r"^ARGS \?= (.*)$", (REPO / "Makefile").read_text(), re.M)[1].split()
    assert sorted(a.split("=")[0] for a in make_args) == ["mesh", "rule"], make_args
    assert "a full run, as long as make run's" in first, first


def test_overrides_paragraph_budget_example_is_the_configs_arithmetic():
    # Adding `data.num_simulations=1000` to try a command quickly was refused ("the global batch size 1024 must be at
    # most 900 (the 900 training pairs)"); the README's list of refusals did not name that one. Its numbers must stay
    # those of the default task's config.
    data = yaml.safe_load((REPO / "conf" / "data" / f"{_defaults()['data']}.yaml").read_text())
    said = re.search(r"`data\.num_simulations=(\d+)` keeps (\d+) of them, fewer than the default batch of ([\d,]+)\)",
                     _readme())
    assert said, "README's Overrides paragraph no longer names the batch larger than the training pairs"
    sims, kept, batch = int(said[1]), int(said[2]), int(said[3].replace(",", ""))
    assert kept == round(sims * (1 - data["val_fraction"])), (kept, sims, data["val_fraction"])
    assert batch == data["batch_size"] and batch > kept, (batch, data["batch_size"])


def test_quick_c2st_range_names_the_task_it_was_read_on():
    # `experiment=quick data=gaussian_linear` read C2ST 0.848, outside the README's "0.95-0.99" stated for any quick
    # run; the range is two_moons', the task experiment=quick trains unless told otherwise.
    quick = yaml.safe_load((REPO / "conf" / "experiment" / "quick.yaml").read_text())
    assert "name" not in quick.get("data", {}), quick["data"]
    said = re.search(r"its 20 steps read a C2ST of 0\.95-0\.99 on (\w+),", _readme())
    assert said, "README no longer names the task of experiment=quick's C2ST range"
    assert said[1] == _defaults()["data"] == "two_moons", said[1]

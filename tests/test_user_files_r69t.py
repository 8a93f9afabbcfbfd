"""The suite passes in a checkout holding the files the README tells a user to add there.

Was (round 69's new-user walkthrough): following the README, then ``make test-fast``, failed 13 tests, with nothing
pointing at the user's files: conf/rule/my_rule.yaml ("Writing your own rule") made 12 fail (pinned rule lists, the
"# Use this when" check, YAML-error tests whose own my_rule.yaml it shadowed), runs/a (the checkpoint example) one.
The walkthrough ran make test-fast only; the README's file fails 9 more here, a user's edit of it (its own table) 5
more, and docs/gensbi_models.md's conf/data/noisy_gauss.yaml one.
"""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text()

# The tests the README's files broke: whole functions, so every parameter of them runs in the clone.
NODES = ["tests/test_group_compose_parens_r68l.py::test_a_choice_of_no_option_is_said_in_one_parenthesis",
         "tests/test_group_compose_r67h.py::test_an_interpolation_that_resolves_to_no_option_names_what_it_resolves_to",
         "tests/test_override_types.py::test_an_override_hydra_would_refuse_is_named_with_the_fix",
         "tests/test_rules.py::test_every_preset_says_when_to_use_it",
         "tests/test_rules.py::test_a_rule_file_yaml_cannot_read_is_named_with_its_line_and_fix",
         "tests/test_rules.py::test_a_rule_file_written_as_a_list_is_named_with_the_fix",
         "tests/test_override_grammar.py::test_printed_commands_give_hydra_the_folder_back",
         "tests/test_config.py::test_every_option_on_disk_is_covered",
         "tests/test_setting_checks.py::test_a_rule_file_beside_a_launch_from_another_folder_is_named_with_the_search_"
         "path_to_add",
         "tests/test_setting_checks.py::test_a_refused_rule_file_leaves_no_folder",
         "tests/test_setting_checks.py::test_an_empty_name_is_said_as_typed_with_no_steps_to_add_it",
         "tests/test_setting_checks.py::test_an_unknown_name_names_the_override_that_fixes_it",
         "tests/test_setting_checks.py::test_a_search_path_without_file_scheme_is_checked_as_hydra_reads_it",
         "tests/test_name_case_r64break.py::test_a_group_option_in_another_case_is_offered_in_its_own"]
# ... and those the user's own edit of that file broke besides (the README: "Add yours as a file").
EDITED_NODES = [
    "tests/test_config.py::test_a_rule_files_table_changed_on_the_command_line_is_reported_as_overridden",
    "tests/test_setting_checks.py::test_a_sweep_over_an_axis_a_rule_file_leaves_out_names_the_sweeps_fix_not_each_jobs",
    "tests/test_setting_checks.py::test_every_axis_a_rule_file_leaves_out_is_named_in_one_run",
    "tests/test_sweep_check.py::test_a_refused_jobs_fix_that_prefixes_a_swept_override_names_the_sweeps_values"]


def readme_rule_file():
    """The README's own rule file: its path and its lines, as "Writing your own rule" words them."""
    found = re.search(r"`(conf/rule/\w+\.yaml)`\s+holding\s+((?:`[^`]+`(?:,\s+|\s+and\s+)?)+)", README)
    assert found, "README's 'Writing your own rule' no longer names conf/rule/<name>.yaml holding `key: value`s"
    return found[1], re.findall(r"`([^`]+)`", found[2])


def test_readme_names_the_files_this_test_adds():
    path, lines = readme_rule_file()
    assert (path, lines) == ("conf/rule/my_rule.yaml", ["name: my_rule", "embed: data", "mlp: model"])
    assert sorted(set(re.findall(r"hydra\.run\.dir=(runs/[\w.-]+)", README))) == [
        "runs/a", "runs/b", "runs/q", "runs/s", "runs/s-steps40"]


def run(args, cwd, timeout):
    return subprocess.run([sys.executable, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow
def test_the_tests_the_readmes_files_broke_pass_in_a_clone_holding_them(tmp_path):
    # ~65 s on 2 shared cores: a tiny run (runs/a must be a real one) and two pytests of the affected tests.
    clone = tmp_path / "clone"
    cloned = subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], capture_output=True, text=True,
                            timeout=120)
    if cloned.returncode and not (REPO / ".git").exists():
        pytest.skip("not a git checkout: nothing to clone")
    assert cloned.returncode == 0, cloned.stderr
    # The clone's package, not the one installed from REPO: python -c and -m put the cwd first on sys.path.
    origin = run(["-c", "import importlib.util as u; print(u.find_spec('gensbi_sharding').origin)"], clone, 60)
    assert Path(origin.stdout.strip()).resolve() == (clone / "gensbi_sharding" / "__init__.py").resolve()

    path, lines = readme_rule_file()
    (clone / path).write_text("".join(f"{line}\n" for line in lines))
    made = run(["launch.py", "experiment=quick", "train.steps=8", "data.num_simulations=768", "eval.enabled=false",
                "hydra.run.dir=runs/a"], clone, 300)
    assert made.returncode == 0 and (clone / "runs" / "a" / "metrics.json").is_file(), made.stderr[-2000:]
    for folder in sorted(set(re.findall(r"hydra\.run\.dir=(runs/[\w.-]+)", README)) - {"runs/a"}):
        shutil.copytree(clone / "runs" / "a", clone / folder)  # the checkpoint section's other folders
    # docs/gensbi_models.md's data set of one's own: its conf/data/noisy_gauss.yaml, with the lines the page names
    page = " ".join((REPO / "docs" / "gensbi_models.md").read_text().split())
    held = re.search(r"with `(conf/data/\w+\.yaml)` holding (.*?) \(", page)
    assert held, "gensbi_models.md no longer names conf/data/<name>.yaml holding `key: value`s"
    (clone / held[1]).write_text("".join(f"{line}\n" for line in re.findall(r"`(\w+: \w+)`", held[2])))
    (clone / "outputs").mkdir()
    np.save(clone / "outputs" / "x_o.npy", np.array([0.1, -0.2]))  # "Your own observation"

    def passed(nodes):
        tested = run(["-m", "pytest", "-q", "-p", "no:cacheprovider", *nodes], clone, 400)
        assert tested.returncode == 0 and " failed" not in tested.stdout, tested.stdout[-4000:]
        return int(re.search(r"(\d+) passed", tested.stdout)[1])

    assert passed(NODES) >= 71  # 71 at round 69, of which 23 failed before
    (clone / path).write_text("# my own rule\nname: my_rule\nembed: model\nmlp: data\nheads: model\n")  # edited
    assert passed(NODES + EDITED_NODES) >= 71 + 5  # the 5 more all failed before

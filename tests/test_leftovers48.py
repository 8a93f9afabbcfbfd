"""Round 48's leftovers: harness faults noticed in earlier rounds and left alone, each fixed as a kind.

Each test names what was typed, what happened, and checks what happens now.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gensbi_sharding.harness.command_checks import command_problem

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("text, said", [
    ("name: my_rule\nembd: data\n", "rule.embd is not a logical axis; valid keys: embed, mlp, heads, vocab, in, out "
                                    "(and name); did you mean rule.embed?"),
    ("name: my_rule\nembed: 3\n", "rule.embed=3 must be a mesh axis name, a list of them, or null; e.g. "
                                  "rule.embed=data, or rule.embed=null (unsplit)"),
    ("name: my_rule\nembed: [data, data]\n", "rule.embed=[data,data] names a mesh axis twice; list each mesh axis "
                                             "once: set rule.embed=data"),
    ("name: my_rule\nembed: dta\n", "rule.embed=dta (rule my_rule) names mesh axis dta, which the mesh lacks; valid "
                                    "values: data, model or null; set rule.embed=data"),
])
def test_a_rule_files_table_is_refused_with_the_command_lines_checks(tmp_path, text, said):
    # Was: `python launch.py rule=my_rule` with a key typo in conf/rule/my_rule.yaml passed launch.py's checks of the
    # command line; the run refused the table after Hydra had made its folder, which kept error.txt and metrics.json.
    (tmp_path / "rule").mkdir()
    (tmp_path / "rule" / "my_rule.yaml").write_text(text)
    searched = f"hydra.searchpath=[file://{tmp_path}]"
    written = f" (written in {tmp_path / 'rule' / 'my_rule.yaml'}: fix it there)"
    assert command_problem([searched, "rule=my_rule"]) == said + written
    assert command_problem([searched, "experiment=quick", "dry_run=true", "rule=my_rule"]) == said + written
    assert command_problem(["-m", searched, "rule=fsdp,my_rule"]) == said + written
    assert command_problem([searched, "rule=fsdp"]) is None  # a file this command never reads stops nothing
    if "dta" in text:  # no mesh: no mesh axis to lack (as the run takes it)
        assert command_problem([searched, "rule=my_rule", "mesh=none"]) is None
        assert command_problem([searched, "rule=my_rule", "rule.embed=data"]) is None  # the override wins


@pytest.mark.parametrize("typed, said", [
    ("rule.embed=dta", "rule.embed=dta (rule replicated+overrides) names mesh axis dta, which the mesh lacks; "
                       "valid values: data, model or null; set rule.embed=data"),
    ("rule.embed=3", "rule.embed=3 must be a mesh axis name, a list of them, or null; e.g. rule.embed=data, or "
                     "rule.embed=null (unsplit)"),
])
def test_a_rule_override_the_run_would_refuse_is_refused_before_hydra(typed, said):
    # The same tables typed on the command line: refused too only after the run's folder was made.
    assert command_problem(["experiment=quick", typed]) == said
    assert command_problem(["experiment=quick", "rule.embed=data"]) is None


def test_a_refused_rule_file_leaves_no_folder(tmp_path):
    (tmp_path / "conf" / "rule").mkdir(parents=True)
    (tmp_path / "conf" / "rule" / "my_rule.yaml").write_text("name: my_rule\nembd: data\n")
    out = tmp_path / "out"
    ran = subprocess.run([sys.executable, str(REPO / "launch.py"), f"hydra.searchpath=[file://{tmp_path / 'conf'}]",
                          "experiment=quick", "rule=my_rule", f"hydra.run.dir={out}"],
                         capture_output=True, text=True, cwd=tmp_path, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    assert ran.returncode == 1
    assert ran.stderr.strip().splitlines()[-1] == (
        "[ERROR] rule.embd is not a logical axis; valid keys: embed, mlp, heads, vocab, in, out (and name); did you "
        "mean rule.embed? (written in conf/rule/my_rule.yaml: fix it there)")
    assert not out.exists()

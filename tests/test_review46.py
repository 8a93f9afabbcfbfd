"""Round 46's own changes, broken by review: each test names what was typed, what happened, and what happens now.

In-process, 8 simulated CPU devices (conftest); no run trains."""

import ast
import re

import pytest


def test_a_python_callers_folder_refusal_names_a_folder_with_a_space_or_quote_as_python_takes_it(tmp_path):
    # Was (run(cfg) from Python, the folder "my runs/killed"): "... or in a new folder with
    # cfg.train.resume='<tmp>/my' runs/killed' hydra.run.dir ..." -- the shell's quotes read as the value's end, the
    # folder cut at its space, and the two settings not joined; a quote in the folder's name came out as '"'"'.
    from faults_helpers import compose_tiny

    from gensbi_sharding.harness.python_words import python_words
    from gensbi_sharding.harness.run import run

    for name in ("my runs", "it's (1), a=b"):
        killed = tmp_path / name / "killed"
        (killed / "checkpoints" / "5").mkdir(parents=True)
        error = run(compose_tiny(output_dir=killed))["error"]
        found = re.search(r"or in a new folder with cfg\.train\.resume=(.*) and cfg\.output_dir='<new folder>'; set "
                          r"cfg\.output_dir in omegaconf\.open_dict\(cfg\)$", error)
        assert found and ast.literal_eval(found[1]) == str(killed), error
        # A refusal before the lock (folder_problem): the folder it names, as Python's repr.
        (tmp_path / name / "file").write_text("")
        error = run(compose_tiny(output_dir=tmp_path / name / "file" / "sub"))["error"]
        found = re.fullmatch(r"ConfigError: cfg\.output_dir=(.*): (.*) is a file, not a folder; choose another "
                             r"cfg\.output_dir; set cfg\.output_dir in omegaconf\.open_dict\(cfg\)", error)
        assert found and ast.literal_eval(found[1]) == str(tmp_path / name / "file" / "sub"), error
        assert found[2] == str(tmp_path / name / "file"), error
    # Sentence punctuation after a plain override is the sentence's; a number stays a number.
    assert python_words("rerun with train.resume=auto: or train.steps=16.") == (
        "rerun with cfg.train.resume='auto': or cfg.train.steps=16.")

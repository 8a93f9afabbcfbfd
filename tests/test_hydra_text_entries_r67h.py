"""A yes/no as an entry of a list or dict of text of Hydra's (``exclude_keys=[true,false]``, ``env_set={A:true}``):
refused as a bare yes/no for a text setting is (override_hydra_text), the fix quoting it.

Was (found by round 67's fuzz): every check passed and the run went on with 'True' and 'False' (Python's spelling):
the keys excluded from the folder name were 'True', the job's variable A was 'True'.
"""

import shlex

import pytest
from hydra import compose, initialize_config_dir

from gensbi_sharding.harness.command_checks import command_problem
from gensbi_sharding.harness.groups import CONF

EXCLUDE = "hydra.job.config.override_dirname.exclude_keys"


def _hydra(overrides):
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose("config", overrides=overrides, return_hydra_config=True).hydra


@pytest.mark.parametrize("typed, word, fix, read", [
    (f"{EXCLUDE}=[true,false]", "true", f"{EXCLUDE}=['true','false']", ("job.config.override_dirname.exclude_keys",
                                                                         ["true", "false"])),
    (f"{EXCLUDE}=[seed,FALSE]", "false", f"{EXCLUDE}=[seed,'false']", ("job.config.override_dirname.exclude_keys",
                                                                        ["seed", "false"])),
    ("+hydra.job.env_set={A:true}", "true", "+hydra.job.env_set={A:'true'}", ("job.env_set", {"A": "true"})),
    ("hydra.job.env_set={A:true}", "true", "++hydra.job.env_set={A:'true'}", ("job.env_set", {"A": "true"}))])
@pytest.mark.fast_cases(1)
def test_a_yes_no_entry_of_a_text_list_or_dict_is_refused_and_the_quoted_fix_gives_the_text(typed, word, fix, read):
    from omegaconf import OmegaConf

    problem = command_problem([typed])
    key, raw = typed.lstrip("+").split("=", 1)
    assert problem == (f"{typed}: {key} takes text entries, and {word} (an entry of {raw}) is a yes/no, which it "
                       f"would read as '{word.title()}' (Python's spelling), as in a config file; for the text, quote "
                       f"it: \"{fix}\"")
    pasted = shlex.split(problem.rsplit("quote it: ", 1)[1])  # as a shell reads the words printed
    assert pasted == [fix] and command_problem(pasted) is None
    path, text = read
    assert OmegaConf.to_container(OmegaConf.select(_hydra(pasted), path)) == text  # the words, as typed
    if typed.startswith("+"):
        assert "True" in str(OmegaConf.select(_hydra([typed]), path)) or "False" in str(
            OmegaConf.select(_hydra([typed]), path))  # what the command as typed gave


@pytest.mark.parametrize("typed", [f"{EXCLUDE}=[seed]", f"{EXCLUDE}=[seed,'true']", "+hydra.job.env_set={A:'1'}"])
def test_text_entries_pass(typed):
    assert command_problem([typed]) is None


@pytest.mark.slow
def test_a_yes_no_in_env_copy_is_quoted_and_the_variable_named_so_must_be_set(monkeypatch):
    monkeypatch.delenv("false", raising=False)
    lines = command_problem(["hydra.job.env_copy=[false]"]).splitlines()  # both refusals, each with its fix
    assert lines[1].endswith("; for the text, quote it: \"hydra.job.env_copy=['false']\"")
    assert lines[2].startswith("  hydra.job.env_copy=['false']: false is not set in this shell")
    monkeypatch.setenv("false", "1")  # Hydra copies a variable of that name: one that is set
    assert command_problem(["hydra.job.env_copy=['false']"]) is None

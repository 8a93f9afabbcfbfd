"""Overrides whose key Hydra's grammar cannot read: refused in one line naming the key, never a traceback.

Was: ``-m 'hydra.sweeper.params.+hydra.job.env_set.X=true,false'`` ended in an AttributeError ('NoneType' object has
no attribute 'key_or_group') from hydra_plugin_problem, which read every override, those the grammar could not read
among them; grammar_problem skipped any override whose key was no plain key.
"""

import shlex

import pytest

from gensbi_sharding.harness.command_checks import command_problem
from gensbi_sharding.harness.grammar_checks import grammar_problem
from gensbi_sharding.harness.hydra_plugins import hydra_plugin_problem
from gensbi_sharding.harness.hydra_values import sweeper_param_problem

UNREADABLE = ["hydra.sweeper.params.+hydra.job.env_set.X=true,false", "hydra.launcher.+n_jobs=2", "a b=1",
              "~hydra.sweeper.params.+x"]


@pytest.mark.parametrize("arg", UNREADABLE)
def test_a_key_the_grammar_cannot_read_is_named_in_one_line(arg):
    problem = command_problem(["-m", arg])
    assert problem.startswith(f"{arg}: Hydra's override grammar cannot read the key ")
    assert repr(arg.partition("=")[0]) in problem and "\n" not in problem
    assert "+, ++ or ~ only in front of the whole key" in problem


@pytest.mark.parametrize("arg", UNREADABLE)
def test_the_plugin_check_skips_what_the_grammar_cannot_read(arg):
    assert hydra_plugin_problem([arg]) is None  # was: AttributeError for the first two


def test_a_typed_sweep_of_the_sweeper_names_the_command_lines_sweep_which_runs():
    problem = command_problem(["-m", "hydra.sweeper.params.+seed=0,1"])
    assert problem.endswith("to sweep a key from the command line, give its values with -m, e.g. -m seed=0,1")
    assert command_problem(["-m", "seed=0,1"]) is None  # the advice, pasted
    assert command_problem(["-m", "+hydra.job.env_set.X=1"]) is None  # the key shown as written right


def test_no_key_before_the_equals_sign_is_named():
    assert command_problem(["=1"]) == ("=1: no key before the '='; write key=value, e.g. seed=1 (python launch.py "
                                       "--cfg job lists the keys)")
    assert command_problem(["seed=1"]) is None


def test_a_flags_value_is_no_override():
    assert grammar_problem(["--config-name", "a b=1"]) is None
    assert grammar_problem(["a b=1"]) is not None


# A name too long for the file system (found by fuzzing the command checks): was an OSError traceback, [Errno 36]
# File name too long, from the checks that look the name up as a file (config_files.unsearched_file,
# --config-path's folder, a search path's folder), or no refusal at all where Hydra then made the folder.
LONG = "x" * 300


@pytest.mark.parametrize("args", [["mesh=" + LONG], ["-m", f"model=mlp,{LONG}"], ["experiment=" + LONG],
                                  ["-cp", LONG], [f"hydra.searchpath=[file://{LONG}]"], ["hydra.run.dir=" + LONG]])
def test_a_name_too_long_for_a_file_is_refused_in_one_line(args):
    problem = command_problem(args)
    assert "is 300 bytes, longer than a file or folder name can be here (255)" in problem
    assert "\n" not in problem and len(problem) < 300


def test_a_long_group_option_names_where_the_options_are_listed():
    problem = command_problem(["mesh=" + LONG])
    assert problem == (f"mesh={LONG[:55]}...: its name {LONG[:24]}... is 300 bytes, longer than a file or folder "
                       "name can be here (255), so no mesh option has it; python launch.py --help lists the options")


def test_a_long_run_folder_names_a_folder_that_runs():
    problem = command_problem(["hydra.run.dir=/tmp/" + LONG])
    assert problem.endswith("; give a shorter one, e.g. hydra.run.dir=outputs/my_run")
    assert command_problem(["hydra.run.dir=outputs/my_run"]) is None  # the advice, pasted
    assert command_problem(["hydra.run.dir=/tmp/" + "x" * 255]) is None  # as long as a name can be


# A line break in a word (found by fuzzing: $'mesh=\n', a $(cat file)): every refusal showed it as typed, over
# several lines, the grammar's advising to quote the line break.
@pytest.mark.parametrize("args", [["mesh=\n"], ["model.width=3\n"], ["--config-name", "a\nb"], ["seed=1", "x=\r"]])
def test_a_line_break_in_a_word_is_named_in_one_line(args):
    problem = command_problem(args)
    word = next(w for w in args if w.splitlines() != [w])
    assert problem == (f"{word!r}: the word holds a line break, which no setting, option or flag takes; type it on "
                       "one line (python launch.py --cfg job shows the settings and their values)")


# A word of no '=' (found by fuzzing): no check read it as an override, and Hydra's "Error parsing override 'fsdp'
# missing EQUAL at '<EOF>'" came in several lines after every check passed.
def test_an_option_alone_names_its_group_and_the_fix_runs():
    assert command_problem(["fsdp"]) == ("fsdp: Hydra reads each word after the flags as an override, key=value, and "
                                         "fsdp has no '='; fsdp is an option of rule: write rule=fsdp")
    assert command_problem(["rule=fsdp"]) is None  # the advice, pasted


def test_a_key_alone_and_a_value_split_off_by_the_shell_are_named():
    assert command_problem(["seed"]).startswith("seed: Hydra reads each word after the flags as an override")
    assert command_problem(["seed=", "3"]).endswith("(the shell split seed=3 at a space); write seed=3")
    assert command_problem(["seed=3"]) is None


@pytest.mark.parametrize("args", [["--cfg", "job"], ["-cn", "config"], ["--info", "config"], ["-m", "seed=0,1"]])
def test_a_flags_value_is_no_bare_word(args):
    assert command_problem(args) is None


# Hydra's own settings given a shape Hydra cannot take (found by fuzzing): all passed every check, then Hydra's
# several-line "Cannot assign int to Dict[str, str] / full_key / object_type", "Ambiguous value" without -m, or
# (its advice) "Sweeping over Hydra's configuration is not supported" with -m.
@pytest.mark.slow
def test_a_dict_setting_of_hydras_given_one_value_names_how_to_set_an_entry():
    problem = command_problem(["hydra.job.env_set=1"])
    assert problem == ('hydra.job.env_set=1: hydra.job.env_set holds entries by name (a dict), not one value; set one '
                       'by its name: \'+hydra.job.env_set.MY_VAR="1"\'')
    assert command_problem(["+hydra.job.env_set.MY_VAR=1"]) is None  # the advice, pasted (the shell drops the "")
    assert command_problem(["hydra.callbacks=[1]"]).startswith("hydra.callbacks=[1]: hydra.callbacks holds entries")
    assert command_problem(["hydra.sweeper.params=1"]).endswith("give its values with -m, e.g. -m seed=0,1")
    assert command_problem(["hydra.job.env_set={}"]) is None


@pytest.mark.parametrize("args", [["hydra.job.env_set.X=1,2"], ["hydra.run.dir=a,b"], ["hydra/launcher=basic,slurm"],
                                  ["hydra.job.name=choice(x,y)"]])
@pytest.mark.fast_cases(2)
def test_a_sweep_of_a_hydra_setting_without_m_is_refused_and_its_fix_runs(args):
    problem = command_problem(args)
    assert problem.startswith(f"{args[-1]}: several values are a sweep, and Hydra sweeps none of its own settings "
                              "(hydra.*); give ")
    fix = shlex.split(problem.rsplit("e.g. ", 1)[1])  # the advice, pasted: as the shell reads the words printed
    assert len(fix) == 1 and command_problem(fix) is None


def test_a_sweep_typed_into_the_sweepers_params_names_the_command_lines_sweep():
    problem = command_problem(["hydra.sweeper.params.seed=range(3)"])
    assert problem.endswith("; to sweep seed, give its values with -m: -m 'seed=range(3)'")
    assert command_problem(["-m", "seed=range(3)"]) is None  # the advice, pasted


# Two Python tracebacks from Hydra after every check passed (found by fuzzing): ~sweep=inf (a group's removal given
# no option's name: "ValueError: Config group override deletion value must be a string"), and
# hydra.sweeper.params.seed=1 with no preset giving the sweeper params ("AssertionError: Unexpected type for root").
def test_removing_an_optional_group_by_no_options_name_is_refused_and_the_fix_runs():
    assert command_problem(["~sweep=inf"]) == ("~sweep=inf: ~sweep= takes the option to remove, and inf is none of "
                                               "sweep's options (rules_x_model_axis); write ~sweep")
    assert command_problem(["~sweep"]) is None  # the advice, pasted


@pytest.mark.parametrize("args", [["hydra.sweeper.params.seed=1"], ["-m", "hydra.sweeper.params.seed=1"]])
def test_a_sweeper_param_with_no_params_to_set_it_in_names_the_command_lines_sweep(args):
    problem = command_problem(args)
    assert problem == ("hydra.sweeper.params.seed=1: the sweeper has no params to set seed in (only a preset, e.g. "
                       "sweep=rules_x_model_axis, gives it some); sweep seed from the command line with -m: -m seed=1")
    assert command_problem(["-m", "seed=1"]) is None  # the advice, pasted
    assert sweeper_param_problem(["-m", "sweep=rules_x_model_axis", "hydra.sweeper.params.seed=0"]) is None  # its


# A setting of Hydra's of a fixed type given a value it cannot take (found by fuzzing): passed every check, then
# Hydra's several-line "Error merging override ... full_key ... object_type".
@pytest.mark.parametrize("arg, reason", [
    ("hydra.job.chdir=x", "Value 'x' is not a valid bool (type str)"),
    # hydra.mode=a: its names and the one to write (tests/test_hydra_mode_values_r68l.py)
    ("hydra.run.dir=[]", "Cannot convert 'list' to string: '[]'"),
])
def test_a_hydra_setting_given_a_value_of_another_type_is_named_in_one_line(arg, reason):
    key, raw = arg.split("=", 1)
    assert command_problem([arg]) == (f"{arg}: {key} cannot take {raw} ({reason}); give it a value it takes, or "
                                      "leave it out")


def test_a_hydra_setting_of_a_type_names_hydras_default_where_it_has_one_and_it_runs():
    problem = command_problem(["hydra.output_subdir=[1]"])
    assert problem.endswith("give it a value it takes, e.g. hydra.output_subdir=.hydra, or leave it out")
    assert command_problem(["hydra.output_subdir=.hydra"]) is None  # the advice, pasted
    assert command_problem(["hydra.job.chdir=true", "hydra.mode=RUN", "hydra.run.dir=runs/a"]) is None


# A package (@pkg) Hydra cannot apply (found by fuzzing): passed every check, then Hydra's "Override seed@pkg=1 looks
# like a config group override, but config group 'seed' does not exist" or "Could not override 'rule@pkg'. No match
# in the defaults list", each with its HYDRA_FULL_ERROR line and no fix.
@pytest.mark.slow
def test_a_package_on_a_key_that_is_no_group_names_the_plain_override_which_runs():
    assert command_problem(["seed@pkg=1"]) == ("seed@pkg=1: @pkg places a config group's option "
                                               "(group@package=option), and seed is no group; write seed=1")
    assert command_problem(["seed=1"]) is None  # the advice, pasted


def test_a_package_on_a_group_the_config_lists_without_one_names_the_plain_override_which_runs():
    assert command_problem(["rule@pkg=fsdp"]) == ("rule@pkg=fsdp: conf/config.yaml lists rule without a package, so "
                                                  "there is no rule@pkg to change; write rule=fsdp")
    assert command_problem(["rule=fsdp"]) is None  # the advice, pasted
    assert command_problem(["+experiment@_global_=quick"]) is None  # + adds the group at a package: Hydra's


# + on a setting Hydra's own config holds (found by fuzzing): passed every check, then Hydra's "Could not append to
# config. An item is already at 'hydra.output_subdir'. Either remove + prefix ... Or add a second + ..." in 4 lines.
@pytest.mark.slow
@pytest.mark.parametrize("arg", ["+hydra.output_subdir=x", "+hydra.job.chdir=true", "+hydra.run.dir=runs/a"])
def test_a_plus_on_a_setting_of_hydras_names_the_override_without_it_which_runs(arg):
    key = arg[1:].split("=", 1)[0]
    assert command_problem([arg]) == f"{arg}: {key} exists (+ adds a key the config lacks); write {arg[1:]}"
    assert command_problem([arg[1:]]) is None  # the advice, pasted
    assert command_problem(["+hydra.job.env_set.MY_VAR=1"]) is None  # a new entry of a dict: + adds it

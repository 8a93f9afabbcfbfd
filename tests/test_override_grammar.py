"""Values Hydra's override grammar cannot read: refused in one line naming the override and how to write it,
and every command the harness prints or starts writes its folders so that Hydra reads them back.

Was: ``train.resume=~/x`` or ``hydra.run.dir=runs/a(1)`` ended in Hydra's "token recognition error at: '~'" /
"mismatched input '(' expecting <EOF>", naming neither the override nor the fix; and a run in a folder
quoted for Hydra (``'hydra.run.dir="runs/a(1)"'``) printed continue commands, and started
``distributed=local`` processes, with the folder unquoted: each failed in Hydra's grammar.
"""

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from hydra.core.override_parser.overrides_parser import OverridesParser

from gensbi_sharding.harness.command_checks import command_problem
from gensbi_sharding.harness.grammar_checks import grammar_problem
from gensbi_sharding.harness.hydra_flags import flag_order_problem
from gensbi_sharding.harness.override_grammar import hydra_override, hydra_value, parse
from gensbi_sharding.harness.further_hint import train_further_hint
from gensbi_sharding.harness.sweep_hints import job_command

REPO = Path(__file__).resolve().parents[1]
HOME = os.path.expanduser("~")
ODD_FOLDERS = ["/tmp/runs/a(1)", "/tmp/my runs/a", "/tmp/x=y", "/tmp/a,b", "/tmp/[x]", "/tmp/it's", "/tmp/~x",
               "/tmp/q\"u'o", "runs/a"]


def parsed(override: str):
    return OverridesParser.create().parse_override(override).value()


@pytest.mark.parametrize("args, message, fix", [
    (("train.resume=~/x",), "train.resume=~/x: Hydra's override grammar cannot read the value ~/x (token recognition "
     f"error at: '~'); write it out: train.resume={HOME}/x (~ written out: neither the shell nor Hydra expands it "
     "there)", f"train.resume={HOME}/x"),
    (("experiment=quick", "hydra.run.dir=runs/a(1)"), "hydra.run.dir=runs/a(1): Hydra's override grammar cannot read "
     "the value runs/a(1) (mismatched input '(' expecting <EOF>); quote it for Hydra inside the shell's quotes: "
     "'hydra.run.dir=\"runs/a(1)\"'", 'hydra.run.dir="runs/a(1)"'),
    (("-m", "hydra.sweep.dir=/tmp/x=y", "rule=fsdp,tensor"), "hydra.sweep.dir=/tmp/x=y: Hydra's override grammar "
     "cannot read the value /tmp/x=y (mismatched input '=' expecting <EOF>); quote it for Hydra inside the shell's "
     "quotes: 'hydra.sweep.dir=\"/tmp/x=y\"'", 'hydra.sweep.dir="/tmp/x=y"'),
    # A leading ~ quoted for Hydra: Hydra would make a folder named "~" under the current one.
    (('hydra.run.dir="~/runs/a"',), "hydra.run.dir=\"~/runs/a\": Hydra does not expand ~ and would make a folder "
     f"named '~' under the current one; write the path out: hydra.run.dir={HOME}/runs/a",
     f"hydra.run.dir={HOME}/runs/a"),
    # Empty (an unset shell variable: hydra.run.dir=$OUT): Hydra wrote .hydra/, metrics.json and launch.log into
    # the current folder, the repository's root when launched from there.
    (("dry_run=true", "hydra.run.dir="), "hydra.run.dir=: an empty folder (an unset shell variable?) would put the "
     "run's files in the current folder; give one, e.g. hydra.run.dir=outputs/my_run, or leave hydra.run.dir out "
     "for outputs/<date>/<time>", "hydra.run.dir=outputs/my_run"),
    (("-m", "hydra.sweep.dir=''", "rule=fsdp,tensor"), "hydra.sweep.dir='': an empty folder (an unset shell "
     "variable?) would put the run's files in the current folder; give one, e.g. hydra.sweep.dir=outputs/my_run, or "
     "leave hydra.sweep.dir out for multirun/<date>/<time>", "hydra.sweep.dir=outputs/my_run"),
    # Brackets: quoting would make a string of a list, so Hydra's reason and the list form are named.
    (("eval.observations=[1,2",), "eval.observations=[1,2: Hydra's override grammar cannot read the value [1,2 (no "
     "viable alternative at input '[1,2'); check its brackets and commas (a list: eval.observations=[1,2,3]; a "
     "sweep: -m rule=fsdp,tensor)", "eval.observations=[1,2]"),
])
def test_a_value_hydra_cannot_read_is_refused_naming_how_to_write_it(args, message, fix):
    assert grammar_problem(args) == message
    assert grammar_problem([fix]) is None
    key, value = fix.split("=", 1)
    assert parsed(fix) == ([1, 2] if key == "eval.observations" else value.strip('"'))


@pytest.mark.parametrize("args", [
    ("-m", "rule=fsdp,tensor"), ("hydra/launcher=slurm",), ("hydra.sweep.subdir=${rule.name}",), ("--cfg", "job"),
    ("+model.width=8",), ("~train.resume",), ("-m", "eval.observations=[1],[2,3]"), ("hydra.run.dir=/tmp/a b",),
    ('hydra.run.dir="runs/a(1)"',), ('train.resume="~/x"',), ('hydra.run.dir="runs/~x"',),
])
def test_what_hydra_reads_passes(args):
    assert grammar_problem(args) is None


@pytest.mark.slow  # a launch.py process (refused before any folder: about 2 s)
def test_launch_refuses_it_in_one_line_writing_nothing(tmp_path):
    proc = subprocess.run([sys.executable, str(REPO / "launch.py"), "experiment=quick", "hydra.run.dir=runs/a(1)"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and proc.stderr == (
        "[ERROR] hydra.run.dir=runs/a(1): Hydra's override grammar cannot read the value runs/a(1) (mismatched input "
        "'(' expecting <EOF>); quote it for Hydra inside the shell's quotes: 'hydra.run.dir=\"runs/a(1)\"'\n")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("folder", ODD_FOLDERS)
def test_printed_commands_give_hydra_the_folder_back(folder, tmp_path, monkeypatch):
    assert parsed(f"hydra.run.dir={hydra_value(folder)}") == folder
    assert parsed(shlex.split(hydra_override("train.resume", folder))[0]) == folder
    continued = shlex.split(job_command(["rule=fsdp", 'eval.observations=[1]'], folder, multirun=True))
    assert continued[:2] == ["python", "launch.py"] and grammar_problem(continued[2:]) is None
    assert {o.split("=")[0]: parsed(o) for o in continued[2:]} == {
        "rule": "fsdp", "eval.observations": [1], "train.resume": "auto", "hydra.mode": "RUN", "hydra.run.dir": folder}
    # The hint reads the run's folder: a relative one resolves in an empty cwd, not in the checkout, where runs/a may be
    # the README's checkpoint example, a finished run whose saved overrides would be read in place of these.
    monkeypatch.chdir(tmp_path)
    further = train_further_hint(folder, 20, 40, ["rule=fsdp"]).split("into a new folder: ")[1]
    words = shlex.split(further)[2:]
    assert grammar_problem(words) is None
    assert parsed(words[2]) == str(Path(folder).absolute()) and words[1] == "train.steps=40"
    assert parsed(words[3]) == str(Path(folder).absolute().with_name(Path(folder).name + "-steps40"))


def test_one_module_parses_the_command_line_for_every_check():
    # Five checkers each parsed the command line their own way (and disagreed on which model= counts); now
    # override_grammar.parse reads it once and command_checks (launch.py's) hands that one reading to every check.
    harness = REPO / "gensbi_sharding" / "harness"
    parsers = sorted(p.name for p in harness.glob("*.py") if "parse_override(" in p.read_text())
    assert parsers == ["override_grammar.py"]
    command = parse(["-m", "model=mlp,flux1", "model=transformer", "~seed", "train.resume=~/x", "--cfg", "job"])
    assert [(o.typed, o.raw, o.error is None) for o in command.overrides] == [
        ("model", "mlp,flux1", True), ("model", "transformer", True), ("~seed", "", True),
        ("train.resume", "~/x", False)]
    assert command.models == ["transformer"] and command.model == "transformer" and command.multirun
    launch, checks = (REPO / "launch.py").read_text(), (harness / "command_checks.py").read_text()
    assert "command_problem(sys.argv[1:])" in launch and "for check in OVERRIDE_CHECKS if (problem := check(command))" \
        in checks


ORDER = ("{word} comes after {flag}, which follows the override {first}: Hydra reads the overrides as one run of "
         "words (it refused the rest as 'unrecognized arguments'); put the flags first: python launch.py {fixed}")


@pytest.mark.parametrize("args, word, flag, first, fixed", [
    # Was: Hydra's usage text and "launch.py: error: unrecognized arguments: train.steps=1,2", as if unknown keys.
    (["experiment=quick", "-m", "train.steps=1,2"], "train.steps=1,2", "-m", "experiment=quick",
     "-m experiment=quick train.steps=1,2"),
    (["experiment=quick", "--cfg", "job", "--package", "train", "~seed"], "~seed", "--cfg", "experiment=quick",
     "--cfg job --package train experiment=quick '~seed'"),
    (["--cfg", "job", "a=1", "-m", "hydra.run.dir=my dir"], "hydra.run.dir=my dir", "-m", "a=1",
     "--cfg job -m a=1 'hydra.run.dir=my dir'"),
])
def test_overrides_on_both_sides_of_a_flag_are_refused_naming_the_order(args, word, flag, first, fixed):
    assert flag_order_problem(args) == ORDER.format(word=word, flag=flag, first=first, fixed=fixed)


@pytest.mark.parametrize("args", [["-m", "a=1", "b=2"], ["a=1", "b=2", "-m"], ["--cfg", "job", "a=1"],
                                  ["-m", "a=1", "--cfg", "job"], ["--help"], []])
def test_overrides_in_one_run_pass(args):
    assert flag_order_problem(args) is None


@pytest.mark.parametrize("args, refused, fixed", [
    (["--info", "experiment=quick"], "--info experiment=quick", "--info all experiment=quick"),
    (["-i", "experiment=quick", "seed=1"], "-i experiment=quick", "-i all experiment=quick seed=1"),
    (["experiment=quick", "--info", "seed=1"], "--info seed=1", "--info all experiment=quick seed=1")])
def test_info_reading_an_override_as_what_to_show_is_refused_naming_the_command(args, refused, fixed):
    # Was: Hydra's whole usage text and "argument --info/-i: invalid choice: 'experiment=quick'", though --cfg job
    # takes the overrides after it so.
    flag = refused.split()[0]
    assert command_problem(args) == (
        f"{refused}: Hydra reads the word after {flag} as what to show (all, config, defaults, defaults-tree, plugins, "
        f"searchpath), not as an override; name it first: python launch.py {fixed}")
    assert command_problem(fixed.split()) is None  # the command it names passes


@pytest.mark.parametrize("args", [["--info"], ["experiment=quick", "--info"], ["--info", "config", "seed=1"],
                                  ["--shell-completion", "install=bash"], ["-sc", "query=launch.py"]])
def test_info_and_shell_completion_as_hydra_reads_them_pass(args):
    assert command_problem(args) is None


def test_shell_completion_without_what_to_do_is_refused_naming_it():
    # Was: Hydra's ValueError traceback, "Expecting one subcommand from ['install', 'uninstall', 'query'] to be set";
    # and with it, --shell-completion install=bash was refused as "install is not a setting" (the case above).
    assert command_problem(["--shell-completion"]) == (
        "--shell-completion needs what to do: python launch.py --shell-completion install=bash (or install=zsh, "
        "install=fish; uninstall=bash; query=<the words>), without other overrides")


@pytest.mark.parametrize("args, message", [
    (["--hydra-help", "seed=1"], "--hydra-help seed=1: --hydra-help shows Hydra's own help, which takes no overrides; "
     "run python launch.py --hydra-help, or see a job's config with python launch.py --cfg job seed=1"),
    (["--resolve", "experiment=quick"], "--resolve only changes what --cfg or --help print (interpolations resolved): "
     "add one, e.g. python launch.py --cfg job --resolve experiment=quick"),
    (["--info", "--resolve"], "--resolve only changes what --cfg or --help print (interpolations resolved): add one, "
     "e.g. python launch.py --cfg job --resolve"),
    (["--experimental-rerun", "runs/nope/.hydra/config.pickle"], "--experimental-rerun runs/nope/.hydra/config.pickle: "
     "no such file; it takes a job's .hydra/config.pickle, which Hydra writes only under hydra.callbacks.save_job_info "
     "(its PickleJobInfoCallback); to run a job again, give its overrides (<its folder>/.hydra/overrides.yaml) and a "
     "new hydra.run.dir")])
def test_hydra_flags_hydra_cannot_use_so_are_refused_naming_the_command(args, message):
    # Was: a traceback each, Hydra's "Could not override 'seed'. To append to your config use +seed=1" (its help
    # config has no seed; +seed=1 is refused in turn) and "The --resolve flag can only be used in conjunction with
    # --cfg or --help".
    assert command_problem(args) == message


@pytest.mark.parametrize("args", [["--hydra-help"], ["--cfg", "job", "--resolve", "seed=1"], ["--help", "--resolve"]])
def test_hydra_help_and_resolve_as_hydra_reads_them_pass(args):
    assert command_problem(args) is None


@pytest.mark.parametrize("args, message", [
    # Was "Hydra's override grammar cannot read the value replicated, (mismatched input '<EOF>' ...); quote it for
    # Hydra inside the shell's quotes: 'rule=\"replicated,\"'": a one-string rule, not the sweep the user typed.
    (["-m", "rule=replicated,", "fsdp,", "tensor", "seed=1"], "rule=replicated,: a value cannot end in a comma (the "
     "shell split fsdp,tensor from it at a space); write rule=replicated,fsdp,tensor"),
    (["-m", "train.steps=20,", "30"], "train.steps=20,: a value cannot end in a comma (the shell split 30 from it at "
     "a space); write train.steps=20,30"),
    (["rule=replicated,"], "rule=replicated,: a value cannot end in a comma; write rule=replicated"),
])
def test_a_value_ending_in_a_comma_names_the_words_the_shell_split_off(args, message):
    from gensbi_sharding.harness.command_checks import command_problem

    assert grammar_problem(args) == message
    fixed = [a for a in args if a.startswith("-") or "=" in a]
    fixed[fixed.index(args[1] if args[0] == "-m" else args[0])] = message.rsplit("write ", 1)[1]
    assert grammar_problem(fixed) is None and command_problem(fixed) is None


def test_a_word_parsed_again_is_the_callers_own_copy():
    # parse keeps each word's parse (every check of a command parses it again); a caller that changes the value it
    # got back (a list) must not change what the next parse of the same word gives.
    from gensbi_sharding.harness.override_grammar import parse

    first = parse(["eval.observations=[1,2,3]", "rule=fsdp,tensor"])
    first.overrides[0].hydra.value().append(4)
    again = parse(["eval.observations=[1,2,3]", "rule=fsdp,tensor"])
    assert again.overrides[0].hydra.value() == [1, 2, 3]
    assert again.overrides[0].hydra is not first.overrides[0].hydra
    assert again.overrides[1].values() == ["fsdp", "tensor"]

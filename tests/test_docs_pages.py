"""The docs/ pages' own examples as a user copies them: each YAML block written to the file its first line names,
composed and checked by the commands the page gives beside it; rules.md's account of a rule table from Python;
and pages written to a reader, not in the project's rounds or changelog."""

import math
import re
import shlex
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest
from flax import nnx
from hydra import compose, initialize_config_dir

import gensbi_sharding as gs
from gensbi_sharding.harness.command_checks import command_problem
from gensbi_sharding.harness.config import ConfigError, register_configs
from gensbi_sharding.harness.config_checks import validate
from gensbi_sharding.harness.rule_config import rule_table

REPO = Path(__file__).resolve().parents[1]


def _blocks(page, lang):
    return re.findall(rf"```{lang}\n(.*?)```", (REPO / "docs" / page).read_text(), re.S)


def _written(page, root):
    """Each ```yaml block of ``page`` whose first line is ``# <path>``, written to ``root / <path>``; the paths."""
    paths = []
    for block in _blocks(page, "yaml"):
        path = re.match(r"# (\S+\.yaml)\n", block)
        if path:
            (root / path[1]).parent.mkdir(parents=True, exist_ok=True)
            (root / path[1]).write_text(block)
            paths.append(path[1])
    return paths


def _commands(page, pwd):
    """The ``python launch.py`` lines of ``page``'s ```bash blocks, as the shell passes their arguments in ``pwd``."""
    lines = [line.split("  #")[0] for block in _blocks(page, "bash") for line in block.splitlines()]
    return [shlex.split(line.replace("$PWD", str(pwd)))[2:] for line in lines if line.startswith("python launch.py")]


def _composed(args, config_dir):
    register_configs()
    with initialize_config_dir(version_base="1.3", config_dir=str(config_dir)):
        return compose(config_name="config", overrides=args)


@pytest.mark.slow
def test_rules_md_rule_file_and_its_commands_compose_as_the_page_says(tmp_path):
    # The page's file goes into the checkout's conf/ (here a copy of it), and its three commands run from there.
    shutil.copytree(REPO / "conf", tmp_path / "conf")
    assert _written("rules.md", tmp_path) == ["conf/rule/my_rule.yaml"]
    commands = _commands("rules.md", tmp_path)
    assert len(commands) == 3
    expected = [("my_rule", {"embed": "data", "mlp": "model"}),  # keys left out are not split
                ("fsdp+overrides", {"embed": "data", "mlp": "model"}),
                ("replicated+overrides", {"embed": ("data", "model")})]
    for args, (name, split) in zip(commands, expected):
        cfg = _composed(args, tmp_path / "conf")
        validate(cfg)
        label, table = rule_table(cfg.rule)
        assert cfg.mesh.model_axis == 2
        assert {axis: value for axis, value in table.items() if value is not None} == split
        assert label == name  # the console's and metrics.json's name of the rule


def test_rules_md_tables_from_python_are_refused_or_kept_as_the_page_says(devices, tmp_path):
    # docs/rules.md: an unknown key with a mesh axis, or a value naming a mesh axis twice, is refused without a mesh;
    # a name declared unsplit is allowed from Python (launch.py refuses a near-typo of a logical axis, embd: null);
    # a mesh axis the mesh lacks replicates what it names and says why in the fallback warning.
    model = nnx.Linear(4, 8, kernel_init=gs.partitioned(nnx.initializers.lecun_normal(), ("embed", "mlp")),
                       rngs=nnx.Rngs(0))
    for table in ({"foo": "data"}, {"embed": ["data", "data"]}, {"embed": 3}):
        with pytest.raises(ValueError):
            gs.shard_model_by_table(model, None, table)
    gs.shard_model_by_table(model, None, {"embd": None, "layers": None})
    with pytest.raises(ConfigError, match=r"rule\.embd is not a logical axis; .*did you mean rule\.embed\?$"):
        rule_table({"name": "my_rule", "embd": None})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gs.shard_model_by_table(model, gs.make_mesh(model_axis=2), {"embed": "dta"})
    fallback = [str(w.message) for w in caught if issubclass(w.category, gs.ShardingFallbackWarning)]
    assert len(fallback) == 1 and "'dta', absent from the mesh" in fallback[0]


def test_gensbi_models_md_preset_of_ones_own_composes_as_the_page_says(tmp_path):
    # The page's my_conf/model/my_flux1.yaml, in the folder its command is run from ($PWD).
    assert _written("gensbi_models.md", tmp_path) == ["my_conf/model/my_flux1.yaml"]
    (args,) = [args for args in _commands("gensbi_models.md", tmp_path) if "model=my_flux1" in args]
    assert command_problem(args) is None
    cfg = _composed(args, REPO / "conf")
    validate(cfg)
    assert (cfg.model.name, cfg.model.num_heads, cfg.model.depth, cfg.model.depth_single_blocks) == ("flux1", 2, 1, 1)
    assert list(cfg.model.id_embedding_strategy) == ["rope1d", "rope1d"]
    assert (cfg.rule.name, cfg.mesh.model_axis) == ("tensor", 2)


def _documented_runs(pwd):
    """``(where, arguments, comment)`` of each single-run ``python launch.py`` command a user copies: the README's and
    docs pages' ```bash blocks (a line ending in ``\\`` joined to the next), the conf/ files' comment lines and
    ``--help``'s headline commands (what follows two spaces or more is the command's comment)."""
    pages = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    lines = [(page.name, line) for page in pages for block in re.findall(r"```bash\n(.*?)```", page.read_text(), re.S)
             for line in block.replace("\\\n", " ").splitlines()]
    lines += [(str(path.relative_to(REPO)), line.lstrip("# ")) for path in sorted((REPO / "conf").rglob("*.yaml"))
              for line in path.read_text().splitlines() if line.lstrip("# ").startswith("python launch.py")]
    runs, last = [], None
    for where, line in lines:
        if line.startswith("python launch.py"):
            command, comment = (re.split(r" {2,}", line, maxsplit=1) + [""])[:2]
            last = [where, shlex.split(command.replace("$PWD", str(pwd)))[2:], comment]
            runs.append(last)
        elif last is not None and line.startswith(" ") and line.lstrip().startswith("#"):  # its comment, continued
            last[2] += " " + line.strip(" #")
        else:
            last = None
    return [(where, args, comment) for where, args, comment in runs
            if "-m" not in args and not any("<" in a or a.startswith(("--", "hydra/launcher")) for a in args)]


@pytest.mark.slow
def test_no_documented_command_is_one_the_run_itself_calls_a_waste(devices, tmp_path):
    # Typed (README, "Running on several hosts"): python launch.py distributed=local distributed.local_processes=2
    # rule=fsdp mesh.model_axis=2. Was: the run answered the README's own example with "rule fsdp leaves the model
    # axis idle: ... the 2 devices along it repeat the same work; run with mesh.model_axis=1 ..., or rule=tensor"
    # (so did conf/model/flux1.yaml's example). Each command is composed as the run composes it, on the mesh it
    # gets on 8 devices, and given the placement block's hints; only make run's command may get one, and its
    # comment says so.
    from gensbi_sharding.harness.run_report import idle_model_axis_hint, splits_nothing_hint
    from gensbi_sharding.harness.state import activation_axes_read, partition_axis_for

    shutil.copytree(REPO / "conf", tmp_path / "conf")
    _written("rules.md", tmp_path), _written("gensbi_models.md", tmp_path)
    runs = _documented_runs(tmp_path)
    assert len(runs) >= 20 and any("distributed=local" in args for _, args, _ in runs), runs
    flagged, composed = [], {}  # 50 commands, 34 distinct: each composed once (~0.1 s a composition)
    for where, args, comment in runs:
        if tuple(args) not in composed:
            composed[tuple(args)] = _composed(args, tmp_path / "conf")
        cfg = composed[tuple(args)]
        if cfg.mesh.spec == "none" or (cfg.devices.cpu_count or 8) != 8:  # 16 devices cannot be simulated here
            continue
        mesh = gs.make_mesh(model_axis=1 if cfg.mesh.spec == "auto" else cfg.mesh.model_axis)
        label, table = rule_table(cfg.rule)
        sizes, spec = dict(mesh.shape), cfg.mesh.spec or "none"
        hint = splits_nothing_hint(sizes, table, label, spec) or idle_model_axis_hint(
            sizes, table, label, spec, activation_axes_read(cfg, partition_axis_for(cfg, table, mesh)))
        if hint and "the run says so" not in comment:
            flagged.append(f"{where}: python launch.py {' '.join(args)} -> {hint}")
    assert flagged == [], "\n".join(flagged)


def test_pages_speak_to_a_reader_not_of_the_projects_rounds_or_changes():
    # Was, atop every docs/ page: "as it stood in the README before round 41", benchmarks.md's GPU check "not yet
    # run: no GPU was available to this round", and a changelog's "(was: the next job started only to record ...)" in
    # hosts_and_preemption.md: a reader has no rounds nor the old behaviour. test_times.md is the history of measured
    # times, where a round's end dates a measurement.
    found = [f"{page.name}: {m.group(0)}" for page in sorted((REPO / "docs").glob("*.md")) if page.name != "test_times.md"
             for m in re.finditer(r"\b(?:before |to |this |that |next )?round (?:\d{2,}\b|'s\b)|\b(?:this|that|next) round\b"
                                  r"|\(was:", " ".join(page.read_text().split()))]
    assert found == [], found


def test_gensbi_models_md_model_of_ones_own_needs_only_the_steps_it_lists(tmp_path, request):
    # Typed, following the page's four places for a model of one's own: a settings dataclass added to config.py
    # (here defined in that module's namespace, as the file would define it), conf/model/tiny.yaml listing
    # /tiny_schema, and a registered factory. Was: "conf/model/tiny.yaml lists /tiny_schema, which no schema is
    # stored as: add its settings' dataclass to ... config.py", the very step just done: register_configs stored
    # only the built-in schemas, each by a line of its own, which the page never named.
    from hydra.core.config_store import ConfigStore

    from faults_helpers import registered
    from gensbi_sharding.harness import config
    from gensbi_sharding.harness.models.mlp import make_mlp
    from gensbi_sharding.harness.name_hints import registered_name_problem
    from gensbi_sharding.harness.override_types import override_problem

    assert "@register_model(\"<name>\")" in (REPO / "docs" / "gensbi_models.md").read_text()
    exec("@dataclass\nclass TinyConfig(ModelConfig):\n    name: str = 'tiny'\n    width: int = 64\n", vars(config))
    try:
        (tmp_path / "model").mkdir()
        (tmp_path / "model" / "tiny.yaml").write_text("defaults:\n  - /tiny_schema\n  - _self_\nwidth: 16\n")
        args = [f"hydra.searchpath=[file://{tmp_path}]", "model=tiny"]
        assert override_problem([*args, "experiment=quick"]) is None
        cfg = _composed(args, REPO / "conf")
        assert (cfg.model.name, cfg.model.width, cfg.model.init) == ("tiny", 16, "sharded")
        registered(request, "model", "tiny", lambda **kw: make_mlp(**kw))  # the page's @register_model("tiny")
        assert registered_name_problem(cfg, {"model": "tiny", "data": "two_moons", "rule": "replicated"}) is None
    finally:
        del config.TinyConfig
        ConfigStore.instance().repo.pop("tiny_schema.yaml", None)  # config.py's schemas are the models: as before


def test_gensbi_models_md_names_every_keyword_a_data_set_factory_is_called_with():
    # Typed, following the page's data set of one's own: a factory of the keywords the page named. Was: the page named
    # none, so the factory's signature came from reading pipeline.py; a keyword added there and not here would
    # leave every such factory failing on the unexpected argument.
    import ast

    text = " ".join((REPO / "docs" / "gensbi_models.md").read_text().split())
    listed = re.search(r"The factory is called with the keywords (.*?) \(", text)
    assert listed, "gensbi_models.md no longer lists the data set factory's keywords"
    named = set(re.findall(r"`(\w+)`", listed[1]))
    tree = ast.parse((REPO / "gensbi_sharding" / "harness" / "pipeline.py").read_text())
    calls = [node for node in ast.walk(tree) if isinstance(node, ast.Call)
             and isinstance(node.func, ast.Name) and node.func.id == "factory"]
    assert len(calls) == 1
    assert named == {k.arg for k in calls[0].keywords}


def test_gensbi_models_md_data_set_of_ones_own_example_builds_its_pipeline_as_printed(request, devices, tmp_path):
    # Typed, following the page as a new user: its data set of one's own named the factory's keywords but not what to
    # give the SimulationData fields such a simulator lacks (observation, reference_samples), nor what
    # conf/data/<name>.yaml holds: both were guessed from load_task and two_moons.yaml. Now the page shows one; its
    # block, run where it says (the end of harness/data.py, whose names it uses), and its yaml, written from the
    # page's words, compose and build a pipeline of 2 data shards that passes the factory checks.
    from gensbi_sharding.harness import data, registry
    from gensbi_sharding.harness.pipeline import build_pipeline

    (block,) = [b for b in _blocks("gensbi_models.md", "python") if "@register_data(" in b]
    text = " ".join((REPO / "docs" / "gensbi_models.md").read_text().split())
    held = re.search(r"with `conf/data/noisy_gauss.yaml` holding (.*?) \(", text)
    assert held, "gensbi_models.md no longer says what its example's conf/data/noisy_gauss.yaml holds"
    shutil.copytree(REPO / "conf", tmp_path / "conf")
    (tmp_path / "conf" / "data" / "noisy_gauss.yaml").write_text("\n".join(re.findall(r"`(\w+: \w+)`", held[1])))
    registry.data_names()  # the built-ins first, so the page's is the only registration to give back
    request.addfinalizer(lambda: registry.unregister("data", "noisy_gauss"))
    exec(block, dict(vars(data)))
    cfg = _composed(["data=noisy_gauss", "eval.enabled=false"], tmp_path / "conf")
    validate(cfg)
    assert (cfg.data.num_simulations, cfg.data.batch_size) == (2000, 128)
    pipe = build_pipeline(cfg.data, seed=0, mesh=gs.make_mesh(model_axis=1), shards=2)
    assert pipe.val_pairs == 200 and next(pipe.train_batches)["theta"].shape == (128, 2)
    assert np.abs(pipe.sims.theta_mean).max() < 0.1 and np.abs(pipe.sims.x_std - 1).max() < 0.1  # N(0, I) + noise


def test_readme_quick_start_make_run_time_spans_the_latest_measured_one():
    # Read in a fresh clone: Quick start said make run takes 111.4 s, the Tests section's latest fresh-clone line
    # 93.7 s (a day later, same default): a new user saw two times for one run. The latest must lie in Quick start's.
    text = " ".join((REPO / "README.md").read_text().split())
    quick = re.search(r"a placement block and a final line \([^)]*\) in ([\d.]+)(?:-([\d.]+))? s in a fresh clone",
                      text)
    latest = re.search(r"Latest, in a fresh clone.*?`make run` ([\d.]+) s", text)
    assert quick and latest, "README's Quick start or Tests section no longer states make run's time as read here"
    low, high, measured = float(quick[1]), float(quick[2] or quick[1]), float(latest[1])
    assert round(low) <= round(measured) <= round(high), (
        f"README's Tests section measured make run at {measured} s, outside Quick start's {low}-{high} s: "
        "update Quick start")


def _tables(text):
    """The markdown tables of ``text`` outside code blocks: ``{header line: [its lines]}``."""
    found, current = {}, None
    for line in [*text.splitlines(), ""]:
        if line.startswith("|"):
            current = current if current is not None else found.setdefault(line, [])
            current.append(line)
        else:
            current = None
    return found


def test_readme_sbibm_table_is_the_committed_one_and_that_is_rebuilt_from_the_committed_scores(tmp_path, monkeypatch):
    # Read by a new user: "are the README's numbers backed by a file or a command?" The sbibm table's are: the README
    # names `sbibm.py table --from-results benchmarks/results/sbibm_results.csv`, which rebuilds
    # benchmarks/results/sbibm_table.md. Nothing checked that the README's rows, their bold ("below sbibm's best") or
    # posterior_quality.md's copy agree with that file, so a rerun committed without the README edited went unseen.
    import importlib.util

    spec = importlib.util.spec_from_file_location("sbibm_script", REPO / "benchmarks" / "sbibm.py")
    sbibm = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sbibm)
    monkeypatch.setattr(sbibm, "plot", lambda *a: b"")  # the table's numbers are under test, not its picture
    results = REPO / "benchmarks" / "results"
    rebuilt = sbibm.table_from_results(results / "sbibm_results.csv", tmp_path)
    assert rebuilt == (results / "sbibm_table.md").read_text()
    (header, committed), = _tables(rebuilt).items()
    readme = _tables((REPO / "README.md").read_text())[header]
    assert [row.replace("**", "") for row in readme] == committed
    for row in readme[2:]:
        cells = row.replace("**", "").split("|")
        (ours, ours_sd), (best, best_sd) = ((float(m[1]), float(m[2] or "nan")) for m in
                                            (re.match(r"\s*([\d.]+)(?: \+- ([\d.]+))?", cells[k]) for k in (3, 5)))
        n = int(m[1]) if (m := re.search(r"\((\d+) obs\.", cells[3])) else 10
        # bold, as the note under the table says: below sbibm's best by more than the difference's standard error
        assert ("**" in row) == (best - ours > math.hypot(ours_sd, best_sd) / math.sqrt(n)), (
            f"README: bold marks a row below sbibm's best by more than the standard error, and only those: {row}")
    assert _tables((REPO / "docs" / "posterior_quality.md").read_text())[header] == readme


def test_readme_tables_are_their_docs_pages_tables():
    # The README shortens each section and links its docs/ page, which repeats the section's tables (shard_model,
    # step_overhead, GenSBI's pipeline, sbibm; the GPU-sized Flux1's is on its page alone): one updated without the
    # other shows a user two sets of numbers for one measurement.
    readme = _tables((REPO / "README.md").read_text())
    pages = {page.name: _tables(page.read_text()) for page in sorted((REPO / "docs").glob("*.md"))}
    repeated = [(name, header) for header in readme for name, tables in pages.items() if header in tables]
    assert len(repeated) >= 4, repeated
    differ = [f"{name}: {header}" for name, header in repeated if pages[name][header] != readme[header]]
    assert differ == [], differ


def test_a_paragraph_ending_in_a_colon_is_followed_by_what_it_introduces():
    # Read in docs/library.md: "A training script of your own, end to end (this runs as written ...): build ...
    # and train on:", then "(The script is in the README ...)": the page promised a script and gave a pointer;
    # gensbi_models.md's "wrap any model you built (this runs as written ...):" did the same. What a colon
    # introduces comes next: a code block, a table (or its one-line caption, then the table), a list or a heading.
    found = []
    for page in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        text = re.sub(r"```.*?```", "```", page.read_text(), flags=re.S)  # a code block: one paragraph, never a colon's
        paragraphs = [p.strip() for p in re.split(r"\n\s*\n", text)]
        for before, after, then in zip(paragraphs, paragraphs[1:], [*paragraphs[2:], ""]):
            introduced = after.startswith(("```", "|", "- ", "* ", "#")) or (
                "\n" not in after and then.startswith("|"))
            if before.endswith(":") and not introduced:
                found.append(f"{page.name}: ...{before[-60:]!r} then {after[:60]!r}")
    assert found == [], "\n".join(found)


def test_benchmarks_md_names_every_benchmark_script():
    # Read by a new user from the README's "every run and its conditions" link: docs/benchmarks.md covered three
    # scripts; benchmarks/gensbi_pipeline.py, gensbi_scale.py and sbibm.py, written up on other pages, were not
    # named there, so the page read as the whole list. Every script a user runs is named on it.
    scripts = [f"benchmarks/{path.name}" for path in sorted((REPO / "benchmarks").iterdir())
               if path.suffix == ".sh" or path.suffix == ".py" and "__main__" in path.read_text()]
    assert len(scripts) >= 7, scripts
    text = (REPO / "docs" / "benchmarks.md").read_text()
    assert [script for script in scripts if script not in text] == []


def test_a_simulator_of_ones_own_is_found_from_the_readme_contents_and_the_harness_page():
    # Read as a new user with a simulator of their own (the usual next step after make run): its steps were only in
    # docs/gensbi_models.md, under "GenSBI's own models", named by the README at that section's end; neither the
    # README's Contents nor the harness page, where a user looks for the data step, led there.
    section = "docs/gensbi_models.md#a-model-or-data-set-of-your-own-in-the-harness"
    page = (REPO / section.split("#")[0]).read_text()
    assert "@register_data" in page.split("## A model or data set of your own in the harness")[1].split("\n## ")[0]
    readme = (REPO / "README.md").read_text()
    assert f"]({section})" in readme.split("## Contents")[1].split("\n## ")[0]
    harness = (REPO / "docs" / "harness.md").read_text()
    assert f"]({section.removeprefix('docs/')})" in harness.split("Contents:")[1].split("\n## ")[0]


def test_library_md_names_every_exported_name():
    # Read as the library's "full reference": partition_spec_for, logical_axes_of, partition_specs, bytes_per_device,
    # batch_axes, batch_size_divisor, input_partition_spec and check_model_groups_local, exported in __all__ with
    # docstrings, were in neither the README's table nor docs/library.md (a few named in passing only), so a user
    # reading the reference could not know they exist.
    text = (REPO / "docs" / "library.md").read_text()
    assert [name for name in gs.__all__ if not re.search(rf"`{name}\b", text)] == []


def test_readme_and_library_md_module_lists_name_every_library_module():
    # Read as "Modules, one job each": the README's list and docs/library.md's left out batch_sizes (the nearest
    # valid batch size) and the README's checkpoint_fixes (restore's advice), so a reader looking for where a
    # message comes from was sent to modules that do not hold it.
    modules = sorted(path.stem for path in (REPO / "gensbi_sharding").glob("*.py") if path.stem != "__init__")
    for page in (REPO / "README.md", REPO / "docs" / "library.md"):
        listed = page.read_text().split("Modules, one job each")[1].split("No module is over")[0]
        assert [name for name in modules if f"`{name}`" not in listed] == [], page.name


def test_gensbi_models_md_names_every_model_field_once_with_its_meaning_and_every_fixed_one():
    # gensbi_models.md's "Bring your own Params": per model, a table of the Params fields a user sets as model.*, each
    # with its meaning, checked against the settings' dataclasses (whose match with GenSBI's Params
    # test_task_fixed_fields checks), then every field the harness fixes. Was: a bare list of names, and Flux1's
    # vec_in_dim, context_in_dim and dim_cond named nowhere (a user reading GenSBI's Flux1Params could not tell whether
    # to set them).
    import dataclasses

    from gensbi_sharding.harness.config import Flux1Config, ModelConfig, SimformerConfig
    from gensbi_sharding.harness.task_fixed import TASK_FIXED

    text = (REPO / "docs" / "gensbi_models.md").read_text()
    common = {f.name for f in dataclasses.fields(ModelConfig)}
    for model, schema in (("flux1", Flux1Config), ("simformer", SimformerConfig)):
        table = text.split(f"| `model={model}` field | What it sets |\n|---|---|\n", 1)[1].split("\n\n", 1)[0]
        rows = [re.fullmatch(r"\| `(\w+)` \| (.+) \|", line) for line in table.splitlines()]
        assert all(rows), table
        named = [row[1] for row in rows]
        assert named == [f.name for f in dataclasses.fields(schema) if f.name not in common], model
        assert all(len(row[2]) > 10 for row in rows)  # a meaning, not a blank cell
    fixed = " ".join(text.split("The harness fixes the other fields", 1)[1].split("\n\n", 1)[0].split())
    for field, (where, models, *_) in TASK_FIXED.items():
        if models:  # GenSBI's Params fields (dim_theta, dim_x, partition_axis: every factory's arguments)
            assert f"`{field}` (" in fixed or f"`{field}` and" in fixed, field
    assert "`model.init`" in text.split("The harness fixes the other fields", 1)[0].rsplit("\n\n", 1)[1]


def _flat(node, prefix=""):
    """``node`` (a plain dict) as ``{dotted key: leaf value}``."""
    flat = {}
    for key, value in node.items():
        flat.update(_flat(value, f"{prefix}{key}.") if isinstance(value, dict) else {f"{prefix}{key}": value})
    return flat


@pytest.mark.slow
def test_harness_md_names_every_setting_with_its_composed_default():
    # Read by a new user looking up train.log_every, eval.c2st_jobs or model.mlp_ratio: docs/harness.md had no list of
    # the settings, so 30 of them were named on no page. Each row of its "Every setting" table names its keys (and the
    # option they need, `model=transformer`) and their defaults; both are checked against what launch.py composes.
    from omegaconf import OmegaConf

    text = (REPO / "docs" / "harness.md").read_text()
    assert "## Every setting and its default\n" in text, "docs/harness.md has no list of the settings"
    section = text.split("## Every setting and its default\n", 1)[1].split("\n## ", 1)[0]
    (header, rows), = _tables(section).items()
    named, wrong, configs, stated_values = {}, [], {}, []
    for row in rows[2:]:
        first, default = row.split("|")[1:3]
        names = [token for token in re.findall(r"`([^`]+)`", first) if "=" not in token]
        option = [token for token in re.findall(r"`([^`]+)`", first) if "=" in token]
        if tuple(option) not in configs:  # composed once each: Hydra's compose costs ~0.4 s
            configs[tuple(option)] = _flat(OmegaConf.to_container(_composed(option, REPO / "conf"), resolve=True))
        composed = configs[tuple(option)]
        values, *stated = default.split(" (", 1)  # the rest: what a launch-mode option composes (below)
        values = re.findall(r"`([^`]+)`", values)
        values = values * len(names) if len(values) == 1 else values
        assert len(values) == len(names), row
        for group_option, its in re.findall(r"`(\w+=\w+)`: ([^;)]+)", stated[0] if stated else ""):
            stated_values.append((group_option, names, re.findall(r"`([^`]+)`", its), row))
        for name, value in zip(names, values):
            named.setdefault(tuple(option), set()).add(name)
            true = composed.get(name, "<not a setting>")
            typed = "null" if true is None else str(true).lower() if isinstance(true, bool) else str(true)
            if typed != value and not (
                    isinstance(true, float) and re.fullmatch(r"[\d.e-]+", value) and float(value) == true):
                wrong.append(f"{name}: the page says {value}, {' '.join(option) or 'the default'} composes {true!r}")
    assert wrong == [], wrong
    assert set(configs) == {(), ("model=transformer",)}, set(configs)
    # A launch-mode option that sets a setting its own way is named beside that setting's default, with its value:
    # was "`120`" for distributed.timeout_s, which distributed=local composes as 60.
    for file in sorted((REPO / "conf" / "distributed").glob("*.yaml")):
        option = f"distributed={file.stem}"
        composed = _flat(OmegaConf.to_container(_composed([option], REPO / "conf"), resolve=True))
        for name in sorted(key for key, value in composed.items() if configs[()].get(key) != value):
            said = [dict(zip(names, values)).get(name) for opt, names, values, _ in stated_values
                    if opt == option and name in names]
            typed = "null" if composed[name] is None else str(composed[name])
            assert said == [typed], f"docs/harness.md's Every setting: {name}'s row says {said} for {option} " \
                                    f"(`{option}`: `{typed}` beside its default), {option} composes {typed}"
    for option, names, values, row in stated_values:  # and every value stated so is the one its option composes
        assert len(values) == len(names), row
        composed = _flat(OmegaConf.to_container(_composed([option], REPO / "conf"), resolve=True))
        assert values == ["null" if composed[n] is None else str(composed[n]) for n in names], row
    for option, composed in configs.items():
        shared = named[()] if option else set()  # a model's row names only what the default model lacks or sets else
        missing = sorted(set(composed) - named[option] - shared - {"hydra"})
        assert missing == [], f"docs/harness.md's Every setting lacks {missing} ({' '.join(option) or 'the default'})"


def test_every_table_of_measurements_is_dated_beside_it():
    # Read by a new user asking "when, and by what, was this measured?": step_overhead.py's table (README and
    # docs/benchmarks.md, from 2026-11-29) and posterior_quality.md's defaults table (2026-11-30) carried no date, so a
    # reader could not tell them from a measurement of the code they cloned. A table of measured numbers has a date in
    # the two paragraphs before it or the one after; the sbibm table is its committed file's (tested above).
    sbibm_header = next(iter(_tables((REPO / "benchmarks" / "results" / "sbibm_table.md").read_text())))
    undated = []
    for page in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        text = re.sub(r"```.*?```", "```", page.read_text(), flags=re.S)
        paragraphs = [p.strip() for p in re.split(r"\n\s*\n", text)]
        for i, paragraph in enumerate(paragraphs):
            header = paragraph.splitlines()[0]
            if not paragraph.startswith("|") or not re.search(r"\d\.\d", paragraph[len(header):]) or header in (
                    sbibm_header, "| setting | default | what it sets |"):
                continue
            if not re.search(r"20\d\d-\d\d-\d\d", "\n".join(paragraphs[max(0, i - 2):i + 2])):
                undated.append(f"{page.name}: {header}")
    assert undated == [], undated


@pytest.mark.slow
def test_every_documented_sbibm_run_command_passes_runs_checks(tmp_path, monkeypatch):
    # docs/posterior_quality.md now says how to try `sbibm.py run` tiny (a new user had only the hours-long commands);
    # each `run` command the pages give, as typed (in a bash block or inline), passes the checks run makes before any
    # job: its flags, its extra arguments composed for every (task, budget), its rounds. No job runs here.
    import importlib.util

    spec = importlib.util.spec_from_file_location("sbibm_script", REPO / "benchmarks" / "sbibm.py")
    sbibm = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sbibm)
    started = []
    monkeypatch.setattr(sbibm, "run", lambda root, tasks, budgets, extra, **kw: started.append(extra) or [])
    commands = set()
    for page in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        text = page.read_text()
        lines = [line.split("  #")[0] for block in re.findall(r"```bash\n(.*?)```", text, re.S)
                 for line in block.splitlines()]
        inline = re.findall(r"`(python benchmarks/sbibm\.py run [^`<]+)`", re.sub(r"```.*?```", "", text, flags=re.S))
        commands |= {" ".join(c.split()) for c in [*lines, *inline] if c.startswith("python benchmarks/sbibm.py run --root")}
    assert any("train.steps=20" in command for command in commands), commands  # the tiny one
    for command in sorted(commands):
        args = shlex.split(command)[2:]
        args[args.index("--root") + 1] = str(tmp_path / "root")
        try:
            sbibm.main(args)
        except SystemExit as refused:
            pytest.fail(f"{command}: refused ({refused.code})")
    assert len(started) == len(commands)


def _sbibm_commands(text):
    """Each ``python benchmarks/sbibm.py run|table ...`` command of ``text``: its bash-block and indented lines (a
    line ending in ``\\`` joined to the next) and its inline ones, comments dropped."""
    lines = [line.strip().split("  #")[0] for line in text.replace("\\\n", " ").splitlines()]
    inline = re.findall(r"`(python benchmarks/sbibm\.py (?:run|table) [^`]+)`", text)
    return {" ".join(c.split()) for c in [*lines, *inline] if re.match(r"python benchmarks/sbibm\.py (run|table) ", c)}


def test_no_documented_sbibm_command_writes_into_the_shipped_results():
    # Read by a new user: the README, docs/posterior_quality.md and sbibm.py's --help gave `sbibm.py run --root
    # benchmarks/results` (and `table ... --out benchmarks/results`), so re-running the documented command added jobs
    # to the committed results folder. Every run and table they show writes under a folder of the user's own; the one
    # that writes benchmarks/results is the committed table's provenance, rebuilt from its own sbibm_results.csv.
    shipped = (REPO / "benchmarks" / "results").resolve()
    commands = set()
    for source in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), REPO / "benchmarks" / "sbibm.py"]:
        commands |= {(source.name, command) for command in _sbibm_commands(source.read_text())}
    assert len({c for _, c in commands if " run " in c}) >= 5 and any(" table " in c for _, c in commands), commands
    into_shipped = []
    for where, command in sorted(commands):
        args = shlex.split(command)[2:]
        flag = "--root" if args[0] == "run" else "--out"
        folders = [a for a in args[1:] if not a.startswith("-")]  # table's default --out: its first folder
        target = args[args.index(flag) + 1] if flag in args else folders[0] if folders else None  # None: --help
        if target is None:
            continue
        rebuilds_itself = "--from-results" in args and args[args.index("--from-results") + 1] == (
            "benchmarks/results/sbibm_results.csv")
        if (REPO / target).resolve().is_relative_to(shipped) and not rebuilds_itself:
            into_shipped.append(f"{where}: {command}")
    assert into_shipped == [], "\n".join(into_shipped)

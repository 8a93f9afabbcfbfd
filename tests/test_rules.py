"""Rules users write in config: the presets, custom tables from YAML and the command line, errors."""

import re
import shutil
import warnings
from pathlib import Path

import pytest
from flax import nnx
from hydra import compose, initialize_config_dir
from jax.sharding import NamedSharding, PartitionSpec as P

from checkout_files import shipped_files
from gensbi_sharding.harness.config import ConfigError, register_configs
from gensbi_sharding.harness.config_checks import validate
from gensbi_sharding.harness.models.mlp import make_mlp
from gensbi_sharding.harness.rule_config import as_rule, check_table_against_mesh, rule_table
from gensbi_sharding import (LOGICAL_AXES, RULES, ShardingFallbackWarning, make_mesh,
                                      shard_model_by_table)

CONF = Path(__file__).resolve().parents[1] / "conf"
# The rule file the YAML-error tests write on a search path: a name no user picks, since Hydra reads conf/ first and a
# conf/rule/<name>.yaml of the user's (the README's my_rule.yaml) would be composed in its place
PROBE = "yaml_probe_r69t"


def composed(*overrides, config_dir=CONF):
    """The run config as ``python launch.py <overrides>`` would see it."""
    register_configs()
    with initialize_config_dir(version_base="1.3", config_dir=str(config_dir)):
        return compose(config_name="config", overrides=list(overrides))


@pytest.fixture(scope="module")
def mesh(devices):
    return make_mesh(model_axis=2)  # {"data": 4, "model": 2}


def placed_mlp(mesh, table):
    """A tiny mlp (W=16, H=32, d_in=13) placed under ``table``; returns its arrays by path."""
    model = make_mlp(dim_theta=2, dim_x=3, rngs=nnx.Rngs(0), width=16, depth=1, mlp_ratio=2,
                     time_embed_dim=8)
    shard_model_by_table(model, mesh, table)
    return {"/".join(map(str, path)): var.get_value() for path, var in nnx.graph.iter_graph(model)
            if isinstance(var, nnx.Param)}


def assert_placed(arrays, mesh, expected):
    for path, spec in expected.items():
        sharding = arrays[path].sharding
        assert sharding.is_equivalent_to(NamedSharding(mesh, spec), arrays[path].ndim), (path, sharding)


@pytest.mark.parametrize("name", sorted(RULES))
def test_builtin_presets_equal_rules(name):
    assert rule_table(composed(f"rule={name}").rule) == (name, dict(RULES[name]))


def test_every_preset_says_when_to_use_it():
    presets = shipped_files(CONF / "rule")  # the ones git tracks: a user's own rule file is theirs to word
    assert {p.stem for p in presets} >= set(RULES) | {"fsdp_tensor"}
    for path in presets:
        assert path.read_text().startswith("# Use this when"), path.name


def test_fsdp_tensor_preset():
    name, table = rule_table(composed("rule=fsdp_tensor").rule)
    assert name == "fsdp_tensor" and table == {"embed": "data", "mlp": "model", "heads": "model",
                                               "vocab": "model", "in": None, "out": None}


def test_custom_rule_from_a_yaml_file(tmp_path, mesh):
    conf = shutil.copytree(CONF, tmp_path / "conf")
    (conf / "rule" / "my_rule.yaml").write_text(
        "# Use this when the residual stream is wide: embed over model, mlp over data.\n"
        "name: my_rule\nembed: model\nmlp: data\n")
    cfg = composed("rule=my_rule", config_dir=conf)
    validate(cfg)
    name, table = rule_table(cfg.rule)
    assert name == "my_rule" and table == {**dict.fromkeys(LOGICAL_AXES), "embed": "model", "mlp": "data"}
    check_table_against_mesh(name, table, tuple(mesh.axis_names))
    assert_placed(placed_mlp(mesh, table), mesh, {
        "blocks/0/up/kernel": P("model", "data"), "blocks/0/up/bias": P("data"),
        "blocks/0/down/kernel": P("data", "model"), "in_proj/kernel": P(None, "model"),
        "out_proj/kernel": P("model", None), "out_proj/bias": P()})


def test_custom_rule_from_a_command_line_override(mesh):
    name, table = rule_table(composed("rule=fsdp", "rule.mlp=model").rule)
    assert table == {**dict(RULES["fsdp"]), "mlp": "model"}
    assert name == "fsdp+overrides"  # reports never show a built-in's name for another table
    assert_placed(placed_mlp(mesh, table), mesh, {
        "blocks/0/up/kernel": P("data", "model"), "blocks/0/up/bias": P("model"),
        "in_proj/kernel": P(None, "data"), "blocks/0/norm/scale": P("data")})


def test_override_to_several_mesh_axes(mesh):
    _, table = rule_table(composed("rule=replicated", "rule.embed=[data,model]").rule)
    assert table["embed"] == ("data", "model")
    assert_placed(placed_mlp(mesh, table), mesh, {
        "in_proj/kernel": P(None, ("data", "model")), "blocks/0/up/kernel": P(("data", "model"), None)})


@pytest.mark.parametrize("overrides,match", [
    (["+rule.embedd=data"], r"rule\.embedd is not a logical axis; valid keys: embed, mlp, heads, "
                            r"vocab, in, out \(and name\)"),
    (["rule.embed=3"], r"rule\.embed=3 must be a mesh axis name, a list of them, or null"),
    (["rule.embed=[data,1]"], r"rule\.embed=\[data,1\]: a list must hold mesh axis names"),
    (["rule.embed=[]"], r"rule\.embed=\[\]: a list must hold mesh axis names"),
])
def test_bad_table_from_the_command_line(overrides, match):
    cfg = composed(*overrides)
    with pytest.raises(ConfigError, match=match):
        validate(cfg)


@pytest.mark.parametrize("rule,match", [
    ({"embed": "data", "heds": "model"}, r"rule\.heds is not a logical axis"),
    ({"embed": {"axis": "data"}}, r"rule\.embed=\{'axis': 'data'\} must be a mesh axis name"),
    ("tensr", r"unknown rule 'tensr'; choose one of replicated, fsdp, tensor"),
    (["embed", "data"], r"rule must be a mapping of logical axes to mesh axes"),
    # Was "TypeError: unhashable type: 'list'" (name: [my_rule] in conf/rule/my_rule.yaml)
    ({"name": ["my_rule"], "embed": "data"}, r"^rule\.name=\[my_rule\] must be one word naming the rule .*: e\.g\. "
                                             r"name: my_rule in the rule's file$"),
    ({"name": 3}, r"^rule\.name=3 must be one word"),
])
def test_bad_table_from_python(rule, match):
    with pytest.raises(ConfigError, match=match):
        rule_table(rule)


@pytest.mark.parametrize("value,axis", [("tensor", "tensor"), (["data", "pipe"], "pipe")])
def test_mesh_axis_the_mesh_lacks(mesh, value, axis):
    _, table = rule_table({"name": "mine", "heads": value})
    typed = re.escape(value if isinstance(value, str) else f"[{','.join(value)}]")  # as the override is typed
    with pytest.raises(ConfigError, match=rf"rule\.heads={typed} \(rule mine\) names mesh axis {axis}, which "
                                          r"the mesh lacks; valid values: data, model or null"):
        check_table_against_mesh("mine", table, tuple(mesh.axis_names))


def test_two_logical_names_on_one_mesh_axis_replicate_with_one_warning(mesh):
    _, table = rule_table({"embed": "model", "mlp": "model"})
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        arrays = placed_mlp(mesh, table)
    messages = [str(w.message) for w in record if issubclass(w.category, ShardingFallbackWarning)]
    assert len(messages) == 1
    for path in ("blocks/0/up/kernel", "blocks/0/down/kernel"):
        assert f"{path} (logical axes" in messages[0]
    assert "'embed' and 'mlp' both map to mesh axis 'model'" in messages[0]
    assert "e.g. ('embed', None), or a rule table with {'mlp': None})" in messages[0]  # its fix (was: none)
    assert messages[0].startswith("2 variable(s) replicated instead of split under custom rule table")
    assert_placed(arrays, mesh, {
        "blocks/0/up/kernel": P(), "blocks/0/down/kernel": P(), "blocks/0/up/bias": P("model"),
        "in_proj/kernel": P(None, "model")})


def test_a_named_rule_table_is_named_in_messages():
    """rule=fsdp_tensor (a harness preset) was called "custom rule table" in the fallback warning."""
    from gensbi_sharding.harness.rule_config import as_rule

    name, table = rule_table({"name": "fsdp_tensor", "embed": "data", "mlp": "model", "heads": "model",
                              "vocab": "model"})
    assert as_rule(name, table).label == "rule 'fsdp_tensor'"
    assert as_rule("fsdp", dict(RULES["fsdp"])).label == "rule 'fsdp'"
    assert as_rule("fsdp", {**dict(RULES["fsdp"]), "mlp": "model"}).label == "rule 'fsdp' with an edited table"
    assert as_rule("custom", {"embed": "data"}).label == "custom rule table"


def test_another_name_declared_unsplit_is_taken_as_the_librarys_tables_take_it():
    # Was: conf/rule/<mine>.yaml with `layers: null` (a stacked-layer axis of a model of one's own, which the
    # library's tables take: {**dict(RULES["fsdp"]), "layers": None}) refused: "rule.layers is not a logical axis".
    from gensbi_sharding.harness.command_checks import command_problem

    for unsplit in (None, []):
        name, table = rule_table({"name": "mine", "embed": "data", "layers": unsplit})
        assert (name, table["layers"], table["embed"]) == ("mine", None, "data")
        assert as_rule(name, table).table["layers"] is None
    with pytest.raises(ConfigError) as split:  # only a logical axis is split: said, with the fix
        rule_table({"layers": "model"})
    assert str(split.value) == ("rule.layers is not a logical axis; valid keys: embed, mlp, heads, vocab, in, out (and "
                                "name); another name (a stacked-layer axis of a model of one's own, say) can only be "
                                "declared unsplit: rule.layers=null")
    with pytest.raises(ConfigError, match=r"rule\.embd is not a logical axis; .*; did you mean rule\.embed\?$"):
        rule_table({"embd": None})  # a typo of a logical axis, unsplit, would leave that axis as it was
    assert command_problem(["rule=fsdp", "+rule.layers=null"]) is None
    assert command_problem(["rule=fsdp", "rule.layers=null"]) == (  # Hydra adds a key only with +
        "rule.layers is no key of the rule table (name, embed, mlp, heads, vocab, in, out); add another name declared "
        "unsplit: +rule.layers=null")
    assert command_problem(["+rule.layers=model"]).endswith(
        "drop +rule.layers=model, or declare it unsplit: +rule.layers=null (only a logical axis is split)")


@pytest.mark.parametrize("text, where, reason", [
    ("name: my_rule\n\tembed: data\n", "line 2, column 1", "(found character '\\t' that cannot start any token); "
                                                         "indent with spaces: YAML takes no tabs"),
    ("name: my_rule\nembed: data\t# split\n", "line 2, column 12", "(found character '\\t' that cannot start any "
                                                                 "token); write spaces for the tab at that column: "
                                                                 "YAML takes no tabs"),  # was: "indent with spaces"
    ("name: my_rule\nembed: data\nembed: model\n", "line 3, column 1", "(found duplicate key embed); keep one of the "
                                                                      "two 'embed:' lines"),
    ("name: my_rule\nembed: [data\n", "line 3, column 1", "(expected ',' or ']', but got '<stream end>'); write each "
                                                        "setting as key: value, nested ones indented by spaces, lists "
                                                        "as [a, b]"),
])
@pytest.mark.fast_cases(2)
def test_a_rule_file_yaml_cannot_read_is_named_with_its_line_and_fix(tmp_path, text, where, reason):
    # Was Hydra's 87-line traceback of its defaults list and PyYAML's scanner, the file named only in its last line.
    from gensbi_sharding.harness.command_checks import command_problem

    (tmp_path / "rule").mkdir()
    (tmp_path / "rule" / f"{PROBE}.yaml").write_text(text)
    searched = f"hydra.searchpath=[file://{tmp_path}]"
    assert command_problem([searched, f"rule={PROBE}"]) == (
        f"{tmp_path / 'rule' / PROBE}.yaml, {where}: YAML cannot read it {reason}")
    assert command_problem(["-m", searched, f"rule=fsdp,{PROBE}"]).startswith(f"{tmp_path / 'rule' / PROBE}.yaml, ")
    assert command_problem([searched, "rule=fsdp"]) is None  # a file this command never reads stops nothing


def test_a_rule_file_written_as_a_list_is_named_with_the_fix(tmp_path):
    # Was Hydra's "ValidationError raised while composing config: Invalid type assigned: list is not a subclass of
    # Dict[str, Any]", naming no fix.
    from gensbi_sharding.harness.command_checks import command_problem

    (tmp_path / "rule").mkdir()
    (tmp_path / "rule" / f"{PROBE}.yaml").write_text("- embed: data\n- mlp: model\n")
    searched = f"hydra.searchpath=[file://{tmp_path}]"
    assert command_problem([searched, f"rule={PROBE}"]) == (
        f"{tmp_path / 'rule' / PROBE}.yaml holds a list (its lines start with '- '), and a config file is a "
        "mapping: write each setting as key: value, without the '- '")
    assert command_problem([searched, "rule=tensor"]) is None


def test_an_unknown_rule_name_names_the_harness_rule_file_as_a_table_and_a_kept_name_key_is_said_to_be_dropped():
    # Was: plan_shardings(model, mesh, "fsdp_tensor") said "unknown sharding rule" alone, though the harness holds
    # conf/rule/fsdp_tensor.yaml; that file's table, its name: key kept, was told to write {'name': None}.
    from omegaconf import OmegaConf

    import gensbi_sharding as gs

    model, mesh = make_mlp(dim_theta=2, dim_x=3, rngs=nnx.Rngs(0), width=16, depth=1), make_mesh(model_axis=2)
    example = "{k: v for k, v in OmegaConf.load('conf/rule/fsdp_tensor.yaml').items() if k != 'name'}"
    for refused in (lambda: gs.plan_shardings(model, mesh, "fsdp_tensor"), lambda: gs.shard_model(model, mesh,
                                                                                                   "fsdp_tensor")):
        with pytest.raises(ValueError, match="unknown sharding rule 'fsdp_tensor'") as err:
            refused()
        assert f"a harness rule file, conf/rule/<name>.yaml, is a rule table once its name: key is dropped, e.g. " \
               f"{example}" in str(err.value), err.value
    file = OmegaConf.load(CONF / "rule" / "fsdp_tensor.yaml")
    with pytest.raises(ValueError) as err:
        gs.plan_shardings(model, mesh, dict(file))
    assert str(err.value).endswith("('name' names a harness rule file's table (conf/rule/*.yaml): drop it)")
    assert "{'name': None}" not in str(err.value)
    table = {k: v for k, v in file.items() if k != "name"}  # the example, as said, places
    assert gs.plan_shardings(model, mesh, table).specs


@pytest.mark.parametrize("typed, meant", [("fsdpp", "fsdp"), ("tensr", "tensor"), ("replicate", "replicated")])
def test_a_rule_name_near_a_named_rule_is_told_that_rule_not_the_harness_rule_files(typed, meant):
    # Was: 'fsdpp' got "a harness rule file, conf/rule/<name>.yaml, is a rule table once its name: key is dropped"
    # and no word of fsdp; resolve_rule, plan_shardings and shard_model alike.
    import gensbi_sharding as gs

    model, mesh = make_mlp(dim_theta=2, dim_x=3, rngs=nnx.Rngs(0), width=16, depth=1), make_mesh(model_axis=2)
    for refused in (lambda: gs.resolve_rule(typed), lambda: gs.plan_shardings(model, mesh, typed),
                    lambda: gs.shard_model(model, mesh, typed)):
        with pytest.raises(ValueError, match=f"unknown sharding rule '{typed}'") as err:
            refused()
        assert str(err.value).endswith(f"; did you mean '{meant}'?"), err.value
        assert "conf/rule" not in str(err.value)
    assert gs.resolve_rule(meant).name == meant  # the name offered resolves

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
    # Was (a folder whose name ends in punctuation, "killed."): "cfg.train.resume='<tmp>/killed'. cfg.output_dir=..."
    # -- the sentence's reading of a plain word's last character took it out of the value.
    for end in ".:,;":
        killed = tmp_path / f"killed{end}"
        (killed / "checkpoints" / "5").mkdir(parents=True)
        error = run(compose_tiny(output_dir=killed))["error"]
        found = re.search(r"or in a new folder with cfg\.train\.resume=(.*) and cfg\.output_dir='<new folder>'; set "
                          r"cfg\.output_dir in omegaconf\.open_dict\(cfg\)$", error)
        assert found and ast.literal_eval(found[1]) == str(killed), error
        error = run(compose_tiny(output_dir=tmp_path / name / "file" / f"sub{end}"))["error"]
        found = re.fullmatch(r"ConfigError: cfg\.output_dir=(.*): .* is a file, not a folder; choose another "
                             r"cfg\.output_dir; set cfg\.output_dir in omegaconf\.open_dict\(cfg\)", error)
        assert found and ast.literal_eval(found[1]) == str(tmp_path / name / "file" / f"sub{end}"), error
    # Sentence punctuation after a plain override is the sentence's; a number stays a number.
    assert python_words("rerun with train.resume=auto: or train.steps=16.") == (
        "rerun with cfg.train.resume='auto': or cfg.train.steps=16.")


@pytest.mark.parametrize("spec", [{"data": 2, "model_axis": "x"}, {"data": 2, "model_axis": 0},
                                  {"data": 2, "devices": []}, {"data": 2, "devices": [0, 0]},
                                  {"data": 2, "model": 2, "devices": "0123"}])
def test_resolve_mesh_given_axis_sizes_with_a_bad_model_axis_or_devices_suggests_no_spec_that_fails(devices, spec):
    # Was: TypeError "unsupported operand type(s) for %: 'int' and 'str'" in place of the unknown key's message;
    # "for data=2 x model=0 write {'devices': [], 'model_axis': 0}"; a fix naming device 0 twice; a string's
    # characters counted as its devices. Now the key's refusal stands, with the rule and no spec to copy.
    import gensbi_sharding as gs

    with pytest.raises(ValueError) as err:
        gs.resolve_mesh(spec)
    assert re.fullmatch(r"unknown mesh spec key '(data|model)'; accepted keys: \('devices', 'model_axis'\) \(the "
                        r"axes' sizes are not keys: a mesh spec gives model_axis, the data axis taking the rest of "
                        r"the( \d+)? devices\)", str(err.value)), str(err.value)


def test_resolve_mesh_given_axis_sizes_and_device_objects_suggests_the_ids_a_spec_takes(devices):
    # Was: "write {'devices': [CpuDevice(id=4), ...], ...}", no value a config can hold.
    import jax

    import gensbi_sharding as gs

    with pytest.raises(ValueError, match=r"for data=2 x model=1 write (\{.*\})$") as err:
        gs.resolve_mesh({"data": 2, "devices": jax.devices()[4:6]})
    fix = ast.literal_eval(re.search(r"write (\{.*\})$", str(err.value))[1])
    assert fix == {"devices": [4, 5], "model_axis": 1}
    assert [d.id for d in gs.resolve_mesh(fix).devices.flat] == [4, 5]


def test_z_score_statistics_over_processes_are_those_of_one_process_holding_every_row(monkeypatch):
    # Was, on 2 real processes (jax.distributed, gloo; x ~ 1000 +- 1): std [1.0308, 0.9354, 0.9354] for the rows'
    # [1.0083, 0.9790, 0.9984], 2-6 % off: the all-gather places the float64 sums on devices, which without
    # jax_enable_x64 hold float32, and the sum of squares minus the squared mean cancelled. Every multi-process run
    # normalised so, and (round 46) every data.shards above the process count. The all-gather is stood in for by
    # what it does with each process's values: placed on a device, then stacked (two processes, alike).
    import jax
    import numpy as np
    from jax.experimental import multihost_utils

    from gensbi_sharding.harness.simulation_data import global_stats

    monkeypatch.setattr(jax, "process_count", lambda: 2)
    monkeypatch.setattr(multihost_utils, "process_allgather",
                        lambda x, **_: np.stack([np.asarray(jax.device_put(x))] * 2))
    rows = (1000.0 + np.random.default_rng(0).standard_normal((1000, 3))).astype(np.float32)
    (dropped,), (mean, std) = global_stats([3], [rows], 2)
    assert dropped == 6
    np.testing.assert_array_equal(mean, rows.mean(0, dtype=np.float64).astype(np.float32))
    np.testing.assert_array_equal(std, rows.std(0, dtype=np.float64).astype(np.float32))


def test_pad_for_mesh_given_a_traced_count_in_jit_names_a_fix_that_works_there(devices):
    # Was (round 46's 0-d fix): "got JitTracer(~int32[]); pass int(n)", which raises inside jax.jit.
    import jax
    import jax.numpy as jnp

    import gensbi_sharding as gs

    mesh = gs.make_mesh(model_axis=2)
    with pytest.raises(ValueError, match=r"got JitTracer\(~?int32\[\]\); pass a static count \(x\.shape\[0\], or n "
                                         r"in jax\.jit's static_argnums\)"):
        jax.jit(lambda n: gs.pad_for_mesh(n, mesh))(jnp.array(10))
    assert jax.jit(lambda n: gs.pad_for_mesh(n, mesh), static_argnums=0)(10) == (12, 10)  # the fix named
    assert jax.jit(lambda x: gs.pad_for_mesh(x.shape[0], mesh))(jnp.ones((10, 2))) == (12, 10)
    # Was: "pass int(n)" for a count int() changes (10.5 -> 10, True -> 1) or that stays refused (-3, NaN).
    import numpy as np

    for count in (np.array(10.5), np.float32(10.5), jnp.array(10.5), np.array(True), np.array(-3), np.array(np.nan)):
        with pytest.raises(ValueError, match=r"got .*; pass the whole row count, e\.g\. x\.shape\[0\]$"):
            gs.pad_for_mesh(count, mesh)
    for count in (np.array(10), np.float64(10.0), jnp.array(10)):  # int(n) keeps these: it is the fix named
        with pytest.raises(ValueError, match=r"; pass int\(n\)$"):
            gs.pad_for_mesh(count, mesh)
        assert gs.pad_for_mesh(int(count), mesh) == (12, 10)

"""sample.py's refusal of an existing output names a free file (REVIEW72C, session 72).

Sampling a run three times at one observation: the second refusal named ``x_o_posterior_2.npz``; pasted, that command
run again was refused naming ``x_o_posterior_2_2.npz`` (then ``_2_2_2``), not the next number, ``x_o_posterior_3.npz``.
"""

from gensbi_sharding.harness.sample_output import output_problem


def test_a_numbered_output_that_exists_is_refused_naming_the_next_number(tmp_path):
    for name in ("x_o_posterior.npz", "x_o_posterior_2.npz"):
        (tmp_path / name).write_bytes(b"an earlier sampling")
    out = tmp_path / "x_o_posterior_2.npz"
    assert output_problem(out, str(out)) == (f"{out} exists and is never overwritten: pass --out "
                                             f"{tmp_path / 'x_o_posterior_3.npz'} (or another new file)")


def test_a_name_ending_in_a_number_of_its_own_is_counted_past_the_taken_ones(tmp_path):
    out = tmp_path / "run_7.npz"  # numbered on from its own 7: run_8 is taken, so run_9
    out.write_bytes(b"")
    (tmp_path / "run_8.npz").write_bytes(b"")
    assert output_problem(out, str(out)).endswith(f"pass --out {tmp_path / 'run_9.npz'} (or another new file)")


def test_an_output_another_sample_py_wrote_while_sampling_is_kept_naming_a_free_file(tmp_path, monkeypatch, capsys):
    """Two sample.py at one x_o at once: the later one's refusal named '<a new file>.npz', not a name to paste."""
    import numpy as np

    from gensbi_sharding.harness import own_observation

    np.save(tmp_path / "x_o.npy", np.zeros(2, np.float32))
    out = tmp_path / "x_o_posterior.npz"

    def the_other_call_finishes_first(*args, details, **kwargs):
        out.write_bytes(b"the other call's samples")
        details.update(observation=np.zeros(2, np.float32), seed=0, ode_steps=2, step=5, checkpoint="c",
                       weights="EMA at the last step", checkpoint_step=5, acceptance=1.0, dtype="float32")
        return np.ones((3, 2), np.float32)

    monkeypatch.setattr(own_observation, "sample_posterior", the_other_call_finishes_first)
    info = {own_observation.NORMALIZATION: {"theta_mean": [0.0, 0.0]}}  # what the size check reads of a run
    monkeypatch.setattr(own_observation, "checked_request", lambda *a: (None, None, info, None, None, 3, None, None))
    assert own_observation.main([str(tmp_path), str(tmp_path / "x_o.npy")]) == 1
    err = capsys.readouterr().err
    assert err.rstrip().endswith(f"nothing written: pass --out {tmp_path / 'x_o_posterior_2.npz'}"), err
    assert out.read_bytes() == b"the other call's samples"

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

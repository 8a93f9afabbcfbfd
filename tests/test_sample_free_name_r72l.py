"""sample.py's refusal of an existing output names a free file to pass, not "<a new file>" (session 72)."""

from gensbi_sharding.harness.sample_output import out_path, output_problem


def test_an_existing_default_output_is_refused_naming_the_first_free_numbered_name(tmp_path):
    observation = tmp_path / "x_o.npy"
    observation.write_bytes(b"")
    out = out_path(None, observation)
    out.write_bytes(b"first run's samples")
    (tmp_path / "x_o_posterior_2.npz").write_bytes(b"second run's samples")
    message = output_problem(out, None)
    assert message == (f"{out} exists and is never overwritten: pass --out {tmp_path / 'x_o_posterior_3.npz'} "
                       "(or another new file)")
    assert output_problem(tmp_path / "x_o_posterior_3.npz", str(tmp_path / "x_o_posterior_3.npz")) is None


def test_the_free_name_is_quoted_for_the_shell(tmp_path):
    folder = tmp_path / "John's runs"
    folder.mkdir()
    out = folder / "x.npz"
    out.write_bytes(b"")
    assert output_problem(out, str(out)).endswith(f"pass --out '{tmp_path}/John'\"'\"'s runs/x_2.npz' (or another new file)")

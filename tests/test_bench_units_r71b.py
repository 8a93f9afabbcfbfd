"""benchmarks/init.py prints a small model's sizes in their own unit, not as 0.00 GB."""

import sys

from faults_helpers import REPO, load_benchmark


def _script(monkeypatch):
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))  # its cli_args
    return load_benchmark("init")


def test_init_benchmark_names_a_small_models_bytes_in_their_unit(monkeypatch, capsys):
    # Was: "mlp width=8 depth=1 mlp_ratio=1: 0.00 GB float32" and "| 0.000 |" in the fullest device peak (GB)
    # column, as if neither the model nor any device held a byte.
    script = _script(monkeypatch)
    child = {"wall_s": 2.0, "cpu_s": 1.0, "peak": 330e6, "base": 290e6, "fullest": 1_160, "model_bytes": 2_320}
    monkeypatch.setattr(script, "run_child", lambda way, args, save: dict(child, way=way))
    monkeypatch.setattr(script, "largest_difference", lambda path, reference: 0.0)
    monkeypatch.setattr(sys, "argv", ["init.py", "--width", "8", "--depth", "1", "--mlp-ratio", "1",
                                      "--repeats", "1"])
    assert script.main() == 0
    out = capsys.readouterr().out
    assert "mlp width=8 depth=1 mlp_ratio=1: 2.3 KB float32;" in out
    assert "| fullest device peak | largest difference to eager |" in out
    rows = [line.split(" | ") for line in out.splitlines() if line.startswith(("| eager |", "| sharded |"))]
    assert [row[8] for row in rows] == ["1.2 KB", "1.2 KB"]

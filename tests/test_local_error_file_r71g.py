"""distributed=local: a job whose process other than 0 died names that death in error.txt, not only process 0's
Gloo traceback (HOSTS71B: a sweep's job with process 1 killed by SIGKILL left an error.txt whose only text was
process 0's "Gloo AllGather failed ... Connection reset by peer", which read as the cause)."""

from __future__ import annotations

from pathlib import Path

from omegaconf import OmegaConf

from gensbi_sharding.harness import local_cluster

DEATH = "process 1 of 2 died (killed by SIGKILL); the others ended 9.8 s later"
GLOO = "Traceback (most recent call last):\njax.errors.JaxRuntimeError: Gloo AllGather failed: Connection reset\n"


def _job(monkeypatch, tmp_path: Path, first_failed: int | None, error_txt: str | None) -> str | None:
    if error_txt is not None:
        (tmp_path / "error.txt").write_text(error_txt)
    outcome = {"status": "error", "error": DEATH, "first_failed_process": first_failed}
    monkeypatch.setattr(local_cluster, "run_local_processes", lambda cfg, out, watch: dict(outcome))
    return local_cluster.run_local_job(OmegaConf.create({}), tmp_path, {"config": {}}, None)


def test_another_process_died_error_txt_leads_with_that_death_and_keeps_process_0s_traceback(monkeypatch, tmp_path):
    text = _job(monkeypatch, tmp_path, 1, GLOO)
    assert text is not None
    assert text.splitlines()[0] == DEATH
    assert "process 0's traceback (after process 1 died):" in text
    assert text.endswith(GLOO)


def test_process_0_failed_itself_its_traceback_stays_as_written(monkeypatch, tmp_path):
    assert _job(monkeypatch, tmp_path, 0, GLOO) is None  # run.py leaves error.txt as process 0 wrote it


def test_no_traceback_written_the_death_line_is_the_text(monkeypatch, tmp_path):
    text = _job(monkeypatch, tmp_path, 1, None)
    assert text == f"{DEATH}\n(each process's own output: process_<rank>.log)\n"

"""distributed=local: SIGTERM to the parent during training is said at once on the console (HOSTS71B: JAX's
preemption service takes the children's SIGTERM without a word, so nothing was said until the step under way ended
and its checkpoint was written: 11 s at model.width=512 on 2 cores, minutes for a large model)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_sigterm_to_the_parent_in_training_is_said_before_the_stop(tmp_path):
    out = tmp_path / "run"
    console = tmp_path / "console.txt"
    env = {k: v for k, v in os.environ.items() if k != "JAX_NUM_CPU_DEVICES"}
    with console.open("w") as sink:
        parent = subprocess.Popen(
            [sys.executable, "launch.py", "experiment=quick", "distributed=local", "distributed.local_processes=2",
             "devices.cpu_count=4", "train.steps=2000", f"hydra.run.dir={out}"],
            cwd=ROOT, stdout=sink, stderr=subprocess.STDOUT, env=env)
        try:
            deadline = time.monotonic() + 200
            while "[5/7] train" not in console.read_text() and time.monotonic() < deadline:
                assert parent.poll() is None, console.read_text()[-3000:]
                time.sleep(0.2)
            parent.send_signal(signal.SIGTERM)
            parent.wait(timeout=120)
        finally:
            parent.kill()
    text = console.read_text()
    assert parent.returncode == 75, text[-3000:]
    said = text.index("received SIGTERM: passed on to the 2 processes, which stop together where they "
                      "agree (in training: a step boundary a few steps on, after a checkpoint)")
    assert said < text.index("preempted by SIGTERM at step")  # said before the stop, not with it
    assert text.count("received SIGTERM") == 1

"""Train a sharded flow-matching posterior: ``python launch.py mesh=auto rule=tensor``.

Compose the config (conf/), run the job (gensbi_sharding.harness.run), exit non-zero
if any job of the run or sweep failed. Importing this file never starts JAX's backend.
"""

import sys

import hydra
from omegaconf import DictConfig

from gensbi_sharding.harness.config import register_configs
from gensbi_sharding.harness.preemption import EXIT_PREEMPTED
from gensbi_sharding.harness.run import run

register_configs()
failed_jobs: list[str] = []


@hydra.main(version_base="1.3", config_path="conf", config_name="config")
def main(cfg: DictConfig) -> float | None:
    metrics = run(cfg)
    if metrics["status"] == "preempted":  # checkpointed; the rest of a sweep would be cut short too
        sys.exit(EXIT_PREEMPTED)
    if metrics["status"] != "ok":
        failed_jobs.append(metrics.get("error", "error"))
    return metrics.get("c2st")


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        print("interrupted: the job's metrics.json records it (status interrupted)", file=sys.stderr)
        sys.exit(130)
    sys.exit(1 if failed_jobs else 0)

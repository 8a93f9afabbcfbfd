"""One sequential job of ``benchmarks/sbibm.py run --rounds 2`` (or more): truncated rounds per observation, in a
job folder that ``run`` resumes from and ``table`` reads like an amortised job's.

``run`` starts it; by hand it runs one (task, budget) cell into a folder of your choice:

    python benchmarks/sequential.py --job <root>/sir_10000_sequential-2-box-0.5/job --task sir --budget 10000 \\
        --rounds 2 --region box --margin 0.5 -- mesh=none

The rounds (``sequential_rounds.sequential_scores``: TSNPE-style truncated proposals, round 1 shared) score the
observations the config asks (``eval.observations``), each costing ``--budget`` simulations. The folder gets what
an amortised job leaves there for ``run`` and ``table``: ``.hydra/config.yaml`` and ``.hydra/overrides.yaml``,
``c2st.csv`` (rewritten as each observation is scored), ``metrics.json`` (status ``ok``, or ``error`` / ``stopped``
with why) and, its own, ``sequential.json`` (rounds, region, margin), which marks it as sequential (written first, so
a job stopped or killed while it writes the rest is started again in place). It holds
the folder's lock while it runs. A stopped job saved no checkpoint: ``run`` starts it again. A ``--job`` that is a
``launch.py`` run's folder, or lies inside one, is refused before anything there is touched, as is a sequential
job's folder holding scores (finished, or stopped after some: ``scores_problem``).
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # this checkout's package, not an installed copy
sys.path.append(str(REPO / "benchmarks"))

from cli_args import Refused, fit_console, new_parser, one_of, positive_int  # noqa: E402
from gensbi_sharding.harness.posterior import c2st_csv  # noqa: E402
from gensbi_sharding.messages import clipped  # noqa: E402
from gensbi_sharding.harness.tasks import TASKS  # noqa: E402
from sbibm_method import Method, margin_arg, read_results, region_arg, rounds_arg, write_record  # noqa: E402

RESULTS = REPO / "benchmarks" / "results" / "sbibm_results.csv"


def amortised_scores(task: str, budget: int, results: Path = RESULTS) -> dict[int, float]:
    """The committed amortised C2ST per observation of ``task`` at ``budget`` (``results``), printed beside each
    sequential score; none when the file is missing."""
    if not results.is_file():
        return {}
    return {int(r["observation"]): float(r["c2st"]) for r in read_results(results)
            if r["task"] == task and int(r["num_simulations"]) == budget and r["method"] == "amortised"}


def scores_problem(job: Path) -> str | None:
    """Why ``job``, a sequential job's own folder, is not started again in place: it holds scores (its
    ``metrics.json``: finished, or stopped or failed after scoring some), which starting again deletes first; None if
    it holds none (a new job's, or one killed or stopped before its first score, which ``run`` starts again so).

    Was: ``sequential.py --job <a finished job>`` (a rerun by hand, or one with another ``--margin``) deleted its
    c2st.csv and metrics.json and rewrote its sequential.json before its first round, losing every score; ``run``
    skips such a job, or moves a stopped one aside before starting it again.
    """
    import json

    try:
        metrics = json.loads((job / "metrics.json").read_text())
    except (OSError, ValueError):  # none, or damaged: no score to keep
        return None
    rows = metrics.get("c2st_observations") if isinstance(metrics, dict) else None
    rows = [r for r in rows if isinstance(r, dict) and "observation" in r] if isinstance(rows, list) else []
    if not rows:
        return None
    return (f"--job {job} holds a sequential job ({metrics.get('method', 'sequential')}, status "
            f"{metrics.get('status')}) with the scores of observations {[r['observation'] for r in rows]}, which "
            f"starting it again would delete; pass a new --job, or move {job} aside to run it again")


def main(argv: list[str] | None = None) -> None:
    parser = new_parser(__doc__)
    parser.add_argument("--job", type=Path, required=True, help="the job's folder (run: <root>/<cell>/job)")
    parser.add_argument("--task", type=one_of(TASKS, argument="--task", several=False), required=True,
                        help="the sbibm task")
    parser.add_argument("--budget", type=positive_int, required=True, help="simulations per observation")
    parser.add_argument("--rounds", type=rounds_arg, default=2, help="rounds per observation, equal shares")
    parser.add_argument("--region", type=region_arg, default="box",
                        help="truncation region: the samples' widened box, or their Gaussian's ellipsoid")
    parser.add_argument("--margin", type=margin_arg, default=0.5,
                        help="box widening, times its range, per side; ellipsoid: radius times 1 + margin")
    parser.add_argument("overrides", nargs="*", help="Hydra overrides for every round's training, after --")
    args = parser.parse_args(argv)
    if args.rounds < 2:
        parser.error(f"--rounds {args.rounds}: one round is the amortised preset, which launch.py runs; pass "
                     "--rounds 2 or more")
    from omegaconf import OmegaConf

    from gensbi_sharding.harness.config_checks import scored_observations
    from gensbi_sharding.harness.folder_lock import FolderLock, run_folder_holding
    from sbibm_method import RECORD

    # Only a sequential job's own folder is started again in place (a launch.py run's folder, or one inside it, would
    # lose its c2st.csv, metrics.json and .hydra record to this job's, which are rewritten as it starts)
    # also where a symlink leads (--job <a link to a folder inside a run's> would write a run inside that run)
    host = run_folder_holding(args.job) or run_folder_holding(args.job.resolve())
    if host is not None and not (host == args.job.absolute() and (host / RECORD).is_file()):
        where = ("is the folder of the run {}, whose c2st.csv, metrics.json and .hydra record this job would replace"
                 if host == args.job.absolute()
                 else "lies inside the folder of the run {}, which is never written into")
        parser.error(f"--job {args.job} {where.format(host)}; pass a new folder, e.g. --job {host}-sequential")
    if host is not None and (problem := scores_problem(args.job)):  # a sequential job's own folder, with scores
        parser.error(problem)
    from gensbi_sharding.harness.outputs import write_atomic, write_json
    from sbibm_checks import extra_problem
    from sbibm_method import sequential_problem
    from sequential_rounds import compose_config, sequential_scores, shares_problem

    method = Method(args.rounds, args.region, args.margin)
    # As run checks them (checked by hand, eval.enabled=false would be ignored, data=slcp trained beside --task
    # two_moons, a typo a traceback; each recorded in the job's settings, which table names under its row)
    try:
        cfg = compose_config(args.task, args.budget, args.overrides)
    except Exception:  # noqa: BLE001 (Hydra's or OmegaConf's): an override extra_problem names, next
        cfg = None
    # The share of round 1 first: the budget's own checks are an amortised job's (its whole budget trains at once)
    try:
        problem = (cfg is not None and shares_problem(args.budget, args.rounds, cfg.data.val_fraction,
                                                      cfg.data.batch_size)) \
            or extra_problem(args.overrides, [args.task], [args.budget],
                             {"task": "--task", "budget": "--budget", "root": "--job", "layout": ""}) \
            or sequential_problem(method, [args.task], [args.budget], args.overrides)  # an extra train.resume
    except Refused as environment:  # JAX_PLATFORMS=cuda on a CPU machine: argparse's line, not its usage text
        parser.exit(2, f"{parser.prog}: error: {environment}\n")
    if problem:
        parser.error(problem)
    cfg = cfg if cfg is not None else compose_config(args.task, args.budget, args.overrides)
    from gensbi_sharding.harness.config import ConfigError
    from gensbi_sharding.harness.devices import configure_devices

    try:  # before the folder is touched: a JAX_PLATFORMS or devices.platform JAX cannot start, named in one line
        configure_devices(1, cfg.devices.platform)
    except ConfigError as err:  # one line, before metrics.json is touched
        parser.exit(2, f"{parser.prog}: error: {err}\n")
    from sbibm_args import job_folder_problem

    # (a file; an sbibm.py --root, or outputs/, would become one run's folder, which run and table then refuse)
    if host is None and (problem := job_folder_problem(args.job, method.folder(args.task, args.budget))):
        parser.error(problem)
    job = args.job.absolute()
    lock = FolderLock(job)
    lock.acquire()  # table and run see it as running, as a launch.py job
    # A signal passed on by run (its stop, a preemption: sbibm_jobs.FORWARDED) ends the rounds as Ctrl-C does,
    # saying so in metrics.json, instead of ending the process with no record of why. It is also remembered:
    # scikit-learn's classifier catches KeyboardInterrupt and returns a half-fitted model, whose C2ST the
    # stop check (evaluate_observations calls it before recording a score) keeps from being written.
    stops: list[int] = []

    def stop(signum, frame):
        stops.append(signum)
        raise KeyboardInterrupt

    def stop_check():
        if stops:
            raise KeyboardInterrupt

    previous = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1, signal.SIGUSR2)}
    rows, record = [], {"method": method.label, "config": OmegaConf.to_container(cfg)}
    try:  # the folder's records too: a stop or an error while they are written is said in metrics.json, lock freed
        # The record first: a folder with .hydra (and an earlier attempt's metrics.json) but none is a launch.py run's,
        # refused above (after .hydra, a job killed between the two could not be started again).
        write_record(job, method)
        (job / ".hydra").mkdir(parents=True, exist_ok=True)
        OmegaConf.save(cfg, job / ".hydra" / "config.yaml")
        settings = ["experiment=sbibm", f"data={args.task}", f"data.num_simulations={args.budget}", *args.overrides]
        write_atomic(job / ".hydra" / "overrides.yaml", "".join(f"- {o}\n" for o in settings))
        for stale in ("metrics.json", "c2st.csv"):  # the records are this run's alone
            (job / stale).unlink(missing_ok=True)
        amortised = amortised_scores(args.task, args.budget)
        for row in sequential_scores(cfg, args.budget, method, scored_observations(cfg)[0],
                                     say=lambda line: print(line, flush=True), stop_check=stop_check):
            rows.append(row)
            write_atomic(job / "c2st.csv", c2st_csv(rows))
            beside = (f"amortised {amortised[row['observation']]:.3f}" if row["observation"] in amortised else  # not
                      f"no amortised score of {args.task} at {args.budget} simulations in")  # "amortised nan"
            print(f"observation {row['observation']}: sequential C2ST {row['c2st']:.3f} +- "
                  f"{row['c2st_sd_folds']:.3f}, {beside} ({RESULTS.relative_to(REPO)})", flush=True)
        means = [r["c2st"] for r in rows]
        write_json(job / "metrics.json", {**record, "status": "ok", "c2st": sum(means) / len(means),
                                          "c2st_observations": rows})
    except KeyboardInterrupt:
        write_json(job / "metrics.json", {**record, "status": "stopped", "error": "stopped by Ctrl-C or a signal, "
                                          "with no checkpoint: run starts it again", "c2st_observations": rows})
        raise SystemExit(130) from None
    except Exception as err:
        write_json(job / "metrics.json", {**record, "status": "error", "c2st_observations": rows,
                                          "error": f"{type(err).__name__}: {clipped(' '.join(str(err).split()), 500)}"})
        raise
    finally:
        lock.release()
        for signum, handler in previous.items():  # as they were (main called in a process that goes on)
            signal.signal(signum, handler)
    print(f"mean over observations {[r['observation'] for r in rows]}: sequential C2ST "
          f"{sum(means) / len(means):.3f}", flush=True)


if __name__ == "__main__":
    fit_console()  # a console without UTF-8: a table's character escaped, never an UnicodeEncodeError
    main()

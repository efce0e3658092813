"""Fault isolation, our planner against the reference's strategy, on the same seeded fault sets; figures
printed, never asserted.

Run as ``.venv/bin/python -m tests.bench.bench_isolation`` from the repository root. For every N in {16, 64,
232, 1024, 4096} nodes (domains of 4-18 nodes) and d in {0, 1, 2, 4, 8} persistent faults (node, NVLink-only,
slow, inter-domain link; plus ~1% transient nodes that fail one of their first three jobs), both planners run
the loop planner -> simulated jobs -> results to a verdict (`tests/bench/isolation_sim.py`). Per (N, d): mean
and max rounds, mean jobs, mean node-jobs (GPU cost: the sum of group sizes), how many seeds ended exact (the
verdict names exactly the injected persistent faults) and how many blamed a healthy node. Goals (issue 14):
every seed exact and nobody healthy blamed; rounds <= 0.75 x baseline at N=232, d <= 4, never more than the
baseline; node-jobs <= baseline.
"""

from __future__ import annotations

import statistics
import sys
import time
from dataclasses import dataclass

from nvcre_argo.plan.isolation import plan_baseline_round, plan_isolation_round
from tests.bench.isolation_sim import Planner, Run, blames_healthy, is_exact, make_scenario, run_planner

SIZES = (16, 64, 232, 1024, 4096)
FAULTS = (0, 1, 2, 4, 8)
SEEDS = {16: 40, 64: 40, 232: 40, 1024: 10, 4096: 3}


@dataclass(frozen=True)
class Summary:
    """One planner's figures over the seeds of one (N, d)."""

    mean_rounds: float
    max_rounds: int
    jobs: float
    node_jobs: float
    exact: int
    blamed: int
    disjoint: bool


def summarize(runs: list[Run], exact: list[bool], blamed: list[bool]) -> Summary:
    """Means and counts over the seeds."""
    return Summary(
        mean_rounds=statistics.mean(r.rounds for r in runs),
        max_rounds=max(r.rounds for r in runs),
        jobs=statistics.mean(r.jobs for r in runs),
        node_jobs=statistics.mean(r.node_jobs for r in runs),
        exact=sum(exact),
        blamed=sum(blamed),
        disjoint=all(r.max_rounds_disjoint for r in runs),
    )


def measure(planner: Planner, n: int, d: int, seeds: int) -> tuple[Summary, list[int]]:
    """Run one planner on the seeds of (n, d); also return rounds per seed for the pairwise comparison."""
    runs, exact, blamed = [], [], []
    for seed in range(seeds):
        scenario = make_scenario(n, d, seed)
        run = run_planner(planner, scenario)
        runs.append(run)
        exact.append(is_exact(run.verdict, scenario))
        blamed.append(blames_healthy(run.verdict, scenario))
    return summarize(runs, exact, blamed), [r.rounds for r in runs]


def main() -> int:
    """Print the table; exit 0 (figures are read, not asserted)."""
    started = time.perf_counter()
    print("seeds per N: " + ", ".join(f"N={n}: {s}" for n, s in SEEDS.items()))
    header = (
        f"{'N':>5} {'d':>2} {'seeds':>5} | {'planner':<8} {'rounds':>6} {'max':>4} {'jobs':>7} {'node-jobs':>9} "
        f"{'exact':>7} {'blamed':>6} {'disjoint':>8} | {'rounds/base':>11} {'seeds>base':>10}"
    )
    print(header)
    print("-" * len(header))
    for n in SIZES:
        for d in FAULTS:
            seeds = SEEDS[n]
            ours, ours_rounds = measure(plan_isolation_round, n, d, seeds)
            base, base_rounds = measure(plan_baseline_round, n, d, seeds)
            worse = sum(o > b for o, b in zip(ours_rounds, base_rounds, strict=True))
            ratio = ours.mean_rounds / base.mean_rounds
            for name, s in (("ours", ours), ("baseline", base)):
                tail = f"{ratio:>11.2f} {worse:>10}" if name == "ours" else f"{'':>11} {'':>10}"
                print(
                    f"{n:>5} {d:>2} {seeds:>5} | {name:<8} {s.mean_rounds:>6.2f} {s.max_rounds:>4} {s.jobs:>7.1f} "
                    f"{s.node_jobs:>9.1f} {s.exact:>3}/{seeds:<3} {s.blamed:>6} {'yes' if s.disjoint else 'NO':>8} | "
                    f"{tail}"
                )
            sys.stdout.flush()
    print(f"wall time: {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

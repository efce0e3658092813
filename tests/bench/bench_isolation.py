"""Fault isolation, our planner against the reference's strategy, on the same seeded fault sets; figures printed,
never asserted.

Run as ``.venv/bin/python -m tests.bench.bench_isolation`` from the repository root (``--sizes 1024 --seeds
1024=40`` for one size over more seeds). For every N in {16, 64, 232, 1024, 4096} nodes (domains of 4-18 nodes)
and d in {0, 1, 2, 4, 8} persistent faults (node, NVLink-only, slow, inter-domain link; plus ~1% transient nodes
that fail one of their first three jobs), both planners run the loop planner -> simulated jobs -> results to a
verdict (`tests/bench/isolation_sim.py`). Per (N, d): mean and max rounds, mean jobs, mean node-jobs (GPU cost:
the sum of group sizes), how many seeds ended exact (the verdict names exactly the injected persistent faults) and
how many blamed a healthy node. Goals (issue 14): every seed exact and nobody healthy blamed; rounds <= 0.75 x
baseline at N=232, d <= 4, never more than the baseline; node-jobs <= baseline. Faulty links between domains cost
far more than node faults to find exactly (every other domain pair must be seen passing), so a table splits
each planner's node-jobs by the number of faulty links in the seed, and a last one compares node-jobs over the
seeds where the baseline's verdict is exact too (the same verdict for both).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from nvcre_argo.plan.isolation import plan_baseline_round, plan_isolation_round
from tests.bench.isolation_sim import Planner, Run, blames_healthy, is_exact, make_scenario, run_planner

SIZES = (16, 64, 232, 1024, 4096)
FAULTS = (0, 1, 2, 4, 8)
SEEDS = {16: 40, 64: 40, 232: 40, 1024: 40, 4096: 3}


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
    per_seed: tuple[Run, ...] = ()
    """Each seed's run, in seed order (the tables below compare the planners seed by seed)."""
    exact_per_seed: tuple[bool, ...] = ()
    links_per_seed: tuple[int, ...] = ()
    """How many faulty links between domains each seed injected."""

    def node_jobs_by_links(self) -> dict[int, list[int]]:
        """Node-jobs of each seed, keyed by how many faulty links between domains the seed injected."""
        by_links: defaultdict[int, list[int]] = defaultdict(list)
        for run, count in zip(self.per_seed, self.links_per_seed, strict=True):
            by_links[count].append(run.node_jobs)
        return dict(by_links)


def summarize(runs: list[Run], exact: list[bool], blamed: list[bool], links: list[int]) -> Summary:
    """Means and counts over the seeds."""
    return Summary(
        mean_rounds=statistics.mean(r.rounds for r in runs),
        max_rounds=max(r.rounds for r in runs),
        jobs=statistics.mean(r.jobs for r in runs),
        node_jobs=statistics.mean(r.node_jobs for r in runs),
        exact=sum(exact),
        blamed=sum(blamed),
        disjoint=all(r.max_rounds_disjoint for r in runs),
        per_seed=tuple(runs),
        exact_per_seed=tuple(exact),
        links_per_seed=tuple(links),
    )


def measure(planner: Planner, n: int, d: int, seeds: int) -> Summary:
    """Run one planner on the seeds of (n, d)."""
    runs, exact, blamed, links = [], [], [], []
    for seed in range(seeds):
        scenario = make_scenario(n, d, seed)
        run = run_planner(planner, scenario)
        runs.append(run)
        exact.append(is_exact(run.verdict, scenario))
        blamed.append(blames_healthy(run.verdict, scenario))
        links.append(len(scenario.link_faults))
    return summarize(runs, exact, blamed, links)


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)), help="comma-separated N (default: all)")
    parser.add_argument("--seeds", action="append", default=[], metavar="N=COUNT", help="seeds for one N (repeatable)")
    args = parser.parse_args(argv)
    seeds = dict(SEEDS)
    try:
        args.sizes = [int(n) for n in args.sizes.split(",")]
        for item in args.seeds:
            n, count = item.split("=", 1)
            seeds[int(n)] = int(count)
    except ValueError:
        parser.error("--sizes takes numbers, --seeds takes N=COUNT")
    args.seeds = seeds
    unknown = [n for n in args.sizes if n not in args.seeds]
    if unknown:
        parser.error(f"no seed count for N={unknown[0]}: add --seeds {unknown[0]}=COUNT")
    return args


def print_by_links(rows: list[tuple[int, int, Summary, Summary]]) -> None:
    """Mean node-jobs of each planner over the seeds with 0, 1, 2 ... faulty links, where a cell has any."""
    print("mean node-jobs, ours / baseline, by the number of faulty links between domains in the seed:")
    for n, d, ours, base in rows:
        ours_by_links, base_by_links = ours.node_jobs_by_links(), base.node_jobs_by_links()
        if set(ours_by_links) == {0}:
            continue
        cells = [
            f"{links} link(s), {len(jobs)} seed(s): {statistics.mean(jobs):.0f} / "
            f"{statistics.mean(base_by_links[links]):.0f}"
            for links, jobs in sorted(ours_by_links.items())
        ]
        print(f"  N={n:>5} d={d}: " + "; ".join(cells))


def print_where_baseline_exact(rows: list[tuple[int, int, Summary, Summary]]) -> None:
    """Mean node-jobs of each planner over the seeds where the baseline's verdict is exact too, where a cell has
    seeds where it is not: the baseline spends less where it stops short of a fault, most often a faulty link."""
    print("mean node-jobs, ours / baseline, over the seeds where the baseline's verdict is exact:")
    for n, d, ours, base in rows:
        both = [
            (o.node_jobs, b.node_jobs)
            for o, b, exact in zip(ours.per_seed, base.per_seed, base.exact_per_seed, strict=True)
            if exact
        ]
        if len(both) == len(base.per_seed):
            continue
        if not both:
            print(f"  N={n:>5} d={d}: exact in none of {len(base.per_seed)} seeds")
            continue
        mean_ours, mean_base = (statistics.mean(column) for column in zip(*both, strict=True))
        print(f"  N={n:>5} d={d}: {len(both)} of {len(base.per_seed)} seeds: {mean_ours:.1f} / {mean_base:.1f}")


def main(argv: Sequence[str] | None = None) -> int:
    """Print the tables; exit 0 (figures are read, not asserted)."""
    args = parse_args(sys.argv[1:] if argv is None else argv)
    started = time.perf_counter()
    print("seeds per N: " + ", ".join(f"N={n}: {args.seeds[n]}" for n in args.sizes))
    header = (
        f"{'N':>5} {'d':>2} {'seeds':>5} | {'planner':<8} {'rounds':>6} {'max':>4} {'jobs':>7} {'node-jobs':>9} "
        f"{'exact':>7} {'blamed':>6} {'disjoint':>8} | {'rounds/base':>11} {'seeds>base':>10}"
    )
    print(header)
    print("-" * len(header))
    rows: list[tuple[int, int, Summary, Summary]] = []
    for n in args.sizes:
        for d in FAULTS:
            seeds = args.seeds[n]
            ours = measure(plan_isolation_round, n, d, seeds)
            base = measure(plan_baseline_round, n, d, seeds)
            worse = sum(o.rounds > b.rounds for o, b in zip(ours.per_seed, base.per_seed, strict=True))
            ratio = ours.mean_rounds / base.mean_rounds
            for name, s in (("ours", ours), ("baseline", base)):
                tail = f"{ratio:>11.2f} {worse:>10}" if name == "ours" else f"{'':>11} {'':>10}"
                print(
                    f"{n:>5} {d:>2} {seeds:>5} | {name:<8} {s.mean_rounds:>6.2f} {s.max_rounds:>4} {s.jobs:>7.1f} "
                    f"{s.node_jobs:>9.1f} {s.exact:>3}/{seeds:<3} {s.blamed:>6} {'yes' if s.disjoint else 'NO':>8} | "
                    f"{tail}"
                )
            rows.append((n, d, ours, base))
            sys.stdout.flush()
    print_by_links(rows)
    print_where_baseline_exact(rows)
    print(f"wall time: {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""`make scorecard`: how well the product finds bad nodes, on the simulated GPU cluster; figures printed and
written to JSON, never asserted.

Run from the repository root as (`make scorecard SCORECARD_ARGS=...` passes the options)

    .venv/bin/python -m tests.bench.scorecard [--sizes 16,64] [--seed N] [--out build/scorecard.json]
        [--training] [--max-concurrent N] [--runs faults-1,no-fault] [--kinds crash,transient]
        [--no-fault-each-size]
    .venv/bin/python -m tests.bench.scorecard --report build/scorecard.json [more.json ...]   # tables again

For each cluster size (GPU nodes in NVLink cliques of 8) it starts one simulated cluster (`tests/sim/cluster.py`:
real control plane, Argo, Trainer, JobSet; simulated GPU nodes playing a fault plan) and runs, each in a
namespace of its own, one Certification with these categories, in this order (each with `maxConcurrent: 16`):

    communication  nccl-all-reduce  testScale diagnose (`--communication pairs`: nodesPerJob 2),
                                    busBandwidthGBps >= 100 (healthy: 380), timeoutPerJob 90s
    diagnostics    dcgm-level1      one node per group, timeoutPerJob 90s
    training       nemotron5-8b     with --training: nodesPerJob 2, avgStepTimeSec <= 5 (healthy: 2 s),
                                    maxSteps 20, timeoutPerJob 90s

Each entry is compiled from a `--catalog` directory that gives the built-in entry the health expression
`scorecard_run.HEALTH_EXPRESSION` (cordoned, tainted `nvidia.com/gpu-unhealthy`, condition `GpuUnhealthy`,
or not Ready), as a site whose GPU health agent marks nodes would configure it; the built-in default only
catches a cordon. Why diagnose for communication: a slow, hung or corrupting member slows, blocks or corrupts
the whole collective, so a fixed group's result can only blame all of its nodes; fault isolation splits failing
groups and confirms each suspect with a known-healthy partner, which is what names the node (and clears a
transient failure). Fixed groups (`--communication pairs`, and the training category) confirm the nodes of a
group blamed as a whole the same way after their groups (`plan.confirmation`).

Measured on 2 cores (sharing nothing): 16 nodes 12.5 minutes (three runs: long faults 5.6, short faults 3.2,
no fault 3.1), 64 nodes 15.4 minutes (faults 8.4, no fault 6.0), each cluster starting in about 20 s; the
default (no-fault run on the largest size only) takes about 25 minutes, plus any wait for the machine's
cluster lock (not counted in the printed times). Hence these choices:
- training is opt-in: a third category adds about 40% to every run, for one more kind (slow-training) and a
  second look at crashes;
- one run without faults, on the largest cluster (`--no-fault-each-size` for one per size): the other sizes'
  healthy groups still count false positives;
- `maxConcurrent: 16`: with all 64 diagnostics groups at once (64 step pods and their executors on 2 cores)
  the sim kubelet's lease renewals fell behind, the node controller set the system node and two healthy GPU
  nodes `Ready=Unknown` for good (the sim kubelet never posts a Ready status again), and the run stalled with
  its step pods unschedulable. At 16 at once the median lease age peaked at 19 s (lease 40 s) under a load
  of 12; `--max-concurrent 0` lifts the cap. That was with a step pod per group; the default shared runner
  runs every group in one pod, which the overhead benchmark ran with 256 groups at once. With it (and this
  cap) 64 nodes took 16.9 minutes (faults 13.3, of which the communication category's 5 diagnose rounds 9.6;
  no fault 2.9), with the same scores; without the cap (`--max-concurrent 0 --runs faults-1`) the faults run
  took 12.7 minutes, with the same scores. 256 nodes with training (`--sizes 256 --training --max-concurrent 0`)
  took 26.8 minutes (faults 17.1, of which diagnose 10.5; no fault 8.1).

The fault runs inject every kind of `tests/bench/scorecard_faults.py` on random nodes, at most one per node
group (the pair categories have the same groups), with random `afterSeconds` where the kind takes one (seeded:
the same seed gives the same faults on the same nodes); at 16 nodes the kinds do not all fit in one run, so the
long kinds (hang, stall, health, notready) run together and the short ones in a second run; from 64 nodes one
run holds two or more copies of each kind. The no-fault run injects nothing. What each run is scored on is what
a user reads: each category's failed-node and succeeded-node ConfigMaps (through the Certification's status)
and the Certification's result; the node groups come from the group-result ConfigMaps (a node left out of a
later category's plan shifts that category's pairs, so its groups are read, not assumed).

A health system marks a node once: when the first category has ended, the node marks (health, notready) leave
the fault plan and the nodes stay marked until the run's namespace is deleted. Left in, the simulator would
make each mark again on every later workload, and for a taint the API server refuses the duplicate and the sim
kubelet fails the pod, a failure the product would be credited with. Between runs every node must be
Ready, schedulable, untainted and free of fault conditions again; a fault condition the sim kubelet leaves
behind after its namespace is deleted (its undo merges the kubelet's conditions and keeps the others) is
removed by the scorecard, as an operator repairing the node would.

What a correct product reports, per kind and category (`tests/bench/scorecard_scoring.py`'s `EXPECTATIONS`;
WF WorkloadFailed, TV ThresholdViolation, HW HardwareFailureDetected; `-` the category cannot see the fault,
so reporting the node is a false positive; `not certified` any failure reason, or left out of the plan):

    kind              communication       diagnostics        training           why
    crash             WF                  WF                 WF                 the node's rank exits non-zero first
    hang              WF                  WF                 WF                 blocked until timeoutPerJob
    stall             WF                  WF                 WF                 blocked before any output
    transient         failed once         -                  -                  crashes on its first workload only
    slow-nccl         TV                  -                  -                  bus bandwidth below the threshold
    slow-training     -                   -                  TV                 step time above the threshold
    datacheck         WF                  -                  -                  nccl-tests' wrong results, exit 1
    health-condition  HW                  not certified      not certified      condition set during the first run
    health-taint      HW                  not certified      not certified      taint added during the first run
    health-cordon     HW                  not certified      not certified      cordoned during the first run
    notready          HW                  not certified      not certified      NotReady during the first run

A fault the category can see is one its workload exercises (or, for a health mark, one on the node before the
category is planned). Healthy groupmates reported with a group-wide fault (a slow or hung collective has no
single culprit) are false positives like any other, listed under the kind that caused them.

Printed per size, then over all sizes: per kind, the (node, category) pairs expected, found, wrong-reason,
missed (certified), untested, recall, false positives caused and precision; a kind x category matrix; the
crash groups (one crashing node, healthy groupmates) and how many blamed the whole group, which measures the
run step's known blind spot (it polls every 10 s and blames the rank that failed first; when a crash and
JobSet's teardown both fall between two polls, nothing says who failed first). Wall time per run and size.

Exit code: 0 when every run completed (whatever the figures), 1 when one could not (it is in the JSON with
its error). The cluster takes the machine's simulated-cluster lock, so it may wait for other users of it.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Final

import yaml
from kubernetes.client.exceptions import ApiException

from tests.bench.scorecard_faults import plan_runs
from tests.bench.scorecard_run import (
    COMMUNICATION_SCALES,
    DEFAULT_MAX_CONCURRENT,
    FAULT_DEFAULTS,
    HEALTH_EXPRESSION,
    RunRecord,
    Settings,
    categories,
    certification,
    progress,
    run_scenario,
    wait_nodes_clean,
)
from tests.bench.scorecard_scoring import CATEGORY_ORDER, CrashGroup, NodeVerdict, kinds_seen_in
from tests.bench.scorecard_tables import (
    CostLine,
    RunLine,
    category_table,
    cost_lines,
    crash_table,
    duration,
    kind_table,
    runs_table,
)
from tests.harness.versions import REPO_ROOT
from tests.sim import scenario
from tests.sim.cluster import SimCluster, gpu_nodes
from tests.sim.kubelet import node_manifest

DEFAULT_SIZES: Final = (16, 64)
PER_CLIQUE: Final = 8
DESCRIPTION: Final = "How well the product finds bad nodes on simulated GPU clusters (figures printed, JSON written)."
LOCK_STEP: Final = "the machine's simulated-cluster lock"  # SimCluster.timings' name for the wait


# ------------------------------------------------------------------------------------------- planning


def preview_groups(size: int, settings: Settings) -> list[list[str]]:
    """The node pairs faults are placed in: the communication category's groups with `--communication pairs`
    on this cluster, from `nvcre-argo plan` on the simulated nodes as their kubelet registers them; the
    training category's, when it runs, must be the same pairs. (A diagnose category plans no fixed groups; its
    isolation finds the faults wherever they fall, so the pairs serve it as well.)"""
    nodes = [node_manifest(spec, 0) for spec in gpu_nodes(size, per_clique=PER_CLIQUE)]
    listing = yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": nodes})
    with _yaml_file(certification("scorecard", dataclasses.replace(settings, communication="pairs"))) as path:
        proc = subprocess.run(
            [str(Path(sys.executable).parent / "nvcre-argo"), "plan", str(path), "--nodes", "-", "-o", "json"],
            input=listing, capture_output=True, text=True, cwd=REPO_ROOT, timeout=300, check=False,
        )  # fmt: skip
    if proc.returncode != 0:
        raise RuntimeError(f"nvcre-argo plan failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    planned = {item["domain"]: item for item in json.loads(proc.stdout)["categories"]}
    pairs = [sorted(group["nodes"]) for group in planned["communication"]["groups"]]
    training = [sorted(group["nodes"]) for group in planned["training"]["groups"]] if settings.training else pairs
    if sorted(pairs) != sorted(training):
        raise RuntimeError("the communication and training categories would not run the same node groups")
    return pairs


@contextlib.contextmanager
def _yaml_file(document: Mapping[str, Any]) -> Iterator[Path]:
    """A YAML file of one document, for a CLI that reads its input from a file; removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="nvcre-scorecard-") as directory:
        path = Path(directory) / "certification.yaml"
        path.write_text(yaml.safe_dump(dict(document)), encoding="utf-8")
        yield path


@dataclass
class SizeRecord:
    """One cluster size: its runs and times."""

    size: int
    seed: int
    groups: int = 0
    planned_runs: list[str] = field(default_factory=list)
    lock_wait_seconds: float = 0.0
    cluster_start_seconds: float = 0.0
    seconds: float = 0.0
    runs: list[RunRecord] = field(default_factory=list)
    error: str = ""


def run_size(size: int, settings: Settings, *, no_fault: bool, save: Callable[[SizeRecord], None]) -> SizeRecord:
    """Plan the runs of one size (seeded; `no_fault`: with the run without a fault), start its cluster and
    play every run on it; `save` is called with the record after each run, so an interrupted scorecard keeps
    what it measured."""
    record = SizeRecord(size=size, seed=settings.seed)
    began = time.monotonic()
    groups = preview_groups(size, settings)
    record.groups = len(groups)
    kinds = [kind for kind in kinds_seen_in(settings.domains) if settings.kinds is None or kind.name in settings.kinds]
    specs = plan_runs(groups, random.Random(settings.seed * 100_003 + size), kinds, no_fault=no_fault)
    specs = [spec for spec in specs if settings.runs is None or spec.name in settings.runs]
    record.planned_runs = [spec.name for spec in specs]
    nodes = gpu_nodes(size, per_clique=PER_CLIQUE)
    try:
        with SimCluster(nodes=nodes) as sim, sim.api_client() as api:
            record.lock_wait_seconds = sim.timings.get(LOCK_STEP, 0.0)
            record.cluster_start_seconds = sum(sim.timings.values()) - record.lock_wait_seconds
            for spec in specs:
                wait_nodes_clean(api, [node.name for node in sim.nodes])
                progress(f"{size} nodes: run {spec.name} ({len(spec.injections)} faults) ...")
                run = run_scenario(sim, api, spec, size=size, settings=settings, timeout_s=run_timeout_s(size))
                progress(f"{size} nodes: run {spec.name}: {run.error or run.result} in {duration(run.seconds)}")
                record.runs.append(run)
                record.seconds = time.monotonic() - began - record.lock_wait_seconds
                save(record)
    except (scenario.ScenarioError, ApiException, RuntimeError, OSError) as error:
        record.error = f"{type(error).__name__}: {str(error)[:2000]}"
    record.seconds = time.monotonic() - began - record.lock_wait_seconds
    save(record)
    return record


def run_timeout_s(size: int) -> float:
    """How long one run may take before it counts as one that could not complete: up to three categories,
    each up to timeoutPerJob per wave of groups plus their orchestration, with a wide margin for a loaded
    machine."""
    return 900.0 + 15.0 * size


# ------------------------------------------------------------------------------------------- output


def injected_counts(runs: Sequence[RunRecord]) -> dict[str, int]:
    return dict(Counter(item["kind"] for run in runs for item in run.injections))


def run_lines(runs: Sequence[RunRecord]) -> list[RunLine]:
    def kinds(run: RunRecord) -> tuple[str, ...]:
        counted = Counter(item["kind"] for item in run.injections)
        return tuple(f"{kind} x{count}" if count > 1 else kind for kind, count in counted.items())

    return [
        RunLine(
            run.name,
            kinds(run),
            run.result,
            run.expected_result,
            run.seconds,
            run.error,
            tuple(category.get("seconds") for category in run.categories),
        )
        for run in runs
    ]


def report(title: str, runs: Sequence[RunRecord], domains: Sequence[str], *, costs: bool = True) -> list[str]:
    """The tables of a set of runs (one size, or all of them) over the categories they ran; `costs`: with each
    run's object sizes, step memory and planning time (one size's runs, whose names are unique)."""
    verdicts = [verdict for run in runs for verdict in run.verdicts]
    lines = [title, *runs_table(run_lines(runs)), ""]
    lines += [*kind_table(verdicts, injected_counts(runs)), ""]
    lines += [*category_table(verdicts, injected_counts(runs), domains), ""]
    lines += crash_table(group for run in runs for group in run.crash_groups)
    leftovers = [name for run in runs for name in run.leftover_trainjobs]
    if leftovers:
        lines.append(f"TrainJobs left unfinished after their run: {', '.join(leftovers)}")
    late = [name for run in runs for name in run.marks_dropped_late]
    if late:
        lines.append(f"workloads that started before the node marks left the fault plan: {', '.join(late)}")
    measured = [cost_line(run) for run in runs if costs and run.largest_objects]
    return [*lines, *(["", *cost_lines(measured)] if measured else [])]


def cost_line(run: RunRecord) -> CostLine:
    plans = [(str(category["domain"]), category.get("planSeconds") or {}) for category in run.categories]
    return CostLine(run.name, run.largest_objects, run.step_memory_mib, plans)


def size_title(record: SizeRecord) -> str:
    planned = max(len(record.planned_runs), len(record.runs))
    runs = f"{len(record.runs)} runs" if len(record.runs) == planned else f"{len(record.runs)} of {planned} runs"
    return (
        f"== {record.size} GPU nodes (cliques of {PER_CLIQUE}, {record.groups} node pairs), seed {record.seed}: "
        f"{runs} in {duration(record.seconds)}"
        f" (cluster start {duration(record.cluster_start_seconds)}; not counted: waiting"
        f" {duration(record.lock_wait_seconds)} for the machine's cluster lock)"
        + (f"; ERROR {record.error}" if record.error else "")
        + " =="
    )


def to_json(records: Sequence[SizeRecord], settings: Settings) -> dict[str, Any]:
    return {
        "seed": settings.seed,
        "categories": categories(settings),
        "faultDefaults": FAULT_DEFAULTS,
        "healthExpression": HEALTH_EXPRESSION,
        "order": list(settings.domains),
        "sizes": [asdict(record) for record in records],
    }


def incomplete_runs(records: Sequence[SizeRecord]) -> list[str]:
    """`<size>/<run>` for every planned run that did not complete (an error, or never started)."""
    found = []
    for record in records:
        done = {run.name for run in record.runs if not run.error}
        found += [f"{record.size}/{name}" for name in record.planned_runs if name not in done]
        if record.error and not record.planned_runs:
            found.append(f"{record.size}/(planning)")
    return found


def _names(text: str | None) -> frozenset[str] | None:
    return frozenset(name.strip() for name in text.split(",") if name.strip()) if text else None


def _interrupt(signum: int, frame: object) -> None:
    """SIGTERM ends the scorecard like Ctrl-C, so the cluster is stopped: its components run in sessions of
    their own and would outlive a plain exit."""
    del signum, frame
    raise KeyboardInterrupt("SIGTERM")


def records_from_json(document: Mapping[str, Any]) -> list[SizeRecord]:
    """The records of a JSON file this module wrote (to print its tables again, or several files together)."""
    records = []
    for size in document["sizes"]:
        runs = [_run_from_json(run) for run in size["runs"]]
        records.append(SizeRecord(**{**size, "runs": runs}))
    return records


def _run_from_json(run: Mapping[str, Any]) -> RunRecord:
    verdicts = [NodeVerdict(**{**item, **_tuples(item, "reasons", "causes")}) for item in run["verdicts"]]
    groups = [CrashGroup(**{**item, **_tuples(item, "group", "blamed")}) for item in run["crash_groups"]]
    return RunRecord(**{**run, "verdicts": verdicts, "crash_groups": groups})


def _tuples(item: Mapping[str, Any], *keys: str) -> dict[str, tuple[str, ...]]:
    return {key: tuple(item[key]) for key in keys}


def print_reports(records: Sequence[SizeRecord], domains: Sequence[str]) -> None:
    """One set of tables per size, then one over every size when there are several."""
    for record in records:
        print("\n".join(["", *report(size_title(record), record.runs, domains)]), flush=True)
    if len(records) > 1:
        every = [run for record in records for run in record.runs]
        title = f"== every size ({', '.join(str(record.size) for record in records)} nodes) =="
        print("\n".join(["", *report(title, every, domains, costs=False)]))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make scorecard", description=DESCRIPTION)
    parser.add_argument("--report", type=Path, nargs="+", help="print the tables of saved JSON files; run nothing")
    parser.add_argument("--sizes", default=",".join(map(str, DEFAULT_SIZES)), help="GPU node counts (default 16,64)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the fault placement (default 1)")
    parser.add_argument(
        "--max-concurrent",
        type=int,
        default=DEFAULT_MAX_CONCURRENT,
        help=f"groups each category runs at once; 0 = all (default {DEFAULT_MAX_CONCURRENT})",
    )
    parser.add_argument("--training", action="store_true", help="add the training category (about +40%% time)")
    parser.add_argument("--runs", help="play only these planned runs, e.g. no-fault or faults-1,faults-2")
    parser.add_argument("--kinds", help="inject only these fault kinds, e.g. crash,transient")
    parser.add_argument(
        "--no-fault-each-size", action="store_true", help="a run without faults on every size, not only the largest"
    )
    parser.add_argument(
        "--communication",
        choices=sorted(COMMUNICATION_SCALES),
        default="diagnose",
        help="the communication category's grouping: diagnose (fault isolation, default) or pairs (nodesPerJob 2)",
    )
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "build" / "scorecard.json", help="the JSON file")
    args = parser.parse_args(argv)
    if args.report:
        documents = [json.loads(path.read_text(encoding="utf-8")) for path in args.report]
        domains = [domain for domain in CATEGORY_ORDER if any(domain in item["order"] for item in documents)]
        print_reports([record for item in documents for record in records_from_json(item)], domains)
        return 0
    sizes = [int(item) for item in args.sizes.split(",") if item.strip()]
    settings = Settings(
        args.seed,
        args.max_concurrent or None,
        args.training,
        _names(args.runs),
        _names(args.kinds),
        args.communication,
    )
    signal.signal(signal.SIGTERM, _interrupt)
    args.out.parent.mkdir(parents=True, exist_ok=True)

    records: list[SizeRecord] = []

    def save(current: SizeRecord) -> None:
        document = to_json([*records, current], settings)
        args.out.write_text(json.dumps(document, indent=1, default=str) + "\n", encoding="utf-8")

    for size in sizes:
        no_fault = args.no_fault_each_size or size == max(sizes)
        records.append(run_size(size, settings, no_fault=no_fault, save=save))
    print_reports(records, settings.domains)
    print(f"\nwritten to {args.out}")
    incomplete = incomplete_runs(records)
    if incomplete:
        print(f"runs that could not complete: {', '.join(incomplete)}", file=sys.stderr)
    return 1 if incomplete else 0


if __name__ == "__main__":
    sys.exit(main())

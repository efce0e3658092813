"""How fast the compiler is and how big its output gets, printed next to the targets (never asserted).

Run as ``python -m tests.bench.bench_compile [RUNS]`` from the repository root (default 20 timed runs after a
warm-up). Targets (DESIGN.md §4, the issue's budget): compiling 64 categories in-process < 250 ms; the seed
example end to end through the ``nvcre-compile`` command < 1.0 s; every emitted object < 1 MiB (etcd's object
limit; the API server stores JSON, so the JSON size of the largest object is printed too).

In-process time is `compile_certifications` plus the YAML dump, for an already loaded Certification and catalog:
what a long-running process (the watcher's `--submit`) pays per Certification.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from nvcre_argo.catalog.loader import Catalog, load_catalog
from nvcre_argo.compiler import CompileOptions, compile_certifications
from nvcre_argo.loading import LoadedCertification, load_certifications, parse_certification
from nvcre_argo.render.certification_workflow import embedded_category_workflow
from nvcre_argo.yamlio import dump_yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
SEED_EXAMPLE = REPO_ROOT / "examples" / "gpu-cluster-cert.yaml"
TEMPLATES_DIR = REPO_ROOT / "workflow_templates"
COMPILE_SCRIPT = Path(sys.executable).with_name("nvcre-compile")
DEFAULT_RUNS = 20
WARM_UP = 3
CLI_RUNS = 5
MIB = 1024 * 1024
TARGET_64_MS = 250.0
TARGET_CLI_S = 1.0
TARGET_BYTES = MIB
MAX_CATEGORIES = 64


def certification(name: str, keys: list[str]) -> LoadedCertification:
    document = {
        "apiVersion": "nvcre.nvidia.com/v1alpha1",
        "kind": "Certification",
        "metadata": {"name": name, "namespace": "nvcre"},
        "spec": {
            "target": {"nodeSelector": {"nvidia.com/gpu.present": "true"}},
            "categories": [dict(zip(("domain", "variant"), key.split("/"), strict=True)) for key in keys],
        },
    }
    return LoadedCertification(f"{name}.yaml", parse_certification(document, f"{name}.yaml"))


def compile_to_yaml(loaded: LoadedCertification, catalog: Catalog) -> str:
    (compiled,) = compile_certifications([loaded], catalog=catalog, options=CompileOptions())
    return dump_yaml(compiled.workflow)


def percentile(samples: list[float], fraction: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(samples)
    return ordered[max(0, math.ceil(fraction * len(ordered)) - 1)]


def time_ms(action: Callable[[], Any], runs: int) -> list[float]:
    for _ in range(WARM_UP):
        action()
    samples = []
    for _ in range(runs):
        began = time.perf_counter()
        action()
        samples.append((time.perf_counter() - began) * 1000)
    return samples


def verdict(met: bool) -> str:
    return "met" if met else "NOT MET"


def manifests(workflow: dict[str, Any]) -> list[str]:
    embedded = (embedded_category_workflow(template) for template in workflow["spec"]["templates"])
    return [json.dumps(manifest, sort_keys=True) for manifest in embedded if manifest is not None]


def main(argv: list[str]) -> int:
    runs = int(argv[0]) if argv else DEFAULT_RUNS
    catalog = load_catalog()
    keys = catalog.names()
    (seed,) = load_certifications(SEED_EXAMPLE.read_text(encoding="utf-8"), str(SEED_EXAMPLE))
    cycling = certification("sixty-four", [keys[index % len(keys)] for index in range(MAX_CATEGORIES)])
    sizes = {key: len(compile_to_yaml(certification("one", [key]), catalog)) for key in keys}
    largest_entry = max(sizes, key=lambda key: sizes[key])
    heaviest = certification("sixty-four-heaviest", [largest_entry] * MAX_CATEGORIES)

    load = ", ".join(f"{value:.2f}" for value in os.getloadavg())
    print(f"nvcre-compile benchmark ({runs} timed runs after {WARM_UP} warm-up runs; Python {sys.version.split()[0]})")
    print(f"{os.cpu_count()} CPUs, load average {load} (figures are noisy when the machine is busy)")
    print()
    print(f"{'In-process compile + YAML dump (ms)':<48} {'median':>8} {'p95':>8}   target")
    timings = {
        "seed example (2 categories)": (seed, None),
        "64 categories, cycling the catalog": (cycling, TARGET_64_MS),
        f"64 x {largest_entry} (largest entry)": (heaviest, TARGET_64_MS),
    }
    for label, (loaded, target) in timings.items():
        samples = time_ms(lambda loaded=loaded: compile_to_yaml(loaded, catalog), runs)
        median, p95 = statistics.median(samples), percentile(samples, 0.95)
        goal = f"< {target:.0f} ms: {verdict(p95 < target)} (p95)" if target else "-"
        print(f"  {label:<46} {median:8.1f} {p95:8.1f}   {goal}")

    print()
    wall = []
    for _ in range(CLI_RUNS):
        began = time.perf_counter()
        subprocess.run([str(COMPILE_SCRIPT), str(SEED_EXAMPLE)], check=True, capture_output=True)
        wall.append(time.perf_counter() - began)
    cli_median = statistics.median(wall)
    print(f"CLI wall time, nvcre-compile {SEED_EXAMPLE.relative_to(REPO_ROOT)} (median of {CLI_RUNS} runs)")
    print(
        f"  {cli_median:.3f} s (min {min(wall):.3f}, max {max(wall):.3f})   "
        f"target < {TARGET_CLI_S:.1f} s: {verdict(cli_median < TARGET_CLI_S)}"
    )

    print()
    objects: dict[str, tuple[int, int]] = {}
    for label, loaded in (("seed example", seed), ("64 categories", cycling), (f"64 x {largest_entry}", heaviest)):
        (compiled,) = compile_certifications([loaded], catalog=catalog, options=CompileOptions())
        text = dump_yaml(compiled.workflow)
        objects[f"parent Workflow, {label}"] = (len(text.encode()), len(json.dumps(compiled.workflow).encode()))
        largest = max(manifests(compiled.workflow), key=len)
        objects[f"largest category Workflow, {label}"] = (
            len(largest.encode()),
            len(json.dumps(yaml.safe_load(largest)).encode()),
        )
    for path in sorted(TEMPLATES_DIR.glob("*.yaml")):
        text = path.read_text(encoding="utf-8")
        objects[f"WorkflowTemplate {path.stem}"] = (len(text.encode()), len(json.dumps(yaml.safe_load(text)).encode()))
    width = max(len(label) for label in objects)
    print(f"Emitted object sizes (bytes){' ' * (width - 26)}YAML       JSON")
    for label, (yaml_bytes, json_bytes) in objects.items():
        print(f"  {label:<{width}} {yaml_bytes:>9} {json_bytes:>10}")
    biggest = max(objects, key=lambda label: max(objects[label]))
    size = max(objects[biggest])
    print(
        f"Largest object: {biggest}, {size} bytes ({size / MIB:.2f} MiB)   "
        f"target < 1 MiB: {verdict(size < TARGET_BYTES)}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

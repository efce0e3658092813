"""What 10,000 GPU nodes cost the compiled Workflows and the in-workflow steps, printed next to the targets
(never asserted).

Run as ``PYTHONPATH=. .venv/bin/python -m tests.bench.bench_scale [NODES]`` from the repository root (default
10,000; a smaller number is a quick look). It starts its own etcd + kube-apiserver with the Argo, Trainer and
JobSet CRDs, creates that many synthetic DGX-class Node objects (`tests/bench/scale_cluster.py`: ~80 labels,
50 images, 42-character names), then measures, against that real API server:

- object sizes: the certification Workflow and its category Workflows compiled for 8, 4,096 and 10,000 nodes
  per group (the seed's two categories), the installed WorkflowTemplates, all as the API server stores them,
  and every ConfigMap, TrainingRuntime and TrainJob the steps write (a write the API server refuses is listed
  with the bytes sent), and the plan step's Argo outputs. Targets: every object < 1 MiB (etcd's object
  limit; the API server refuses a ConfigMap whose data passes 1 MiB); the Workflows the same size for 8 and
  10,000 nodes per group (only `nodesPerJob`'s digits differ);
- the plan step: the real `nvcre-argo step plan`, started as the compiled WorkflowTemplate's plan container
  would be (its command, and its environment with Argo's `{{...}}` filled in), with a kubeconfig instead of a
  service account; for 8 and for 4,096 nodes per group. Peak RSS (GNU time's, of the step's process alone) and
  wall time; target: RSS < 256 MiB (the step container's limit is 512 Mi);
- the run step's API requests per poll cycle for a 4,096-node group of the 10,000 matching nodes: the
  product's `run_group` (what `nvcre-argo step run` calls, after reading the plan back as the command does)
  polls a real TrainJob and follows the group's Nodes (one list + watch, its thread included); only the sleep
  between polls is taken out, and the TrainJob's end is written by the benchmark, as the Trainer controller
  would. Requests are counted by the client's transport and, independently, by the API server
  (`apiserver_request_total`, which counts a watch when it ends: after the last cycle here); target: <= 3 per
  poll cycle. The same for an 8-node group of the 10,000, which reads its nodes with one GET each per poll,
  and the health check's CPU per Node (measured in-process on the synthetic Nodes). No JobSet pods
  exist here: on a cluster their list is one more page of ~4,100 pods per poll (one request
  at the step's page size of 5,000), which adds transfer time but no request;
- the record step (`nvcre-argo step record`, run like the plan step) over one group that passed, one whose
  TrainJob failed with no rank to blame (every node blamed: the largest result a group writes) and one with
  no result: what each step writes, its peak RSS and wall time.

Times depend on the machine's load (2 shared cores here): read them as orders of magnitude.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import re
import resource
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nvcre_argo import contract
from nvcre_argo.catalog.loader import load_catalog
from nvcre_argo.cel import CelError, evaluate
from nvcre_argo.compiler import CompileOptions, compile_certifications
from nvcre_argo.kube.client import KubeClient
from nvcre_argo.kube.connect import connect
from nvcre_argo.kube.errors import ApiError
from nvcre_argo.kube.resources import CONFIGMAPS, TRAINING_RUNTIMES, TRAINJOBS, Resource
from nvcre_argo.loading import LoadedCertification, parse_certification
from nvcre_argo.names import runtime_name, trainjob_name
from nvcre_argo.render.certification_workflow import embedded_category_workflow
from nvcre_argo.render.trainjob import render_trainjob
from nvcre_argo.resolve.values import gpu_values
from nvcre_argo.steps.children import Parent, child_manifest
from nvcre_argo.steps.context import StepContext, parse_category
from nvcre_argo.steps.following import RunSettings
from nvcre_argo.steps.health import compile_health_check
from nvcre_argo.steps.planning import load_plan
from nvcre_argo.steps.running import run_group
from nvcre_argo.yamlio import load_yaml_mapping
from tests.bench.scale_cluster import (
    GPU_PRESENT,
    IMAGES_PER_NODE,
    CountingApiClient,
    Endpoint,
    Request,
    TimedKubeClient,
    counting_kube,
    create_all,
    encoded,
    node_name,
    output_lock,
    server_request_counts,
    synthetic_node,
)
from tests.harness.controlplane import Cluster, start_cluster
from tests.harness.crds import crd_files

REPO_ROOT = Path(__file__).resolve().parents[2]
TEMPLATES_DIR = REPO_ROOT / "workflow_templates"
STEP_BIN_DIR = Path(sys.executable).parent
TIME_COMMAND = "/usr/bin/time"  # GNU time: the peak RSS of the step alone (see `run_step`)
NAMESPACE = "bench-scale"
CERTIFICATION = "scale"
DEFAULT_NODES = 10_000
RUN_GROUP_SIZE = 4096
# Poll cycles measured after the first poll (which also creates the TrainJob and starts the Node watch).
POLL_CYCLES = 3
MIB = 1024 * 1024
TARGET_OBJECT_BYTES = MIB
TARGET_RSS_MIB = 256.0
TARGET_REQUESTS = 3
POLL_INTERVAL_S = RunSettings().poll_seconds
SEED_CATEGORIES = (
    {"domain": "communication", "variant": "nccl-all-reduce"},
    {"domain": "training", "variant": "nemotron5-8b"},
)
TEMPLATE_VARIABLE = re.compile(r"\{\{\s*([^}\s]+)\s*\}\}")
# The resources a run step touches; the API server's own requests (leases, endpoints) are reported apart.
STEP_RESOURCES = ("nodes", "pods", "trainjobs", "configmaps")


def say(message: str) -> None:
    print(message, flush=True)


def verdict(met: bool) -> str:
    return "met" if met else "NOT MET"


def json_size(obj: Mapping[str, Any]) -> int:
    """Bytes of the object as the API server serves it (compact JSON, what etcd's limit is about)."""
    return len(json.dumps(obj, separators=(",", ":")).encode())


def without_group_size(workflow: Mapping[str, Any]) -> str:
    """The compiled JSON with every `nodesPerJob` value written as 0: what is left must not depend on it."""
    return re.sub(r"(nodesPerJob\W{1,8})\d+", r"\g<1>0", json.dumps(workflow, separators=(",", ":")))


# --- the objects ------------------------------------------------------------------------------------------------


@dataclass
class Sizes:
    """Every object measured, once each (by kind and name), labelled with where it came from: bytes stored."""

    rows: dict[str, int] = field(default_factory=dict)
    seen: set[str] = field(default_factory=set)

    def add(self, label: str, obj: Mapping[str, Any], *, key: str | None = None) -> int:
        size = json_size(obj)
        if key is None or key not in self.seen:
            self.rows[label] = size
            self.seen.add(key or label)
        return size

    def largest(self) -> tuple[str, int]:
        label = max(self.rows, key=lambda name: self.rows[name])
        return label, self.rows[label]


def certification(nodes_per_job: int) -> LoadedCertification:
    """The seed's two categories on every GPU node, with `nodesPerJob` groups."""
    document = {
        "apiVersion": "nvcre.nvidia.com/v1alpha1",
        "kind": "Certification",
        "metadata": {"name": CERTIFICATION, "namespace": NAMESPACE},
        "spec": {
            "target": {"nodeSelector": {GPU_PRESENT: "true"}},
            "gangScheduler": {"schedulerName": "kai-scheduler", "queue": "high-priority"},
            "nodesPerJob": nodes_per_job,
            "categories": list(SEED_CATEGORIES),
        },
    }
    source = f"{CERTIFICATION}-{nodes_per_job}.yaml"
    return LoadedCertification(source, parse_certification(document, source))


@dataclass(frozen=True)
class Category:
    """One category Workflow on the server, as the certification Workflow's step created it."""

    workflow: dict[str, Any]

    @property
    def name(self) -> str:
        return str(self.workflow["metadata"]["name"])

    @property
    def uid(self) -> str:
        return str(self.workflow["metadata"]["uid"])

    @property
    def template(self) -> str:
        return str(self.workflow["spec"]["workflowTemplateRef"]["name"])

    def variables(self) -> dict[str, str]:
        """What Argo fills into the template's `{{...}}` for this Workflow."""
        values = {"workflow.name": self.name, "workflow.uid": self.uid, "workflow.namespace": NAMESPACE}
        for parameter in self.workflow["spec"]["arguments"]["parameters"]:
            values[f"workflow.parameters.{parameter['name']}"] = str(parameter["value"])
        return values

    def context(self) -> StepContext:
        """The StepContext `nvcre-argo step ...` builds from that environment."""
        values = self.variables()
        return StepContext(
            category=parse_category(values[f"workflow.parameters.{contract.PARAM_CATEGORY}"]),
            certification=values[f"workflow.parameters.{contract.PARAM_CERTIFICATION}"],
            workflow_name=self.name,
            workflow_uid=self.uid,
            namespace=NAMESPACE,
        )


def install_templates(kube: KubeClient, sizes: Sizes) -> dict[str, dict[str, Any]]:
    """The committed WorkflowTemplates (what `kubectl apply -f workflow_templates/` installs), by name."""
    installed = {}
    for path in sorted(TEMPLATES_DIR.glob("*.yaml")):
        manifest = load_yaml_mapping(path.read_text(encoding="utf-8"), str(path))
        manifest["metadata"]["namespace"] = NAMESPACE
        stored = kube.create(manifest)
        sizes.add(f"WorkflowTemplate {path.stem}", stored)
        installed[stored["metadata"]["name"]] = stored
    return installed


def submit(kube: KubeClient, workflow: dict[str, Any]) -> tuple[dict[str, Any], list[Category]]:
    """Create the certification Workflow, then each category Workflow exactly as its category step would:
    the manifest from the step's environment with Argo's `{{workflow.name}}` filled in, owned by the parent."""
    parent = kube.create(workflow)
    owner = Parent(parent["metadata"]["name"], parent["metadata"]["uid"], NAMESPACE)
    children = []
    for template in parent["spec"]["templates"]:
        if embedded_category_workflow(template) is None:
            continue
        (text,) = [
            env["value"] for env in template["container"]["env"] if env["name"] == contract.ENV_CATEGORY_WORKFLOW
        ]
        manifest = load_yaml_mapping(text.replace("{{workflow.name}}", owner.name), contract.ENV_CATEGORY_WORKFLOW)
        children.append(Category(kube.create(child_manifest(manifest, owner))))
    return parent, children


def record_step_objects(kube: KubeClient, category: Category, sizes: Sizes, prefix: str) -> None:
    """Size every ConfigMap, TrainingRuntime and TrainJob that this category Workflow's steps wrote (owned by it
    or labelled with it), the first time it is seen."""
    kinds: tuple[Resource, ...] = (CONFIGMAPS, TRAINING_RUNTIMES, TRAINJOBS)
    for kind in kinds:
        items, _ = kube.list(kind, NAMESPACE)
        for item in items:
            metadata = item["metadata"]
            owners = {owner.get("uid") for owner in metadata.get("ownerReferences") or []}
            labelled = (metadata.get("labels") or {}).get("nvcre.nvidia.com/workflow") == category.name
            if category.uid in owners or labelled:
                key = f"{kind.kind}/{metadata['name']}"
                sizes.add(f"{prefix}: {kind.kind} {metadata['name']}", item, key=key)


# --- steps as their pods run them ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class StepRun:
    seconds: float
    peak_rss_mib: float
    cpu_seconds: float
    returncode: int
    stdout: str
    stderr: str
    outputs: dict[str, int]  # Argo output parameter -> bytes
    memory_limit: str  # the step container's, from the template

    def line(self, marker: str) -> str:
        """The step's own summary line (the first containing `marker`), or the end of its error output."""
        found = [line for line in self.stdout.splitlines() if marker in line]
        return found[0] if found else self.stderr.strip()[-500:]


def _fill(value: str, variables: Mapping[str, str]) -> str:
    def one(match: re.Match[str]) -> str:
        if match.group(1) not in variables:
            raise KeyError(f"the benchmark does not fill {match.group(0)}")
        return variables[match.group(1)]

    return TEMPLATE_VARIABLE.sub(one, value)


def run_step(cluster: Cluster, templates: Mapping[str, dict[str, Any]], category: Category, step: str) -> StepRun:
    """Run one template of the category's WorkflowTemplate as its container would: the same command, arguments
    and environment (Argo's `{{...}}` filled in), plus a kubeconfig since no service account token is mounted
    here.

    Peak RSS comes from GNU time's `%M` for its own child, never from `wait4` on a child of this process:
    Python starts children with vfork, and Linux carries the parent's high-water RSS into the child's at exec,
    so a direct child would report the benchmark's own peak (hundreds of MiB after creating the Nodes)."""
    (spec,) = [item for item in templates[category.template]["spec"]["templates"] if item["name"] == step]
    container = spec["container"]
    command = [*container["command"], *container.get("args", [])]
    command[0] = str(STEP_BIN_DIR / command[0])
    variables = category.variables()
    env = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig)}
    env |= {item["name"]: _fill(item["value"], variables) for item in container.get("env", [])}
    outputs = {
        parameter["name"]: Path(parameter["valueFrom"]["path"])
        for parameter in (spec.get("outputs") or {}).get("parameters", [])
    }
    logs = Path(cluster.plane.workdir)
    usage = logs / f"{step}.usage"
    timed = [TIME_COMMAND, "--format=%M %e %U %S", f"--output={usage}", *command]
    with output_lock(Path(contract.OUTPUT_DIR)):
        for path in outputs.values():
            path.unlink(missing_ok=True)
        with (logs / f"{step}.out").open("w+") as out, (logs / f"{step}.err").open("w+") as err:
            done = subprocess.run(timed, env=env, stdout=out, stderr=err, cwd=REPO_ROOT, check=False)
            out.seek(0)
            err.seek(0)
            stdout, stderr = out.read(), err.read()
        written = {name: path.stat().st_size for name, path in outputs.items() if path.exists()}
        for path in outputs.values():  # the directory is shared: leave nothing behind for the next user
            path.unlink(missing_ok=True)
    # GNU time prefixes "Command exited with non-zero status N" on a line of its own when the step fails.
    peak_kib, seconds, user, system = usage.read_text(encoding="utf-8").splitlines()[-1].split()
    return StepRun(
        seconds=float(seconds),
        peak_rss_mib=int(peak_kib) / 1024,
        cpu_seconds=float(user) + float(system),
        returncode=done.returncode,
        stdout=stdout,
        stderr=stderr,
        outputs=written,
        memory_limit=str(((container.get("resources") or {}).get("limits") or {}).get("memory", "none")),
    )


# --- the run step's poll cycles ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Mark:
    requests: int  # requests the client had sent
    server: Counter[tuple[str, str]]  # the API server's counts
    at: float
    request_seconds: float  # seconds the client had spent in requests


@dataclass
class PollMarks:
    """The run step's sleep between polls: marks each poll cycle's end on both counters, then, after the measured
    cycles, plays the Trainer controller."""

    kube: TimedKubeClient
    recorder: CountingApiClient
    server: Callable[[], Counter[tuple[str, str]]]
    finish: Callable[[], None]
    marks: list[Mark] = field(default_factory=list)

    def mark(self) -> None:
        server = self.server()  # first: the client count must not include what `finish` sends next
        self.marks.append(Mark(len(self.recorder.requests), server, time.monotonic(), self.kube.request_seconds))

    def __call__(self, _seconds: float) -> None:
        self.mark()
        if len(self.marks) == POLL_CYCLES + 2:
            self.finish()


@dataclass(frozen=True)
class Cycle:
    requests: list[Request]
    server: Counter[tuple[str, str]]
    seconds: float
    request_seconds: float

    @property
    def server_step(self) -> int:
        return sum(count for (_, kind), count in self.server.items() if kind.split("/")[0] in STEP_RESOURCES)

    @property
    def server_other(self) -> Counter[tuple[str, str]]:
        return Counter({key: n for key, n in self.server.items() if key[1].split("/")[0] not in STEP_RESOURCES})


def cycles_of(marks: list[Mark], recorder: CountingApiClient) -> list[Cycle]:
    return [
        Cycle(
            recorder.requests[before.requests : after.requests],
            after.server - before.server,
            after.at - before.at,
            after.request_seconds - before.request_seconds,
        )
        for before, after in itertools.pairwise(marks)
    ]


def measure_polls(cluster: Cluster, category: Category, group_name: str) -> tuple[int, int, list[Cycle]]:
    """Drive the run step of one group for POLL_CYCLES cycles after its first poll, then let its TrainJob
    complete; (nodes the plan matched, group size, [first poll with the TrainJob's creation, cycles...])."""
    kube, recorder = counting_kube(cluster.kubeconfig)
    context = category.context()
    plan = load_plan(kube, context)  # what `step run` does first, with the same client
    group = plan.group(group_name)
    trainjob = trainjob_name(context.workflow_name, group.name, 0)
    trainer = connect(str(cluster.kubeconfig))

    def complete() -> None:
        condition = {"type": "Complete", "status": "True", "reason": "JobsCompleted", "message": "jobset completed"}
        condition["lastTransitionTime"] = "2026-12-01T00:00:00Z"
        patch = {"status": {"conditions": [condition]}}
        trainer.merge_patch(TRAINJOBS, trainjob, patch, NAMESPACE, subresource="status")

    marks = PollMarks(kube, recorder, lambda: server_request_counts(cluster.plane.get), complete)
    marks.mark()
    result = run_group(
        kube,
        context,
        group=group.name,
        nodes=group.nodes,
        gpu=gpu_values(context.category, plan.architecture),
        settings=RunSettings(poll_seconds=0, sleep=marks),
        measure=None,
        report=lambda _line: None,
        matched=len(plan.candidates),
    )
    if not result.succeeded:
        raise RuntimeError(f"the run step did not pass: {result.iterations[-1].message}")
    return len(plan.candidates), len(group.nodes), cycles_of(marks.marks, recorder)


def health_check_cpu(samples: int = 200) -> tuple[float, float]:
    """CPU milliseconds per Node of the default health check: (the product's compiled check on the fields the
    expression reads, evaluating the whole Node with a fresh compile as each poll once did), on synthetic
    Nodes as served (JSON round trip). The watch runs the check once per Node event, never per poll."""
    nodes = [json.loads(json.dumps(synthetic_node(index))) for index in range(samples)]
    check = compile_health_check()
    began = time.process_time()
    for node in nodes:
        check.fires(node)
    compiled = time.process_time() - began
    began = time.process_time()
    for node in nodes:
        with contextlib.suppress(CelError):
            evaluate(check.expression, {"node": node})
    whole = time.process_time() - began
    return compiled * 1000 / samples, whole * 1000 / samples


def fail_group(cluster: Cluster, category: Category, group_name: str, sizes: Sizes, prefix: str) -> str:
    """Run one group whose TrainJob already failed with no rank pod (as a retried run step finds it): every node
    of the group is blamed, the largest result a group writes. Returns how the step ended; a result write the
    API server refuses goes into `sizes` with the size that was sent."""
    kube, recorder = counting_kube(cluster.kubeconfig)
    context = category.context()
    plan = load_plan(kube, context)
    group = plan.group(group_name)
    name = trainjob_name(context.workflow_name, group.name, 0)
    gpu = gpu_values(context.category, plan.architecture)
    manifest = render_trainjob(
        context.category,
        gpu,
        name=name,
        namespace=NAMESPACE,
        certification=context.certification,
        runtime_name=runtime_name(context.workflow_name),
        group=group.name,
        nodes=group.nodes,
        owner_references=context.owner_references(),
    )
    kube.create(manifest)
    condition = {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded", "message": "jobset failed"}
    condition["lastTransitionTime"] = "2026-12-01T00:00:00Z"
    kube.merge_patch(TRAINJOBS, name, {"status": {"conditions": [condition]}}, NAMESPACE, subresource="status")
    try:
        result = run_group(
            kube,
            context,
            group=group.name,
            nodes=group.nodes,
            gpu=gpu,
            settings=RunSettings(poll_seconds=0),
            measure=None,
            report=lambda _line: None,
            matched=len(plan.candidates),
        )
    except ApiError as error:
        write = recorder.requests[-1]
        sizes.rows[f"{prefix}: ConfigMap {write.body_name} (REFUSED: HTTP {error.status})"] = write.body_bytes
        return (
            f"the run step FAILED writing its result ({write.method} of {write.body_bytes:,} B): "
            f"HTTP {error.status} {error.reason}: {error.message[:300]}"
        )
    return f"{len(result.iterations[-1].failed_nodes):,} node(s) blamed, result written"


# --- the benchmark ---------------------------------------------------------------------------------------------------


def create_nodes(cluster: Cluster, kube: KubeClient, count: int) -> None:
    began = time.monotonic()
    sent = create_all(
        Endpoint.from_kubeconfig(cluster.kubeconfig), encoded("/api/v1/nodes", map(synthetic_node, range(count)))
    )
    took = time.monotonic() - began
    node = kube.request("GET", f"/api/v1/nodes/{node_name(0)}")
    served = json_size(node)
    say(
        f"{count:,} Nodes created in {took:.1f} s ({count / took:.0f}/s, {sent / MIB:.0f} MiB sent); one Node as "
        f"served: {served / 1024:.1f} KiB ({len(node['metadata']['labels'])} labels, {IMAGES_PER_NODE} images), "
        f"{served * count / MIB:.0f} MiB for all"
    )


def compile_and_submit(
    kube: KubeClient, sizes: Sizes, group_sizes: tuple[int, ...]
) -> tuple[dict[int, list[Category]], bool]:
    """Compile the seed-like Certification per group size, create the Workflows, print their stored sizes;
    (category Workflows per group size, whether the compiled output is the same but for nodesPerJob)."""
    catalog = load_catalog()
    compiled = {
        size: compile_certifications([certification(size)], catalog=catalog, options=CompileOptions())[0].workflow
        for size in group_sizes
    }
    categories: dict[int, list[Category]] = {}
    say("\nCompiled Workflows as the API server stores them (bytes of JSON)")
    say(
        f"  {'nodes per group':<18}{'certification Workflow':>24}{'category 0 Workflow':>22}{'category 1 Workflow':>22}"
    )
    for size, workflow in compiled.items():
        parent, children = submit(kube, workflow)
        categories[size] = children
        row = [sizes.add(f"certification Workflow, {size} nodes/group", parent)]
        row += [
            sizes.add(f"category {i} Workflow, {size} nodes/group", child.workflow) for i, child in enumerate(children)
        ]
        say(f"  {size:<18,}{row[0]:>24,}{row[1]:>22,}{row[2]:>22,}")
    first, last = compiled[group_sizes[0]], compiled[group_sizes[-1]]
    same = without_group_size(first) == without_group_size(last)
    say(
        f"  compiled (its category Workflows inside): {json_size(first):,} B at {group_sizes[0]} nodes per group, "
        f"{json_size(last):,} B at {group_sizes[-1]:,}; with nodesPerJob's digits set aside: "
        f"{'byte for byte the same' if same else 'DIFFERENT'}"
    )
    return categories, same


def print_cycles(matched: int, group: int, cycles: list[Cycle]) -> None:
    say(f"  group g0: {group:,} nodes of the {matched:,} the target matched")
    for index, cycle in enumerate(cycles):
        what = "first poll, with the TrainJob's creation" if index == 0 else f"poll cycle {index}"
        say(
            f"  {what}: {len(cycle.requests)} requests sent by the step, {cycle.server_step} counted by the API "
            f"server; {cycle.seconds:.1f} s, of which {cycle.request_seconds:.1f} s in requests (sending, waiting, "
            f"decoding) and {cycle.seconds - cycle.request_seconds:.1f} s in the step's own work"
        )
        for request in cycle.requests:
            say(f"      {request.method} {request.path}{'?' if request.query else ''}{_short_query(request.query)}")
        if cycle.server_other:
            other = ", ".join(f"{verb} {kind} x{n}" for (verb, kind), n in sorted(cycle.server_other.items()))
            say(f"      (meanwhile the API server's own requests, not the step's: {other})")


def _short_query(query: str) -> str:
    return re.sub(r"continue=[^&]+", "continue=<token>", query)


def main(argv: list[str]) -> int:
    count = int(argv[0]) if argv else DEFAULT_NODES
    # A smaller cluster (a quick look) keeps two full groups of the run step's size.
    run_size = min(RUN_GROUP_SIZE, count // 2)
    group_sizes = (8, run_size, count)
    started = time.monotonic()
    say(
        f"scale benchmark: {count:,} synthetic GPU nodes on a real kube-apiserver "
        f"({os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f})"
    )
    cluster = start_cluster(None, crd_files())
    sizes = Sizes()
    try:
        kube = connect(str(cluster.kubeconfig))
        kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
        say(f"control plane with its CRDs ready in {time.monotonic() - started:.1f} s")
        create_nodes(cluster, kube, count)
        templates = install_templates(kube, sizes)
        categories, same = compile_and_submit(kube, sizes, group_sizes)
        measured = categories[run_size][0]

        say(f"\nPlan step: `nvcre-argo step plan` as its pod runs it, {count:,} matching nodes")
        plans: dict[int, StepRun] = {}
        for size in group_sizes[:2]:
            run = plans[size] = run_step(cluster, templates, categories[size][0], contract.TEMPLATE_PLAN)
            outputs = ", ".join(f"{name} {n:,} B" for name, n in run.outputs.items()) or "none"
            say(
                f"  {size:,} nodes per group: exit {run.returncode}, {run.seconds:.1f} s wall, {run.cpu_seconds:.1f} s "
                f"CPU, peak RSS {run.peak_rss_mib:.1f} MiB; Argo outputs: {outputs}\n    {run.line('group(s)')}"
            )
            if run.returncode != 0:
                raise RuntimeError("the plan step failed")
            record_step_objects(kube, categories[size][0], sizes, f"plan, {size:,}/group")
            for name, written in run.outputs.items():
                sizes.rows[f"plan, {size:,}/group: Argo output {name}"] = written

        say(f"\nRun step: run_group's poll cycles for a {run_size:,}-node group against the real API server")
        matched, group, cycles = measure_polls(cluster, measured, "g0")
        print_cycles(matched, group, cycles)
        per_node, whole_node = health_check_cpu()
        say(
            f"  health check CPU per Node event: {per_node:.3f} ms compiled once, on the fields it reads "
            f"({whole_node:.2f} ms compiling again and converting the whole Node); "
            f"{per_node * group / 1000:.1f} s for the group's first list, then only for Nodes that change"
        )
        say("\nRun step: an 8-node group of the same target (a few nodes: one GET per node per poll, no watch)")
        _, small, small_cycles = measure_polls(cluster, categories[8][0], "g0")
        print_cycles(matched, small, small_cycles)

        say("\nA group that blames every node, then the record step")
        ended = fail_group(cluster, measured, "g1", sizes, f"run, {run_size:,}/group")
        say(f"  group g1 ({run_size:,} nodes), its TrainJob failed with no rank pod to blame: {ended}")
        record = run_step(cluster, templates, measured, contract.TEMPLATE_RECORD)
        say(
            f"  `nvcre-argo step record`: exit {record.returncode} (1: the category failed), {record.seconds:.1f} s "
            f"wall, peak RSS {record.peak_rss_mib:.1f} MiB\n    {record.line('ConfigMaps')}"
        )
        record_step_objects(kube, measured, sizes, f"run+record, {run_size:,}/group")

        say("\nEvery object measured, largest first (bytes of JSON as stored; target < 1 MiB each)")
        width = max(len(label) for label in sizes.rows)
        for label, size in sorted(sizes.rows.items(), key=lambda item: -item[1]):
            say(f"  {label:<{width}} {size:>11,}{'' if size < TARGET_OBJECT_BYTES else '   <-- 1 MiB or more'}")

        biggest, biggest_size = sizes.largest()
        peak = max(run.peak_rss_mib for run in plans.values())
        steady = cycles[1:] or cycles
        requests = max(max(len(cycle.requests), cycle.server_step) for cycle in steady)
        first, last = (sizes.rows[f"certification Workflow, {size} nodes/group"] for size in (8, count))
        say(f"\nSummary ({count:,} nodes){' ' * 40}figure{' ' * 20}target")
        rows = [
            ("largest object", f"{biggest_size / MIB:.2f} MiB", f"< 1 MiB: {verdict(biggest_size < MIB)}"),
            ("  which", biggest, ""),
            (
                f"certification Workflow, 8 vs {count:,} nodes per group",
                f"{first:,} vs {last:,} B",
                f"the same but nodesPerJob's digits: {verdict(same)}",
            ),
            (
                "plan step peak RSS",
                f"{peak:.0f} MiB",
                f"< {TARGET_RSS_MIB:.0f} MiB: {verdict(peak < TARGET_RSS_MIB)} (limit {plans[8].memory_limit})",
            ),
            (
                f"plan step wall time (8 / {run_size:,} nodes per group)",
                " / ".join(f"{run.seconds:.1f} s" for run in plans.values()),
                "",
            ),
            (
                f"run step API requests per poll cycle, {group:,}-node group",
                f"{requests}",
                f"<= {TARGET_REQUESTS}: {verdict(requests <= TARGET_REQUESTS)}",
            ),
            (
                f"run step API requests per poll cycle, {small}-node group",
                f"{max(max(len(c.requests), c.server_step) for c in small_cycles[1:] or small_cycles)}",
                "(2 + one GET per node)",
            ),
            (
                "health check CPU per Node event (was per Node per poll)",
                f"{per_node:.2f} ms",
                f"(was {whole_node:.1f} ms)",
            ),
            (
                "record step peak RSS (8,192 nodes failed)" if count == DEFAULT_NODES else "record step peak RSS",
                f"{record.peak_rss_mib:.0f} MiB",
                f"(its container's limit: {record.memory_limit})",
            ),
            (
                "run step poll cycle duration",
                f"{max(cycle.seconds for cycle in steady):.1f} s",
                f"(polls every {POLL_INTERVAL_S:.0f} s)",
            ),
        ]
        for label, figure, target in rows:
            say(f"  {label:<58}{figure:<26}{target}")
        say(
            f"\nbenchmark wall time {time.monotonic() - started:.0f} s "
            f"(its own process: {resource.getrusage(resource.RUSAGE_SELF).ru_utime:.0f} s CPU)"
        )
    finally:
        cluster.plane.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

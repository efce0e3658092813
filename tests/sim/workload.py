"""What a workload pod on a simulated GPU node does under a fault plan (pure): its `Script`.

Why a pure script: the sim kubelet (`tests/sim/player.py`) only carries steps out (append to the log, wait,
become Ready, mark the node, record a checkpoint, exit or run until deleted); every decision a test relies on
(which pod fails first, what the logs say, which number the product will measure) is made here from the pod
object, its group's nodes, the fault plan, the attempt number and the checkpoint it resumes from, so it can be
unit-tested without a cluster and the product's own parsers can be run over the generated logs.

Roles, from the pod exactly as the API returns it (see `workload_kind`):
- `nccl-launcher`: the MPI launcher (`jobset.sigs.k8s.io/replicatedjob-name: launcher`, or `mpirun` in its
  command) running an nccl-tests binary across the group; it prints the results.
- `mpi-worker`: an MPI `node` pod running `sshd`; Ready at once, runs until deleted.
- `nccl-single-node`: an nccl-tests binary run directly in a one-node job (the loopback entries).
- `megatron-training`: a torch `node` pod running torchrun/Megatron-LM; the last rank (highest
  `batch.kubernetes.io/job-completion-index`) prints Megatron's `training_log` lines.
- `dcgm-diag`: `dcgmi diag`; the verdict is the exit code.
- `generic`: anything else; exits 0 after `durationSeconds`.

Group semantics (what the product must attribute): a collective runs at the speed of its slowest member, so
NCCL bus bandwidth is the MIN over the group's nodes, TFLOP/s the MIN and step time the MAX. A crash ends the
crashing pod first (at its `afterSeconds`); everything it takes down ends `PEER_TEARDOWN_SECONDS` later, never
before (a training peer reports the lost peer; the MPI launcher reports mpirun's abort; MPI workers keep
running until deleted). A hang or stall blocks the whole collective forever; a hang prints its first
result/iteration first (with `afterSeconds`, every one due before that time, so a training run can show a
steady step time before it stops), a stall never does. A `health`/`notready` node is marked by its own pod only (the
launcher never marks), and the whole group's run is stretched to `durationSeconds + afterSeconds +
HEALTH_GRACE_SECONDS` so the product's health monitor sees the mark before the workload could succeed.
`datacheck` only changes nccl-tests output (wrong values, exit 1); training and DCGM ignore it. So does
`nomeasurement`: nccl-tests' result table (column header, rows, footer) never reaches the log, everything else
is unchanged and the run succeeds, as when rank 0's output goes elsewhere (a wrapper redirecting it): a
finished workload with nothing to measure.

A broken link between two NVLink domains (the plan's `links`, matched against `domains`, the group's nodes'
`nvidia.com/gpu.clique` values) fails a multi-node group that has a node on each side of it, with no node to
blame: at the link's `afterSeconds` the MPI launcher prints NCCL's `NET/IB` completion errors between a host
on each side (the first node of each domain) and mpirun's abort, and exits with the link's `exitCode`;
every training rank reports the network error at that same time and exits with that code (so no rank fails
first); MPI workers keep running until deleted. Single-node workloads never cross a link.

A crash, or a link failure (a crash without a culprit node), outweighs a hang/stall, which outweighs
completion. When a group has both, the earlier one decides how it ends; on a tie the node crash does, since
it is the failure the product can attribute.

Time: `Wait` steps are real seconds for the kubelet (scaled by the plan's `durationSeconds`, a few seconds).
Timestamps printed inside logs are virtual: they start at the fixed `LOG_EPOCH` and follow the simulated
work (e.g. Megatron's lines are one step time apart per iteration), so they are consistent with the numbers
in the log, deterministic, and unrelated to the wall clock. Nothing here reads a clock or random numbers.

Checkpoints (`tests/sim/checkpoints.py` says which pods checkpoint and where their saves persist): the first
rank (node rank 0, Megatron's global rank 0, `print_rank_0`) of a checkpointing training run prints at
start-up Megatron's messages for the checkpoint it loads (`resume_from`, which the player looks up in its
store) or that its directory has none. It prints a save at the time of the `training_log` line (printed by
the last rank) of each logged iteration that is the first at or past a multiple of `SAVE_INTERVAL` (up to
`--train-iters`; the sim acts at logged iterations only), with a `SaveCheckpoint` step
between Megatron's two save lines. Saves follow the cut of the lines: a run that crashes, hangs or fails on a
link never prints or stores a save due after that. A resumed run logs the multiples of `--log-interval` after
the loaded iteration (its first interval is warm-up again, as after any restart), saves at the next due
multiples, and lasts `durationSeconds` times the part of `--train-iters` left, at least RESUMED_MIN_SECONDS;
a checkpoint at or past `--train-iters` leaves nothing to train: the run loads it and completes after
RESUMED_MIN_SECONDS. Every rank gets the same `resume_from`, so the group still ends together.

Placing a crash around the first checkpoint: a run's N `training_log` lines are printed at span x k/(N+1),
k = 1..N, where span is the run's duration, stretched by a crash at `afterSeconds` a to
max(duration, 2 x (a + PEER_TEARDOWN_SECONDS) + 1). A save is printed and stored if and only if its line is
printed strictly before a. So a failed run shows at most the first half of its lines, and only a save in
that half can come before a crash: pick `SAVE_INTERVAL` small enough. `checkpoint_save_seconds(...,
crash_after_seconds=a)` returns the saves printed before a crash at a, with their times: a test picks a so
that it is not empty (the crash comes after the first checkpoint, and the restart must resume) or empty (the
crash comes before any). With `durationSeconds` >= 2 x (a + PEER_TEARDOWN_SECONDS) + 1 the crash does not
stretch the span, and the times of the uncut run (no `crash_after_seconds`) hold as they are.

Hosts in nccl-tests' `# Rank` lines and in mpirun/NCCL messages are node names (the pods' hostnames would
be JobSet's `<jobset>-node-0-<i>`, which the peers list does not carry), so a test can tie a message to a node.

`attempt` (for `transient`) counts the workloads the pod's own node has run under this plan; groupmates are
assumed to be on the same attempt (true when every group reruns together, as retries do).
"""

from __future__ import annotations

import enum
import hashlib
import ipaddress
import json
import posixpath
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from pathlib import PurePosixPath
from typing import Any, Final, Literal

from tests.sim.checkpoints import CheckpointSettings, checkpoint_settings
from tests.sim.faults import HEALTHY, FaultPlan, LinkFault, NodeFault

JOBSET_NAME_LABEL: Final = "jobset.sigs.k8s.io/jobset-name"
REPLICATED_JOB_LABEL: Final = "jobset.sigs.k8s.io/replicatedjob-name"
COMPLETION_INDEX: Final = "batch.kubernetes.io/job-completion-index"
GPU_RESOURCE: Final = "nvidia.com/gpu"
LAUNCHER: Final = "launcher"

PEER_TEARDOWN_SECONDS: Final = 2.0
HEALTH_GRACE_SECONDS: Final = 30.0
LOG_EPOCH: Final = datetime(2026, 1, 1, 0, 0, 0)
TRAINING_START: Final = LOG_EPOCH + timedelta(seconds=60)  # after a minute of initialisation
DEFAULT_TRAIN_ITERS: Final = 20
DEFAULT_LOG_INTERVAL: Final = 5
DEFAULT_GLOBAL_BATCH_SIZE: Final = 32
DEFAULT_NCCL_MIN_BYTES: Final = 8
DEFAULT_NCCL_MAX_BYTES: Final = 64 << 20
MAX_NCCL_ROWS: Final = 64
WARMUP_FACTOR: Final = 5.0  # Megatron's first iteration (initialisation, compilation) vs a steady one
RESUMED_MIN_SECONDS: Final = 1.0  # the shortest a resumed training run takes, so it is seen running
CHECKPOINT_FORMAT: Final = "torch_dist"  # Megatron's default `--ckpt-format`
NCCL_LATENCY_US: Final = 30.0
PID_BASE: Final = 4000
GPU_NAME: Final = "NVIDIA H100 80GB HBM3"
FIRST_NODE_ADDRESS: Final = ipaddress.IPv4Address("127.3.0.1")  # the group's nodes count up from here (loopback only)
NCCL_IB_PORT: Final = 53422  # the port NCCL's messages show after a peer's host


# --------------------------------------------------------------------------------------------- steps


@dataclass(frozen=True)
class Log:
    """Append `text` to the container's log: one or more whole lines, each ending in a newline."""

    text: str


@dataclass(frozen=True)
class Wait:
    seconds: float


@dataclass(frozen=True)
class Ready:
    """The pod becomes Ready from here on (JobSet's `dependsOn: Ready` gates the MPI launcher on it)."""


@dataclass(frozen=True)
class Exit:
    """The container terminates; `reason` is its terminated reason (`Completed`, `Error`, `OOMKilled`)."""

    code: int
    reason: str


@dataclass(frozen=True)
class RunForever:
    """Keep running until the pod is deleted."""


@dataclass(frozen=True)
class MarkNode:
    """Change the Node object, in the sim kubelet's shape: `{"taint": {key, value?, effect}}` (add the taint),
    `{"condition": {type, status, reason?, message?}}` (set the condition) or `{"not_ready": True}` (Ready=False,
    stop heartbeats)."""

    node: str
    change: Mapping[str, Any]


@dataclass(frozen=True)
class SaveCheckpoint:
    """The checkpoint of `iteration` is complete on disk (Megatron's `latest_checkpointed_iteration.txt` now
    names it); where the disk is, and whether it outlives the pod, is the player's business."""

    iteration: int


Step = Log | Wait | Ready | Exit | RunForever | MarkNode | SaveCheckpoint
Terminal = Exit | RunForever


class WorkloadKind(enum.StrEnum):
    NCCL_LAUNCHER = "nccl-launcher"
    MPI_WORKER = "mpi-worker"
    NCCL_SINGLE_NODE = "nccl-single-node"
    MEGATRON_TRAINING = "megatron-training"
    DCGM_DIAG = "dcgm-diag"
    GENERIC = "generic"


@dataclass(frozen=True)
class Script:
    """The ordered steps of one pod's main container; exactly one terminal step (`Exit` or `RunForever`), last."""

    kind: WorkloadKind
    steps: tuple[Step, ...]

    def __post_init__(self) -> None:
        terminals = [index for index, step in enumerate(self.steps) if isinstance(step, Exit | RunForever)]
        if terminals != [len(self.steps) - 1]:
            raise ValueError(f"a script ends with exactly one Exit or RunForever: {self.steps}")
        if sum(isinstance(step, Ready) for step in self.steps) > 1:
            raise ValueError("a pod becomes Ready at most once")

    def __iter__(self) -> Iterator[Step]:
        return iter(self.steps)

    def __len__(self) -> int:
        return len(self.steps)

    def timeline(self) -> list[tuple[float, Step]]:
        """Every step with the second (from the container's start) at which it happens."""
        now, timed = 0.0, []
        for step in self.steps:
            timed.append((now, step))
            if isinstance(step, Wait):
                now = round(now + step.seconds, 6)
        return timed

    @property
    def ready_after_seconds(self) -> float | None:
        return next((at for at, step in self.timeline() if isinstance(step, Ready)), None)

    @property
    def terminal(self) -> Terminal:
        last = self.steps[-1]
        assert isinstance(last, Exit | RunForever)
        return last

    @property
    def exit(self) -> Exit | None:
        return self.terminal if isinstance(self.terminal, Exit) else None

    @property
    def ends_after_seconds(self) -> float | None:
        """When the container terminates; None when it runs until deleted."""
        return self.timeline()[-1][0] if self.exit is not None else None

    @property
    def log(self) -> str:
        """The container's whole log once the script has run."""
        return "".join(step.text for step in self.steps if isinstance(step, Log))

    @property
    def marks(self) -> list[tuple[float, MarkNode]]:
        return [(at, step) for at, step in self.timeline() if isinstance(step, MarkNode)]


# --------------------------------------------------------------------------------------------- roles

_NCCL_BINARY = re.compile(r"^(?P<test>[a-z_]+?)_perf(?:_mpi)?$")
_TRAINING_WORDS = ("torchrun", "pretrain_gpt.py", "pretrain_gpt", "megatron")


def workload_kind(pod: Mapping[str, Any]) -> WorkloadKind:
    """Recognise what the pod runs from its main (first) container's command and args, and its JobSet role.

    - a word `dcgmi` → DCGM diagnostics;
    - an nccl-tests binary (`<test>_perf` or `<test>_perf_mpi`) → the MPI launcher when the pod is the
      `launcher` replicated job or runs `mpirun`, else a single-node NCCL test;
    - `sshd` (the MPI worker's `exec /usr/sbin/sshd -De`) → an MPI worker;
    - `torchrun`, `pretrain_gpt.py` or anything naming Megatron → Megatron-LM training;
    - anything else → generic.
    Words are the whitespace-separated pieces of command and args (shell scripts included), unquoted, and
    compared by their last path component.
    """
    tokens = _tokens(_main_container(pod))
    names = {PurePosixPath(token).name for token in tokens if token}
    if "dcgmi" in names:
        return WorkloadKind.DCGM_DIAG
    if _nccl_binary_index(tokens) is not None:
        if "mpirun" in names or _labels(pod).get(REPLICATED_JOB_LABEL) == LAUNCHER:
            return WorkloadKind.NCCL_LAUNCHER
        return WorkloadKind.NCCL_SINGLE_NODE
    if "sshd" in names:
        return WorkloadKind.MPI_WORKER
    if any(word in token.lower() for token in tokens for word in _TRAINING_WORDS):
        return WorkloadKind.MEGATRON_TRAINING
    return WorkloadKind.GENERIC


def script_for(
    pod: Mapping[str, Any],
    *,
    peers: Sequence[str],
    plan: FaultPlan,
    attempt: int,
    domains: Mapping[str, str] = {},
    resume_from: int | None = None,
) -> Script:
    """What this pod does, in order.

    `pod` is the pod as the API returns it, bound (`spec.nodeName` set). `peers` are the nodes the pod's group
    does its GPU work on: the nodes of the JobSet's ranks (every pod but an MPI launcher), sorted; duplicates
    are ignored, and a rank pod's own node counts even when missing. The MPI launcher's own node takes part
    only if it is listed (the launcher runs no GPU work, so its node's fault does not affect it). `attempt` is 0
    for the first workload the pod's node runs under this plan, 1 for the next, ... `domains` maps node names
    to their NVLink domain (the `nvidia.com/gpu.clique` label), which the plan's `links` are matched against;
    a node missing from it is in no domain, so it never puts its group across a link. `resume_from` is the
    iteration of the checkpoint a checkpointing training pod finds in its checkpoint directory (None: none
    there); every other pod ignores it.
    """
    node = _node_name(pod)
    kind = workload_kind(pod)
    context = _Pod(pod, node, _tokens(_main_container(pod)), _env(_main_container(pod)))
    if kind is WorkloadKind.NCCL_LAUNCHER:
        group = _Group.of(peers or [node], plan, attempt, domains)
        return _nccl_script(kind, context, group, _outcome(group, None))
    if kind is WorkloadKind.MPI_WORKER:
        return _mpi_worker_script(kind, context, _effective(plan.fault_for(node), attempt))
    if kind is WorkloadKind.MEGATRON_TRAINING:
        run = _training_run(context, len({*peers, node}), resume_from)
        group = _Group.of([*peers, node], plan, attempt, domains, work=run.remaining)
        return _training_script(kind, context, run, group, _outcome(group, node))
    group = _Group.of([node], plan, attempt)
    outcome = _outcome(group, node)
    if kind is WorkloadKind.NCCL_SINGLE_NODE:
        return _nccl_script(kind, context, group, outcome)
    if kind is WorkloadKind.DCGM_DIAG:
        return _dcgm_script(kind, context, group, outcome)
    return _generic_script(kind, context, group, outcome)


# --------------------------------------------------------------------------------------------- the pod


@dataclass(frozen=True)
class _Pod:
    manifest: Mapping[str, Any]
    node: str
    tokens: tuple[str, ...]
    env: Mapping[str, str]

    def option(self, *names: str, start: int = 0, stop: int | None = None) -> str | None:
        """The value after the first of `names` (or `name=value`) in tokens[start:stop], env references
        resolved; None when absent or not knowable."""
        for index in range(start, len(self.tokens) if stop is None else stop):
            token = self.tokens[index]
            for name in names:
                if token == name and index + 1 < len(self.tokens):
                    return _expand(self.tokens[index + 1], self.env)
                if token.startswith(f"{name}="):
                    return _expand(token[len(name) + 1 :], self.env)
        return None

    def number(self, *names: str, start: int = 0, stop: int | None = None) -> int | None:
        value = self.option(*names, start=start, stop=stop)
        return int(value) if value is not None and value.isdigit() else None

    @property
    def gpus(self) -> int | None:
        limits = _main_container(self.manifest).get("resources", {}).get("limits", {})
        value = str(limits.get(GPU_RESOURCE, ""))
        return int(value) if value.isdigit() else None

    @property
    def jobset(self) -> str:
        return _labels(self.manifest).get(JOBSET_NAME_LABEL, str(self.manifest.get("metadata", {}).get("name", "")))


def _node_name(pod: Mapping[str, Any]) -> str:
    node = pod.get("spec", {}).get("nodeName")
    if not node:
        raise ValueError("the pod is not bound to a node (spec.nodeName is empty)")
    return str(node)


def _labels(pod: Mapping[str, Any]) -> Mapping[str, str]:
    labels: Mapping[str, str] = pod.get("metadata", {}).get("labels") or {}
    return labels


def _main_container(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    containers = pod.get("spec", {}).get("containers") or [{}]
    container: Mapping[str, Any] = containers[0]
    return container


def _tokens(container: Mapping[str, Any]) -> tuple[str, ...]:
    words = [*(container.get("command") or []), *(container.get("args") or [])]
    pieces = (piece.strip("\"'\\;") for word in words for piece in str(word).split())
    return tuple(piece for piece in pieces if piece)


def _env(container: Mapping[str, Any]) -> dict[str, str]:
    return {
        str(item["name"]): str(item["value"])
        for item in container.get("env") or []
        if "name" in item and isinstance(item.get("value"), str)
    }


_REFERENCE = re.compile(r"^\$\{?(?P<name>[A-Za-z_][A-Za-z0-9_]*)\}?$")


def _expand(token: str, env: Mapping[str, str]) -> str | None:
    """A literal, or a whole-word `$NAME`/`${NAME}` from the container's env; None when it cannot be known."""
    match = _REFERENCE.match(token)
    if match is None:
        return token
    return env.get(match["name"])


def _completion_index(pod: Mapping[str, Any]) -> int:
    metadata = pod.get("metadata", {})
    value = (metadata.get("annotations") or {}).get(COMPLETION_INDEX, _labels(pod).get(COMPLETION_INDEX, "0"))
    return int(value) if str(value).isdigit() else 0


def _nccl_binary_index(tokens: Sequence[str]) -> int | None:
    for index, token in enumerate(tokens):
        if _NCCL_BINARY.match(PurePosixPath(token).name):
            return index
    return None


# --------------------------------------------------------------------------------------------- the group


def _effective(fault: NodeFault, attempt: int) -> NodeFault:
    """A transient fault is a crash on the node's first workload and nothing afterwards."""
    if fault.kind != "transient":
        return fault
    return replace(fault, kind="crash") if attempt == 0 else HEALTHY


@dataclass(frozen=True)
class _Group:
    """The nodes a workload does its GPU work on, their faults, and the broken link they span, if any."""

    nodes: tuple[str, ...]
    plan: FaultPlan
    faults: Mapping[str, NodeFault]
    domains: Mapping[str, str]
    link: LinkFault | None = None
    work: float = 1.0  # the part of its work the group still has to do (less than 1 when resumed)

    @classmethod
    def of(
        cls,
        nodes: Sequence[str],
        plan: FaultPlan,
        attempt: int,
        domains: Mapping[str, str] = {},
        *,
        work: float = 1.0,
    ) -> _Group:
        """`domains` may name any nodes; only the group's own count. Without domains, no link is spanned
        (single-node workloads pass none)."""
        unique = tuple(sorted(set(nodes)))
        faults = {node: _effective(plan.fault_for(node), attempt) for node in unique}
        own = {node: domains[node] for node in unique if node in domains}
        return cls(unique, plan, faults, own, plan.broken_link(set(own.values())), work)

    def link_hosts(self, link: LinkFault) -> tuple[str, str]:
        """The host on each side of the link whose NCCL errors are shown: the first node of each domain."""
        first, second = (min(node for node in self.nodes if self.domains.get(node) == side) for side in link.between)
        return first, second

    def address(self, node: str) -> str:
        """A node's made-up IPv4 address (its place in the group), as NCCL prints its peers' GIDs."""
        index = self.nodes.index(node) if node in self.nodes else 0
        return str(FIRST_NODE_ADDRESS + index)

    def with_kind(self, *kinds: str) -> list[tuple[str, NodeFault]]:
        return [(node, fault) for node, fault in self.faults.items() if fault.kind in kinds]

    @property
    def first_crash(self) -> tuple[str, NodeFault] | None:
        crashes = self.with_kind("crash")
        return min(crashes, key=lambda item: (item[1].resolved_after_seconds, item[0])) if crashes else None

    @property
    def blocked(self) -> Literal["stall", "hang"] | None:
        """A stall blocks before the first result, so it wins over a hang."""
        if self.with_kind("stall"):
            return "stall"
        return "hang" if self.with_kind("hang") else None

    @property
    def hang_after(self) -> float | None:
        """When the group's earliest hang blocks; None: right after the first result (a hang without
        `afterSeconds` in the group blocks there, before any hang with a time)."""
        hangs = [fault.after_seconds for _, fault in self.with_kind("hang")]
        if not hangs or any(after is None for after in hangs):
            return None
        return min(after for after in hangs if after is not None)

    @property
    def duration(self) -> float:
        base = _scaled_duration(self.plan.defaults.duration_seconds, self.work)
        marked = [fault.resolved_after_seconds for _, fault in self.with_kind("health", "notready")]
        return base + max(marked) + HEALTH_GRACE_SECONDS if marked else base

    @property
    def datacheck(self) -> bool:
        return bool(self.with_kind("datacheck"))

    @property
    def no_measurement(self) -> bool:
        return bool(self.with_kind("nomeasurement"))

    @property
    def bus_bandwidth_gbps(self) -> float:
        return min(self.plan.bus_bandwidth_gbps(node) for node in self.nodes)

    @property
    def tflops_per_gpu(self) -> float:
        return min(self.plan.tflops_per_gpu(node) for node in self.nodes)

    @property
    def step_time_ms(self) -> float:
        return max(self.plan.step_time_ms(node) for node in self.nodes)


@dataclass(frozen=True)
class _Outcome:
    """How the pod's run ends: completes, crashes itself, is taken down by a peer's crash, fails on a broken
    link (`link`), or blocks. `progress_until` is when the collective stops making progress (the group's first
    failure, or the end)."""

    end_at: float | None
    exit: Exit | None
    progress_until: float | None = None
    crashed: bool = False
    culprit: str | None = None
    blocked: Literal["stall", "hang"] | None = None
    link: LinkFault | None = None
    blocked_at: float | None = None  # a hang's `afterSeconds`; None: after the first result

    @property
    def completes(self) -> bool:
        return self.exit is not None and not self.crashed and self.culprit is None and self.link is None


def _outcome(group: _Group, me: str | None) -> _Outcome:
    """`me` is the pod's node when the pod does GPU work in the group, None for the MPI launcher."""
    first = group.first_crash
    own = group.faults.get(me, HEALTHY) if me is not None else HEALTHY
    link = group.link
    if link is not None and (first is None or link.resolved_after_seconds < first[1].resolved_after_seconds):
        # The whole collective fails at once on the link: every pod doing GPU work, and the launcher.
        failed = Exit(link.resolved_exit_code, "Error")
        return _Outcome(link.resolved_after_seconds, failed, link.resolved_after_seconds, link=link)
    if first is not None:
        stopped = first[1].resolved_after_seconds
        if own.kind == "crash" and own.resolved_after_seconds < _teardown(first[1]):
            crash = Exit(own.resolved_exit_code, own.resolved_reason)
            return _Outcome(own.resolved_after_seconds, crash, stopped, crashed=True)
        return _Outcome(_teardown(first[1]), Exit(1, "Error"), stopped, culprit=first[0])
    if group.blocked is not None:
        return _Outcome(None, None, blocked=group.blocked, blocked_at=group.hang_after)
    return _Outcome(group.duration, Exit(0, "Completed"), group.duration)


def _teardown(crash: NodeFault) -> float:
    return crash.resolved_after_seconds + PEER_TEARDOWN_SECONDS


def _scaled_duration(base: float, work: float) -> float:
    """A run's duration when only `work` (0..1) of it is left to do: proportionally shorter, but never below
    RESUMED_MIN_SECONDS (nor above the full run), so the product still sees it running."""
    if work >= 1.0:
        return base
    return min(base, max(RESUMED_MIN_SECONDS, base * work))


def _progress_span(group: _Group) -> float:
    """The seconds over which progress lines are spread, the same for every pod of the group."""
    first = group.first_crash
    failures = [_teardown(first[1])] if first is not None else []
    if group.link is not None:
        failures.append(group.link.resolved_after_seconds)
    return _spread_span(group.duration, failures)


def _spread_span(duration: float, failures: Sequence[float]) -> float:
    """The run's duration, or when a failure (a crash's teardown, a broken link) cuts it short, long enough
    that it is cut at most halfway (a failed run never shows its last result)."""
    return max(duration, 2 * max(failures) + 1) if failures else duration


def _progress_at(count: int, span: float) -> list[float]:
    return [span * (index + 1) / (count + 1) for index in range(count)]


def _keep_progress(times: Sequence[float], outcome: _Outcome) -> int:
    """How many progress lines the run prints before it ends or blocks."""
    if outcome.blocked == "stall":
        return 0
    if outcome.blocked == "hang" and outcome.blocked_at is not None:
        return sum(1 for at in times if at < outcome.blocked_at)
    if outcome.blocked == "hang":
        return min(1, len(times))
    if outcome.completes or outcome.progress_until is None:
        return len(times)
    return sum(1 for at in times if at < outcome.progress_until)


def _mark_event(node: str, fault: NodeFault) -> list[tuple[float, Step]]:
    change = fault.node_change()
    return [] if change is None else [(fault.resolved_after_seconds, MarkNode(node, change))]


def _assemble(kind: WorkloadKind, events: Sequence[tuple[float, Step]], outcome: _Outcome) -> Script:
    """Order the events by time (ties keep their order), put Waits between them, end with the terminal step.
    Events after the end never happen (the container is gone); consecutive log lines are merged."""
    end = outcome.end_at
    kept = sorted((item for item in events if end is None or item[0] <= end), key=lambda item: item[0])
    steps: list[Step] = []
    now = 0.0
    for at, step in kept:
        now = _wait_until(steps, now, at)
        if isinstance(step, Log) and steps and isinstance(steps[-1], Log):
            steps[-1] = Log(steps[-1].text + step.text)
        else:
            steps.append(step)
    if outcome.exit is None or end is None:
        steps.append(RunForever())
    else:
        _wait_until(steps, now, end)
        steps.append(outcome.exit)
    return Script(kind, tuple(steps))


def _wait_until(steps: list[Step], now: float, at: float) -> float:
    gap = round(at - now, 3)
    if gap > 0:
        steps.append(Wait(gap))
        return now + gap
    return now


# --------------------------------------------------------------------------------------------- MPI workers


def _mpi_worker_script(kind: WorkloadKind, pod: _Pod, own: NodeFault) -> Script:
    """sshd, Ready at once, running until deleted; only a crash of its own node ends it."""
    events: list[tuple[float, Step]] = [
        (0.0, Log("Server listening on 0.0.0.0 port 22.\nServer listening on :: port 22.\n")),
        (0.0, Ready()),
        *_mark_event(pod.node, own),
    ]
    if own.kind != "crash":
        return _assemble(kind, events, _Outcome(None, None))
    outcome = _Outcome(own.resolved_after_seconds, Exit(own.resolved_exit_code, own.resolved_reason), crashed=True)
    events.append((own.resolved_after_seconds, Log(_cuda_failure(pod.node, PID_BASE))))
    return _assemble(kind, events, outcome)


# --------------------------------------------------------------------------------------------- nccl-tests

# Bus bandwidth = algorithm bandwidth x k(n-1)/n for n ranks (nccl-tests' PERFORMANCE.md); other tests: x 1.
_BUS_FACTORS: Final[Mapping[str, int]] = {"all_reduce": 2, "all_gather": 1, "reduce_scatter": 1, "alltoall": 1}
_REDUCING: Final = ("all_reduce", "reduce_scatter", "reduce")
_SIZE = re.compile(r"^(?P<number>\d+)(?P<unit>[KMGT]?)$")
_UNITS: Final = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


@dataclass(frozen=True)
class _Rank:
    rank: int
    host: str
    device: int
    pid: int


@dataclass(frozen=True)
class _NcclRun:
    test: str
    binary: str
    sizes: tuple[int, ...]
    step_factor: int
    ranks: tuple[_Rank, ...]
    gpus_per_process: int
    iterations: int
    warmup: int

    @property
    def bus_factor(self) -> float:
        """The factor for n ranks; 1 for a single rank (nccl-tests would print 0, which would make the plan's
        figure unmeasurable on a 1-GPU sim node)."""
        n, k = len(self.ranks), _BUS_FACTORS.get(self.test)
        return k * (n - 1) / n if k is not None and n > 1 else 1.0

    def first_rank_on(self, host: str) -> _Rank:
        return next((rank for rank in self.ranks if rank.host == host), self.ranks[0])


def _nccl_run(kind: WorkloadKind, pod: _Pod, group: _Group) -> _NcclRun:
    """The test, sizes and ranks from the binary's options (`-b -e -f -g -n -w`; mpirun's `-np`)."""
    at = _nccl_binary_index(pod.tokens) or 0
    binary = PurePosixPath(pod.tokens[at]).name if pod.tokens else "all_reduce_perf"
    match = _NCCL_BINARY.match(binary)
    test = match["test"] if match else "all_reduce"
    low = _parse_size(pod.option("-b", "--minbytes", start=at)) or DEFAULT_NCCL_MIN_BYTES
    high = _parse_size(pod.option("-e", "--maxbytes", start=at)) or DEFAULT_NCCL_MAX_BYTES
    factor = max(2, pod.number("-f", "--stepfactor", start=at) or 2)
    sizes = [low]
    while sizes[-1] * factor <= high and len(sizes) < MAX_NCCL_ROWS:
        sizes.append(sizes[-1] * factor)
    if kind is WorkloadKind.NCCL_LAUNCHER:
        processes = pod.number("-np", "-n", "--np", stop=at) or len(group.nodes)
        per_node = max(1, processes // len(group.nodes))
        ranks = [
            _Rank(index * per_node + device, host, device, PID_BASE + index * per_node + device)
            for index, host in enumerate(group.nodes)
            for device in range(per_node)
        ]
        gpus_per_process = pod.number("-g", "--ngpus", start=at) or 1
    else:
        gpus_per_process = pod.number("-g", "--ngpus", start=at) or pod.gpus or 1
        ranks = [_Rank(device, pod.node, device, PID_BASE) for device in range(gpus_per_process)]
    return _NcclRun(
        test=test,
        binary=binary,
        sizes=tuple(sizes),
        step_factor=factor,
        ranks=tuple(ranks),
        gpus_per_process=gpus_per_process,
        iterations=pod.number("-n", "--iters", start=at) or 20,
        warmup=pod.number("-w", "--warmup_iters", start=at) or 1,
    )


def _parse_size(text: str | None) -> int | None:
    match = _SIZE.match(text or "")
    return int(match["number"]) * _UNITS[match["unit"]] if match else None


@dataclass(frozen=True)
class _NcclRow:
    text: str
    busbw: tuple[float, float]
    wrong: int


def _nccl_rows(run: _NcclRun, peak_busbw: float, *, datacheck: bool) -> list[_NcclRow]:
    """One row per size. Time = latency x (1 - size/max) + size / peak algbw, so bandwidth grows with the size
    and reaches exactly the peak at the largest one; in-place runs 0.1% slower. With `datacheck` the upper
    half of the sizes reports a few wrong elements (1, 2, 3, ... per half)."""
    peak_algbw = peak_busbw / run.bus_factor
    largest = run.sizes[-1]
    redop = "sum" if run.test in _REDUCING else "none"
    rows = []
    half = len(run.sizes) // 2
    for index, size in enumerate(run.sizes):
        count = max(1, size // 4)
        wrong = index - half + 1 if datacheck and index >= half else 0
        halves, busbws = [], []
        for slowdown in (1.0, 1.001):
            time_us = (NCCL_LATENCY_US * (1 - size / largest) + size / (peak_algbw * 1e3)) * slowdown
            algbw = size / (time_us * 1e3)
            busbw = algbw * run.bus_factor
            halves.append(f"{_format_time(time_us):>8}  {algbw:6.2f}  {busbw:6.2f}  {wrong:6d}")
            busbws.append(busbw)
        text = f"{size:>12}  {count:>12}  {'float':>8}  {redop:>6}  {-1:>6}  {halves[0]}  {halves[1]}\n"
        rows.append(_NcclRow(text, (busbws[0], busbws[1]), 2 * wrong))
    return rows


def _format_time(time_us: float) -> str:
    return f"{time_us:.2f}" if time_us < 1e5 else f"{time_us:.0f}"


def _nccl_preamble(run: _NcclRun) -> str:
    lines = [
        "# nccl-tests version 2.17.1 nccl-headers=22703 nccl-library=22703",
        f"# Collective test starting: {run.binary}",
        f"# nThread 1 nGpus {run.gpus_per_process} minBytes {run.sizes[0]} maxBytes {run.sizes[-1]} "
        f"step: {run.step_factor}(factor) "
        f"warmup iters: {run.warmup} iters: {run.iterations} agg iters: 1 validation: 1 graph: 0",
        "#",
        "# Using devices",
    ]
    lines += [
        f"#  Rank {rank.rank:2d} Group  0 Pid {rank.pid:6d} on {rank.host} device {rank.device:2d} "
        f"[0000:{0x18 + rank.device:02x}:00] {GPU_NAME}"
        for rank in run.ranks
    ]
    first = run.ranks[0]
    lines += [
        f"{first.host}:{first.pid}:{first.pid} [0] NCCL INFO Bootstrap: Using eth0:{FIRST_NODE_ADDRESS}<0>",
        f"{first.host}:{first.pid}:{first.pid} [0] NCCL INFO NCCL version 2.27.3+cuda12.9",
    ]
    return "".join(f"{line}\n" for line in lines)


_NCCL_HEADER: Final = (
    "#\n"
    "#                                                              out-of-place                       in-place\n"
    "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw "
    "#wrong\n"
    "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)\n"
)


def _nccl_footer(run: _NcclRun, rows: Sequence[_NcclRow]) -> str:
    wrong = sum(row.wrong for row in rows)
    average = sum(sum(row.busbw) for row in rows) / (2 * len(rows))
    verdict = "FAILED" if wrong else "OK"
    return (
        f"# Out of bounds values : {wrong} {verdict}\n"
        f"# Avg bus bandwidth    : {average:.3f} \n"
        "#\n"
        f"# Collective test concluded: {run.binary}\n"
    )


def _cuda_failure(host: str, pid: int) -> str:
    return (
        f"{host}:{pid}:{pid} [0] NCCL WARN Cuda failure 'unspecified launch failure'\n"
        f"{host}: Test CUDA failure common.cu:1035 'unspecified launch failure'\n"
        f" .. {host} pid {pid}: Test failure common.cu:1126\n"
    )


def _ib_completion_error(group: _Group, host: str, peer: str, *, send: bool) -> str:
    """NCCL's `NET/IB` warning when a work request to a peer fails with IBV_WC_RETRY_EXC_ERR (status 12, the
    remote end never acknowledged: the link is down), as the InfiniBand transport's proxy thread prints it."""
    direction = "Send" if send else "Recv"
    opcode = 0 if send else 129
    return (
        f"NET/IB : Got completion from peer {peer}<{NCCL_IB_PORT}> with status=12 opcode={opcode} len=0 "
        f"vendor err 129 ({direction}) localGid ::ffff:{group.address(host)} "
        f"remoteGids::ffff:{group.address(peer)} hca mlx5_0"
    )


def _nccl_link_failure(group: _Group, run: _NcclRun, link: LinkFault) -> str:
    """Both sides of the broken link report it (each from its first rank), then nccl-tests fails on both with
    NCCL's remote error (ncclRemoteError, 6)."""
    first, second = group.link_hosts(link)
    text = ""
    for host, peer, send in ((first, second, True), (second, first, False)):
        pid = run.first_rank_on(host).pid
        prefix = f"{host}:{pid}:{pid + 64} [0]"
        warning = _ib_completion_error(group, host, peer, send=send)
        text += (
            f"{prefix} transport/net_ib.cc:2276 NCCL WARN {warning}\n"
            f"{prefix} NCCL INFO transport/net.cc:1302 -> 6\n"
            f"{prefix} NCCL INFO proxy.cc:698 -> 6\n"
            f"{prefix} NCCL INFO proxy.cc:878 -> 6 [Progress Thread]\n"
        )
    for host in (first, second):
        pid = run.first_rank_on(host).pid
        text += (
            f"{host}: Test NCCL failure common.cu:1005 'remote process exited or there was a network error / '\n"
            f" .. {host} pid {pid}: Test failure common.cu:1126\n"
        )
    return text


_SIGNAL_NAMES: Final = {6: "Aborted", 7: "Bus error", 9: "Killed", 11: "Segmentation fault", 15: "Terminated"}


def _mpirun_abort(run: _NcclRun, pod: _Pod, culprit: _Rank, code: int, processes: int = 1) -> str:
    """Open MPI's messages when ranks exit non-zero: by signal (exit code > 128) they name rank, PID and node."""
    job = int(hashlib.sha256(pod.jobset.encode()).hexdigest()[:8], 16) % 50000 + 10000
    rule = "-" * 74
    plural = "process" if processes == 1 else "processes"
    text = (
        f"{rule}\nPrimary job  terminated normally, but {processes} {plural} returned\n"
        f"a non-zero exit code. Per user-direction, the job has been aborted.\n{rule}\n{rule}\n"
    )
    if code > 128:
        signal = code - 128
        name = _SIGNAL_NAMES.get(signal, f"Signal {signal}")
        text += (
            f"mpirun noticed that process rank {culprit.rank} with PID {culprit.pid} on node {culprit.host} "
            f"exited on signal {signal} ({name}).\n"
        )
    else:
        text += (
            "mpirun detected that one or more processes exited with non-zero status, thus causing\n"
            "the job to be terminated. The first process to do so was:\n\n"
            f"  Process name: [[{job},1],{culprit.rank}]\n  Exit code:    {code}\n"
        )
    return text + f"{rule}\n"


def _nccl_script(kind: WorkloadKind, pod: _Pod, group: _Group, outcome: _Outcome) -> Script:
    """nccl-tests' output: preamble and rank lines at once, the column header once communicators are up (never
    under a stall), rows spread over the run, the footer at the end (no header, rows or footer under
    `nomeasurement`). The launcher adds mpirun's messages."""
    run = _nccl_run(kind, pod, group)
    rows = [] if group.no_measurement else _nccl_rows(run, group.bus_bandwidth_gbps, datacheck=group.datacheck)
    times = _progress_at(len(rows), _progress_span(group))
    events: list[tuple[float, Step]] = [(0.0, Ready()), (0.0, Log(_nccl_preamble(run)))]
    if kind is not WorkloadKind.NCCL_LAUNCHER:
        events += _mark_event(pod.node, group.faults[pod.node])
    if outcome.blocked != "stall" and rows:
        events.append((0.0, Log(_NCCL_HEADER)))
    shown = _keep_progress(times, outcome)
    events += [(at, Log(row.text)) for at, row in zip(times[:shown], rows, strict=False)]
    end = outcome.end_at if outcome.end_at is not None else 0.0
    launcher = kind is WorkloadKind.NCCL_LAUNCHER
    if outcome.completes:
        if rows:
            events.append((end, Log(_nccl_footer(run, rows))))
        if group.datacheck:
            if launcher:
                events.append((end, Log(_mpirun_abort(run, pod, run.ranks[0], 1, len(run.ranks)))))
            outcome = replace(outcome, exit=Exit(1, "Error"))
    elif outcome.link is not None and outcome.exit is not None:
        events.append((end, Log(_nccl_link_failure(group, run, outcome.link))))
        if launcher:
            first = run.first_rank_on(group.link_hosts(outcome.link)[0])
            events.append((end, Log(_mpirun_abort(run, pod, first, outcome.exit.code, processes=2))))
    elif outcome.exit is not None:
        host = outcome.culprit or pod.node
        culprit = run.first_rank_on(host)
        events.append((end, Log(_cuda_failure(host, culprit.pid))))
        if launcher:
            code = group.faults[host].resolved_exit_code if host in group.faults else outcome.exit.code
            events.append((end, Log(_mpirun_abort(run, pod, culprit, code))))
    return _assemble(kind, events, outcome)


# --------------------------------------------------------------------------------------------- Megatron-LM


@dataclass(frozen=True)
class _TrainingRun:
    train_iters: int
    log_interval: int
    global_batch_size: int
    node_rank: int
    nnodes: int
    nproc_per_node: int
    checkpointing: CheckpointSettings | None = None
    loaded: int | None = None  # the iteration of the checkpoint the run resumes from
    tensor_parallel: int = 1
    pipeline_parallel: int = 1

    @property
    def last_rank(self) -> bool:
        return self.node_rank == self.nnodes - 1

    @property
    def first_global_rank(self) -> int:
        return self.node_rank * self.nproc_per_node

    @property
    def start(self) -> int:
        """The last iteration done before this run: the loaded checkpoint's, or 0."""
        return self.loaded or 0

    @property
    def remaining(self) -> float:
        """The part of the run's iterations still to do, 0..1."""
        return max(0, self.train_iters - self.start) / self.train_iters if self.train_iters >= 1 else 0.0

    @property
    def logged_iterations(self) -> list[int]:
        """Megatron logs every `log_interval`-th iteration; a fresh run (the sim's choice) also logs iteration
        1, so its first line is the initialisation overhead alone. A resumed run logs the multiples after the
        loaded iteration."""
        if self.start:
            first = (self.start // self.log_interval + 1) * self.log_interval
            return list(range(first, self.train_iters + 1, self.log_interval))
        multiples = range(self.log_interval, self.train_iters + 1, self.log_interval)
        return sorted({1, *multiples}) if self.train_iters >= 1 else []

    @property
    def saved_iterations(self) -> list[int]:
        """Where the run saves: for each multiple of the save interval after the start, up to `train_iters`,
        the first logged iteration at or past it (the sim acts at logged iterations only)."""
        if self.checkpointing is None:
            return []
        logged = self.logged_iterations
        interval = self.checkpointing.save_interval
        due = range((self.start // interval + 1) * interval, self.train_iters + 1, interval)
        return sorted({next(i for i in logged if i >= m) for m in due if logged and logged[-1] >= m})


def _training_run(pod: _Pod, group_size: int, resume_from: int | None) -> _TrainingRun:
    """From torchrun's env (`PET_NNODES`, `PET_NPROC_PER_NODE`, set by the Trainer), Megatron's arguments
    (`--train-iters "${TRAIN_ITERS}"` is resolved from the container's env) and the checkpoint env
    (`tests/sim/checkpoints.py`); `resume_from` counts only for a checkpointing pod."""
    nnodes = pod.env.get("PET_NNODES", "")
    nproc = pod.env.get("PET_NPROC_PER_NODE", "")
    checkpointing = checkpoint_settings(_main_container(pod.manifest))
    return _TrainingRun(
        train_iters=pod.number("--train-iters") or DEFAULT_TRAIN_ITERS,
        log_interval=pod.number("--log-interval") or DEFAULT_LOG_INTERVAL,
        global_batch_size=pod.number("--global-batch-size") or DEFAULT_GLOBAL_BATCH_SIZE,
        node_rank=_completion_index(pod.manifest),
        nnodes=int(nnodes) if nnodes.isdigit() else group_size,
        nproc_per_node=int(nproc) if nproc.isdigit() else pod.gpus or 1,
        checkpointing=checkpointing,
        loaded=resume_from if checkpointing is not None and resume_from is not None else None,
        tensor_parallel=pod.number("--tensor-model-parallel-size") or 1,
        pipeline_parallel=pod.number("--pipeline-model-parallel-size") or 1,
    )


def checkpoint_save_seconds(
    *,
    train_iters: int,
    log_interval: int,
    save_interval: int,
    duration_seconds: float,
    resume_from: int | None = None,
    crash_after_seconds: float | None = None,
) -> list[tuple[int, float]]:
    """When a checkpointing training run prints (and stores) each save: (iteration, seconds after the pod
    started), in order, as `script_for` plays it for a group without health, notready or link faults.
    `duration_seconds` is the plan's `defaults.durationSeconds`; `crash_after_seconds` the `afterSeconds` of
    the group's first crash (a `crash`, or a `transient` on its first workload), which both stretches the span
    the lines are spread over and cuts them: only saves strictly before it are returned."""
    run = _TrainingRun(
        train_iters=train_iters,
        log_interval=log_interval,
        global_batch_size=DEFAULT_GLOBAL_BATCH_SIZE,
        node_rank=0,
        nnodes=1,
        nproc_per_node=1,
        checkpointing=CheckpointSettings("/", save_interval),
        loaded=resume_from,
    )
    crash = [] if crash_after_seconds is None else [crash_after_seconds + PEER_TEARDOWN_SECONDS]
    span = _spread_span(_scaled_duration(duration_seconds, run.remaining), crash)
    times = _progress_at(len(run.logged_iterations), span)
    saved = set(run.saved_iterations)
    return [
        (iteration, at)
        for iteration, at in zip(run.logged_iterations, times, strict=True)
        if iteration in saved and (crash_after_seconds is None or at < crash_after_seconds)
    ]


def _stamp(at: datetime) -> str:
    return at.strftime("%Y-%m-%d %H:%M:%S.%f")


def _glog(severity: str, at: datetime) -> str:
    """The glog-style prefix torch's C++ and elastic agent print (`W0101 00:01:02.000000`)."""
    return f"{severity}{at:%m%d %H:%M:%S.%f}"


def _training_lines(run: _TrainingRun, *, step_ms: float, tflops: float) -> list[tuple[datetime, str]]:
    """Megatron's `training_log` lines with their virtual times: the first interval (iteration 1, or the
    first after a loaded checkpoint) runs at WARMUP_FACTOR times the step time and 1/WARMUP_FACTOR of the
    throughput, every later one exactly `step_ms` per iteration at `tflops`; each line's timestamp is the
    previous one plus the interval's iterations x its time per iteration, starting at TRAINING_START."""
    clock = TRAINING_START
    previous = run.start
    lines: list[tuple[datetime, str]] = []
    for iteration in run.logged_iterations:
        warmup = not lines
        elapsed_ms = step_ms * (WARMUP_FACTOR if warmup else 1.0)
        throughput = tflops / WARMUP_FACTOR if warmup else tflops
        clock += timedelta(milliseconds=elapsed_ms * (iteration - previous))
        loss = 11.0 / (1 + 0.05 * iteration)
        text = (
            f" [{_stamp(clock)}] iteration {iteration:8d}/{run.train_iters:8d} |"
            f" consumed samples: {iteration * run.global_batch_size:12d} |"
            f" elapsed time per iteration (ms): {elapsed_ms:.1f} |"
            f" throughput per GPU (TFLOP/s/GPU): {throughput:.1f} |"
            f" learning rate: {3e-4:.6E} | global batch size: {run.global_batch_size:5d} |"
            f" lm loss: {loss:.6E} | loss scale: 1.0 | grad norm: {1.0 + 10.0 / iteration:.3f} |"
            " number of skipped iterations:   0 | number of nan iterations:   0 |\n"
        )
        lines.append((clock, text))
        previous = iteration
    return lines


def _torch_banner(run: _TrainingRun) -> str:
    return (
        f"{_glog('W', LOG_EPOCH)} 1 torch/distributed/run.py:766] Setting OMP_NUM_THREADS environment variable "
        f"for each process to be 1 in default; node rank {run.node_rank} of {run.nnodes}, "
        f"{run.nproc_per_node} processes per node\n"
    )


def _torch_crash(run: _TrainingRun, code: int, at: datetime) -> str:
    rank = run.first_global_rank
    return (
        f"[rank{rank}]: Traceback (most recent call last):\n"
        f'[rank{rank}]:   File "/mnt/workspace/megatron-lm/pretrain_gpt.py", line 229, in <module>\n'
        f"[rank{rank}]: RuntimeError: CUDA error: unspecified launch failure\n"
        f"{_glog('E', at)} 1 torch/distributed/elastic/multiprocessing/api.py:874] failed "
        f"(exitcode: {code}) local_rank: 0 (pid: {PID_BASE}) of binary: /usr/bin/python\n"
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:\n"
    )


def _torch_lost_peer(run: _TrainingRun, last_error: str, at: datetime) -> str:
    """torch's NCCL watchdog on a failed collective; `last_error` is NCCL's own last message (what went wrong
    underneath: a peer's socket closing when it crashed, an InfiniBand error on a broken link)."""
    rank = run.first_global_rank
    return (
        f"[rank{rank}]:[{_glog('E', at)} ProcessGroupNCCL.cpp:1895] [PG ID 0 PG GUID 0(default_pg) "
        f"Rank {rank}] Process group watchdog thread terminated with exception: NCCL error: remote process "
        "exited or there was a network error, NCCL version 2.27.3\n"
        f"[rank{rank}]: ncclRemoteError: A call failed possibly due to a network error or a remote process "
        "exiting prematurely.\n"
        f"[rank{rank}]: Last error:\n"
        f"[rank{rank}]: {last_error}\n"
        f"{_glog('E', at)} 1 torch/distributed/elastic/multiprocessing/api.py:874] failed (exitcode: 1) "
        f"local_rank: 0 (pid: {PID_BASE}) of binary: /usr/bin/python\n"
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:\n"
    )


def _training_script(kind: WorkloadKind, pod: _Pod, run: _TrainingRun, group: _Group, outcome: _Outcome) -> Script:
    """Every rank starts torchrun; the last rank prints Megatron's lines spread over the run (the group's
    worst step time and TFLOP/s); completion exits 0, a crash exits first, its peers PEER_TEARDOWN later.
    Every rank works out the same virtual times, so a crash is stamped one step after the last line printed
    before it, and the peers' reports PEER_TEARDOWN_SECONDS after that. A checkpointing run's first rank
    prints what it loaded (or that there was nothing to load) and each save at its iteration's time, and
    saves only what it printed."""
    lines = _training_lines(run, step_ms=group.step_time_ms, tflops=group.tflops_per_gpu)
    times = _progress_at(len(lines), _progress_span(group))
    shown = _keep_progress(times, outcome)
    events: list[tuple[float, Step]] = [(0.0, Ready()), (0.0, Log(_torch_banner(run)))]
    events += _mark_event(pod.node, group.faults[pod.node])
    # Megatron prints training lines from the last rank (`print_rank_last`) and checkpoint messages from global
    # rank 0 (`print_rank_0`), the first node's pod: one pod prints both only in a one-node run.
    checkpoints = run.checkpointing if run.node_rank == 0 else None
    if checkpoints is not None:
        events.append((0.0, Log(_checkpoint_load(run, checkpoints))))
    if run.last_rank:
        events.append((0.0, Log(f" [before the start of training step] datetime: {_stamp(TRAINING_START)}\n")))
    saved = set(run.saved_iterations)
    for at, iteration, (clock, text) in zip(times[:shown], run.logged_iterations, lines, strict=False):
        if run.last_rank:
            events.append((at, Log(text)))
        if checkpoints is not None and iteration in saved:
            events += _checkpoint_save(run, checkpoints, iteration, clock, at)
    end = outcome.end_at if outcome.end_at is not None else 0.0
    crash_stamp = (lines[shown - 1][0] if shown else TRAINING_START) + timedelta(milliseconds=group.step_time_ms)
    if outcome.completes and run.last_rank:
        done = (lines[-1][0] if lines else TRAINING_START) + timedelta(seconds=1)
        events.append((end, Log(f" [after training is done] datetime: {_stamp(done)}\n")))
    elif outcome.crashed and outcome.exit is not None:
        stamp = crash_stamp + timedelta(seconds=end - (outcome.progress_until or 0.0))
        events.append((end, Log(_torch_crash(run, outcome.exit.code, stamp))))
    elif outcome.link is not None:
        last_error = _training_link_error(group, pod.node, outcome.link)
        events.append((end, Log(_torch_lost_peer(run, last_error, crash_stamp))))
    elif outcome.culprit is not None:
        stamp = crash_stamp + timedelta(seconds=PEER_TEARDOWN_SECONDS)
        closed = f"socketProgress: Connection closed by remote peer {outcome.culprit}<{NCCL_IB_PORT}>"
        events.append((end, Log(_torch_lost_peer(run, closed, stamp))))
    return _assemble(kind, events, outcome)


def _parallel_ranks(run: _TrainingRun) -> str:
    """Megatron's `[ t x/X, p y/Y ]` for the first rank, which prints checkpoint messages."""
    return f"[ t 1/{run.tensor_parallel}, p 1/{run.pipeline_parallel} ]"


def _checkpoint_load(run: _TrainingRun, checkpointing: CheckpointSettings) -> str:
    """What Megatron's `load_checkpoint` prints for `--load` at start-up: the checkpoint it loaded, or that the
    directory has no `latest_checkpointed_iteration.txt` and training starts from scratch."""
    directory = checkpointing.directory
    if run.loaded is None:
        tracker = posixpath.join(directory, "latest_checkpointed_iteration.txt")
        return (
            f"WARNING: could not find the metadata file {tracker}\n"
            "    will not load any checkpoints and will start from random\n"
        )
    return (
        f" loading distributed checkpoint from {directory} at iteration {run.loaded}\n"
        f"  successfully loaded checkpoint from {directory} {_parallel_ranks(run)} at iteration {run.loaded}\n"
    )


def _checkpoint_save(
    run: _TrainingRun, checkpointing: CheckpointSettings, iteration: int, clock: datetime, at: float
) -> list[tuple[float, Step]]:
    """Megatron's `save_checkpoint` messages around the save itself: the checkpoint is complete (the player
    stores it) before the success line, as Megatron writes its tracker file before printing it, so a log
    that shows the success always has the checkpoint behind it."""
    directory = checkpointing.directory
    return [
        (
            at,
            Log(
                f"[{_stamp(clock)}] saving checkpoint at iteration {iteration:7d} to {directory} "
                f"in {CHECKPOINT_FORMAT} format\n"
            ),
        ),
        (at, SaveCheckpoint(iteration)),
        (
            at,
            Log(
                f"  [{_stamp(clock)}] successfully saved checkpoint from iteration {iteration:7d} to {directory} "
                f"{_parallel_ranks(run)}\n"
            ),
        ),
    ]


def _training_link_error(group: _Group, node: str, link: LinkFault) -> str:
    """The IB error a rank's NCCL last saw: on either side of the link, its own node's send to the first host
    across it; a rank on neither side fails with the collective and reports what the first side saw."""
    first, second = group.link_hosts(link)
    side = group.domains.get(node)
    if side == link.between[0]:
        return _ib_completion_error(group, node, second, send=True)
    if side == link.between[1]:
        return _ib_completion_error(group, node, first, send=True)
    return _ib_completion_error(group, first, second, send=True)


# --------------------------------------------------------------------------------------------- DCGM

_DCGM_TESTS: Final = (
    (1, "Deployment", "software"),
    (2, "Integration", "pcie"),
    (2, "Hardware", "memory"),
    (3, "Stress", "targeted_stress"),
    (3, "Stress", "targeted_power"),
    (3, "Stress", "memory_bandwidth"),
    (4, "Hardware", "diagnostic"),
    (4, "Stress", "pulse_test"),
)


def _dcgm_output(pod: _Pod, *, failed: bool) -> str:
    """`dcgmi diag`'s verdict: a JSON document under `--json`, else its table; a failure fails the last test."""
    level = pod.number("--run", "-r") or 1
    gpus = pod.gpus or 1
    tests = [(category, name) for minimum, category, name in _DCGM_TESTS if minimum <= level]
    statuses = ["Fail" if failed and index == len(tests) - 1 else "Pass" for index in range(len(tests))]
    if "--json" in pod.tokens or "-j" in pod.tokens:
        categories: dict[str, list[dict[str, Any]]] = {}
        for (category, name), status in zip(tests, statuses, strict=True):
            result: dict[str, Any] = {"status": status}
            if status == "Fail":
                result["warnings"] = [{"warning": "GPU 0 reported Xid 79 (GPU has fallen off the bus)"}]
            categories.setdefault(category, []).append({"name": name, "results": [result]})
        document = {
            "DCGM GPU Diagnostic": {
                "test_categories": [{"category": key, "tests": value} for key, value in categories.items()]
            },
            "Driver Version Detected": "580.82.07",
            "GPU Device IDs": ["2330"] * gpus,
            "version": "4.5.2",
        }
        return json.dumps(document, indent=2) + "\n"
    rule = "+---------------------------+------------------------------------------------+"
    lines = [
        "Successfully ran diagnostic for group." if not failed else "Diagnostic failed for group.",
        rule,
        "| Diagnostic                | Result                                         |",
        rule.replace("-", "="),
        "|-----  Metadata  ----------+------------------------------------------------|",
        f"| DCGM Version              | {'4.5.2':<46} |",
        f"| Number of GPUs Detected   | {gpus:<46} |",
    ]
    for (category, name), status in zip(tests, statuses, strict=True):
        lines.append(f"|-----  {category + '  ':-<19}+------------------------------------------------|")
        lines.append(f"| {name:<25} | {status:<46} |")
        if status == "Fail":
            lines.append(f"| {'Warning':<25} | {'GPU 0: Xid 79 (GPU has fallen off the bus)':<46} |")
    lines.append(rule)
    return "".join(f"{line}\n" for line in lines)


def _dcgm_script(kind: WorkloadKind, pod: _Pod, group: _Group, outcome: _Outcome) -> Script:
    """dcgmi prints nothing until its verdict: the table at the end, Pass (exit 0) or a failed test (exit code)."""
    events: list[tuple[float, Step]] = [(0.0, Ready()), *_mark_event(pod.node, group.faults[pod.node])]
    if outcome.exit is not None and outcome.end_at is not None:
        events.append((outcome.end_at, Log(_dcgm_output(pod, failed=not outcome.completes))))
    return _assemble(kind, events, outcome)


# --------------------------------------------------------------------------------------------- anything else


def _generic_script(kind: WorkloadKind, pod: _Pod, group: _Group, outcome: _Outcome) -> Script:
    events: list[tuple[float, Step]] = [
        (0.0, Ready()),
        (0.0, Log(f"sim: workload started on {pod.node}\n")),
        *_mark_event(pod.node, group.faults[pod.node]),
    ]
    if outcome.exit is not None and outcome.end_at is not None:
        verdict = "finished" if outcome.completes else f"failed: CUDA error on {pod.node}"
        events.append((outcome.end_at, Log(f"sim: workload {verdict} (exit code {outcome.exit.code})\n")))
    return _assemble(kind, events, outcome)
